/* SPDX-License-Identifier: MIT */
/*
 * Threads: churn, remote frees, adoption of abandoned heaps, bounded
 * memory.
 *
 * Part 1 (churn): identical phases; each runs waves of short-lived threads
 * that allocate, free locally, and swap objects through a shared exchange
 * (an atomic slot array): what a thread takes out it frees -- usually an
 * object of another thread, often one that has exited. Threads leave with
 * objects still in the exchange, which the main thread frees after the
 * phase (remote frees into abandoned heaps). After every phase: live
 * objects are zero, and after a trim, the mapped segments, the active
 * pages and the RSS (/proc/self/statm) stay within a slack of the first
 * phase's; heaps are adopted, not created per thread.
 *
 * Part 2 (producer/consumer): one thread allocates, another frees every
 * object (all frees remote), both long-lived; live objects return to zero.
 */
#include "alloc_common.h"

#define XN 4096   /* exchange slots */
#define WAVE 4    /* threads at once */
#define WAVES 6   /* waves per phase */
#define PHASES 4

static _Atomic(void *) g_x[XN];

static size_t x_size(uint32_t j)
{
	if (j % 512 == 7)
		return 20000 + j; /* a few large objects */
	return (j * 37u) % 3000 + 1;
}

static void x_put(uint32_t j, void *p)
{
	void *old = atomic_exchange(&g_x[j], p);

	if (old) {
		AC_CHECK(old, x_size(j), j);
		rqspin_free_nolock(old);
	}
}

struct churn_arg {
	uint64_t seed;
};

static void *churn_thread(void *argp)
{
	struct churn_arg *arg = argp;
	enum { LOCAL = 64 };
	void *loc[LOCAL] = { 0 };
	size_t locsz[LOCAL] = { 0 };
	uint32_t ops = TU_ITERS(6000u);
	tu_rng r;

	tu_rng_seed(&r, arg->seed);
	for (uint32_t i = 0; i < ops; i++) {
		uint32_t k = tu_rng_below(&r, 4);

		if (k == 0) {
			uint32_t j = tu_rng_below(&r, XN);
			void *p = rqspin_malloc_nolock(x_size(j), 0);

			CHECK(p != NULL);
			ac_fill(p, x_size(j), j);
			x_put(j, p);
		} else {
			int s = (int)tu_rng_below(&r, LOCAL);

			if (loc[s]) {
				AC_CHECK(loc[s], locsz[s], (uint32_t)s);
				rqspin_free_nolock(loc[s]);
				loc[s] = NULL;
			} else {
				locsz[s] = tu_rng_below(&r, 1500);
				loc[s] = rqspin_malloc_nolock(locsz[s], 0);
				CHECK(loc[s] != NULL);
				ac_fill(loc[s], locsz[s], (uint32_t)s);
			}
		}
	}
	/* Leave some local objects for others: into the exchange they go
	 * only through x_put, so free the rest. */
	for (int s = 0; s < LOCAL; s++) {
		if (loc[s]) {
			AC_CHECK(loc[s], locsz[s], (uint32_t)s);
			rqspin_free_nolock(loc[s]);
		}
	}
	return NULL;
}

static void phase(uint32_t ph)
{
	struct churn_arg args[WAVE];
	pthread_t t[WAVE];

	for (uint32_t w = 0; w < WAVES; w++) {
		for (int i = 0; i < WAVE; i++) {
			args[i].seed = ((uint64_t)w * WAVE + (uint64_t)i) * 7919u + ph * 104729u;
			t[i] = tu_thread_start(churn_thread, &args[i]);
		}
		for (int i = 0; i < WAVE; i++)
			tu_thread_join(t[i]);
	}
	/* Free what the (exited) threads left: remote frees into abandoned
	 * heaps. */
	for (uint32_t j = 0; j < XN; j++) {
		void *p = atomic_exchange(&g_x[j], NULL);

		if (p) {
			AC_CHECK(p, x_size(j), j);
			rqspin_free_nolock(p);
		}
	}
}

