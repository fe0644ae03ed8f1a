/* SPDX-License-Identifier: MIT */
/*
 * The measurements of `rqspin-bench alloc`, in the child process (alloc.h):
 * rqspin_malloc_nolock/rqspin_free_nolock called directly, or malloc/free
 * of glibc, jemalloc or mimalloc (preloaded by the parent). One
 * measurement per child; the parent repeats them, interleaving the peers.
 *
 * Tests:
 *   pairs    single thread, malloc+free pairs of 16, 64, 256, 1024, 4096 B
 *            (ns of thread CPU time per pair, after a warm-up pass)
 *   xthread  producer/consumer: one thread allocates batches of 256 objects
 *            (16..232 B), another frees everything it receives (all frees
 *            cross-thread); ns of process CPU time per object
 *   churn    larson-like: 4 threads replace random objects (16..1024 B) in
 *            their arrays; after each round every thread takes over the
 *            next thread's array, so its frees are remote; ns of process
 *            CPU time per op, and peak RSS (getrusage ru_maxrss)
 * CPU time rather than wall time: the numbers stay comparable on a shared,
 * loaded machine (waiting for a CPU is not counted; spinning is).
 *   signal   rqspin only: alloc+free pairs inside a signal handler, and a
 *            timer-driven run that counts handlers that interrupted the
 *            allocator (nested path)
 * Targets (allocator): pairs <= 1.0x glibc and <= 1.5x the faster of
 * jemalloc and mimalloc; xthread <= 1.5x the fastest peer; churn peak RSS
 * <= 1.5x jemalloc's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/alloc.h>

#include "alloc.h"

const char *const alloc_peer_name[ALLOC_NPEERS] = { "glibc", "jemalloc", "mimalloc", "rqspin" };

static bool g_quick;
static bool g_rqspin; /* child: use rqspin_malloc_nolock */

/* ---- the allocator under test ---------------------------------------------- */

static inline void *xmalloc(size_t n)
{
	return g_rqspin ? rqspin_malloc_nolock(n, 0) : malloc(n);
}

static inline void xfree(void *p)
{
	if (g_rqspin)
		rqspin_free_nolock(p);
	else
		free(p);
}

static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static double now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long xorshift(unsigned long long *s)
{
	unsigned long long x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* ---- pairs ------------------------------------------------------------------ */

/* Two copies of the loop so that each calls its allocator directly. */
#define PAIR_LOOP(MALLOC, FREE)                          \
	for (uint64_t i = 0; i < n; i++) {               \
		void *p = MALLOC;                        \
		escape(p);                               \
		FREE;                                    \
	}

static double run_pairs(size_t size)
{
	uint64_t n = g_quick ? 2000000 : 8000000;
	double best = 1e30;

	for (int rep = 0; rep < 2; rep++) { /* rep 0 warms up */
		double t0 = now_ns(CLOCK_THREAD_CPUTIME_ID), t;

		if (g_rqspin) {
			PAIR_LOOP(rqspin_malloc_nolock(size, 0), rqspin_free_nolock(p))
		} else {
			PAIR_LOOP(malloc(size), free(p))
		}
		t = (now_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (double)n;
		if (rep > 0 && t < best)
			best = t;
	}
	return best;
}

/* ---- producer / consumer ------------------------------------------------------ */

/* Objects travel in batches, so that the allocators' costs, not the
 * hand-off between the threads, dominate. */
#define XBATCH 256
#define XQUEUE 16
static void *g_batch[XQUEUE][XBATCH];
static _Atomic int g_full[XQUEUE];
static uint64_t g_xbatches;

static void *xproducer(void *arg)
{
	(void)arg;
	for (uint64_t b = 0; b < g_xbatches; b++) {
		void **slot = g_batch[b % XQUEUE];

		while (atomic_load_explicit(&g_full[b % XQUEUE], memory_order_acquire))
			sched_yield();
		for (unsigned k = 0; k < XBATCH; k++) {
			void *p = xmalloc(16 + (k * 24) % 240);

			*(volatile uint64_t *)p = k;
			slot[k] = p;
		}
		atomic_store_explicit(&g_full[b % XQUEUE], 1, memory_order_release);
	}
	return NULL;
}

static void *xconsumer(void *arg)
{
	(void)arg;
	for (uint64_t b = 0; b < g_xbatches; b++) {
		void **slot = g_batch[b % XQUEUE];

		while (!atomic_load_explicit(&g_full[b % XQUEUE], memory_order_acquire))
			sched_yield();
		for (unsigned k = 0; k < XBATCH; k++) {
			if (*(volatile uint64_t *)slot[k] != k)
				abort();
			xfree(slot[k]);
		}
		atomic_store_explicit(&g_full[b % XQUEUE], 0, memory_order_release);
	}
	return NULL;
}

static double run_xthread(void)
{
	double best = 1e30;

	g_xbatches = (g_quick ? 1000000 : 4000000) / XBATCH;
	for (int rep = 0; rep < 1; rep++) {
		pthread_t a, b;
		double t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID), t;

		if (pthread_create(&b, NULL, xconsumer, NULL) || pthread_create(&a, NULL, xproducer, NULL))
			abort();
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		t = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0) / (double)(g_xbatches * XBATCH);
		if (t < best)
			best = t;
	}
	return best;
}

/* ---- larson-like churn --------------------------------------------------------- */

#define CT 4        /* threads */
#define CSLOTS 4000 /* objects per array */

