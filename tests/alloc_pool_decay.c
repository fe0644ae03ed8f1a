/* SPDX-License-Identifier: MIT */
/*
 * The shared pool of empty pages (pool.c): 64 pages stay resident for
 * good; up to 256 while pages keep being retired; the pages beyond 64 go
 * back to the OS once the pool has stayed above 64 for a second (a batch
 * per retire), and at once when a thread exits. Checked through the
 * allocator's statistics, which is deterministic: one thread at a time
 * retires pages.
 *
 * 1. A thread frees 200 pages' worth of 16 KiB objects: the pool keeps
 *    them resident (with a fixed cap of 64, about 130 were madvised and
 *    faulted in again at the next refill; larson-like loads spent a
 *    quarter of their time so).
 * 2. After the decay, a few more retires give the excess back.
 * 3. A thread that frees as much and exits leaves only the 64.
 * The objects' contents are checked throughout.
 */
#include "alloc_common.h"

#include <time.h>

#define OBJ 16384u
#define PER_PAGE 4u
#define PAGES 200u
#define NOBJ (PAGES * PER_PAGE)
#define KEEP 64u
#define MAX 256u
#define HEAP_CACHE 4u

static void *g_obj[NOBJ];

static void fill_all(uint32_t gen)
{
	for (unsigned i = 0; i < NOBJ; i++) {
		g_obj[i] = rqspin_malloc_nolock(OBJ, 0);
		CHECK(g_obj[i] != NULL);
		ac_fill(g_obj[i], OBJ, gen + i);
	}
}

static void free_all(uint32_t gen)
{
	for (unsigned i = 0; i < NOBJ; i++) {
		AC_CHECK(g_obj[i], OBJ, gen + i);
		rqspin_free_nolock(g_obj[i]);
	}
}

static uint64_t cached(void)
{
	return ac_stats().pages_cached;
}

static void say(const char *what, uint64_t v)
{
	tu_write_str("alloc_pool_decay: ");
	tu_write_str(what);
	tu_write_u64(v);
	tu_write_str("\n");
}

static void *retire_and_decay(void *arg)
{
	uint64_t c, madv0;

	(void)arg;
	fill_all(1);
	madv0 = ac_stats().madvise_calls;
	free_all(1);
	c = cached();
	say("cached after freeing 200 pages: ", c);
	/* Old behaviour: at most KEEP in the pool plus the heap's cache. */
	CHECK(c > KEEP + HEAP_CACHE + 100);
	CHECK(c <= MAX + HEAP_CACHE);
	CHECK_EQ_U64(ac_stats().madvise_calls, madv0);

	/* The decay: one second above KEEP, then each retire that puts a page
	 * into the pool gives a batch back. 40 objects are 10 pages: more
	 * than the heap's cache holds, so every round puts pages into the
	 * pool. */
	tu_sleep_us(1300000);
	for (unsigned r = 0; r < 20; r++) {
		for (unsigned i = 0; i < 40; i++) {
			g_obj[i] = rqspin_malloc_nolock(OBJ, 0);
			CHECK(g_obj[i] != NULL);
			ac_fill(g_obj[i], OBJ, 5000 + r * 64 + i);
		}
		for (unsigned i = 0; i < 40; i++) {
			AC_CHECK(g_obj[i], OBJ, 5000 + r * 64 + i);
			rqspin_free_nolock(g_obj[i]);
		}
	}
	c = cached();
	say("cached after the decay: ", c);
	CHECK(c <= KEEP + HEAP_CACHE + 10);
	CHECK(ac_stats().madvise_calls > madv0);
	return NULL;
}

static void *retire_and_exit(void *arg)
{
	(void)arg;
	fill_all(100000);
	free_all(100000);
	CHECK(cached() > KEEP + HEAP_CACHE + 100);
	return NULL;
}

int main(void)
{
	uint64_t c;

	tu_thread_join(tu_thread_start(retire_and_decay, NULL));
	tu_thread_join(tu_thread_start(retire_and_exit, NULL));
	c = cached();
	say("cached after a thread exited: ", c);
	CHECK(c <= KEEP + HEAP_CACHE);
	/* The memory is handed out again, intact. */
	fill_all(200000);
	free_all(200000);
	CHECK_EQ_U64(rqspin_alloc_trim() > 0, 1);
	CHECK_EQ_U64(cached(), 0);
	return 0;
}