static void report(const char *what, uint32_t ph, const struct rqspin_alloc_stats *st,
		   uint64_t rss)
{
	tu_write_str(what);
	tu_write_u64(ph);
	tu_write_str(": segments ");
	tu_write_u64(st->segments);
	tu_write_str(", pages active ");
	tu_write_u64(st->pages_active);
	tu_write_str(", cached ");
	tu_write_u64(st->pages_cached);
	tu_write_str(", heaps ");
	tu_write_u64(st->heaps);
	tu_write_str(" (adopted ");
	tu_write_u64(st->heaps_adopted);
	tu_write_str("), remote frees ");
	tu_write_u64(st->remote_frees);
	tu_write_str(", rss ");
	tu_write_u64(rss >> 10);
	tu_write_str(" KiB\n");
}

static void test_churn(void)
{
	struct rqspin_alloc_stats first = { 0 }, st;
	uint64_t rss_first = 0, rss;

	for (uint32_t ph = 0; ph < PHASES; ph++) {
		phase(ph);
		st = ac_stats();
		CHECK_EQ_U64(st.small_objects, 0);
		CHECK_EQ_U64(st.large_objects, 0);
		rqspin_alloc_trim();
		st = ac_stats();
		rss = ac_rss();
		report("churn phase ", ph, &st, rss);
		CHECK_EQ_U64(st.small_objects, 0);
		/* Heaps of exited threads are adopted: never more than the
		 * peak number of threads (+ main + slack for races). */
		CHECK_LE_U64(st.heaps, WAVE + 3);
		if (ph == 0) {
			first = st;
			rss_first = rss;
			continue;
		}
		CHECK_GE_U64(st.heaps_adopted, 1);
		CHECK_LE_U64(st.segments, first.segments + 2);
		CHECK_LE_U64(st.pages_active, first.pages_active + 64);
		/* TSan's own shadow memory grows with every new thread, and
		 * so does an emulator's per-thread state: there the segment
		 * and page counts above are the check. */
#ifndef TU_TSAN
		if (rss && rss_first && !tu_emulated())
			CHECK_LE_U64(rss, rss_first + (16u << 20));
#else
		(void)rss_first;
#endif
	}
}

/* ---- producer / consumer -------------------------------------------------- */

#define PC_RING 1024
static _Atomic(void *) g_pc[PC_RING];
static atomic_int g_pc_done;

static size_t pc_size(uint64_t i)
{
	return (size_t)(i * 13 % 400) + 8;
}

static void *producer(void *arg)
{
	uint64_t n = TU_ITERS(400000u);

	(void)arg;
	for (uint64_t i = 0; i < n; i++) {
		void *p = rqspin_malloc_nolock(pc_size(i), 0);

		CHECK(p != NULL);
		memcpy(p, &i, sizeof(i)); /* pc_size() >= 8 */
		while (atomic_load_explicit(&g_pc[i % PC_RING], memory_order_acquire) != NULL)
			sched_yield();
		atomic_store_explicit(&g_pc[i % PC_RING], p, memory_order_release);
	}
	atomic_store(&g_pc_done, 1);
	return NULL;
}

static void *consumer(void *arg)
{
	uint64_t n = TU_ITERS(400000u);

	(void)arg;
	for (uint64_t i = 0; i < n; i++) {
		void *p;
		uint64_t v;

		while ((p = atomic_load_explicit(&g_pc[i % PC_RING], memory_order_acquire)) == NULL)
			sched_yield();
		atomic_store_explicit(&g_pc[i % PC_RING], NULL, memory_order_relaxed);
		memcpy(&v, p, sizeof(v));
		CHECK_EQ_U64(v, i);
		rqspin_free_nolock(p);
	}
	return NULL;
}

static void test_prodcons(void)
{
	uint64_t rf = ac_stats().remote_frees;
	pthread_t c = tu_thread_start(consumer, NULL);
	pthread_t p = tu_thread_start(producer, NULL);
	struct rqspin_alloc_stats st;

	tu_thread_join(p);
	tu_thread_join(c);
	rqspin_alloc_trim();
	st = ac_stats();
	report("prodcons ", 0, &st, ac_rss());
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_GE_U64(st.remote_frees, rf + TU_ITERS(400000u));
}

int main(void)
{
	tu_watchdog(240);
	test_churn();
	test_prodcons();
	tu_write_str("alloc_threads: ok\n");
	return 0;
}
