/* SPDX-License-Identifier: MIT */
/*
 * Single-thread behaviour of the allocator, with contents verified after
 * every operation (address-keyed patterns):
 *  1. every request size from 0 to 1100 and around every class boundary up
 *     to 16 KiB, plus large sizes: usable size >= request (and == class
 *     size for small requests), documented alignment, distinct objects;
 *  2. RQSPIN_ALLOC_ZERO on recycled (dirty) objects, small and large;
 *  3. size 0: unique, freeable pointers;
 *  4. a random alloc/free mix over all classes, all live objects verified
 *     regularly;
 *  5. errno is preserved, also across calls that map or unmap memory;
 *  6. statistics: live objects/bytes per class follow the program, return
 *     to zero when everything is freed; trim gives memory back;
 *  7. a free/alloc loop at a page boundary does not call madvise.
 * Built against the release library (alloc_basic) and the debug flavour
 * with its internal checks (alloc_basic_debug).
 */
#include "alloc_common.h"

#define NOBJ 48

static void check_obj(void *p, size_t size, uint32_t gen)
{
	CHECK(p != NULL);
	CHECK_GE_U64(rqspin_malloc_usable_size(p), size);
	CHECK_EQ_U64((uintptr_t)p % ac_align(size), 0);
	AC_CHECK(p, size, gen);
}

static void one_size(size_t size)
{
	void *p[NOBJ];
	size_t cls = ac_class_size(size);

	for (int i = 0; i < NOBJ; i++) {
		p[i] = rqspin_malloc_nolock(size, 0);
		CHECK(p[i] != NULL);
		if (cls)
			CHECK_EQ_U64(rqspin_malloc_usable_size(p[i]), cls);
		ac_fill(p[i], rqspin_malloc_usable_size(p[i]), (uint32_t)size);
		check_obj(p[i], size, (uint32_t)size);
		for (int j = 0; j < i; j++)
			CHECK(p[j] != p[i]);
	}
	for (int i = 0; i < NOBJ; i++)
		AC_CHECK(p[i], rqspin_malloc_usable_size(p[i]), (uint32_t)size);
	/* Free in an interleaved order, checking the others as we go. */
	for (int i = 0; i < NOBJ; i += 2) {
		rqspin_free_nolock(p[i]);
		if (i + 1 < NOBJ)
			AC_CHECK(p[i + 1], size, (uint32_t)size);
	}
	for (int i = 1; i < NOBJ; i += 2)
		rqspin_free_nolock(p[i]);
}

static void test_sizes(void)
{
	static const size_t large[] = { 16385, 20000, 65536, 100000, 1u << 20, (1u << 20) + 1 };

	for (size_t s = 0; s <= 1100; s++)
		one_size(s);
	for (size_t c = 1024; c <= RQSPIN_ALLOC_SMALL_MAX; c = ac_class_size(c) + 1) {
		size_t k = ac_class_size(c);

		one_size(k - 1);
		one_size(k);
		if (k + 1 <= RQSPIN_ALLOC_SMALL_MAX)
			one_size(k + 1);
	}
	for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++) {
		void *p = rqspin_malloc_nolock(large[i], 0);

		CHECK(p != NULL);
		CHECK_EQ_U64((uintptr_t)p % 64, 0);
		CHECK_GE_U64(rqspin_malloc_usable_size(p), large[i]);
		ac_fill(p, large[i], 7);
		AC_CHECK(p, large[i], 7);
		rqspin_free_nolock(p);
	}
	/* Absurd sizes fail with NULL (out of memory), not a crash. */
	CHECK(rqspin_malloc_nolock(SIZE_MAX, 0) == NULL);
	CHECK(rqspin_malloc_nolock(SIZE_MAX / 2, 0) == NULL);
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static void test_zero(void)
{
	for (size_t s = 1; s <= RQSPIN_ALLOC_SMALL_MAX + 5000; s = s * 5 / 4 + 1) {
		void *d[8];

		/* Dirty a few objects of the class, free them, get them back. */
		for (int i = 0; i < 8; i++) {
			d[i] = rqspin_malloc_nolock(s, 0);
			CHECK(d[i] != NULL);
			memset(d[i], 0xa5, rqspin_malloc_usable_size(d[i]));
		}
		for (int i = 0; i < 8; i++)
			rqspin_free_nolock(d[i]);
		for (int i = 0; i < 8; i++) {
			d[i] = rqspin_malloc_nolock(s, RQSPIN_ALLOC_ZERO);
			CHECK(d[i] != NULL);
			CHECK(all_zero(d[i], rqspin_malloc_usable_size(d[i])));
			ac_fill(d[i], s, 3);
		}
		for (int i = 0; i < 8; i++) {
			AC_CHECK(d[i], s, 3);
			rqspin_free_nolock(d[i]);
		}
	}
}

