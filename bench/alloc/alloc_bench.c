/* SPDX-License-Identifier: MIT */
/*
 * rqspin-alloc-bench / `rqspin-bench alloc`: rqspin_malloc_nolock against
 * glibc malloc, jemalloc and mimalloc.
 *
 * Every measurement runs in its own process: the program re-executes
 * itself (/proc/self/exe with its original command line) with the
 * environment variable RQSPIN_ALLOC_BENCH_CHILD naming the peer and the
 * test, and with LD_PRELOAD=libjemalloc.so.2 / libmimalloc.so.2 for those
 * peers (both export malloc, so they cannot share a process); glibc runs
 * without a preload; rqspin calls rqspin_malloc_nolock/rqspin_free_nolock
 * directly. The child prints one "RESULT ..." line on stdout.
 *
 * Tests:
 *   pairs    single thread, malloc+free pairs of 16, 64, 256, 1024, 4096 B
 *            (ns of thread CPU time per pair, best of 3)
 *   xthread  producer/consumer: one thread allocates batches of 256 objects
 *            (16..232 B), another frees everything it receives (all frees
 *            cross-thread); ns of process CPU time per object, best of 3
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

int alloc_bench_main(int argc, char **argv);

#define CHILD_ENV "RQSPIN_ALLOC_BENCH_CHILD"

enum peer { P_GLIBC, P_JEMALLOC, P_MIMALLOC, P_RQSPIN, NPEERS };
static const char *const peer_name[NPEERS] = { "glibc", "jemalloc", "mimalloc", "rqspin" };
static const char *const peer_lib[NPEERS] = { NULL, "libjemalloc.so.2", "libmimalloc.so.2", NULL };

static const unsigned pair_sizes[] = { 16, 64, 256, 1024, 4096 };
#define NPAIRS (sizeof(pair_sizes) / sizeof(pair_sizes[0]))

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

	for (int rep = 0; rep < 4; rep++) { /* rep 0 warms up */
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
	for (int rep = 0; rep < 3; rep++) {
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

static int child_main(const char *spec)
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

/* ---- parent side ------------------------------------------------------------ */

static char **g_cmdline; /* our original argv, for re-executing */

static bool read_cmdline(void)
{
	static char buf[65536];
	int fd = open("/proc/self/cmdline", O_RDONLY);
	ssize_t n, len = 0;
	int argc = 0;

	if (fd < 0)
		return false;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	for (ssize_t i = 0; i < len; i++)
		if (buf[i] == '\0')
			argc++;
	g_cmdline = calloc((size_t)argc + 1, sizeof(char *));
	if (!g_cmdline)
		return false;
	argc = 0;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1)
		g_cmdline[argc++] = buf + i;
	return true;
}

static char g_libpath[NPEERS][512];

static bool find_lib(enum peer p)
{
	static const char *const dirs[] = {
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
		"/usr/lib", "/usr/local/lib",
	};
	const char *env = getenv(p == P_JEMALLOC ? "RQSPIN_BENCH_JEMALLOC" : "RQSPIN_BENCH_MIMALLOC");

	if (!peer_lib[p])
		return true;
	if (env && access(env, R_OK) == 0) {
		snprintf(g_libpath[p], sizeof(g_libpath[p]), "%s", env);
		return true;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(g_libpath[p], sizeof(g_libpath[p]), "%s/%s", dirs[i], peer_lib[p]);
		if (access(g_libpath[p], R_OK) == 0)
			return true;
	}
	return false;
}

/* Run one measurement in a child; parse up to 3 numbers. Returns the count
 * parsed (0 on failure). */
static int run_child(enum peer p, const char *test, double out[3])
{
	int fds[2];
	pid_t pid;
	char buf[256], spec[96];
	ssize_t n, len = 0;
	int st, got;

	if (pipe(fds) != 0)
		return 0;
	snprintf(spec, sizeof(spec), "%s %s %d", peer_name[p], test, g_quick ? 1 : 0);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[1]);
		setenv(CHILD_ENV, spec, 1);
		if (peer_lib[p])
			setenv("LD_PRELOAD", g_libpath[p], 1);
		else
			unsetenv("LD_PRELOAD");
		execv("/proc/self/exe", g_cmdline);
		_exit(127);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(fds[0], buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fds[0]);
	buf[len > 0 ? len : 0] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 0;
	got = sscanf(buf, "RESULT %lf %lf %lf", &out[0], &out[1], &out[2]);
	return got > 0 ? got : 0;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
		"usage: %s [--quick] [--tests pairs,xthread,churn,signal] [--help]\n\n"
		"rqspin_malloc_nolock vs glibc malloc, jemalloc and mimalloc; each peer runs\n"
		"in its own process (LD_PRELOAD for jemalloc/mimalloc; override the library\n"
		"paths with RQSPIN_BENCH_JEMALLOC / RQSPIN_BENCH_MIMALLOC). A peer whose\n"
		"library is missing is left out. Default run: ~30-60 s; --quick: ~10 s.\n",
		prog);
}

static const char *verdict(double ratio, double limit)
{
	return ratio <= limit ? "PASS" : "MISS";
}

