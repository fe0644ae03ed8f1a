/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench deadlock`: how fast rqspinlock detects deadlocks and how
 * accurately its timeouts fire, each over many trials (rqspinlock's targets):
 *
 *  aa       a thread holds L and signals itself (pthread_kill); the handler
 *           calls rqspin_lock(&L): the time of that call, which must end in
 *           -EDEADLK (target: median < 10 us);
 *  abba     two threads hold A and B, meet at a barrier, then each locks the
 *           other's lock: time from the barrier (the last arrival) to the
 *           first -EDEADLK; the thread that was not refused gets its lock
 *           once the refused one lets go;
 *  cycle3   the same with three threads, A->B->C->A;
 *           both once per number of registered threads (--registered):
 *           extra live threads that took and released a lock of their own
 *           (so each holds a registry slot the deadlock search walks past)
 *           and sleep on a futex during the trials. Targets: p99 <= 50 us
 *           with up to 64 registered threads, <= 1 ms with 16 000;
 *  timeout  a thread holds L; another calls rqspin_lock_timeout(&L, T) as
 *           the only waiter (the pending-bit position, whose budget is T):
 *           elapsed / T (target: within +10%, i.e. [1.0, 1.1] at the median);
 *  head     (info) the queue head's budget, 2T: a pending waiter with a
 *           long timeout in front of it, elapsed / 2T.
 *
 * Every scenario also checks that rqspin_lock_stats_get counted each
 * failure as the right event (aa / abba / cycle / timeout), the abba and
 * cycle scenarios run a few more trials with a report hook installed and
 * check the reports, and afterwards every lock must be free and work
 * (lock, trylock, and two threads taking them all in order).
 *
 * Bounded: every wait of the harness has a deadline; a trial that does not
 * finish in DL_HANG_S seconds is reported and the process ends (exit 1).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rqspin/lock_diag.h>
#include <rqspin/rqspinlock.h>

#include "cli.h"
#include "deadlock.h"
#include "output.h"
#include "progress.h"

#define DL_SIG SIGUSR2
#define DL_HANG_S 60
#ifndef DL_REPORT_TRIALS
#define DL_REPORT_TRIALS 5
#endif
#define DL_CHECK_ITERS 2000

#define DEF_TRIALS 200
#define QUICK_TRIALS 20
#define QUICK_TIMEOUT_TRIALS 10
#define DEF_HEAD_MS 10
#define DEF_TIMEOUTS "1,10,50"
#define DEF_REGISTERED "1,8,64,1024,16000"
#define MAX_REGISTERED 100000u
#define REG_STACK_BYTES (64u * 1024u)
/* Each scenario lock on its own pair of cache lines (adjacent-line prefetch). */
#define DL_CACHELINE 128

struct dl_lock {
	alignas(DL_CACHELINE) rqspinlock_t l;
};

static struct dl_lock dl_locks[3];

/* ------------------------------------------------------------------------ */
/* Waiting (the harness's own, always bounded)                               */

static void dl_sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static __attribute__((noreturn)) void dl_hang(const char *what)
{
	fflush(stdout);
	cli_error("deadlock: FAILED: no progress for %d s: %s (a hang in the lock or the "
		  "harness); giving up",
		  DL_HANG_S, what);
	fflush(NULL);
	_exit(CLI_EXIT_FAIL);
}

#define DL_WAIT_FOR(cond, what)                                                  \
	do {                                                                     \
		uint64_t dl_end_ = bench_now_ns() + (uint64_t)DL_HANG_S * 1000000000u; \
		while (!(cond)) {                                                \
			if (bench_now_ns() > dl_end_)                            \
				dl_hang(what);                                   \
			dl_sleep_us(20);                                         \
		}                                                                \
	} while (0)

static uint32_t dl_word(rqspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank quantile of sorted v[n]. */
static double quantile(const double *v, size_t n, double q)
{
	size_t k;

	if (!n)
		return NAN;
	k = (size_t)ceil(q * (double)n);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

static void scen_finish(struct dl_scen *s)
{
	qsort(s->v, s->done, sizeof(double), cmp_double);
	s->p50 = quantile(s->v, s->done, 0.50);
	s->p90 = quantile(s->v, s->done, 0.90);
	s->p99 = quantile(s->v, s->done, 0.99);
	s->max = s->done ? s->v[s->done - 1] : NAN;
	s->min = s->done ? s->v[0] : NAN;
	if (s->v_call && s->v_start) {
		qsort(s->v_call, s->done, sizeof(double), cmp_double);
		qsort(s->v_start, s->done, sizeof(double), cmp_double);
		s->call_p50 = quantile(s->v_call, s->done, 0.50);
		s->call_p99 = quantile(s->v_call, s->done, 0.99);
		s->start_p50 = quantile(s->v_start, s->done, 0.50);
		s->start_p99 = quantile(s->v_start, s->done, 0.99);
	}
}

static void count_ret(struct dl_scen *s, int r)
{
	switch (r) {
	case 0:
		s->r_ok++;
		break;
	case -EDEADLK:
		s->r_deadlk++;
		break;
	case -ETIMEDOUT:
		s->r_timedout++;
		break;
	default:
		s->r_other++;
		break;
	}
}

static void stats_delta(struct rqspin_lock_stats *d, const struct rqspin_lock_stats *a,
			const struct rqspin_lock_stats *b)
{
	memset(d, 0, sizeof(*d));
	d->aa = b->aa - a->aa;
	d->abba = b->abba - a->abba;
	d->cycle = b->cycle - a->cycle;
	d->nest_fail = b->nest_fail - a->nest_fail;
	d->timeout = b->timeout - a->timeout;
	d->owner_dead = b->owner_dead - a->owner_dead;
	d->pending = b->pending - a->pending;
	d->queued = b->queued - a->queued;
	d->fast = b->fast - a->fast;
	d->stolen = b->stolen - a->stolen;
	d->deadlock_checks = b->deadlock_checks - a->deadlock_checks;
	d->stall_checks = b->stall_checks - a->stall_checks;
	d->deadline_extended = b->deadline_extended - a->deadline_extended;
}

/* Compare the library's counters over the measured trials with the
 * returns: every -EDEADLK must be counted as `expect_dl` (aa, abba or
 * cycle) and every -ETIMEDOUT as timeout. */
static void stats_check(struct dl_scen *s, const char *expect_dl)
{
	const struct rqspin_lock_stats *d = &s->lib;
	uint64_t dl_counted = strcmp(expect_dl, "aa") == 0     ? d->aa
			      : strcmp(expect_dl, "abba") == 0 ? d->abba
							       : d->cycle;
	uint64_t others = (strcmp(expect_dl, "aa") ? d->aa : 0) +
			  (strcmp(expect_dl, "abba") ? d->abba : 0) +
			  (strcmp(expect_dl, "cycle") ? d->cycle : 0) + d->nest_fail + d->owner_dead;

	if (s->kind == DL_TIMEOUT || s->kind == DL_HEAD) {
		dl_counted = 0;
		others = d->aa + d->abba + d->cycle + d->nest_fail + d->owner_dead;
	}
	s->stats_ok = dl_counted == (s->kind == DL_TIMEOUT || s->kind == DL_HEAD ? 0 : s->r_deadlk) &&
		      d->timeout == s->r_timedout && others == 0;
	snprintf(s->stats_note, sizeof(s->stats_note),
		 "aa %llu abba %llu cycle %llu nest %llu timeout %llu vs %llu EDEADLK %llu ETIMEDOUT",
		 (unsigned long long)d->aa, (unsigned long long)d->abba,
		 (unsigned long long)d->cycle, (unsigned long long)d->nest_fail,
		 (unsigned long long)d->timeout, (unsigned long long)s->r_deadlk,
		 (unsigned long long)s->r_timedout);
}

/* ------------------------------------------------------------------------ */
/* Are the locks free and working?                                           */

struct chk_arg {
	struct dl_lock *locks;
	unsigned n;
	unsigned fails;
	volatile uint64_t *counter;
};

static void *chk_thread(void *p)
{
	struct chk_arg *a = p;

	for (unsigned it = 0; it < DL_CHECK_ITERS; it++) {
		unsigned k;
		int r = 0;

		for (k = 0; k < a->n; k++) {
			r = rqspin_lock(&a->locks[k].l);
			if (r)
				break;
		}
		if (!r)
			*a->counter = *a->counter + 1;
		else
			a->fails++;
		while (k-- > 0)
			rqspin_unlock(&a->locks[k].l);
	}
	return NULL;
}

static void locks_check(struct dl_scen *s, struct dl_lock *locks, unsigned n)
{
	volatile uint64_t counter = 0;
	struct chk_arg a[2];
	pthread_t th[2];
	int r;

	s->locks_ok = false;
	for (unsigned i = 0; i < n; i++) {
		uint32_t w = dl_word(&locks[i].l);

		if (w) {
			snprintf(s->locks_note, sizeof(s->locks_note),
				 "lock %c not free after the trials: word 0x%08x", 'A' + i, w);
			return;
		}
		r = rqspin_lock(&locks[i].l);
		if (r) {
			snprintf(s->locks_note, sizeof(s->locks_note), "lock %c: rqspin_lock -> %d",
				 'A' + i, r);
			if (r == -EOWNERDEAD)
				rqspin_unlock(&locks[i].l);
			return;
		}
		rqspin_unlock(&locks[i].l);
		if (!rqspin_trylock(&locks[i].l)) {
			snprintf(s->locks_note, sizeof(s->locks_note), "lock %c: trylock failed",
				 'A' + i);
			return;
		}
		rqspin_unlock(&locks[i].l);
	}
	for (int k = 0; k < 2; k++) {
		a[k].locks = locks;
		a[k].n = n;
		a[k].fails = 0;
		a[k].counter = &counter;
		if (pthread_create(&th[k], NULL, chk_thread, &a[k]) != 0) {
			snprintf(s->locks_note, sizeof(s->locks_note), "cannot create a thread");
			if (k)
				pthread_join(th[0], NULL);
			return;
		}
	}
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	if (a[0].fails + a[1].fails || counter != 2u * DL_CHECK_ITERS) {
		snprintf(s->locks_note, sizeof(s->locks_note),
			 "2 threads x %u: %u failures, counter %llu", DL_CHECK_ITERS,
			 a[0].fails + a[1].fails, (unsigned long long)counter);
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		if (dl_word(&locks[i].l)) {
			snprintf(s->locks_note, sizeof(s->locks_note), "lock %c not free at the end",
				 'A' + i);
			return;
		}
	}
	s->locks_ok = true;
	snprintf(s->locks_note, sizeof(s->locks_note), "ok");
}

/* ------------------------------------------------------------------------ */
/* aa: a signal handler re-takes the lock its thread holds                   */

static rqspinlock_t *volatile aa_lock;
static volatile sig_atomic_t aa_done;
static volatile int aa_ret;
static volatile uint64_t aa_ns;

static void aa_handler(int sig)
{
	int e = errno, r;
	uint64_t t0, t1;

	(void)sig;
	t0 = bench_now_ns();
	r = rqspin_lock(aa_lock);
	t1 = bench_now_ns();
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(aa_lock); /* not expected: AA was missed */
	aa_ret = r;
	aa_ns = t1 - t0;
	aa_done = 1;
	errno = e;
}

static void run_aa(struct dl_scen *s)
{
	struct sigaction sa, old;
	struct rqspin_lock_stats b, a;
	sigset_t set, oldset;
	rqspinlock_t *l = &dl_locks[0].l;

	rqspin_lock_init(l);
	aa_lock = l;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = aa_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(DL_SIG, &sa, &old);
	sigemptyset(&set);
	sigaddset(&set, DL_SIG);
	pthread_sigmask(SIG_UNBLOCK, &set, &oldset);
	rqspin_lock_stats_get(&b);
	for (unsigned i = 0; i < s->trials; i++) {
		int r = rqspin_lock(l);

		if (r) {
			/* Not contended: cannot fail. */
			s->r_other++;
			continue;
		}
		aa_done = 0;
		pthread_kill(pthread_self(), DL_SIG);
		DL_WAIT_FOR(aa_done, "aa: the signal handler did not run");
		rqspin_unlock(l);
		count_ret(s, aa_ret);
		s->v[s->done++] = (double)aa_ns;
	}
	rqspin_lock_stats_get(&a);
	pthread_sigmask(SIG_SETMASK, &oldset, NULL);
	sigaction(DL_SIG, &old, NULL);
	stats_delta(&s->lib, &b, &a);
	stats_check(s, "aa");
	locks_check(s, dl_locks, 1);
}

/* ------------------------------------------------------------------------ */
/* Registered threads: live, holding a registry slot, asleep                 */

/*
 * A deadlock search looks for the holder of a lock through the registry of
 * threads, so its cost grows with the number of slots. The pool's threads
 * each take and release a lock of their own (their first lock call claims
 * a slot), then sleep on a futex until the pool is stopped. They are
 * started before a scenario's own threads, which then take the slots after
 * theirs: a search walks past every registered thread.
 */
struct reg_pool {
	pthread_t *th;
	unsigned want, created;
	uint32_t gate;                /* futex word: 0 sleep, 1 leave */
	_Atomic unsigned registered;  /* lock call done, 0 returned */
	_Atomic unsigned failed;      /* lock call returned an error */
	double setup_s;               /* creation until every thread registered */
	char note[96];                /* why fewer than want were created */
};

static void *reg_thread(void *p)
{
	struct reg_pool *rp = p;
	rqspinlock_t own;
	int r;

	rqspin_lock_init(&own);
	r = rqspin_lock(&own);
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(&own);
	/* relaxed: the main thread only counts arrivals; the slot itself is
	 * published by the library's own atomics. */
	atomic_fetch_add_explicit(r ? &rp->failed : &rp->registered, 1, memory_order_relaxed);
	/* relaxed: the gate hands over no data, only "leave"; a wake-up that
	 * finds 0 (spurious) sleeps again. */
	while (__atomic_load_n(&rp->gate, __ATOMIC_RELAXED) == 0)
		syscall(SYS_futex, &rp->gate, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return NULL;
}

static void reg_pool_stop(struct reg_pool *rp)
{
	__atomic_store_n(&rp->gate, 1, __ATOMIC_RELAXED);
	syscall(SYS_futex, &rp->gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	for (unsigned i = 0; i < rp->created; i++)
		pthread_join(rp->th[i], NULL);
	free(rp->th);
	rp->th = NULL;
	rp->created = 0;
}

/* Start want threads with small stacks. Returns false (and says why in
 * note, with every started thread joined again) when the machine refuses
 * a thread or a thread's lock call fails. */
static bool reg_pool_start(struct reg_pool *rp, unsigned want)
{
	size_t stack = REG_STACK_BYTES;
	long min = sysconf(_SC_THREAD_STACK_MIN);
	pthread_attr_t attr;
	uint64_t t0 = bench_now_ns();
	int e = 0;

	memset(rp, 0, sizeof(*rp));
	rp->want = want;
	if (!want)
		return true;
	if (min > 0 && (size_t)min > stack)
		stack = (size_t)min;
	rp->th = calloc(want, sizeof(*rp->th));
	if (!rp->th) {
		snprintf(rp->note, sizeof(rp->note), "out of memory");
		return false;
	}
	if ((e = pthread_attr_init(&attr)) != 0) {
		snprintf(rp->note, sizeof(rp->note), "pthread_attr_init: %s", strerror(e));
		free(rp->th);
		rp->th = NULL;
		return false;
	}
	if ((e = pthread_attr_setstacksize(&attr, stack)) != 0) {
		snprintf(rp->note, sizeof(rp->note), "pthread_attr_setstacksize: %s", strerror(e));
		pthread_attr_destroy(&attr);
		free(rp->th);
		rp->th = NULL;
		return false;
	}
	for (; rp->created < want; rp->created++) {
		e = pthread_create(&rp->th[rp->created], &attr, reg_thread, rp);
		if (e)
			break;
	}
	pthread_attr_destroy(&attr);
	if (e) {
		snprintf(rp->note, sizeof(rp->note), "pthread_create: %s after %u threads",
			 strerror(e), rp->created);
		reg_pool_stop(rp);
		return false;
	}
	DL_WAIT_FOR(atomic_load_explicit(&rp->registered, memory_order_relaxed) +
				    atomic_load_explicit(&rp->failed, memory_order_relaxed) ==
			    want,
		    "registered threads: their first lock call");
	rp->setup_s = (double)(bench_now_ns() - t0) / 1e9;
	if (atomic_load_explicit(&rp->failed, memory_order_relaxed)) {
		snprintf(rp->note, sizeof(rp->note), "%u of %u registered threads: lock call failed",
			 atomic_load_explicit(&rp->failed, memory_order_relaxed), want);
		reg_pool_stop(rp);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* abba / cycle3: n threads, thread i holds lock i and wants lock i+1 mod n */

struct cyc {
	unsigned n;
	alignas(DL_CACHELINE) _Atomic unsigned go;       /* trial number posted, 1-based */
	alignas(DL_CACHELINE) _Atomic unsigned arrived;  /* at the barrier, this trial */
	alignas(DL_CACHELINE) _Atomic unsigned released; /* trial number let through */
	_Atomic uint64_t t_barrier;
	alignas(DL_CACHELINE) _Atomic unsigned done;
	_Atomic bool quit;
	struct {
		alignas(DL_CACHELINE) int own_ret;
		int ret;
		uint64_t t_call, t_end;
	} th[3];
};

struct cyc_arg {
	struct cyc *c;
	unsigned idx;
};

static void *cyc_thread(void *p)
{
	struct cyc_arg *a = p;
	struct cyc *c = a->c;
	unsigned i = a->idx, n = c->n, seen = 0;
	rqspinlock_t *own = &dl_locks[i].l, *other = &dl_locks[(i + 1) % n].l;

	for (;;) {
		unsigned trial, spins = 0;
		int r0, r = 0;

		while ((trial = atomic_load_explicit(&c->go, memory_order_acquire)) == seen) {
			if (atomic_load_explicit(&c->quit, memory_order_acquire))
				return NULL;
			dl_sleep_us(20);
		}
		seen = trial;
		r0 = rqspin_lock(own);
		/* The barrier: the last arrival stamps the time and opens it.
		 * A thread that could not take its own lock (impossible: it is
		 * free) still passes through, so the trial ends. */
		if (atomic_fetch_add_explicit(&c->arrived, 1, memory_order_acq_rel) + 1 == n) {
			atomic_store_explicit(&c->t_barrier, bench_now_ns(), memory_order_relaxed);
			atomic_store_explicit(&c->released, trial, memory_order_release);
		} else {
			while (atomic_load_explicit(&c->released, memory_order_acquire) != trial) {
				if (++spins > 1000)
					sched_yield();
			}
		}
		c->th[i].t_call = bench_now_ns();
		if (r0 == 0) {
			r = rqspin_lock(other);
			c->th[i].t_end = bench_now_ns();
			if (r == 0 || r == -EOWNERDEAD)
				rqspin_unlock(other);
			rqspin_unlock(own);
		} else {
			c->th[i].t_end = bench_now_ns();
			if (r0 == -EOWNERDEAD)
				rqspin_unlock(own);
		}
		c->th[i].own_ret = r0;
		c->th[i].ret = r;
		atomic_fetch_add_explicit(&c->done, 1, memory_order_release);
	}
}

/* Report hook for the checked trials. */
static struct {
	_Atomic unsigned n, ok, bad, partial;
	unsigned expect_event, expect_threads;
	const void *locks[3];
	/* The first bad report: what it said. */
	_Atomic int have_bad;
	int bad_event, bad_error;
	unsigned bad_nthreads;
	const char *bad_why;
} dl_rep;

static bool is_scen_lock(const void *l, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (l == dl_rep.locks[i])
			return true;
	return false;
}

/*
 * A report is bad if it has the wrong error, event or lock, or a member
 * that is not a thread or is listed twice; it is stale (counted apart) if
 * it lists only the reporter or a member that no longer holds a lock of the
 * scenario. Stale reports happen when two members detect the same cycle at
 * once: the library walks the cycle again and reads the held tables again
 * to fill the report, and the other member may have backed out by then.
 */
static void dl_report_hook(const struct rqspin_report *rep, void *arg)
{
	unsigned n = dl_rep.expect_threads, k;
	const char *why = NULL;
	bool stale = rep->nthreads == 1;

	(void)arg;
	atomic_fetch_add(&dl_rep.n, 1);
	if (rep->error != -EDEADLK)
		why = "error";
	else if ((unsigned)rep->event != dl_rep.expect_event)
		why = "event";
	else if (rep->nthreads != n && rep->nthreads != 1)
		why = "thread count";
	else if (!is_scen_lock(rep->lock, n))
		why = "lock";
	for (k = 0; !why && k < rep->nthreads && k < RQSPIN_REPORT_MAX_CYCLE; k++) {
		const struct rqspin_report_thread *t = &rep->threads[k];
		bool holds = false;

		if (t->tid <= 0)
			why = "thread id";
		else if (!is_scen_lock(t->waits_for, n))
			why = "a thread's waits_for";
		for (unsigned h = 0; h < t->nheld && h < RQSPIN_NR_HELD; h++)
			holds |= is_scen_lock(t->held[h], n) && t->held[h] != t->waits_for;
		stale |= !holds;
		for (unsigned m = 0; !why && m < k; m++)
			if (rep->threads[m].tid == t->tid)
				why = "a thread listed twice";
	}
	if (!why) {
		atomic_fetch_add(stale ? &dl_rep.partial : &dl_rep.ok, 1);
		return;
	}
	atomic_fetch_add(&dl_rep.bad, 1);
	/* No stdio in a hook: keep the first bad one for the summary. */
	if (atomic_exchange(&dl_rep.have_bad, 1) == 0) {
		dl_rep.bad_event = (int)rep->event;
		dl_rep.bad_error = rep->error;
		dl_rep.bad_nthreads = rep->nthreads;
		dl_rep.bad_why = why;
	}
}

/* One trial (number `trial`, 1-based and increasing); measured into s
 * when measure is set. */
static void cyc_trial(struct cyc *c, struct dl_scen *s, unsigned trial, bool measure)
{
	uint64_t first = UINT64_MAX, first_call = 0, last_call = 0, tb, checks;
	int first_ret = 0;
	bool any = false;
	struct rqspin_lock_stats b, a;

	/* The searches of this trial: the scenario's threads are idle
	 * between trials, the registered ones asleep. */
	if (measure)
		rqspin_lock_stats_get(&b);
	atomic_store_explicit(&c->arrived, 0, memory_order_relaxed);
	atomic_store_explicit(&c->done, 0, memory_order_relaxed);
	atomic_store_explicit(&c->go, trial, memory_order_release);
	DL_WAIT_FOR(atomic_load_explicit(&c->done, memory_order_acquire) == c->n,
		    c->n == 2 ? "abba trial" : "cycle trial");
	if (!measure)
		return;
	rqspin_lock_stats_get(&a);
	checks = a.deadlock_checks - b.deadlock_checks;
	s->checks_sum += checks;
	if (!s->checks_n || checks < s->checks_min)
		s->checks_min = checks;
	if (checks > s->checks_max)
		s->checks_max = checks;
	s->checks_n++;
	tb = atomic_load_explicit(&c->t_barrier, memory_order_relaxed);
	for (unsigned i = 0; i < c->n; i++) {
		int r = c->th[i].own_ret ? c->th[i].own_ret : c->th[i].ret;

		count_ret(s, r);
		if (r && r != -EOWNERDEAD && c->th[i].t_end < first) {
			first = c->th[i].t_end;
			first_call = c->th[i].t_call;
			first_ret = r;
			any = true;
		}
		if (c->th[i].t_call > last_call)
			last_call = c->th[i].t_call;
	}
	if (!any) {
		s->no_failure++;
		return;
	}
	if (first_ret != -EDEADLK)
		s->first_not_deadlk++;
	if (s->v_call && s->v_start) {
		s->v_call[s->done] = first > first_call ? (double)(first - first_call) : 0;
		s->v_start[s->done] = last_call > tb ? (double)(last_call - tb) : 0;
	}
	s->v[s->done++] = first > tb ? (double)(first - tb) : 0;
}

static void run_cycle(struct dl_scen *s, unsigned n)
{
	struct cyc *c = aligned_alloc(DL_CACHELINE, sizeof(*c));
	struct cyc_arg args[3];
	pthread_t th[3];
	unsigned created = 0, trial = 0;
	struct rqspin_lock_stats b, a;

	if (!c) {
		snprintf(s->locks_note, sizeof(s->locks_note), "out of memory");
		return;
	}
	memset(c, 0, sizeof(*c));
	c->n = n;
	for (unsigned i = 0; i < n; i++)
		rqspin_lock_init(&dl_locks[i].l);
	for (; created < n; created++) {
		args[created].c = c;
		args[created].idx = created;
		if (pthread_create(&th[created], NULL, cyc_thread, &args[created]) != 0)
			break;
	}
	if (created < n) {
		snprintf(s->locks_note, sizeof(s->locks_note), "cannot create threads");
		goto out;
	}
	rqspin_lock_stats_get(&b);
	for (unsigned k = 0; k < s->trials; k++)
		cyc_trial(c, s, ++trial, true);
	rqspin_lock_stats_get(&a);
	/* After the trials: the scenario's threads registered in the first. */
	s->reg_slots = a.slots_in_use;
	s->reg_high_water = a.slots_high_water;
	stats_delta(&s->lib, &b, &a);
	stats_check(s, n == 2 ? "abba" : "cycle");

	/* A few more trials with a report hook. */
	memset(&dl_rep, 0, sizeof(dl_rep));
	dl_rep.expect_event = n == 2 ? RQSPIN_EV_ABBA : RQSPIN_EV_CYCLE;
	dl_rep.expect_threads = n;
	for (unsigned i = 0; i < n; i++)
		dl_rep.locks[i] = &dl_locks[i].l;
	rqspin_set_report_hook(dl_report_hook, NULL);
	for (unsigned k = 0; k < DL_REPORT_TRIALS; k++) {
		unsigned before = atomic_load(&dl_rep.n), fails = 0;

		cyc_trial(c, s, ++trial, false);
		for (unsigned i = 0; i < n; i++)
			fails += (c->th[i].own_ret ? c->th[i].own_ret : c->th[i].ret) == -EDEADLK;
		s->rep_trials++;
		/* One report per -EDEADLK. */
		if (atomic_load(&dl_rep.n) - before != fails)
			s->rep_bad++;
	}
	rqspin_set_report_hook(NULL, NULL);
	s->rep_bad += atomic_load(&dl_rep.bad);
	s->rep_ok = atomic_load(&dl_rep.ok);
	s->rep_partial = atomic_load(&dl_rep.partial);
	if (atomic_load(&dl_rep.have_bad))
		snprintf(s->rep_note, sizeof(s->rep_note),
			 "%u reports, %u complete, %u stale; first bad: %s (%s, error %d, "
			 "%u threads)",
			 atomic_load(&dl_rep.n), s->rep_ok, s->rep_partial, dl_rep.bad_why,
			 rqspin_event_name((enum rqspin_event)dl_rep.bad_event), dl_rep.bad_error,
			 dl_rep.bad_nthreads);
	else
		snprintf(s->rep_note, sizeof(s->rep_note),
			 "%u reports, %u complete, %u stale (a member backed out before the report)",
			 atomic_load(&dl_rep.n), s->rep_ok, s->rep_partial);
out:
	atomic_store(&c->quit, true);
	for (unsigned i = 0; i < created; i++)
		pthread_join(th[i], NULL);
	free(c);
	if (created == n)
		locks_check(s, dl_locks, n);
}

/* ------------------------------------------------------------------------ */
/* timeout / head: actors that run one lock call at a time                   */

struct actor {
	pthread_t th;
	alignas(DL_CACHELINE) _Atomic unsigned seq;
	_Atomic unsigned done;
	_Atomic bool quit;
	rqspinlock_t *lock;
	uint64_t timeout_ns;
	int result;
	uint64_t t0, t1;
};

static void *actor_main(void *p)
{
	struct actor *a = p;
	unsigned seen = 0;

	for (;;) {
		unsigned s;
		int r;

		while ((s = atomic_load_explicit(&a->seq, memory_order_acquire)) == seen) {
			if (atomic_load_explicit(&a->quit, memory_order_acquire))
				return NULL;
			dl_sleep_us(20);
		}
		seen = s;
		a->t0 = bench_now_ns();
		r = rqspin_lock_timeout(a->lock, a->timeout_ns);
		a->t1 = bench_now_ns();
		if (r == 0 || r == -EOWNERDEAD)
			rqspin_unlock(a->lock);
		a->result = r;
		atomic_store_explicit(&a->done, s, memory_order_release);
	}
}

static void actor_post(struct actor *a, rqspinlock_t *l, uint64_t timeout_ns)
{
	a->lock = l;
	a->timeout_ns = timeout_ns;
	atomic_fetch_add_explicit(&a->seq, 1, memory_order_release);
}

static bool actor_done(struct actor *a)
{
	return atomic_load_explicit(&a->done, memory_order_acquire) ==
	       atomic_load_explicit(&a->seq, memory_order_relaxed);
}

static bool actor_start(struct actor *a)
{
	memset(a, 0, sizeof(*a));
	return pthread_create(&a->th, NULL, actor_main, a) == 0;
}

static void actor_stop(struct actor *a)
{
	atomic_store(&a->quit, true);
	pthread_join(a->th, NULL);
}

static void run_timeout(struct dl_scen *s)
{
	struct actor *w = aligned_alloc(DL_CACHELINE, sizeof(*w));
	rqspinlock_t *l = &dl_locks[0].l;
	struct rqspin_lock_stats b, a;

	if (!w || !actor_start(w)) {
		snprintf(s->locks_note, sizeof(s->locks_note), "cannot create a thread");
		free(w);
		return;
	}
	rqspin_lock_init(l);
	rqspin_lock_stats_get(&b);
	for (unsigned k = 0; k < s->trials; k++) {
		bool pending = false;
		int r = rqspin_lock(l);

		if (r) {
			s->r_other++;
			continue;
		}
		actor_post(w, l, s->t_ns);
		/* Hold the lock (asleep) until the waiter gives up. */
		DL_WAIT_FOR((pending |= (dl_word(l) & RQSPIN__PENDING_MASK) != 0, actor_done(w)),
			    "timeout trial");
		rqspin_unlock(l);
		count_ret(s, w->result);
		s->position_seen += pending;
		s->v[s->done++] = (double)(w->t1 - w->t0) / (double)s->t_ns;
	}
	rqspin_lock_stats_get(&a);
	actor_stop(w);
	free(w);
	stats_delta(&s->lib, &b, &a);
	stats_check(s, "timeout");
	locks_check(s, dl_locks, 1);
}

static void run_head(struct dl_scen *s)
{
	struct actor *act = aligned_alloc(DL_CACHELINE, 2 * sizeof(*act));
	struct actor *pw = act, *hd = act ? act + 1 : NULL;
	rqspinlock_t *l = &dl_locks[0].l;
	struct rqspin_lock_stats b, a;
	uint64_t timeouts_before_p = 0;

	if (!act || !actor_start(pw)) {
		snprintf(s->locks_note, sizeof(s->locks_note), "cannot create a thread");
		free(act);
		return;
	}
	if (!actor_start(hd)) {
		actor_stop(pw);
		snprintf(s->locks_note, sizeof(s->locks_note), "cannot create a thread");
		free(act);
		return;
	}
	rqspin_lock_init(l);
	rqspin_lock_stats_get(&b);
	for (unsigned k = 0; k < s->trials; k++) {
		bool queued = false;
		int r = rqspin_lock(l);

		if (r) {
			s->r_other++;
			continue;
		}
		/* The pending waiter, with a budget well past the head's 2T. */
		actor_post(pw, l, 10 * s->t_ns);
		DL_WAIT_FOR((dl_word(l) & RQSPIN__PENDING_MASK) || actor_done(pw),
			    "head trial: pending waiter");
		actor_post(hd, l, s->t_ns);
		DL_WAIT_FOR((queued |= (dl_word(l) & RQSPIN__TAIL_MASK) != 0, actor_done(hd)),
			    "head trial: queue head");
		rqspin_unlock(l);
		DL_WAIT_FOR(actor_done(pw), "head trial: pending waiter after the unlock");
		timeouts_before_p += pw->result == -ETIMEDOUT;
		count_ret(s, hd->result);
		s->position_seen += queued;
		s->v[s->done++] = (double)(hd->t1 - hd->t0) / (2.0 * (double)s->t_ns);
	}
	rqspin_lock_stats_get(&a);
	actor_stop(pw);
	actor_stop(hd);
	free(act);
	stats_delta(&s->lib, &b, &a);
	/* The pending waiter's own timeouts (if the machine was very slow)
	 * are counted by the library too. */
	s->lib.timeout -= timeouts_before_p < s->lib.timeout ? timeouts_before_p : s->lib.timeout;
	stats_check(s, "timeout");
	locks_check(s, dl_locks, 1);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static void fmt_val(char *buf, size_t n, const struct dl_scen *s, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (s->ratio)
		snprintf(buf, n, "%.3f", v);
	else
		fmt_ns(buf, n, v);
}

static const char *scen_target(const struct dl_scen *s)
{
	switch (s->kind) {
	case DL_AA:
		return "p50 < 10us";
	case DL_ABBA:
	case DL_CYCLE: {
		double lim = dl_reg_limit_us(s->registered);

		if (s->reg_skipped)
			return "(skipped)";
		return isnan(lim) ? "(info)" : lim == DL_LIMIT_SMALL_US ? "p99 <= 50us" : "p99 <= 1ms";
	}
	case DL_TIMEOUT:
		return "p50 in [1.0,1.1]";
	case DL_HEAD:
		return "(info, 2T)";
	}
	return "";
}

static const char *scen_status(const struct dl_results *r, const struct dl_scen *s)
{
	enum verdict_status vs;

	if (s->verdict < 0)
		return "-";
	vs = r->verdicts.v[s->verdict].status;
	return vs == V_PASS ? "PASS" : vs == V_FAIL ? "FAIL" : "info";
}

/* abba / cycle3 against the number of registered threads, in us. */
static void dl_print_registered(FILE *f, const struct dl_results *r)
{
	bool any = false;

	for (size_t i = 0; i < r->nscen; i++)
		any |= r->scen[i].kind == DL_ABBA || r->scen[i].kind == DL_CYCLE;
	if (!any)
		return;
	fprintf(f,
		"Detection against registered threads, in us (registered: extra live threads with\n"
		"a registry slot, asleep; slots: registry slots in use / high water; p50 p99 max:\n"
		"barrier to the first -EDEADLK; call: that refused rqspin_lock call alone; start:\n"
		"barrier to the last thread's call; checks: the library's deadlock_checks per\n"
		"trial, mean (min..max))\n");
	fprintf(f, "  %-13s %10s %13s %9s %9s %9s %9s %9s %9s  %-16s %-12s %s\n", "scenario",
		"registered", "slots", "p50", "p99", "max", "call p50", "call p99", "start p50",
		"checks/trial", "target", "verdict");
	for (size_t i = 0; i < r->nscen; i++) {
		const struct dl_scen *s = &r->scen[i];
		char slots[24], ck[32];

		if (s->kind != DL_ABBA && s->kind != DL_CYCLE)
			continue;
		if (s->reg_skipped) {
			fprintf(f, "  %-13s %10u  skipped: %s\n", s->name, s->registered, s->reg_note);
			continue;
		}
		snprintf(slots, sizeof(slots), "%llu/%llu", (unsigned long long)s->reg_slots,
			 (unsigned long long)s->reg_high_water);
		if (s->checks_n)
			snprintf(ck, sizeof(ck), "%.2f (%llu..%llu)",
				 (double)s->checks_sum / s->checks_n,
				 (unsigned long long)s->checks_min, (unsigned long long)s->checks_max);
		else
			snprintf(ck, sizeof(ck), "-");
		fprintf(f, "  %-13s %10u %13s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f  %-16s %-12s %s\n",
			s->name, s->registered, slots, s->p50 / 1e3, s->p99 / 1e3, s->max / 1e3,
			s->call_p50 / 1e3, s->call_p99 / 1e3, s->start_p50 / 1e3, ck, scen_target(s),
			scen_status(r, s));
	}
	fputc('\n', f);
}

static void dl_print(FILE *f, const struct dl_results *r)
{
	const struct dl_config *c = r->cfg;

	fprintf(f, "rqspin-bench %s: deadlock detection and timeouts (rqspinlock)\n", c->o->run);
	sysinfo_print(f, &r->sys, "  ");
	fprintf(f, "  run:      %u trials per scenario, %u per timeout%s; %.0f s\n", c->trials,
		c->timeout_trials, c->o->quick ? ", quick" : "", r->wall_s);
	if (r->load.ok)
		fprintf(f,
			"  load:     other processes used %.0f%% of the CPU time during the run, "
			"hypervisor steal %.0f%%\n",
			100 * r->load.other, 100 * r->load.steal);
	fputc('\n', f);
	fprintf(f,
		"Detection latency (aa: the handler's rqspin_lock call; abba/cycle3: barrier to\n"
		"the first -EDEADLK) and timeout accuracy (elapsed / T for the pending waiter,\n"
		"elapsed / 2T for the queue head); returns of every measured call\n");
	fprintf(f, "  %-13s %6s %8s %8s %8s %8s  %5s %5s %5s %5s  %-17s %s\n", "scenario", "trials",
		"p50", "p90", "p99", "max", "ok", "EDEAD", "ETIME", "other", "target", "verdict");
	for (size_t i = 0; i < r->nscen; i++) {
		const struct dl_scen *s = &r->scen[i];
		char a[16], b[16], d[16], e[16];
		const char *st = "-";

		fmt_val(a, sizeof(a), s, s->p50);
		fmt_val(b, sizeof(b), s, s->p90);
		fmt_val(d, sizeof(d), s, s->p99);
		fmt_val(e, sizeof(e), s, s->max);
		if (s->verdict >= 0) {
			enum verdict_status vs = r->verdicts.v[s->verdict].status;

			st = vs == V_PASS ? "PASS" : vs == V_FAIL ? "FAIL" : "info";
		}
		fprintf(f, "  %-13s %6u %8s %8s %8s %8s  %5llu %5llu %5llu %5llu  %-17s %s\n", s->name,
			s->done, a, b, d, e, (unsigned long long)s->r_ok,
			(unsigned long long)s->r_deadlk, (unsigned long long)s->r_timedout,
			(unsigned long long)s->r_other, scen_target(s), st);
	}
	fputc('\n', f);
	dl_print_registered(f, r);
	fprintf(f, "Checks: library counters over the measured trials, reports (hook, %d extra\n"
		   "trials), the waiter's position, the locks afterwards\n",
		DL_REPORT_TRIALS);
	for (size_t i = 0; i < r->nscen; i++) {
		const struct dl_scen *s = &r->scen[i];

		fprintf(f, "  %-13s counters %s: %s\n", s->name, s->stats_ok ? "ok" : "MISMATCH",
			s->stats_note);
		if (s->rep_trials)
			fprintf(f, "  %-13s reports %s: %s\n", "", s->rep_bad ? "BAD" : "ok",
				s->rep_note);
		if (s->kind == DL_TIMEOUT || s->kind == DL_HEAD)
			fprintf(f, "  %-13s position: %s seen in %u of %u trials\n", "",
				s->kind == DL_TIMEOUT ? "pending bit" : "queue tail", s->position_seen,
				s->done);
		if (s->kind == DL_ABBA || s->kind == DL_CYCLE)
			fprintf(f, "  %-13s first failure not -EDEADLK in %u trials, no failure in %u\n",
				"", s->first_not_deadlk, s->no_failure);
		fprintf(f, "  %-13s locks afterwards: %s\n", "", s->locks_note);
	}
	fputc('\n', f);
	vl_print(f, "Verdicts (deadlock; rqspinlock targets):", &r->verdicts, &r->load);
}

/* The per-size summary: for each registered size, abba and cycle3 in us. */
static void dl_json_registered(struct json *j, const struct dl_results *r)
{
	const struct dl_config *c = r->cfg;

	json_begin_array(j, "detection_by_registered");
	for (size_t k = 0; (c->run_abba || c->run_cycle) && k < c->nregistered; k++) {
		json_begin_object(j, NULL);
		json_uint(j, "registered", c->registered[k]);
		for (size_t i = 0; i < r->nscen; i++) {
			const struct dl_scen *s = &r->scen[i];
			const char *st = scen_status(r, s);

			if ((s->kind != DL_ABBA && s->kind != DL_CYCLE) ||
			    s->registered != c->registered[k])
				continue;
			json_begin_object(j, s->kind == DL_ABBA ? "abba" : "cycle3");
			json_bool(j, "skipped", s->reg_skipped);
			json_uint(j, "trials", s->done);
			json_double(j, "p50_us", s->p50 / 1e3);
			json_double(j, "p99_us", s->p99 / 1e3);
			json_double(j, "max_us", s->max / 1e3);
			json_double(j, "call_p50_us", s->call_p50 / 1e3);
			json_double(j, "call_p99_us", s->call_p99 / 1e3);
			json_double(j, "start_p50_us", s->start_p50 / 1e3);
			json_double(j, "start_p99_us", s->start_p99 / 1e3);
			json_double(j, "deadlock_checks_per_trial",
				    s->checks_n ? (double)s->checks_sum / s->checks_n : NAN);
			json_double(j, "target_p99_us", dl_reg_limit_us(s->registered));
			json_string(j, "verdict", strcmp(st, "PASS") == 0   ? "pass"
						  : strcmp(st, "FAIL") == 0 ? "fail"
									    : "info");
			json_end_object(j);
		}
		json_end_object(j);
	}
	json_end_array(j);
}

static int dl_json(const char *path, const struct dl_results *r)
{
	const struct dl_config *c = r->cfg;
	FILE *f = output_open("--json", path);
	struct json j;

	if (!f)
		return -1;
	bench_json_begin(&j, f, "deadlock", c->o, &r->sys, &r->load);
	json_begin_object(&j, "config");
	json_uint(&j, "trials", c->trials);
	json_uint(&j, "timeout_trials", c->timeout_trials);
	json_uint_array(&j, "timeouts_ms", c->timeouts_ms, c->ntimeouts);
	json_uint_array(&j, "registered", c->registered, c->nregistered);
	json_end_object(&j);
	json_double(&j, "wall_seconds", r->wall_s);
	json_begin_array(&j, "scenarios");
	for (size_t i = 0; i < r->nscen; i++) {
		const struct dl_scen *s = &r->scen[i];

		json_begin_object(&j, NULL);
		json_string(&j, "name", s->name);
		json_string(&j, "unit", s->ratio ? (s->kind == DL_HEAD ? "elapsed/2T" : "elapsed/T")
						 : "ns");
		if (s->t_ns)
			json_uint(&j, "timeout_ns", s->t_ns);
		json_uint(&j, "trials", s->done);
		json_double(&j, "p50", s->p50);
		json_double(&j, "p90", s->p90);
		json_double(&j, "p99", s->p99);
		json_double(&j, "max", s->max);
		json_double(&j, "min", s->min);
		json_begin_object(&j, "returns");
		json_uint(&j, "ok", s->r_ok);
		json_uint(&j, "EDEADLK", s->r_deadlk);
		json_uint(&j, "ETIMEDOUT", s->r_timedout);
		json_uint(&j, "other", s->r_other);
		json_end_object(&j);
		if (s->kind == DL_ABBA || s->kind == DL_CYCLE) {
			json_uint(&j, "registered", s->registered);
			json_bool(&j, "registered_skipped", s->reg_skipped);
			if (s->reg_skipped)
				json_string(&j, "skip_reason", s->reg_note);
			json_uint(&j, "registry_slots_in_use", s->reg_slots);
			json_uint(&j, "rqs_registry_high_water", s->reg_high_water);
			json_double(&j, "registered_setup_seconds", s->reg_setup_s);
			json_begin_object(&j, "deadlock_checks_per_trial");
			json_double(&j, "mean", s->checks_n ? (double)s->checks_sum / s->checks_n : NAN);
			json_uint(&j, "min", s->checks_min);
			json_uint(&j, "max", s->checks_max);
			json_end_object(&j);
			json_uint(&j, "first_failure_not_edeadlk", s->first_not_deadlk);
			json_uint(&j, "trials_without_failure", s->no_failure);
			json_uint(&j, "report_trials", s->rep_trials);
			json_uint(&j, "reports_ok", s->rep_ok);
			json_uint(&j, "reports_bad", s->rep_bad);
			json_uint(&j, "reports_stale", s->rep_partial);
		}
		if (s->kind == DL_TIMEOUT || s->kind == DL_HEAD)
			json_uint(&j, "position_seen", s->position_seen);
		output_json_libstats(&j, &s->lib);
		json_bool(&j, "stats_ok", s->stats_ok);
		json_bool(&j, "locks_ok", s->locks_ok);
		json_string(&j, "locks_note", s->locks_note);
		json_begin_array(&j, "samples");
		for (unsigned k = 0; k < s->done; k++)
			json_double(&j, NULL, s->v[k]);
		json_end_array(&j);
		json_end_object(&j);
	}
	json_end_array(&j);
	dl_json_registered(&j, r);
	bench_json_end(&j, &r->verdicts, !r->broken);
	return output_close(f, "--json", path);
}

static int dl_csv(const char *path, const struct dl_results *r)
{
	FILE *f = output_open("--csv", path);

	if (!f)
		return -1;
	fprintf(f, "scenario,unit,timeout_ns,trials,p50,p90,p99,max,min,ret_ok,ret_edeadlk,"
		   "ret_etimedout,ret_other,stats_ok,locks_ok,verdict,registered,checks_per_trial\n");
	for (size_t i = 0; i < r->nscen; i++) {
		const struct dl_scen *s = &r->scen[i];
		const char *st = "";
		char reg[16] = "", ck[32] = "";

		if (s->verdict >= 0) {
			enum verdict_status vs = r->verdicts.v[s->verdict].status;

			st = vs == V_PASS ? "pass" : vs == V_FAIL ? "fail" : "info";
		}
		if (s->kind == DL_ABBA || s->kind == DL_CYCLE) {
			snprintf(reg, sizeof(reg), "%u", s->registered);
			if (s->checks_n)
				snprintf(ck, sizeof(ck), "%.6g", (double)s->checks_sum / s->checks_n);
		}
		fprintf(f, "%s,%s,%llu,%u,%.6g,%.6g,%.6g,%.6g,%.6g,%llu,%llu,%llu,%llu,%d,%d,%s,%s,%s\n",
			s->name, s->ratio ? (s->kind == DL_HEAD ? "elapsed/2T" : "elapsed/T") : "ns",
			(unsigned long long)s->t_ns, s->done, s->p50, s->p90, s->p99, s->max, s->min,
			(unsigned long long)s->r_ok, (unsigned long long)s->r_deadlk,
			(unsigned long long)s->r_timedout, (unsigned long long)s->r_other, s->stats_ok,
			s->locks_ok, st, reg, ck);
	}
	return output_close(f, "--csv", path);
}

/* ------------------------------------------------------------------------ */
/* Schedule                                                                  */

static struct dl_scen *scen_add(struct dl_results *r, enum dl_kind kind, const char *name,
				unsigned trials, uint64_t t_ns)
{
	struct dl_scen *s;

	if (r->nscen >= DL_MAX_SCEN)
		return NULL;
	s = &r->scen[r->nscen];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->trials = trials;
	s->t_ns = t_ns;
	s->ratio = kind == DL_TIMEOUT || kind == DL_HEAD;
	s->verdict = -1;
	s->v = calloc(trials ? trials : 1, sizeof(double));
	if (!s->v)
		return NULL;
	if (kind == DL_ABBA || kind == DL_CYCLE) {
		s->v_call = calloc(trials ? trials : 1, sizeof(double));
		s->v_start = calloc(trials ? trials : 1, sizeof(double));
		if (!s->v_call || !s->v_start) {
			free(s->v);
			free(s->v_call);
			free(s->v_start);
			return NULL;
		}
	}
	r->nscen++;
	return s;
}

/*
 * The model of the run time (progress.h), measured with --quick on an
 * idle 2-core reference machine: an aa trial ~20 us; an abba or cycle3
 * trial ~0.3 ms (threads, barrier, sleeps); starting the registered
 * threads ~25 us each, joining them as much again (0.81 s for the 17 097
 * of --quick); a timeout trial T plus ~1 ms (the queue head's: 2T). All
 * but the timeouts' T is CPU work that stretches on a busy machine
 * (bench_load_factor).
 */
static double aa_cost_s(const struct dl_config *c)
{
	return c->trials * 20e-6 * bench_load_factor(c->o);
}

static double cycle_cost_s(const struct dl_config *c)
{
	return (c->trials + DL_REPORT_TRIALS) * 0.3e-3 * bench_load_factor(c->o);
}

static double pool_cost_s(const struct dl_config *c, unsigned reg)
{
	return reg * 25e-6 * bench_load_factor(c->o);
}

static double timeout_cost_s(const struct dl_config *c, unsigned ms)
{
	return c->timeout_trials * (ms + 1) / 1000.0;
}

/* abba and cycle3 with `reg` registered threads asleep. A size the
 * machine refuses is reported as skipped (scenarios without trials). */
static void run_registered(struct dl_results *r, const struct dl_config *c, unsigned reg)
{
	struct reg_pool pool;
	bool ok;
	struct dl_scen *s;
	char name[32];

	cli_progress(c->o->quiet, "[deadlock] %u registered threads: starting...", reg);
	ok = reg_pool_start(&pool, reg);
	if (ok)
		cli_progress(c->o->quiet, " %.2f s", pool.setup_s);
	else
		cli_progress(c->o->quiet, " skipped: %s", pool.note);
	progress_step(c->o->quiet, pool_cost_s(c, reg));
	for (unsigned n = 2; n <= 3; n++) {
		if (!(n == 2 ? c->run_abba : c->run_cycle))
			continue;
		snprintf(name, sizeof(name), "%s-r%u", n == 2 ? "abba" : "cycle3", reg);
		s = scen_add(r, n == 2 ? DL_ABBA : DL_CYCLE, name, c->trials, 0);
		if (!s)
			break;
		s->registered = reg;
		if (!ok) {
			s->reg_skipped = true;
			snprintf(s->reg_note, sizeof(s->reg_note), "%s", pool.note);
			s->stats_ok = s->locks_ok = true;
			snprintf(s->stats_note, sizeof(s->stats_note), "not run");
			snprintf(s->locks_note, sizeof(s->locks_note), "not run");
			continue;
		}
		s->reg_setup_s = pool.setup_s;
		cli_progress(c->o->quiet, "[deadlock] %s, %u threads, %u registered...",
			     n == 2 ? "abba" : "A->B->C->A", n, reg);
		run_cycle(s, n);
		progress_step(c->o->quiet, cycle_cost_s(c));
	}
	if (ok) {
		uint64_t t0 = bench_now_ns();

		reg_pool_stop(&pool);
		cli_progress(c->o->quiet, "[deadlock] %u registered threads: joined in %.2f s", reg,
			     (double)(bench_now_ns() - t0) / 1e9);
		progress_step(c->o->quiet, pool_cost_s(c, reg));
	} else {
		progress_add(pool_cost_s(c, reg) + (c->run_abba + c->run_cycle) * cycle_cost_s(c));
	}
}

static int dl_execute(const struct dl_config *c, struct verdict_list *v)
{
	struct dl_results *r = calloc(1, sizeof(*r));
	struct load_snap l0, l1;
	uint64_t start;
	int rc = CLI_EXIT_OK;
	struct dl_scen *s;
	char name[32];

	if (!r) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	r->cfg = c;
	sysinfo_collect(&r->sys);
	cli_progress(c->o->quiet, "%s deadlock: %u trials per scenario, %u per timeout\n", cli_prog, c->trials,
		 c->timeout_trials);
	start = bench_now_ns();
	load_snapshot(&l0);
	if (c->run_aa && (s = scen_add(r, DL_AA, "aa-handler", c->trials, 0))) {
		cli_progress(c->o->quiet, "[deadlock] aa in a signal handler...");
		run_aa(s);
		progress_step(c->o->quiet, aa_cost_s(c));
	}
	/* Ascending sizes: the registry's high water only grows, so each size
	 * is measured with a registry about as large as itself. */
	for (size_t i = 0; (c->run_abba || c->run_cycle) && i < c->nregistered; i++)
		run_registered(r, c, c->registered[i]);
	for (size_t i = 0; c->run_timeout && i < c->ntimeouts; i++) {
		snprintf(name, sizeof(name), "timeout-%ums", c->timeouts_ms[i]);
		if (!(s = scen_add(r, DL_TIMEOUT, name, c->timeout_trials,
				   (uint64_t)c->timeouts_ms[i] * 1000000u)))
			break;
		cli_progress(c->o->quiet, "[deadlock] timeout %u ms (pending waiter), %u trials...",
			 c->timeouts_ms[i], c->timeout_trials);
		run_timeout(s);
		progress_step(c->o->quiet, timeout_cost_s(c, c->timeouts_ms[i]));
	}
	if (c->run_head) {
		unsigned ms = DEF_HEAD_MS;

		snprintf(name, sizeof(name), "head-%ums", ms);
		if ((s = scen_add(r, DL_HEAD, name, c->timeout_trials, (uint64_t)ms * 1000000u))) {
			cli_progress(c->o->quiet, "[deadlock] timeout %u ms (queue head), %u trials...", ms,
				 c->timeout_trials);
			run_head(s);
			progress_step(c->o->quiet, timeout_cost_s(c, 2 * ms));
		}
	}
	r->wall_s = (double)(bench_now_ns() - start) / 1e9;
	load_snapshot(&l1);
	r->load = load_between(&l0, &l1);
	for (size_t i = 0; i < r->nscen; i++) {
		scen_finish(&r->scen[i]);
		r->broken |= !r->scen[i].locks_ok;
	}
	deadlock_verdicts(r);
	dl_print(stdout, r);
	fflush(stdout);
	*v = r->verdicts;
	if (c->o->json_path) {
		if (dl_json(c->o->json_path, r) == 0)
			printf("JSON written to %s\n", c->o->json_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (c->o->csv_path) {
		if (dl_csv(c->o->csv_path, r) == 0)
			printf("CSV written to %s\n", c->o->csv_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (r->broken) {
		cli_error("FAILED: deadlock: a lock was not usable after the trials (see above)");
		rc = CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < r->nscen; i++) {
		free(r->scen[i].v);
		free(r->scen[i].v_call);
		free(r->scen[i].v_start);
	}
	free(r);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

static void help(FILE *f)
{
	fprintf(f,
		"rqspinlock deadlock detection latency and timeout accuracy, over many trials:\n"
		"  aa       a signal handler re-takes the lock its thread holds: time of the\n"
		"           handler's rqspin_lock call (-EDEADLK)          target: p50 < 10 us\n"
		"  abba     2 threads hold A and B, barrier, each locks the other: barrier to\n"
		"           the first -EDEADLK\n"
		"  cycle    3 threads, A->B->C->A, the same\n"
		"           abba and cycle run once per --registered size: that many extra\n"
		"           threads took a lock of their own (a registry slot each) and sleep;\n"
		"           target: p99 <= 50 us up to 64 registered, <= 1 ms up to 16000\n"
		"  timeout  the only waiter (pending bit) of a held lock, rqspin_lock_timeout\n"
		"           with T in --timeouts-ms: elapsed / T       target: p50 in [1.0, 1.1]\n"
		"  head     (info) the queue head behind a pending waiter, T = %d ms: elapsed/2T\n"
		"Each scenario checks rqspin_lock_stats_get's event counts against the returns;\n"
		"abba and cycle check the reports of %d extra trials with a report hook; every\n"
		"lock must be free and work afterwards.\n\n"
		"Options:\n"
		"  --trials N            trials of aa, abba and cycle (default %d)\n"
		"  --timeout-trials N    trials per timeout and of head (default: --trials)\n"
		"  --timeouts-ms LIST    the T values of the timeout scenario (default " DEF_TIMEOUTS
		")\n"
		"  --scenarios LIST      any of aa,abba,cycle,timeout,head (default: all)\n"
		"  --registered LIST     registered-thread counts for abba and cycle, 0..%u,\n"
		"                        at most %d (default " DEF_REGISTERED ")\n"
		"  --quick               smoke-test size: %d trials, %d per timeout (every\n"
		"                        --registered size still runs)\n"
		"  --json FILE           write the results (and every sample) as JSON\n"
		"  --csv FILE            one CSV row per scenario\n\n"
		"Exit status 1 also when a lock did not work after the trials or a trial hung.\n",
		DEF_HEAD_MS, DL_REPORT_TRIALS, DEF_TRIALS, MAX_REGISTERED,
		DL_MAX_REGISTERED, QUICK_TRIALS, QUICK_TIMEOUT_TRIALS);
}

static bool parse_scenarios(const char *s, void *dest)
{
	struct dl_config *c = dest;
	char **names;
	size_t n;

	if (!cli_split("--scenarios", s, &names, &n))
		return false;
	c->run_aa = c->run_abba = c->run_cycle = c->run_timeout = c->run_head = false;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(names[i], "aa") == 0)
			c->run_aa = true;
		else if (strcmp(names[i], "abba") == 0)
			c->run_abba = true;
		else if (strcmp(names[i], "cycle") == 0 || strcmp(names[i], "cycle3") == 0)
			c->run_cycle = true;
		else if (strcmp(names[i], "timeout") == 0)
			c->run_timeout = true;
		else if (strcmp(names[i], "head") == 0)
			c->run_head = true;
		else if (strcmp(names[i], "all") == 0)
			c->run_aa = c->run_abba = c->run_cycle = c->run_timeout = c->run_head = true;
		else {
			cli_error("--scenarios: unknown scenario '%s' (aa, abba, cycle, timeout, head)",
				  names[i]);
			free(names);
			return false;
		}
	}
	free(names);
	return true;
}

static bool parse_timeouts(const char *s, void *dest)
{
	struct dl_config *c = dest;
	unsigned *v;
	size_t n;

	if (!cli_parse_uint_list("--timeouts-ms", s, 1, 10000, &v, &n))
		return false;
	if (n > DL_MAX_TIMEOUTS) {
		cli_error("--timeouts-ms: at most %d values", DL_MAX_TIMEOUTS);
		free(v);
		return false;
	}
	memcpy(c->timeouts_ms, v, n * sizeof(*v));
	c->ntimeouts = n;
	free(v);
	return true;
}

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* Sorted ascending (run_registered's order), duplicates dropped. */
static bool parse_registered(const char *s, void *dest)
{
	struct dl_config *c = dest;
	unsigned *v;
	size_t n, k = 0;

	if (!cli_parse_uint_list("--registered", s, 0, MAX_REGISTERED, &v, &n))
		return false;
	qsort(v, n, sizeof(*v), cmp_unsigned);
	for (size_t i = 0; i < n; i++)
		if (!k || v[i] != v[k - 1])
			v[k++] = v[i];
	if (k > DL_MAX_REGISTERED) {
		cli_error("--registered: at most %d distinct values", DL_MAX_REGISTERED);
		free(v);
		return false;
	}
	memcpy(c->registered, v, k * sizeof(*v));
	c->nregistered = k;
	free(v);
	return true;
}

/* The suite's configuration: the options point into it. */
static struct dl_config cfg;
static bool set_trials, set_tt;

static size_t options(struct cli_opt *opts, size_t max)
{
	const struct cli_opt o[] = {
		{ "trials", CLI_UINT, &cfg.trials, 1, 1000000, NULL, NULL, &set_trials },
		{ "timeout-trials", CLI_UINT, &cfg.timeout_trials, 1, 1000000, NULL, NULL, &set_tt },
		{ "timeouts-ms", CLI_CUSTOM, &cfg, 0, 0, NULL, parse_timeouts, NULL },
		{ "scenarios", CLI_CUSTOM, &cfg, 0, 0, NULL, parse_scenarios, NULL },
		{ "registered", CLI_CUSTOM, &cfg, 0, 0, NULL, parse_registered, NULL },
	};
	size_t n = sizeof(o) / sizeof(o[0]);

	memset(&cfg, 0, sizeof(cfg));
	cfg.trials = DEF_TRIALS;
	cfg.run_aa = cfg.run_abba = cfg.run_cycle = cfg.run_timeout = cfg.run_head = true;
	parse_timeouts(DEF_TIMEOUTS, &cfg);
	parse_registered(DEF_REGISTERED, &cfg);
	set_trials = set_tt = false;
	return cli_opts_copy(opts, max, o, n);
}

static bool prepare(const struct bench_opts *bo)
{
	cfg.o = bo;
	if (bo->quick && !set_trials)
		cfg.trials = QUICK_TRIALS;
	if (!set_tt)
		cfg.timeout_trials = bo->quick && !set_trials ? QUICK_TIMEOUT_TRIALS : cfg.trials;
	return true;
}

static double estimate_s(const struct bench_opts *bo)
{
	const struct dl_config *c = &cfg;
	double s = 0;

	(void)bo;
	if (c->run_aa)
		s += aa_cost_s(c);
	for (size_t i = 0; (c->run_abba || c->run_cycle) && i < c->nregistered; i++)
		s += 2 * pool_cost_s(c, c->registered[i]) +
		     (c->run_abba + c->run_cycle) * cycle_cost_s(c);
	for (size_t i = 0; c->run_timeout && i < c->ntimeouts; i++)
		s += timeout_cost_s(c, c->timeouts_ms[i]);
	if (c->run_head)
		s += timeout_cost_s(c, 2 * DEF_HEAD_MS);
	return s;
}

static int run(const struct bench_opts *bo, struct verdict_list *v)
{
	(void)bo;
	return dl_execute(&cfg, v);
}

const struct bench_suite bench_suite_deadlock = {
	.name = "deadlock",
	.summary = "rqspinlock AA/ABBA/cycle detection latency and timeout accuracy",
	.help = help,
	.options = options,
	.prepare = prepare,
	.estimate_s = estimate_s,
	.run = run,
	.all_runs = {
		{ .tag = "deadlock",
		  .args = { "--trials", "200", "--timeout-trials", "20", NULL },
		  .quick_args = { "--trials", "20", "--timeout-trials", "5", NULL } },
	},
};
