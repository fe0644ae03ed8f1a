/* SPDX-License-Identifier: MIT */
/*
 * profiler: a sampling profiler in a signal handler.
 *
 *   profiler [--seconds S] [--threads N] [--hz HZ]
 *
 * setitimer(ITIMER_PROF) sends SIGPROF every 1/HZ s of the process's CPU
 * time. The handler takes a short stack sample of the interrupted thread
 * (the interrupted PC from the ucontext, then a bounded frame-pointer walk)
 * and records it in a hash table protected by one rqspinlock, allocating
 * new entries and a raw per-sample record with rqspin_malloc_nolock().
 *
 * That is what glibc malloc cannot do: malloc is not async-signal-safe. A
 * SIGPROF that lands while the thread is inside malloc (it takes an arena
 * lock) and calls malloc again deadlocks or corrupts the heap, so ordinary
 * profilers preallocate fixed buffers and drop samples when they fill up.
 * rqspin_malloc_nolock may be called from a handler that interrupted the
 * allocator itself; and rqspin_lock returns -EDEADLK instead of spinning
 * forever when the handler interrupted the holder of the table lock.
 *
 * To make both happen, the workload (N threads, CPU-bound) also allocates
 * with rqspin_malloc_nolock and also takes the table lock now and then (a
 * "live top" that sums the table). The handler counts each outcome:
 * -EDEADLK (dropped: it interrupted the lock holder), -ETIMEDOUT, NULL
 * allocations. At the end the program prints the top functions and stacks
 * (names from dladdr: link with -rdynamic, and only exported symbols have
 * names), frees everything and checks with rqspin_alloc_stats_get that the
 * allocator's live bytes are back to where they started. Exit status 0
 * when the summary was printed and nothing leaked.
 */
/* Before any header: REG_RIP (<ucontext.h>) and dladdr() are GNU
 * extensions, which a strict -std=c11 build hides. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <rqspin/rqspin.h>

#define MAX_DEPTH 4          /* PC + 3 callers */
#define TABLE_BUCKETS 509
#define MAX_THREADS 64
/* The handler waits at most this long for the table lock (a holder on
 * another CPU); a handler should not spin for the default 250 ms. */
#define HANDLER_LOCK_NS (5 * 1000 * 1000ull)

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

/* Workload functions: exported (not static) and never inlined or cloned,
 * so that dladdr can name them in the report. */
#if defined(__clang__)
#define PROFILED __attribute__((noinline))
#else
#define PROFILED __attribute__((noinline, noclone))
#endif

/* ------------------------------------------------------------------ */
/* The sample table                                                    */

struct sample_rec {             /* one sample: which thread, when */
	struct sample_rec *next;
	uint64_t t_ns;
	uint32_t thread;        /* workload thread index */
};

struct stack_entry {            /* one distinct stack */
	struct stack_entry *next;
	uint64_t count;
	uint32_t depth;
	uintptr_t pc[MAX_DEPTH];  /* [0] interrupted PC, then return addresses */
	struct sample_rec *recs;  /* newest first */
};

static rqspinlock_t table_lock = RQSPINLOCK_INIT;
static struct stack_entry *table[TABLE_BUCKETS]; /* under table_lock */
static uint64_t table_samples, table_entries;     /* under table_lock */

static struct {
	_Atomic uint64_t signals;     /* SIGPROF handled */
	_Atomic uint64_t recorded;    /* samples stored */
	_Atomic uint64_t edeadlk;     /* table lock: interrupted its holder */
	_Atomic uint64_t etimedout;   /* table lock: holder too slow */
	_Atomic uint64_t owner_dead;  /* table lock: holder died (never here) */
	_Atomic uint64_t alloc_null;  /* rqspin_malloc_nolock returned NULL */
	_Atomic uint64_t no_pc;       /* no PC for this CPU / outside workload */
	/* workload */
	_Atomic uint64_t wl_allocs, wl_alloc_null, wl_scans, wl_lock_errors, wl_mismatch;
} ctr;