static void test_size0(void)
{
	void *p[64];

	for (int i = 0; i < 64; i++) {
		p[i] = rqspin_malloc_nolock(0, 0);
		CHECK(p[i] != NULL);
		CHECK_GE_U64(rqspin_malloc_usable_size(p[i]), 8);
		for (int j = 0; j < i; j++)
			CHECK(p[j] != p[i]);
		ac_fill(p[i], 8, 0);
	}
	for (int i = 0; i < 64; i++) {
		AC_CHECK(p[i], 8, 0);
		rqspin_free_nolock(p[i]);
	}
	rqspin_free_nolock(NULL);
	CHECK_EQ_U64(rqspin_malloc_usable_size(NULL), 0);
}

#define SLOTS 2048

static void *g_slot[SLOTS];
static size_t g_size[SLOTS];
static uint32_t g_gen[SLOTS];

static size_t random_size(tu_rng *r)
{
	switch (tu_rng_below(r, 8)) {
	case 0:
		return tu_rng_below(r, 17);
	case 1:
	case 2:
	case 3:
		return tu_rng_below(r, 257);
	case 4:
	case 5:
		return tu_rng_below(r, 2049);
	case 6:
		return tu_rng_below(r, RQSPIN_ALLOC_SMALL_MAX + 1);
	default:
		return tu_rng_below(r, 40) == 0 ? RQSPIN_ALLOC_SMALL_MAX + 1 + tu_rng_below(r, 200000)
						: tu_rng_below(r, 600);
	}
}

static void verify_all(void)
{
	for (int i = 0; i < SLOTS; i++)
		if (g_slot[i])
			AC_CHECK(g_slot[i], g_size[i], g_gen[i]);
}

static void test_random(void)
{
	tu_rng r;
	uint32_t iters = TU_ITERS(400000u);
	uint64_t live_small = 0;

	tu_rng_seed(&r, 42);
	for (uint32_t it = 0; it < iters; it++) {
		int i = (int)tu_rng_below(&r, SLOTS);

		if (g_slot[i]) {
			AC_CHECK(g_slot[i], g_size[i], g_gen[i]);
			rqspin_free_nolock(g_slot[i]);
			if (g_size[i] <= RQSPIN_ALLOC_SMALL_MAX)
				live_small--;
			g_slot[i] = NULL;
		} else {
			size_t s = random_size(&r);
			unsigned fl = tu_rng_below(&r, 4) == 0 ? RQSPIN_ALLOC_ZERO : 0;

			g_slot[i] = rqspin_malloc_nolock(s, fl);
			CHECK(g_slot[i] != NULL);
			if (fl)
				CHECK(all_zero(g_slot[i], s));
			g_size[i] = s;
			g_gen[i] = it;
			ac_fill(g_slot[i], s, it);
			check_obj(g_slot[i], s, it);
			if (s <= RQSPIN_ALLOC_SMALL_MAX)
				live_small++;
		}
		if (it % 4096 == 0) {
			verify_all();
			CHECK_EQ_U64(ac_stats().small_objects, live_small);
		}
	}
	verify_all();
	for (int i = 0; i < SLOTS; i++) {
		rqspin_free_nolock(g_slot[i]);
		g_slot[i] = NULL;
	}
}

static void test_errno(void)
{
	void *p[4096];

	errno = 12345;
	for (int i = 0; i < 4096; i++) {
		p[i] = rqspin_malloc_nolock(4000, 0); /* maps new pages/segments */
		CHECK(p[i] != NULL);
	}
	CHECK(errno == 12345);
	for (int i = 0; i < 4096; i++)
		rqspin_free_nolock(p[i]);
	CHECK(errno == 12345);
	p[0] = rqspin_malloc_nolock(1 << 20, 0);
	CHECK(p[0] != NULL);
	rqspin_free_nolock(p[0]);
	CHECK(errno == 12345);
	rqspin_alloc_trim();
	CHECK(errno == 12345);
	/* A failing mapping does not leak its errno either. */
	CHECK(rqspin_malloc_nolock(SIZE_MAX / 4, 0) == NULL);
	CHECK(errno == 12345);
}

