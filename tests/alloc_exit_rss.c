/* SPDX-License-Identifier: MIT */
/*
 * Memory of exited threads goes back without rqspin_alloc_trim().
 *
 * Waves of short-lived threads allocate, free some objects locally and
 * swap the others through a shared exchange; what a thread takes out of
 * the exchange it frees, usually an object of a thread that has exited
 * (a remote free into an abandoned heap). At the end the main thread frees
 * what is left in the exchange. Then, with no trim: the pages still in
 * use or resident in caches must be few (the exited threads' heaps were
 * collected as the last objects came back), checked through the
 * allocator's statistics, which is deterministic.
 *
 * `alloc_exit_rss [threads] [--glibc]` prints the resident set before and
 * after (the figure compared with glibc's malloc, which --glibc uses).
 */
#include "alloc_common.h"

#define XN 32768
#define WAVE 8
#define PER_THREAD 256

static _Atomic(void *) g_x[XN];
static bool g_glibc;

static void *xalloc(size_t n)
{
	return g_glibc ? malloc(n) : rqspin_malloc_nolock(n, 0);
}

static void xfree(void *p)
{
	if (g_glibc)
		free(p);
	else
		rqspin_free_nolock(p);
}

static size_t x_size(uint32_t j)
{
	return (j * 37u) % 2000 + 16;
}

static void *churn_thread(void *arg)
{
	uint32_t seed = (uint32_t)(uintptr_t)arg;
	void *mine[PER_THREAD];

	for (uint32_t i = 0; i < PER_THREAD; i++) {
		uint32_t j = (seed * 7919u + i * 104729u) % XN;

		mine[i] = xalloc(x_size(j));
		CHECK(mine[i] != NULL);
		ac_fill(mine[i], 16, j);
		if (i % 8) {
			void *old = atomic_exchange(&g_x[j], mine[i]);

			if (old) {
				AC_CHECK(old, 16, j);
				xfree(old);
			}
			mine[i] = NULL;
		}
	}
	for (uint32_t i = 0; i < PER_THREAD; i++)
		if (mine[i])
			xfree(mine[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned threads = TU_ITERS(10000u);
	uint64_t rss0, rss1;

	tu_watchdog(240);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--glibc") == 0)
			g_glibc = true;
		else
			threads = (unsigned)atoi(argv[i]);
	}
	/* warm up: the main thread's heap, the first segment */
	xfree(xalloc(100));
	rss0 = ac_rss();
	for (unsigned w = 0; w < threads; w += WAVE) {
		pthread_t t[WAVE];

		for (unsigned k = 0; k < WAVE; k++)
			t[k] = tu_thread_start(churn_thread, (void *)(uintptr_t)(w + k));
		for (unsigned k = 0; k < WAVE; k++)
			tu_thread_join(t[k]);
	}
	for (uint32_t j = 0; j < XN; j++) {
		void *p = atomic_exchange(&g_x[j], NULL);

		if (p) {
			AC_CHECK(p, 16, j);
			xfree(p);
		}
	}
	rss1 = ac_rss();
	printf("alloc_exit_rss: %s, %u threads: RSS %.1f MiB before, %.1f MiB after\n",
	       g_glibc ? "glibc malloc" : "rqspin", threads, (double)rss0 / 1048576.0,
	       (double)rss1 / 1048576.0);
	if (!g_glibc) {
		struct rqspin_alloc_stats st = ac_stats();

		printf("alloc_exit_rss: pages active %llu, cached %llu, heaps %llu (abandoned %llu)\n",
		       (unsigned long long)st.pages_active, (unsigned long long)st.pages_cached,
		       (unsigned long long)st.heaps, (unsigned long long)st.heaps_abandoned);
		fflush(stdout);
		CHECK_EQ_U64(st.small_objects, 0);
		/* Left resident without a trim: the main thread's current
		 * pages and cache, each abandoned heap's current pages that
		 * were never emptied (none: all were), the shared pool's
		 * 64 resident pages. In use: the main thread's few current
		 * pages; a page of an exited thread whose last objects came
		 * back while it was partial must have been retired too. */
		CHECK_LE_U64(st.pages_active, 8);
		CHECK_LE_U64(st.pages_active + st.pages_cached, 96);
	}
	return 0;
}
