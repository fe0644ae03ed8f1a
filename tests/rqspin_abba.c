/* SPDX-License-Identifier: MIT */
/*
 * ABBA deadlocks (kernel: the multi-threaded ABBA case of
 * prog_tests/res_spin_lock.c).
 *
 *  1. 16 threads loop "lock A, lock B" against the main thread looping
 *     "lock B, lock A", with the default 250 ms timeout, until an
 *     acquisition fails. Every failure must be -EDEADLK (detected by the
 *     ABBA check, which runs about once per millisecond of waiting), never
 *     -ETIMEDOUT; each failure is reported (hook) as ABBA and counted in
 *     the abba statistic; the data under A and B is consistent (non-atomic
 *     counters equal the successful acquisitions).
 *  2. Deterministic two-thread ABBA with a barrier: T1 holds A, T2 holds B,
 *     both then lock the other. At least one gets -EDEADLK, none times out
 *     or hangs, a thread that gets the lock gets it only after the other
 *     backed off. The report of a sole failer names both threads, both
 *     locks and both held tables.
 */
#include "rqspin_util.h"

#define NTHREADS 16

static rqspinlock_t A = RQSPINLOCK_INIT, B = RQSPINLOCK_INIT;
static uint64_t under_a, under_b; /* protected by A and B */
static _Atomic bool stop;
static _Atomic uint64_t ok_a, ok_b;
static _Atomic unsigned n_deadlk, n_timeout, n_other, n_bad_report;

static void record_failure(int r)
{
	if (r == -EDEADLK) {
		atomic_fetch_add(&n_deadlk, 1);
		/* The hook ran on this thread before rqspin_lock returned. */
		if (ru_last_report.event != RQSPIN_EV_ABBA || ru_last_report.error != -EDEADLK)
			atomic_fetch_add(&n_bad_report, 1);
	} else if (r == -ETIMEDOUT) {
		atomic_fetch_add(&n_timeout, 1);
	} else {
		atomic_fetch_add(&n_other, 1);
	}
	atomic_store(&stop, true);
}

/* first, then second; returns true when both were taken and released. */
static bool lock_pair(rqspinlock_t *first, rqspinlock_t *second, uint64_t hold_ns)
{
	int r = rqspin_lock(first);

	if (r) {
		record_failure(r);
		return false;
	}
	if (first == &A)
		under_a++;
	else
		under_b++;
	atomic_fetch_add(first == &A ? &ok_a : &ok_b, 1);
	if (hold_ns)
		ru_busy_ns(hold_ns);
	r = rqspin_lock(second);
	if (r) {
		record_failure(r);
		rqspin_unlock(first);
		return false;
	}
	if (second == &A)
		under_a++;
	else
		under_b++;
	atomic_fetch_add(second == &A ? &ok_a : &ok_b, 1);
	rqspin_unlock(second);
	rqspin_unlock(first);
	return true;
}

static tu_barrier started;

static void *ab_worker(void *arg)
{
	unsigned max = TU_ITERS(200000u);
	unsigned i;

	(void)arg;
	tu_barrier_wait(&started);
	for (i = 0; i < max && !atomic_load_explicit(&stop, memory_order_relaxed); i++)
		(void)lock_pair(&A, &B, 0);
	return NULL;
}

