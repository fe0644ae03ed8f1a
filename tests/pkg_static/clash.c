/* SPDX-License-Identifier: MIT */
/*
 * A program with its own functions named like librqspin's internal ones
 * links against librqspin.a and uses every part of the library. With an
 * archive whose internal symbols are global this is a link error
 * ("multiple definition of `futex_wait'"), so building this test is the
 * check; running it checks that the library's calls did not land in ours.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rqspin/rqspin.h>

static int ours;

/* Same names as functions inside the library (lock, allocator, storage). */
int futex_wait(void);
int pool_get(void);
int os_map(void);
int heap_at(void);
int st_setup(void);
int futex_wait(void) { return ++ours; }
int pool_get(void) { return ++ours; }
int os_map(void) { return ++ours; }
int heap_at(void) { return ++ours; }
int st_setup(void) { return ++ours; }

struct conn {
	int fd;
	struct rqspin_storage_owner st;
};

int main(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	qspinlock_t q = QSPINLOCK_INIT;
	struct conn c;
	struct rqspin_storage_map *m;
	long *v;
	void *p;
	int err = 0;

	memset(&c, 0, sizeof(c));
	if (rqspin_lock(&l) != 0 || rqspin_lock(&l) != -EDEADLK) {
		fprintf(stderr, "clash: rqspin_lock\n");
		return 1;
	}
	rqspin_unlock(&l);
	qspin_lock(&q);
	qspin_unlock(&q);

	p = rqspin_malloc_nolock(100, RQSPIN_ALLOC_ZERO);
	if (!p) {
		fprintf(stderr, "clash: rqspin_malloc_nolock\n");
		return 1;
	}
	rqspin_free_nolock(p);

	m = rqspin_storage_map_create(sizeof(long), 0);
	if (!m) {
		fprintf(stderr, "clash: rqspin_storage_map_create: %s\n", strerror(errno));
		return 1;
	}
	v = rqspin_storage_get(m, &c.st, NULL, RQSPIN_STORAGE_F_CREATE, &err);
	if (!v || err) {
		fprintf(stderr, "clash: rqspin_storage_get: %d\n", err);
		return 1;
	}
	*v = 42;
	rqspin_storage_owner_destroy(&c.st);
	rqspin_storage_map_destroy(m);

	/* The library never called our look-alikes. */
	if (ours != 0) {
		fprintf(stderr, "clash: the library called the program's %d time(s)\n", ours);
		return 1;
	}
	if (futex_wait() + pool_get() + os_map() + heap_at() + st_setup() != 15)
		return 1;
	puts("clash: the program's own futex_wait, pool_get, os_map, heap_at and st_setup "
	     "coexist with librqspin.a");
	return 0;
}