static void test_stats(void)
{
	struct rqspin_alloc_stats st;
	void *p[100];

	rqspin_alloc_trim();
	st = ac_stats();
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_EQ_U64(st.small_bytes, 0);
	CHECK_EQ_U64(st.large_objects, 0);
	for (int i = 0; i < 100; i++)
		p[i] = rqspin_malloc_nolock(100, 0); /* class 112 */
	st = ac_stats();
	for (int c = 0; c < RQSPIN_ALLOC_NCLASSES; c++) {
		CHECK_EQ_U64(st.class_size[c], ac_class_size(st.class_size[c]));
		CHECK_EQ_U64(st.class_objects[c], st.class_size[c] == 112 ? 100 : 0);
		CHECK_EQ_U64(st.class_bytes[c], st.class_objects[c] * st.class_size[c]);
	}
	CHECK_EQ_U64(st.small_bytes, 11200);
	CHECK_GE_U64(st.segments, 1);
	CHECK_GE_U64(st.mapped_bytes, st.segments * (4u << 20));
	CHECK_GE_U64(st.pages_active, 1);
	CHECK_EQ_U64(st.bad_frees, 0);
	for (int i = 0; i < 100; i++)
		rqspin_free_nolock(p[i]);
	p[0] = rqspin_malloc_nolock(50000, 0);
	st = ac_stats();
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_EQ_U64(st.large_objects, 1);
	CHECK_GE_U64(st.large_bytes, 50000);
	rqspin_free_nolock(p[0]);
	st = ac_stats();
	CHECK_EQ_U64(st.large_objects, 0);
	CHECK_EQ_U64(st.large_bytes, 0);
}

/* Fill many pages, free everything, trim: the pages go back. */
static void test_trim(void)
{
	enum { N = 16384 };
	static void *p[N];
	struct rqspin_alloc_stats st;
	uint64_t rss_full, rss_trim, madv;
	size_t bytes;

	for (int i = 0; i < N; i++) {
		p[i] = rqspin_malloc_nolock(1000, 0);
		CHECK(p[i] != NULL);
		memset(p[i], 1, 1000);
	}
	rss_full = ac_rss();
	madv = ac_stats().madvise_calls;
	for (int i = 0; i < N; i++)
		rqspin_free_nolock(p[i]);
	/* Most pages go back while they are freed (past the shared cache of
	 * 2 MiB), trim gives back the rest. */
	bytes = rqspin_alloc_trim();
	st = ac_stats();
	rss_trim = ac_rss();
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_GE_U64(bytes, 1u << 20);
	CHECK_GE_U64((st.madvise_calls - madv) * 65536, 15u << 20); /* 16 MiB were in use */
	CHECK_LE_U64(st.pages_cached, 8);
	if (rss_full && rss_trim)
		CHECK_LE_U64(rss_trim + (8u << 20), rss_full);
	tu_write_str("trim: ");
	tu_write_u64(bytes >> 10);
	tu_write_str(" KiB given back, rss ");
	tu_write_u64(rss_full >> 10);
	tu_write_str(" -> ");
	tu_write_u64(rss_trim >> 10);
	tu_write_str(" KiB\n");
}

/* Alternating alloc/free right at a page boundary: no system calls. */
static void test_boundary(void)
{
	enum { PER_PAGE = 65536 / 4096 };
	void *p[PER_PAGE];
	uint64_t before;

	for (int i = 0; i < PER_PAGE; i++)
		p[i] = rqspin_malloc_nolock(4096, 0); /* fill (at least) a page */
	before = ac_stats().madvise_calls;
	for (int it = 0; it < 10000; it++) {
		void *q = rqspin_malloc_nolock(4096, 0);

		CHECK(q != NULL);
		ac_fill(q, 64, (uint32_t)it);
		AC_CHECK(q, 64, (uint32_t)it);
		rqspin_free_nolock(q);
		/* and at the other end: empty a page and refill it */
		rqspin_free_nolock(p[it % PER_PAGE]);
		p[it % PER_PAGE] = rqspin_malloc_nolock(4096, 0);
		CHECK(p[it % PER_PAGE] != NULL);
	}
	CHECK_EQ_U64(ac_stats().madvise_calls, before);
	for (int i = 0; i < PER_PAGE; i++)
		rqspin_free_nolock(p[i]);
}

int main(void)
{
	tu_watchdog(240);
	test_sizes();
	test_zero();
	test_size0();
	test_random();
	test_errno();
	test_stats();
	test_boundary();
	test_trim();
	CHECK_EQ_U64(ac_stats().small_objects, 0);
	CHECK_EQ_U64(ac_stats().bad_frees, 0);
	tu_write_str("alloc_basic: ok\n");
	return 0;
}
