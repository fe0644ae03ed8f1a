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
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/alloc.h>

#include "alloc.h"
#include "clock.h"

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

/* ---- waiting between threads ------------------------------------------------- */

/*
 * A thread that waits for another (a full or an empty slot) spins a while,
 * then sleeps on a futex until the other thread announces a change. Not
 * sched_yield(): on an idle machine it returns at once, but with CPU hogs
 * each yield can give a hog a whole scheduler slice (the xmalloc ring took
 * 34 s instead of 1 with four hogs on two CPUs). The waker makes a system
 * call only when somebody sleeps, so the idle figures keep no extra cost.
 * Waiting is never inside a measured loop.
 */
#define XWAIT_SPINS 4096u

struct xwait {
	_Atomic uint32_t seq;      /* bumped by every change the waiter may want */
	_Atomic uint32_t sleepers; /* threads in (or about to enter) futex_wait */
	char pad[56];
};

/* Announce a change to w's waiter. seq_cst (both): with the waiter's
 * seq_cst increment of sleepers and the kernel's check of seq, either the
 * waiter's futex_wait sees the new seq, or we see it sleeping and wake it
 * (no lost wake-up). */
static void xwait_notify(struct xwait *w)
{
	atomic_fetch_add(&w->seq, 1);
	if (atomic_load(&w->sleepers))
		syscall(SYS_futex, &w->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The waiter's side: seq is w->seq as loaded (acquire: with the notifier's
 * release) before the condition was found false; returns when seq moved
 * (or spuriously), and the caller checks its condition again. */
static void xwait_wait(struct xwait *w, uint32_t seq)
{
	for (unsigned i = 0; i < XWAIT_SPINS; i++) {
		if (atomic_load_explicit(&w->seq, memory_order_acquire) != seq)
			return;
		bench_cpu_relax();
	}
	atomic_fetch_add(&w->sleepers, 1);
	syscall(SYS_futex, &w->seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
	atomic_fetch_sub(&w->sleepers, 1);
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
 * hand-off between the threads, dominate. The figure is the threads' CPU
 * time inside their malloc and free loops only: the waiting for a full or
 * an empty slot (xwait_wait) is not the allocator's cost. The process CPU
 * time, waiting included, is the second figure. */
#define XBATCH 256
#define XQUEUE 16
static void *g_batch[XQUEUE][XBATCH];
static _Atomic int g_full[XQUEUE];
static uint64_t g_xbatches;
static double g_xwork_ns[2]; /* [0] producer, [1] consumer: CPU ns in the loops */
static struct xwait g_xwait[2]; /* [0] the producer waits here, [1] the consumer */

static void *xproducer(void *arg)
{
	double work = 0;

	(void)arg;
	for (uint64_t b = 0; b < g_xbatches; b++) {
		void **slot = g_batch[b % XQUEUE];
		double t0;

		for (;;) {
			uint32_t seq = atomic_load_explicit(&g_xwait[0].seq, memory_order_acquire);

			if (!atomic_load_explicit(&g_full[b % XQUEUE], memory_order_acquire))
				break;
			xwait_wait(&g_xwait[0], seq);
		}
		t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		for (unsigned k = 0; k < XBATCH; k++) {
			void *p = xmalloc(16 + (k * 24) % 240);

			*(volatile uint64_t *)p = k;
			slot[k] = p;
		}
		work += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
		atomic_store_explicit(&g_full[b % XQUEUE], 1, memory_order_release);
		xwait_notify(&g_xwait[1]);
	}
	g_xwork_ns[0] = work;
	return NULL;
}

static void *xconsumer(void *arg)
{
	double work = 0;

	(void)arg;
	for (uint64_t b = 0; b < g_xbatches; b++) {
		void **slot = g_batch[b % XQUEUE];
		double t0;

		for (;;) {
			uint32_t seq = atomic_load_explicit(&g_xwait[1].seq, memory_order_acquire);

			if (atomic_load_explicit(&g_full[b % XQUEUE], memory_order_acquire))
				break;
			xwait_wait(&g_xwait[1], seq);
		}
		t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		for (unsigned k = 0; k < XBATCH; k++) {
			if (*(volatile uint64_t *)slot[k] != k)
				abort();
			xfree(slot[k]);
		}
		work += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
		atomic_store_explicit(&g_full[b % XQUEUE], 0, memory_order_release);
		xwait_notify(&g_xwait[0]);
	}
	g_xwork_ns[1] = work;
	return NULL;
}

/* ns per object in the malloc and free loops; *with_wait: process CPU. */
static double run_xthread(double *with_wait)
{
	uint64_t objs;
	pthread_t a, b;
	double t0;

	g_xbatches = (g_quick ? 1000000 : 4000000) / XBATCH;
	objs = g_xbatches * XBATCH;
	t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (pthread_create(&b, NULL, xconsumer, NULL) || pthread_create(&a, NULL, xproducer, NULL))
		abort();
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	*with_wait = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0) / (double)objs;
	return (g_xwork_ns[0] + g_xwork_ns[1]) / (double)objs;
}

/* ---- xmalloc-like ring -------------------------------------------------------- */

/*
 * XM_T threads in a ring: thread i allocates batches (random sizes 8..512 B)
 * for thread i + 1 and frees the batches thread i - 1 made for it, so every
 * free is remote and every thread both allocates and frees, as in xmalloc.
 * One slot per link; a thread that can neither produce nor consume waits
 * (xwait_wait; not counted). The figure is the CPU time inside the malloc and free
 * loops per object.
 */
#define XM_T 4
#define XM_BATCH 128

struct xm_link {
	void *obj[XM_BATCH];
	_Atomic int full;
	char pad[64];
};

static struct xm_link g_xm[XM_T];
static uint64_t g_xm_batches; /* per thread, produced and consumed */
static double g_xm_work[XM_T];
static struct xwait g_xm_wait[XM_T]; /* thread i waits here */

static void *xm_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct xm_link *out = &g_xm[id], *in = &g_xm[(id + XM_T - 1) % XM_T];
	unsigned long long s = 0x2545f4914f6cdd1dull * (id + 1);
	uint64_t made = 0, freed = 0;
	double work = 0;

	while (made < g_xm_batches || freed < g_xm_batches) {
		/* Loaded before the look at the links: a change after it
		 * makes xwait_wait return. */
		uint32_t seq = atomic_load_explicit(&g_xm_wait[id].seq, memory_order_acquire);
		bool did = false;
		double t0;

		if (made < g_xm_batches &&
		    !atomic_load_explicit(&out->full, memory_order_acquire)) {
			t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
			for (unsigned k = 0; k < XM_BATCH; k++) {
				size_t sz = 8 + (size_t)(xorshift(&s) % 505);
				unsigned char *p = xmalloc(sz);

				if (!p)
					abort();
				p[0] = (unsigned char)k;
				out->obj[k] = p;
			}
			work += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
			atomic_store_explicit(&out->full, 1, memory_order_release);
			xwait_notify(&g_xm_wait[(id + 1) % XM_T]);
			made++;
			did = true;
		}
		if (freed < g_xm_batches && atomic_load_explicit(&in->full, memory_order_acquire)) {
			t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
			for (unsigned k = 0; k < XM_BATCH; k++) {
				if (*(unsigned char *)in->obj[k] != (unsigned char)k)
					abort();
				xfree(in->obj[k]);
			}
			work += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
			atomic_store_explicit(&in->full, 0, memory_order_release);
			xwait_notify(&g_xm_wait[(id + XM_T - 1) % XM_T]);
			freed++;
			did = true;
		}
		if (!did)
			xwait_wait(&g_xm_wait[id], seq);
	}
	g_xm_work[id] = work;
	return NULL;
}

static double run_xmalloc(void)
{
	pthread_t t[XM_T];
	double sum = 0;

	g_xm_batches = (g_quick ? 250000 : 1000000) / XM_BATCH;
	for (unsigned i = 0; i < XM_T; i++)
		if (pthread_create(&t[i], NULL, xm_thread, (void *)(uintptr_t)i))
			abort();
	for (unsigned i = 0; i < XM_T; i++) {
		pthread_join(t[i], NULL);
		sum += g_xm_work[i];
	}
	return sum / ((double)g_xm_batches * XM_BATCH * XM_T);
}

/* ---- larson-like: random sizes, random cross-thread frees --------------------- */

/*
 * LS_T threads replace objects in one shared array of slots: each op picks
 * a random slot, takes its object (atomic exchange), frees it, allocates a
 * new one of a random size in 8..1024 B and puts it back, freeing what
 * another thread put there meanwhile. Which thread frees an object is
 * random, so most frees are remote; nobody ever waits. The figure is
 * process CPU time per op.
 */
#define LS_T 4
#define LS_SLOTS 16384

static _Atomic(void *) g_ls[LS_SLOTS];
static uint64_t g_ls_ops;

static void *ls_thread(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	unsigned long long s = 0x9e3779b97f4a7c15ull * (id + 3);

	for (uint64_t i = 0; i < g_ls_ops; i++) {
		unsigned long long x = xorshift(&s);
		size_t slot = (size_t)(x % LS_SLOTS), sz = 8 + (size_t)((x >> 32) % 1017);
		void *p = atomic_exchange_explicit(&g_ls[slot], NULL, memory_order_acquire);
		char *q;

		if (p)
			xfree(p);
		q = xmalloc(sz);
		if (!q)
			abort();
		q[0] = q[sz - 1] = (char)i;
		/* Acquire: what another thread left here was written before its
		 * release exchange; release: our writes to q before whoever
		 * frees it. */
		p = atomic_exchange_explicit(&g_ls[slot], q, memory_order_acq_rel);
		if (p)
			xfree(p);
	}
	return NULL;
}

static double run_larson(void)
{
	pthread_t t[LS_T];
	double t0;

	g_ls_ops = (g_quick ? 250000 : 1000000);
	t0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned i = 0; i < LS_T; i++)
		if (pthread_create(&t[i], NULL, ls_thread, (void *)(uintptr_t)i))
			abort();
	for (unsigned i = 0; i < LS_T; i++)
		pthread_join(t[i], NULL);
	t0 = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0) / ((double)g_ls_ops * LS_T);
	for (size_t i = 0; i < LS_SLOTS; i++) {
		void *p = atomic_load_explicit(&g_ls[i], memory_order_relaxed);

		if (p)
			xfree(p);
	}
	return t0;
}

/* ---- churn: arrays rotating between threads ------------------------------------ */

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

/* The timer run's period. Under ThreadSanitizer a handler (64 pairs) takes
 * longer than 20 us, so the timer would leave the loop no time at all. */
#if defined(__SANITIZE_THREAD__)
#define SIG_TIMER_NS 2000000
#else
#define SIG_TIMER_NS 20000
#endif

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
	its.it_value.tv_nsec = its.it_interval.tv_nsec = SIG_TIMER_NS;
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
		double with_wait, ns = run_xthread(&with_wait);

		printf("RESULT %.4f %.4f\n", ns, with_wait);
	} else if (strcmp(test, "xmalloc") == 0) {
		printf("RESULT %.4f\n", run_xmalloc());
	} else if (strcmp(test, "larson") == 0) {
		printf("RESULT %.4f\n", run_larson());
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