static _Atomic int stop;

/* Set by each workload thread for its own handler (TLS of the executable:
 * safe to read in a handler). */
static _Thread_local uintptr_t stack_lo, stack_hi;
static _Thread_local uint32_t thread_index;
static _Thread_local int is_worker;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The interrupted PC, then up to max-1 return addresses found by walking
 * frame pointers (a frame record is {previous fp, return address} on both
 * x86_64 and aarch64). Every read is checked to lie inside this thread's
 * stack, so a bogus frame pointer (code built without frame pointers, or
 * the interrupted function's prologue) ends the walk instead of faulting.
 * Returns the depth, 0 when the PC is unknown.
 */
static unsigned capture_stack(const void *ucv, uintptr_t *out, unsigned max)
{
	const ucontext_t *uc = ucv;
	uintptr_t pc, fp;
	unsigned n = 0;

#if defined(__x86_64__)
	pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
	pc = (uintptr_t)uc->uc_mcontext.pc;
	fp = (uintptr_t)uc->uc_mcontext.regs[29];
#else
	(void)uc;
	return 0; /* add your CPU's PC/FP registers here */
#endif
	if (!pc)
		return 0;
	out[n++] = pc;
	while (n < max && fp >= stack_lo && fp % sizeof(uintptr_t) == 0 &&
	       fp + 2 * sizeof(uintptr_t) <= stack_hi) {
		const uintptr_t *frame = (const uintptr_t *)fp;

		if (!frame[1])
			break;
		out[n++] = frame[1];
		if (frame[0] <= fp) /* stacks grow down: callers are above */
			break;
		fp = frame[0];
	}
	return n;
}

static unsigned stack_hash(const uintptr_t *pc, unsigned depth)
{
	uint64_t h = depth;

	for (unsigned i = 0; i < depth; i++)
		h = (h ^ pc[i]) * 0x100000001b3ull;
	return (unsigned)(h % TABLE_BUCKETS);
}

static void on_sigprof(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	uintptr_t pc[MAX_DEPTH];
	unsigned depth, b;
	struct stack_entry *e;
	struct sample_rec *rec;
	int err;

	(void)sig;
	(void)si;
	atomic_fetch_add_explicit(&ctr.signals, 1, memory_order_relaxed);
	depth = is_worker ? capture_stack(ucv, pc, MAX_DEPTH) : 0;
	if (!depth) {
		atomic_fetch_add_explicit(&ctr.no_pc, 1, memory_order_relaxed);
		goto out;
	}

	/* Every return is checked. This thread may have been interrupted
	 * inside work_table_peek() with the lock held (-EDEADLK, at once),
	 * or another thread may sit on it for too long (-ETIMEDOUT). */
	err = rqspin_lock_timeout(&table_lock, HANDLER_LOCK_NS);
	if (err == -EDEADLK) {
		atomic_fetch_add_explicit(&ctr.edeadlk, 1, memory_order_relaxed);
		goto out; /* drop the sample */
	} else if (err == -ETIMEDOUT) {
		atomic_fetch_add_explicit(&ctr.etimedout, 1, memory_order_relaxed);
		goto out;
	} else if (err == -EOWNERDEAD) {
		/* Acquired; a thread died inside a table update. Updates here
		 * publish with one pointer store, so the table is usable. */
		atomic_fetch_add_explicit(&ctr.owner_dead, 1, memory_order_relaxed);
	} else if (err) {
		goto out;
	}

	/* Allocating while holding a spinlock, in a signal handler that may
	 * have interrupted the allocator: fine, it never blocks. */
	rec = rqspin_malloc_nolock(sizeof(*rec), 0);
	if (!rec) {
		atomic_fetch_add_explicit(&ctr.alloc_null, 1, memory_order_relaxed);
		goto unlock;
	}
	b = stack_hash(pc, depth);
	for (e = table[b]; e; e = e->next)
		if (e->depth == depth && !memcmp(e->pc, pc, depth * sizeof(pc[0])))
			break;
	if (!e) {
		e = rqspin_malloc_nolock(sizeof(*e), RQSPIN_ALLOC_ZERO);
		if (!e) {
			atomic_fetch_add_explicit(&ctr.alloc_null, 1, memory_order_relaxed);
			rqspin_free_nolock(rec);
			goto unlock;
		}
		e->depth = depth;
		memcpy(e->pc, pc, depth * sizeof(pc[0]));
		e->next = table[b];
		table[b] = e;
		table_entries++;
	}
	rec->t_ns = now_ns();
	rec->thread = thread_index;
	rec->next = e->recs;
	e->recs = rec;
	e->count++;
	table_samples++;
	atomic_fetch_add_explicit(&ctr.recorded, 1, memory_order_relaxed);
unlock:
	rqspin_unlock(&table_lock);
out:
	errno = saved_errno;
}

/* ------------------------------------------------------------------ */
/* The workload                                                        */

unsigned work_hash(uint64_t *rng);
double work_math(uint64_t *rng);
unsigned work_alloc(uint64_t *rng);
void work_table_peek(void);
void *worker_main(void *arg);

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Pure CPU: FNV-1a over a buffer. */
PROFILED unsigned work_hash(uint64_t *rng)
{
	unsigned char buf[1024];
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(xorshift(rng) >> 32);
	for (int round = 0; round < 4; round++)
		for (size_t i = 0; i < sizeof(buf); i++)
			h = (h ^ buf[i]) * 16777619u;
	return h;
}

/* Floating point. */
PROFILED double work_math(uint64_t *rng)
{
	double x = (double)(xorshift(rng) % 1000) / 1000.0, s = 0;

	for (int i = 1; i < 2000; i++)
		s += sqrt(x * i) / (1.0 + x * x * i);
	return s;
}

/* Allocator traffic in the sizes the handler uses too, so that SIGPROF
 * often lands inside rqspin_malloc_nolock/rqspin_free_nolock. */
PROFILED unsigned work_alloc(uint64_t *rng)
{
	void *obj[256];
	unsigned sum = 0;

	for (int i = 0; i < 256; i++) {
		size_t sz = 8 + xorshift(rng) % 57; /* 8..64 bytes */

		obj[i] = rqspin_malloc_nolock(sz, 0);
		if (!obj[i]) {
			atomic_fetch_add_explicit(&ctr.wl_alloc_null, 1, memory_order_relaxed);
			continue;
		}
		memset(obj[i], i, sz);
		sum += ((unsigned char *)obj[i])[sz - 1];
	}
	for (int i = 0; i < 256; i++) {
		int j = (int)(xorshift(rng) % 256); /* free in a shuffled order */
		void *t = obj[i];

		obj[i] = obj[j];
		obj[j] = t;
	}
	for (int i = 0; i < 256; i++)
		rqspin_free_nolock(obj[i]);
	atomic_fetch_add_explicit(&ctr.wl_allocs, 256, memory_order_relaxed);
	return sum;
}

/* A "live top": sum the table under its lock and check it. The handler
 * sometimes interrupts this thread right here, holding the lock. */
PROFILED void work_table_peek(void)
{
	uint64_t sum = 0, recs = 0;
	int err = rqspin_lock(&table_lock);

	if (err == -EOWNERDEAD) {
		/* acquired: see on_sigprof; nothing to repair */
	} else if (err) { /* -ETIMEDOUT (or -EDEADLK): skip this round */
		atomic_fetch_add_explicit(&ctr.wl_lock_errors, 1, memory_order_relaxed);
		return;
	}
	for (unsigned b = 0; b < TABLE_BUCKETS; b++)
		for (struct stack_entry *e = table[b]; e; e = e->next) {
			sum += e->count;
			for (struct sample_rec *r = e->recs; r; r = r->next)
				recs++;
		}
	if (sum != table_samples || recs != table_samples)
		atomic_fetch_add_explicit(&ctr.wl_mismatch, 1, memory_order_relaxed);
	rqspin_unlock(&table_lock);
	atomic_fetch_add_explicit(&ctr.wl_scans, 1, memory_order_relaxed);
}

void *worker_main(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	volatile double sink = 0;
	pthread_attr_t attr;
	sigset_t prof;
	void *addr;
	size_t size;

	/* Tell our handler where this thread's stack is (for the walk). */
	if (!pthread_getattr_np(pthread_self(), &attr)) {
		if (!pthread_attr_getstack(&attr, &addr, &size)) {
			stack_lo = (uintptr_t)addr;
			stack_hi = (uintptr_t)addr + size;
		}
		pthread_attr_destroy(&attr);
	}
	thread_index = (uint32_t)(uintptr_t)arg;
	is_worker = 1;
	/* main blocks SIGPROF (it only sleeps); workers take it. */
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	pthread_sigmask(SIG_UNBLOCK, &prof, NULL);

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		switch (xorshift(&rng) % 8) {
		case 0:
		case 1:
			sink += work_hash(&rng);
			break;
		case 2:
		case 3:
			sink += work_math(&rng);
			break;
		case 4:
		case 5:
		case 6:
			sink += work_alloc(&rng);
			break;
		default:
			work_table_peek();
		}
	}
	(void)sink;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Report                                                              */

struct func_row {
	const void *saddr;
	const char *name, *file;
	uint64_t count;
};

/* Name an address: "symbol+0xoff (object)". A return address points after
 * the call, so callers are looked up at address - 1. */
static void describe(uintptr_t a, char *out, size_t n)
{
	Dl_info di;

	if (dladdr((void *)a, &di) && di.dli_sname) {
		const char *obj = di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;

		snprintf(out, n, "%s+0x%lx (%s)", di.dli_sname,
			 (unsigned long)(a - (uintptr_t)di.dli_saddr),
			 obj ? obj + 1 : di.dli_fname ? di.dli_fname : "?");
	} else if (di.dli_fname) { /* no exported symbol: offset in the object */
		const char *obj = strrchr(di.dli_fname, '/');

		snprintf(out, n, "%s+0x%lx", obj ? obj + 1 : di.dli_fname,
			 (unsigned long)(a - (uintptr_t)di.dli_fbase));
	} else {
		snprintf(out, n, "0x%lx", (unsigned long)a);
	}
}

static int cmp_entry(const void *a, const void *b)
{
	const struct stack_entry *x = *(struct stack_entry *const *)a;
	const struct stack_entry *y = *(struct stack_entry *const *)b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static int cmp_func(const void *a, const void *b)
{
	const struct func_row *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

/* Print the profile. Called with the table lock held and no handler able
 * to run (timer off, workers joined): normal context, stdio is fine. */
static void report(unsigned nthreads)
{
	struct stack_entry **ent = malloc((table_entries + 1) * sizeof(*ent));
	struct func_row *fn = calloc(table_entries + 1, sizeof(*fn));
	uint64_t per_thread[MAX_THREADS] = { 0 };
	size_t ne = 0, nf = 0;
	char a[160], b[160], c[160];

	if (!ent || !fn) {
		fprintf(stderr, "profiler: out of memory for the report\n");
		free(ent);
		free(fn);
		return;
	}
	for (unsigned i = 0; i < TABLE_BUCKETS; i++)
		for (struct stack_entry *e = table[i]; e; e = e->next) {
			ent[ne++] = e;
			for (struct sample_rec *r = e->recs; r; r = r->next)
				per_thread[r->thread % MAX_THREADS]++;
		}
	qsort(ent, ne, sizeof(*ent), cmp_entry);

	/* Self samples per function (the symbol containing the PC). */
	for (size_t i = 0; i < ne; i++) {
		Dl_info di;
		const void *key = NULL;
		size_t j;

		if (dladdr((void *)ent[i]->pc[0], &di) && di.dli_sname)
			key = di.dli_saddr;
		for (j = 0; j < nf && fn[j].saddr != key; j++)
			;
		if (j == nf) {
			fn[nf].saddr = key;
			fn[nf].name = key ? di.dli_sname : "(no exported symbol)";
			fn[nf].file = key && di.dli_fname ? di.dli_fname : "?";
			nf++;
		}
		fn[j].count += ent[i]->count;
	}
	qsort(fn, nf, sizeof(*fn), cmp_func);

	printf("top functions (self samples; names are the nearest exported symbol):\n");
	for (size_t j = 0; j < nf && j < 10; j++) {
		const char *obj = strrchr(fn[j].file, '/');

		printf("  %6.1f%% %6llu  %s (%s)\n", 100.0 * fn[j].count / table_samples,
		       (unsigned long long)fn[j].count, fn[j].name, obj ? obj + 1 : fn[j].file);
	}
	printf("top stacks (PC <- callers):\n");
	for (size_t i = 0; i < ne && i < 5; i++) {
		struct stack_entry *e = ent[i];

		describe(e->pc[0], a, sizeof(a));
		if (e->depth > 1)
			describe(e->pc[1] - 1, b, sizeof(b));
		if (e->depth > 2)
			describe(e->pc[2] - 1, c, sizeof(c));
		printf("  %6llu  %s%s%s%s%s\n", (unsigned long long)e->count, a,
		       e->depth > 1 ? " <- " : "", e->depth > 1 ? b : "",
		       e->depth > 2 ? " <- " : "", e->depth > 2 ? c : "");
	}
	printf("samples per thread:");
	for (unsigned t = 0; t < nthreads && t < MAX_THREADS; t++)
		printf(" %llu", (unsigned long long)per_thread[t]);
	printf("\n");
	free(ent);
	free(fn);
}

/* Free every entry and record (table lock held). */
static void free_table(void)
{
	for (unsigned i = 0; i < TABLE_BUCKETS; i++) {
		while (table[i]) {
			struct stack_entry *e = table[i];

			table[i] = e->next;
			while (e->recs) {
				struct sample_rec *r = e->recs;

				e->recs = r->next;
				rqspin_free_nolock(r);
			}
			rqspin_free_nolock(e);
		}
	}
	table_entries = table_samples = 0;
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--seconds S] [--threads N (1..%d)] [--hz HZ (1..10000)]\n",
		argv0, MAX_THREADS);
	exit(2);
}

static double parse_num(const char *s, double min, double max, const char *argv0)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max))
		usage(argv0);
	return v;
}

