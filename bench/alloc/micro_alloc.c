/* SPDX-License-Identifier: MIT */
/*
 * rqspin-alloc-microbench: Google Benchmark microbenchmarks of alloc+free
 * pairs (through bench/gbench), rqspin_malloc_nolock against the process's
 * malloc. To compare with jemalloc or mimalloc, run the program with
 * LD_PRELOAD=libjemalloc.so.2 (or libmimalloc.so.2): "malloc" is then that
 * allocator. Arguments: the object size; threads 1 and 2 (each thread
 * allocates and frees its own objects).
 *
 *   rqspin_pairs/64/threads:1    rqspin_malloc_nolock(64) + rqspin_free_nolock
 *   malloc_pairs/64/threads:1    malloc(64) + free
 *   rqspin_batch/64              256 allocations, then 256 frees (LIFO)
 *   malloc_batch/64
 */
#include <stdlib.h>

#include <rqspin/alloc.h>

#include "gbench.h"

static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void bm_rqspin_pairs(gbench_state *st)
{
	size_t n = (size_t)gbench_range(st, 0);

	GBENCH_FOR(st) {
		void *p = rqspin_malloc_nolock(n, 0);

		escape(p);
		rqspin_free_nolock(p);
	}
}

static void bm_malloc_pairs(gbench_state *st)
{
	size_t n = (size_t)gbench_range(st, 0);

	GBENCH_FOR(st) {
		void *p = malloc(n);

		escape(p);
		free(p);
	}
}

#define BATCH 256

static void bm_rqspin_batch(gbench_state *st)
{
	size_t n = (size_t)gbench_range(st, 0);
	void *p[BATCH];

	GBENCH_FOR(st) {
		for (int i = 0; i < BATCH; i++)
			p[i] = rqspin_malloc_nolock(n, 0);
		escape(p);
		for (int i = BATCH; i-- > 0;)
			rqspin_free_nolock(p[i]);
	}
	gbench_counter(st, "pairs", BATCH, GBENCH_COUNTER_RATE | GBENCH_COUNTER_ITERATION_INVARIANT);
}

static void bm_malloc_batch(gbench_state *st)
{
	size_t n = (size_t)gbench_range(st, 0);
	void *p[BATCH];

	GBENCH_FOR(st) {
		for (int i = 0; i < BATCH; i++)
			p[i] = malloc(n);
		escape(p);
		for (int i = BATCH; i-- > 0;)
			free(p[i]);
	}
	gbench_counter(st, "pairs", BATCH, GBENCH_COUNTER_RATE | GBENCH_COUNTER_ITERATION_INVARIANT);
}

static void sizes(gbench_bm *b)
{
	static const int64_t s[] = { 16, 64, 256, 1024, 4096 };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		gbench_bm_arg(b, s[i]);
}

GBENCH_INIT(register_alloc_micro)
{
	sizes(gbench_bm_thread_range(gbench_register("rqspin_pairs", bm_rqspin_pairs), 1, 2));
	sizes(gbench_bm_thread_range(gbench_register("malloc_pairs", bm_malloc_pairs), 1, 2));
	sizes(gbench_register("rqspin_batch", bm_rqspin_batch));
	sizes(gbench_register("malloc_batch", bm_malloc_batch));
}

int main(int argc, char **argv)
{
	return gbench_main(argc, argv);
}