static void episode(unsigned ep, uint64_t hold_ns)
{
	pthread_t t[NTHREADS];
	unsigned max = TU_ITERS(200000u), i;
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	uint64_t t0 = tu_now_ns();
	unsigned d0 = atomic_load(&n_deadlk);

	atomic_store(&stop, false);
	tu_barrier_init(&started, NTHREADS + 1);
	for (int k = 0; k < NTHREADS; k++)
		t[k] = tu_thread_start(ab_worker, NULL);
	tu_barrier_wait(&started);
	for (i = 0; i < max && !atomic_load(&stop); i++)
		(void)lock_pair(&B, &A, hold_ns);
	atomic_store(&stop, true);
	for (int k = 0; k < NTHREADS; k++)
		tu_thread_join(t[k]);
	s1 = ru_stats();
	printf("many, episode %u (B held %llu us before A): main ran %u B->A iterations; "
	       "%u -EDEADLK, %u -ETIMEDOUT, %u other in %llu ms; abba stat +%llu\n",
	       ep, (unsigned long long)(hold_ns / 1000), i, atomic_load(&n_deadlk) - d0,
	       atomic_load(&n_timeout), atomic_load(&n_other),
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)(s1.abba - s0.abba));
	CHECK_EQ_U64(atomic_load(&n_timeout), 0);
	CHECK_EQ_U64(atomic_load(&n_other), 0);
	CHECK_GE_U64(atomic_load(&n_deadlk) - d0, 1);
	CHECK_EQ_U64(atomic_load(&n_bad_report), 0);
	CHECK_EQ_U64(s1.abba - s0.abba, atomic_load(&n_deadlk) - d0);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	CHECK_EQ_U64(under_a, atomic_load(&ok_a));
	CHECK_EQ_U64(under_b, atomic_load(&ok_b));
	CHECK_EQ_U64(ru_word(&A), 0);
	CHECK_EQ_U64(ru_word(&B), 0);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 0);
}

static void test_many(void)
{
	/* How long main holds B before asking for A: at least a little, so
	 * that on two cores the window overlaps the workers' A->B for sure. */
	static const uint64_t holds[] = { 1000, 20000, 1000, 5000, 200000, 2000 };
	unsigned n = TU_SLOWDOWN > 1 ? 3 : 6;

	for (unsigned ep = 0; ep < n; ep++)
		episode(ep, holds[ep]);
}

/* ---- deterministic pair ----------------------------------------------- */

struct pair_arg {
	rqspinlock_t *mine, *theirs;
	tu_barrier *bar;
	_Atomic pid_t *tids; /* [2] */
	int idx;
	int result;
	bool report_ok;      /* report complete and consistent */
	bool report_self_ok; /* the reporter's own entry is right */
	pid_t report_other_tid;
	uint32_t report_nthreads;
	int report_event;
};

/* The reporter's own part of a report (its table cannot change under it). */
static bool report_self_ok(const struct rqspin_report *r, const struct pair_arg *p)
{
	const struct rqspin_report_thread *me = &r->threads[0];

	return r->event == RQSPIN_EV_ABBA && r->error == -EDEADLK && r->lock == p->theirs &&
	       r->nthreads >= 1 && me->tid == atomic_load(&p->tids[p->idx]) &&
	       me->waits_for == p->theirs && me->nheld == 1 && me->held[0] == p->mine &&
	       me->held[1] == NULL;
}

/* The whole cycle: the other thread holds theirs and waits for mine. The
 * reporter's table no longer has its failed attempt (it is dropped before
 * the report); the other's still has its attempt, unless it failed too
 * and withdrew it in the meantime. */
static bool report_matches(const struct rqspin_report *r, const struct pair_arg *p)
{
	const struct rqspin_report_thread *other = &r->threads[1];
	bool waiting = other->nheld == 2 && other->held[1] == p->mine;
	bool withdrawn = other->nheld == 1;

	return report_self_ok(r, p) && r->nthreads == 2 &&
	       other->tid == atomic_load(&p->tids[1 - p->idx]) && other->waits_for == p->mine &&
	       (waiting || withdrawn) && other->held[0] == p->theirs;
}

