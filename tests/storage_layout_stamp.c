/* SPDX-License-Identifier: MIT */
/*
 * A program whose rqspin/storage.h inline layout differs from the library's
 * (as if compiled against another version's headers) gets no map: NULL,
 * errno ELIBBAD and a message on stderr naming both stamps, instead of
 * inline lookups that read the wrong words. The same program's calls with
 * the real layout work, before and after.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "storage_util.h"

/* The stderr the library writes while f runs, into buf. */
static void capture_stderr(void (*f)(void), char *buf, size_t len)
{
	int fds[2], saved;
	ssize_t n;

	CHECK(pipe(fds) == 0);
	fflush(stderr);
	saved = dup(2);
	CHECK(saved >= 0 && dup2(fds[1], 2) == 2);
	f();
	fflush(stderr);
	CHECK(dup2(saved, 2) == 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], buf, len - 1); /* one short line: fits the pipe */
	close(fds[0]);
	buf[n > 0 ? n : 0] = '\0';
}

static struct rqspin_storage_map *good_map(void)
{
	return rqspin_storage_map_create(sizeof(long), 0);
}

static const uint64_t good_layout = RQSPIN__STORAGE_LAYOUT;

/* From here on this file stamps another layout, as an older or newer
 * rqspin/static/storage.h would: an element header with one more word, so
 * that the value sits 8 bytes further (the stamp is computed from the
 * structures, with offsetof and sizeof). The key moves with it. */
struct other_elem {
	void *bucket_[2];
	const struct rqspin__storage_local *local;
	void *rcu_[3];
	uint32_t state_;
	rqspinlock_t lock_;
	struct rqspin_storage_map *key;
};
#undef RQSPIN__STORAGE_LAYOUT
#define RQSPIN__STORAGE_LAYOUT                                                        \
	RQSPIN__STORAGE_LAYOUT_OF(struct other_elem, struct rqspin__storage_local, \
				  struct rqspin__storage_index, struct rqspin__storage_slot)

static struct rqspin_storage_map *bad_result;
static int bad_errno;

static void create_bad(void)
{
	errno = 0;
	bad_result = rqspin_storage_map_create(sizeof(long), 0);
	bad_errno = errno;
}

int main(void)
{
	struct rqspin_storage_owner owner = RQSPIN_STORAGE_OWNER_INIT;
	struct rqspin_storage_map *m;
	char msg[1024], want[64];
	long *v;
	int err = -1;

	CHECK(RQSPIN__STORAGE_LAYOUT != good_layout);
	m = good_map();
	CHECK(m != NULL);

	capture_stderr(create_bad, msg, sizeof(msg));
	fprintf(stderr, "library said: %s", msg);
	CHECK(bad_result == NULL);
	CHECK(bad_errno == ELIBBAD);
	snprintf(want, sizeof(want), "%#" PRIx64, (uint64_t)RQSPIN__STORAGE_LAYOUT);
	CHECK(strstr(msg, want) != NULL);
	snprintf(want, sizeof(want), "%#" PRIx64, good_layout);
	CHECK(strstr(msg, want) != NULL);

	/* The map made with the right stamp works (the inline get was
	 * compiled with the header's offsets, before the #undef). */
	v = rqspin_storage_get(m, &owner, NULL, RQSPIN_STORAGE_F_CREATE, &err);
	CHECK(v != NULL && err == 0 && *v == 0);
	*v = 42;
	v = rqspin_storage_get(m, &owner, NULL, 0, &err);
	CHECK(v != NULL && *v == 42);
	rqspin_storage_owner_destroy(&owner);
	rqspin_storage_map_destroy(m);
	m = good_map();
	CHECK(m != NULL);
	rqspin_storage_map_destroy(m);
	/* Maps are freed after a grace period (LeakSanitizer). */
	rqspin_storage_barrier();
	printf("storage_layout_stamp: a different layout gets ELIBBAD and a message\n");
	return 0;
}
