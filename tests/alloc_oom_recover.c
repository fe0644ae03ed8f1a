/* SPDX-License-Identifier: MIT */
/*
 * Running out of memory is not for good. Under an address-space limit
 * (RLIMIT_AS), the test fills the space with large objects and then small
 * ones until the allocator returns NULL, and keeps asking for small
 * objects FAILS times more (every one must be NULL, and none may crash).
 * Then it frees everything and trims: small and large requests must all
 * succeed again, with their contents intact.
 *
 * Each failed small request tries to map a new segment. Before the fix a
 * failed mapping used up one of the MAX_SEGS (65536) segment indices, so
 * after about 65000 failures no segment could ever be mapped again: the
 * process had memory, but every small request past its current pages
 * returned NULL for the rest of its life.
 *
 * Not under ASan or TSan (their shadow memory does not fit any small
 * address-space limit).
 */
#include <sys/resource.h>

#include "alloc_common.h"

#define FAILS 70000
#define NLARGE 4096
#define NSMALL 1000000
#define NAFTER 32000

static void *large[NLARGE], *small[NSMALL], *after[NAFTER];

/* Total virtual size, from /proc/self/statm's first field. */
static uint64_t vm_size(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n;
	uint64_t v = 0;

	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = '\0';
	for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v * (uint64_t)sysconf(_SC_PAGESIZE);
}

int main(void)
{
	struct rlimit rl;
	size_t nl = 0, ns = 0, ok = 0;
	uint64_t lim;

	/* Warm up (the thread's heap, the first segment), then a limit
	 * 192 MiB above what is mapped now. */
	rqspin_free_nolock(rqspin_malloc_nolock(64, 0));
	lim = vm_size() + (192ull << 20);
	rl.rlim_cur = rl.rlim_max = lim;
	CHECK(setrlimit(RLIMIT_AS, &rl) == 0);

	while (nl < NLARGE && (large[nl] = rqspin_malloc_nolock(1 << 20, 0)) != NULL)
		nl++;
	while (ns < NSMALL && (small[ns] = rqspin_malloc_nolock(1000, 0)) != NULL) {
		ac_fill(small[ns], 1000, 1);
		ns++;
	}
	printf("out of memory after %zu large and %zu small objects\n", nl, ns);
	CHECK(nl < NLARGE && ns < NSMALL);
	for (int i = 0; i < FAILS; i++)
		CHECK(rqspin_malloc_nolock(1000, 0) == NULL);

	for (size_t i = 0; i < ns; i++) {
		CHECK(ac_ok(small[i], 1000, 1));
		rqspin_free_nolock(small[i]);
	}
	for (size_t i = 0; i < nl; i++)
		rqspin_free_nolock(large[i]);
	rqspin_alloc_trim();

	/* Sizes from 8 B to 16 KiB, 83 MiB in all: more than the segments
	 * mapped before hold, so new ones must be mapped. */
	for (int i = 0; i < NAFTER; i++) {
		size_t sz = (size_t)8 << (i % 12);

		after[i] = rqspin_malloc_nolock(sz, 0);
		if (after[i]) {
			ac_fill(after[i], sz, 2);
			ok++;
		}
	}
	printf("after freeing everything: %zu of %d small requests succeeded\n", ok, NAFTER);
	CHECK_EQ_U64(ok, NAFTER);
	for (int i = 0; i < NAFTER; i++) {
		CHECK(ac_ok(after[i], (size_t)8 << (i % 12), 2));
		rqspin_free_nolock(after[i]);
	}
	large[0] = rqspin_malloc_nolock(1 << 20, 0);
	CHECK(large[0] != NULL);
	rqspin_free_nolock(large[0]);
	printf("alloc_oom_recover: ok\n");
	return 0;
}