static void *pair_thread(void *arg)
{
	struct pair_arg *p = arg;
	int r;

	atomic_store(&p->tids[p->idx], ru_gettid());
	ru_nreports = 0;
	RU_CHECK_RET(rqspin_lock(p->mine), 0);
	tu_barrier_wait(p->bar);
	r = rqspin_lock(p->theirs);
	p->result = r;
	if (r == 0) {
		/* We got theirs: the other backed off (checked by the caller). */
		rqspin_unlock(p->theirs);
	} else if (r == -EDEADLK) {
		CHECK_EQ_U64(ru_nreports, 1);
		p->report_nthreads = ru_last_report.nthreads;
		p->report_event = ru_last_report.event;
		p->report_ok = report_matches(&ru_last_report, p);
		p->report_self_ok = report_self_ok(&ru_last_report, p);
		p->report_other_tid = ru_last_report.threads[1].tid;
	}
	rqspin_unlock(p->mine);
	return NULL;
}

static void test_pair(void)
{
	unsigned rounds = TU_ITERS(100u) < 10 ? 10 : TU_ITERS(100u);
	unsigned both = 0, one = 0;
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	unsigned failures = 0;

	for (unsigned round = 0; round < rounds; round++) {
		rqspinlock_t a = RQSPINLOCK_INIT, b = RQSPINLOCK_INIT;
		tu_barrier bar;
		_Atomic pid_t tids[2] = { 0, 0 };
		struct pair_arg p[2] = {
			{ .mine = &a, .theirs = &b, .bar = &bar, .tids = tids, .idx = 0 },
			{ .mine = &b, .theirs = &a, .bar = &bar, .tids = tids, .idx = 1 },
		};
		pthread_t t[2];
		int nfail = 0;

		tu_barrier_init(&bar, 2);
		t[0] = tu_thread_start(pair_thread, &p[0]);
		t[1] = tu_thread_start(pair_thread, &p[1]);
		tu_thread_join(t[0]);
		tu_thread_join(t[1]);
		for (int k = 0; k < 2; k++) {
			if (p[k].result != 0)
				RU_CHECK_RET(p[k].result, -EDEADLK);
			if (p[k].result == -EDEADLK) {
				nfail++;
				CHECK_EQ_U64(p[k].report_event, RQSPIN_EV_ABBA);
			}
		}
		CHECK(nfail >= 1);
		failures += (unsigned)nfail;
		if (nfail == 1) {
			/* The sole failer built its report while the other still
			 * waited: the report must show the whole cycle. */
			int k = p[0].result ? 0 : 1;

			if (!p[k].report_ok)
				fprintf(stderr, "round %u: bad report (nthreads %u)\n", round,
					p[k].report_nthreads);
			CHECK(p[k].report_ok);
			one++;
		} else {
			/* Both backed off at once: each report was built while the
			 * other thread was leaving (possibly already gone: its
			 * record then reads tid 0), so only the reporter's own
			 * entry is stable. */
			for (int k = 0; k < 2; k++) {
				CHECK(p[k].report_self_ok);
				if (p[k].report_nthreads == 2)
					CHECK(p[k].report_other_tid == atomic_load(&tids[1 - k]) ||
					      p[k].report_other_tid == 0);
			}
			both++;
		}
		CHECK_EQ_U64(ru_word(&a), 0);
		CHECK_EQ_U64(ru_word(&b), 0);
		/* Both locks still work. */
		RU_CHECK_RET(rqspin_lock(&a), 0);
		RU_CHECK_RET(rqspin_lock(&b), 0);
		rqspin_unlock(&b);
		rqspin_unlock(&a);
	}
	s1 = ru_stats();
	printf("pair: %u rounds, one failed in %u, both in %u; abba stat +%llu\n", rounds, one,
	       both, (unsigned long long)(s1.abba - s0.abba));
	CHECK_EQ_U64(s1.abba - s0.abba, failures);
	CHECK(s1.abba > 0);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	/* The point is detection, not the timeout: keep the kernel's 250 ms
	 * (stretched under TSan). */
	RU_CHECK_RET(rqspin_set_default_timeout(RU_KERNEL_TIMEOUT_NS), 0);
	rqspin_set_report_hook(ru_capture_hook, NULL);
	test_many();
	test_pair();
	rqspin_set_report_hook(NULL, NULL);
	printf("rqspin_abba: PASS\n");
	return 0;
}