int alloc_bench_main(int argc, char **argv)
{
	const char *child = getenv(CHILD_ENV);
	bool want_pairs = true, want_x = true, want_churn = true, want_sig = true;
	bool have[NPEERS];
	double pairs[NPAIRS][NPEERS], xt[NPEERS], churn_ns[NPEERS], churn_rss[NPEERS];
	double out[3];
	int i;

	if (child)
		return child_main(child);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			g_quick = true;
		} else if (strcmp(argv[i], "--tests") == 0 && i + 1 < argc) {
			const char *t = argv[++i];

			want_pairs = strstr(t, "pairs") != NULL;
			want_x = strstr(t, "xthread") != NULL;
			want_churn = strstr(t, "churn") != NULL;
			want_sig = strstr(t, "signal") != NULL;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout, argv[0]);
			return 0;
		} else {
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (!read_cmdline()) {
		fprintf(stderr, "%s: cannot read /proc/self/cmdline\n", argv[0]);
		return 1;
	}
	for (int p = 0; p < NPEERS; p++) {
		have[p] = find_lib((enum peer)p);
		if (!have[p])
			fprintf(stderr, "%s: %s not found: %s left out\n", argv[0], peer_lib[p],
				peer_name[p]);
	}
	memset(pairs, 0, sizeof(pairs));
	memset(xt, 0, sizeof(xt));
	memset(churn_ns, 0, sizeof(churn_ns));
	memset(churn_rss, 0, sizeof(churn_rss));

	printf("rqspin alloc benchmark (%s run; each peer in its own process)\n",
	       g_quick ? "quick" : "default");
	printf("%-22s %10s %10s %10s %10s   %-28s\n", "test", "glibc", "jemalloc", "mimalloc",
	       "rqspin", "rqspin vs target");
	if (want_pairs) {
		for (size_t s = 0; s < NPAIRS; s++) {
			char test[32];
			double best_jm = 1e30;

			snprintf(test, sizeof(test), "pairs%u", pair_sizes[s]);
			snprintf(test, sizeof(test), "pairs %u B (ns/pair)", pair_sizes[s]);
			printf("%-22s", test);
			snprintf(test, sizeof(test), "pairs%u", pair_sizes[s]);
			for (int p = 0; p < NPEERS; p++) {
				if (have[p] && run_child((enum peer)p, test, out) >= 1)
					pairs[s][p] = out[0];
				if (pairs[s][p] > 0)
					printf(" %10.2f", pairs[s][p]);
				else
					printf(" %10s", "-");
				fflush(stdout);
			}
			if (pairs[s][P_JEMALLOC] > 0)
				best_jm = pairs[s][P_JEMALLOC];
			if (pairs[s][P_MIMALLOC] > 0 && pairs[s][P_MIMALLOC] < best_jm)
				best_jm = pairs[s][P_MIMALLOC];
			if (pairs[s][P_RQSPIN] > 0 && pairs[s][P_GLIBC] > 0 && best_jm < 1e30) {
				double rg = pairs[s][P_RQSPIN] / pairs[s][P_GLIBC];
				double rj = pairs[s][P_RQSPIN] / best_jm;

				printf("   %.2fx glibc %s, %.2fx je/mi %s", rg, verdict(rg, 1.0), rj,
				       verdict(rj, 1.5));
			}
			printf("\n");
		}
	}
	if (want_x) {
		double best = 1e30;

		printf("%-22s", "xthread (cpu-ns/obj)");
		for (int p = 0; p < NPEERS; p++) {
			if (have[p] && run_child((enum peer)p, "xthread", out) >= 1)
				xt[p] = out[0];
			if (xt[p] > 0)
				printf(" %10.2f", xt[p]);
			else
				printf(" %10s", "-");
			if (p != P_RQSPIN && xt[p] > 0 && xt[p] < best)
				best = xt[p];
			fflush(stdout);
		}
		if (xt[P_RQSPIN] > 0 && best < 1e30)
			printf("   %.2fx fastest peer %s", xt[P_RQSPIN] / best,
			       verdict(xt[P_RQSPIN] / best, 1.5));
		printf("\n");
	}
	if (want_churn) {
		for (int p = 0; p < NPEERS; p++)
			if (have[p] && run_child((enum peer)p, "churn", out) >= 2) {
				churn_ns[p] = out[0];
				churn_rss[p] = out[1];
			}
		printf("%-22s", "churn (cpu-ns/op)");
		for (int p = 0; p < NPEERS; p++) {
			if (churn_ns[p] > 0)
				printf(" %10.2f", churn_ns[p]);
			else
				printf(" %10s", "-");
		}
		printf("\n%-22s", "churn peak RSS (MiB)");
		for (int p = 0; p < NPEERS; p++) {
			if (churn_rss[p] > 0)
				printf(" %10.1f", churn_rss[p] / 1024.0);
			else
				printf(" %10s", "-");
		}
		if (churn_rss[P_RQSPIN] > 0 && churn_rss[P_JEMALLOC] > 0)
			printf("   %.2fx jemalloc %s", churn_rss[P_RQSPIN] / churn_rss[P_JEMALLOC],
			       verdict(churn_rss[P_RQSPIN] / churn_rss[P_JEMALLOC], 1.5));
		printf("\n");
	}
	if (want_sig) {
		printf("%-22s %10s %10s %10s", "in a signal handler", "n/a", "n/a", "n/a");
		if (run_child(P_RQSPIN, "signal", out) >= 3)
			printf(" %10.2f   ns/pair; timer run: %.0f handlers, %.0f nested allocs\n",
			       out[0], out[2], out[1]);
		else
			printf(" %10s\n", "failed");
		printf("  (glibc, jemalloc and mimalloc are not async-signal-safe: not measured)\n");
	}
	return 0;
}