int main(int argc, char **argv)
{
	double seconds = 1.0;
	unsigned nthreads = 3, hz = 1000;
	pthread_t th[MAX_THREADS];
	struct sigaction sa;
	struct itimerval it = { { 0, 0 }, { 0, 0 } };
	struct rqspin_alloc_stats as0, as1;
	struct rqspin_lock_stats ls;
	struct timespec ts;
	sigset_t prof;
	uint64_t base, live, t0, t1, nsamples;
	int err, ok = 1;

	for (int i = 1; i < argc; i++) {
		if (i + 1 == argc)
			usage(argv[0]);
		if (!strcmp(argv[i], "--seconds"))
			seconds = parse_num(argv[++i], 0.01, 3600, argv[0]);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = (unsigned)parse_num(argv[++i], 1, MAX_THREADS, argv[0]);
		else if (!strcmp(argv[i], "--hz"))
			hz = (unsigned)parse_num(argv[++i], 1, 10000, argv[0]);
		else
			usage(argv[0]);
	}

	/* SIGPROF is process-directed: keep it away from this thread, which
	 * only sleeps (workers unblock it). Threads inherit this mask. */
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	pthread_sigmask(SIG_BLOCK, &prof, NULL);

	rqspin_alloc_stats_get(&as0);
	base = as0.small_bytes + as0.large_bytes;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigprof;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);

	for (unsigned t = 0; t < nthreads; t++) {
		if ((err = pthread_create(&th[t], NULL, worker_main, (void *)(uintptr_t)t))) {
			fprintf(stderr, "profiler: pthread_create: %s\n", strerror(err));
			atomic_store(&stop, 1);
			nthreads = t;
			ok = 0;
			break;
		}
	}
	it.it_interval.tv_usec = 1000000 / hz;
	if (!it.it_interval.tv_usec)
		it.it_interval.tv_usec = 1;
	it.it_value = it.it_interval;
	if (setitimer(ITIMER_PROF, &it, NULL)) {
		perror("profiler: setitimer");
		ok = 0;
	}

	t0 = now_ns();
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	atomic_store(&stop, 1);

	/* Timer off, workers gone; a SIGPROF still pending for the process
	 * is discarded by ignoring the signal. */
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	t1 = now_ns();
	signal(SIGPROF, SIG_IGN);

	err = rqspin_lock(&table_lock);
	if (err && err != -EOWNERDEAD) {
		fprintf(stderr, "profiler: table lock: %s\n", strerror(-err));
		return 1;
	}
	nsamples = table_samples;
	printf("profile summary: %u threads, %.2f s, %u Hz of CPU time\n", nthreads,
	       (double)(t1 - t0) / 1e9, hz);
	printf("SIGPROF: %llu handled, %llu samples recorded in %llu stacks\n",
	       (unsigned long long)ctr.signals, (unsigned long long)ctr.recorded,
	       (unsigned long long)table_entries);
	printf("  dropped: %llu EDEADLK (handler interrupted the table lock's holder), "
	       "%llu ETIMEDOUT, %llu NULL allocations, %llu without a PC\n",
	       (unsigned long long)ctr.edeadlk, (unsigned long long)ctr.etimedout,
	       (unsigned long long)ctr.alloc_null, (unsigned long long)ctr.no_pc);
	if (nsamples)
		report(nthreads);
	else
		printf("no samples (a very busy machine gave the workload no CPU?)\n");
	free_table();
	rqspin_unlock(&table_lock);

	printf("workload: %llu allocations (%llu NULL), %llu table peeks (%llu lock errors, "
	       "%llu inconsistent)\n",
	       (unsigned long long)ctr.wl_allocs, (unsigned long long)ctr.wl_alloc_null,
	       (unsigned long long)ctr.wl_scans, (unsigned long long)ctr.wl_lock_errors,
	       (unsigned long long)ctr.wl_mismatch);
	rqspin_lock_stats_get(&ls);
	printf("lock stats: fast %llu, pending %llu, queued %llu; EDEADLK aa %llu; "
	       "ETIMEDOUT %llu\n",
	       (unsigned long long)ls.fast, (unsigned long long)ls.pending,
	       (unsigned long long)ls.queued, (unsigned long long)ls.aa,
	       (unsigned long long)ls.timeout);

	/* Everything is freed: the allocator's live bytes must be back at
	 * the baseline. (Exited threads' heaps are collected by trim.) */
	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&as1);
	live = as1.small_bytes + as1.large_bytes;
	printf("allocator: handler allocations that interrupted the allocator: nested %llu "
	       "(next class %llu, reserve %llu), deferred frees %llu\n",
	       (unsigned long long)as1.nested, (unsigned long long)as1.next_class,
	       (unsigned long long)as1.reserve_allocs, (unsigned long long)as1.deferred_frees);
	printf("allocator: live bytes %llu at start, %llu at end: %s\n",
	       (unsigned long long)base, (unsigned long long)live,
	       live == base ? "all freed" : "LEAK");
	if (live != base || ctr.wl_mismatch)
		ok = 0;
	printf("profiler: %s\n", ok ? "OK" : "FAILED");
	return ok ? 0 : 1;
}