static void **g_arr[CT];
static pthread_barrier_t g_cbar;
static unsigned g_rounds, g_round_ops;

static void *churn_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	unsigned long long s = 0x9e3779b97f4a7c15ull * (id + 1);

	for (unsigned r = 0; r < g_rounds; r++) {
		void **a = g_arr[(id + r) % CT]; /* rotate: frees become remote */

		for (unsigned k = 0; k < g_round_ops; k++) {
			unsigned long long x = xorshift(&s);
			unsigned i = (unsigned)(x % CSLOTS);
			size_t sz = 16 + (size_t)((x >> 32) % 1009);
			char *p;

			xfree(a[i]);
			p = xmalloc(sz);
			if (!p)
				abort();
			p[0] = (char)k;
			p[sz - 1] = (char)k;
			a[i] = p;
		}
		pthread_barrier_wait(&g_cbar);
	}
	return NULL;
}

static void run_churn(double *ns_op, double *rss_kib)
{
	pthread_t t[CT];
	double t0;
	struct rusage ru;

	g_rounds = g_quick ? 6 : 12;
	g_round_ops = g_quick ? 40000 : 100000;
	for (unsigned i = 0; i < CT; i++) {
		g_arr[i] = calloc(CSLOTS, sizeof(void *)); /* the arrays: same for all */
		if (!g_arr[i])
			abort();
	}
	pthread_barrier_init(&g_cbar, NULL, CT);
	t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned i = 0; i < CT; i++)
		if (pthread_create(&t[i], NULL, churn_thread, (void *)(uintptr_t)i))
			abort();
	for (unsigned i = 0; i < CT; i++)
		pthread_join(t[i], NULL);
	*ns_op = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0) / ((double)g_rounds * g_round_ops * CT);
	for (unsigned i = 0; i < CT; i++) {
		for (unsigned k = 0; k < CSLOTS; k++)
			xfree(g_arr[i][k]);
		free(g_arr[i]);
	}
	getrusage(RUSAGE_SELF, &ru);
	*rss_kib = (double)ru.ru_maxrss;
}

/* ---- allocation in signal handlers (rqspin only) ----------------------------- */

static volatile double g_sig_ns; /* written by the handler */
static volatile uint64_t g_sig_pairs;

static void sig_pairs(int sig)
{
	int e = errno;
	double t0 = now_ns(CLOCK_MONOTONIC); /* vDSO: cheap enough inside */

	(void)sig;
	for (int i = 0; i < 64; i++) {
		void *p = rqspin_malloc_nolock(16 + 16 * (i % 8), 0);

		escape(p);
		rqspin_free_nolock(p);
	}
	g_sig_ns += now_ns(CLOCK_MONOTONIC) - t0;
	g_sig_pairs += 64;
	errno = e;
}

static void run_signal(double *ns_pair, double *nested, double *handlers)
{
	struct sigaction sa;
	struct sigevent sev;
	struct itimerspec its;
	struct rqspin_alloc_stats st;
	timer_t tm;
	unsigned n = g_quick ? 10000 : 40000;
	uint64_t iters = g_quick ? 1000000 : 4000000;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sig_pairs;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	/* 1: handler cost, raised synchronously (best of 4 rounds) */
	*ns_pair = 1e30;
	for (int rep = 0; rep < 4; rep++) {
		g_sig_ns = 0;
		g_sig_pairs = 0;
		for (unsigned i = 0; i < n; i++)
			raise(SIGUSR1);
		if (g_sig_ns / (double)g_sig_pairs < *ns_pair)
			*ns_pair = g_sig_ns / (double)g_sig_pairs;
	}
	/* 2: a 20 us timer interrupting an alloc/free loop at random points */
	g_sig_pairs = 0;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR1;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &tm) != 0)
		abort();
	its.it_value.tv_sec = its.it_interval.tv_sec = 0;
	its.it_value.tv_nsec = its.it_interval.tv_nsec = 20000;
	timer_settime(tm, 0, &its, NULL);
	for (uint64_t i = 0; i < iters; i++) {
		void *p = rqspin_malloc_nolock(16 + 16 * (i % 8), 0);

		escape(p);
		rqspin_free_nolock(p);
	}
	timer_delete(tm);
	rqspin_alloc_stats_get(&st);
	*nested = (double)st.nested;
	*handlers = (double)g_sig_pairs / 64;
}

/* ---- child side ------------------------------------------------------------- */

int alloc_child_main(const char *spec)
{
	char peer[32], test[32];
	int quick = 0;

	if (sscanf(spec, "%31s %31s %d", peer, test, &quick) != 3)
		return 2;
	g_quick = quick != 0;
	g_rqspin = strcmp(peer, "rqspin") == 0;
	if (strncmp(test, "pairs", 5) == 0) {
		printf("RESULT %.4f\n", run_pairs((size_t)strtoul(test + 5, NULL, 10)));
	} else if (strcmp(test, "xthread") == 0) {
		printf("RESULT %.4f\n", run_xthread());
	} else if (strcmp(test, "churn") == 0) {
		double ns, rss;

		run_churn(&ns, &rss);
		printf("RESULT %.4f %.0f\n", ns, rss);
	} else if (strcmp(test, "signal") == 0) {
		double ns, nested, handlers;

		run_signal(&ns, &nested, &handlers);
		printf("RESULT %.4f %.0f %.0f\n", ns, nested, handlers);
	} else {
		return 2;
	}
	fflush(stdout);
	return 0;
}

