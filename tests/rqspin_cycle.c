/* SPDX-License-Identifier: MIT */
/*
 * Deadlock cycles of three or more threads (beyond the kernel, whose
 * ABBCCA stress mode ends in timeouts).
 *
 * N threads, N locks: thread i holds L[i] and then (after a barrier, so all
 * hold their first lock) locks L[(i+1) % N]. At least one thread must get
 * -EDEADLK (reported as a cycle, counted in the `cycle` statistic, never
 * -ETIMEDOUT); each thread that backs off releases its first lock, so the
 * others complete with 0. With the report hook installed the report of a
 * sole failer has event RQSPIN_EV_CYCLE, nthreads == N, the reporter first,
 * and the locks line up: thread k waits for a lock that thread k+1 holds,
 * around the cycle back to the reporter.
 *
 * N = 3 and 4 (many rounds), 8 (RQSPIN_REPORT_MAX_CYCLE, the longest the
 * report can hold). A 9-cycle is past what the detector follows: it must
 * still resolve (errors allowed, no hang).
 */
#include "rqspin_util.h"

#define MAXN 9

struct cyc {
	int n;
	rqspinlock_t locks[MAXN];
	tu_barrier bar;
	_Atomic pid_t tids[MAXN];
};

struct targ {
	struct cyc *c;
	int i;
	int result;
	uint32_t rep_nthreads;
	int rep_event;
	bool rep_self_ok; /* the reporter's own entry */
	bool rep_full_ok; /* the whole cycle lines up */
};

static bool check_report(const struct rqspin_report *r, const struct targ *a, bool full)
{
	struct cyc *c = a->c;
	int n = c->n, i = a->i;

	if (r->error != -EDEADLK || r->lock != &c->locks[(i + 1) % n])
		return false;
	/* The reporter's failed attempt is out of its table already. */
	if (r->threads[0].tid != atomic_load(&c->tids[i]) ||
	    r->threads[0].waits_for != &c->locks[(i + 1) % n] || r->threads[0].nheld != 1 ||
	    r->threads[0].held[0] != &c->locks[i])
		return false;
	if (!full)
		return true;
	if (r->event != RQSPIN_EV_CYCLE || (int)r->nthreads != n)
		return false;
	for (int k = 0; k < n; k++) {
		const struct rqspin_report_thread *t = &r->threads[k];
		const struct rqspin_report_thread *nx = &r->threads[(k + 1) % n];
		int j = (i + k) % n; /* the k-th thread along the chain */
		bool found = false;

		if (t->tid != atomic_load(&c->tids[j]) || t->waits_for != &c->locks[(j + 1) % n] ||
		    t->held[0] != &c->locks[j])
			return false;
		/* Others still show their attempt, unless they withdrew it. */
		if (k > 0 && !(t->nheld == 1 || (t->nheld == 2 && t->held[1] == t->waits_for)))
			return false;
		/* The lock k waits for is held (not merely wanted) by k+1. */
		found = nx->held[0] == t->waits_for;
		if (!found)
			return false;
	}
	return true;
}

static void *cyc_thread(void *arg)
{
	struct targ *a = arg;
	struct cyc *c = a->c;
	rqspinlock_t *mine = &c->locks[a->i], *next = &c->locks[(a->i + 1) % c->n];

	atomic_store(&c->tids[a->i], ru_gettid());
	ru_nreports = 0;
	RU_CHECK_RET(rqspin_lock(mine), 0);
	tu_barrier_wait(&c->bar);
	a->result = rqspin_lock(next);
	if (a->result == 0) {
		rqspin_unlock(next);
	} else if (a->result == -EDEADLK) {
		CHECK_EQ_U64(ru_nreports, 1);
		a->rep_nthreads = ru_last_report.nthreads;
		a->rep_event = ru_last_report.event;
		a->rep_self_ok = check_report(&ru_last_report, a, false);
		a->rep_full_ok = check_report(&ru_last_report, a, true);
	}
	rqspin_unlock(mine);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 0);
	return NULL;
}

/* One round; returns the number of -EDEADLK results. */
static int round_once(int n, bool expect_detect, unsigned *sole)
{
	struct cyc c;
	struct targ a[MAXN];
	pthread_t t[MAXN];
	int nfail = 0, ntimeout = 0;

	memset(&c, 0, sizeof(c));
	c.n = n;
	for (int i = 0; i < n; i++)
		rqspin_lock_init(&c.locks[i]);
	tu_barrier_init(&c.bar, (unsigned)n);
	for (int i = 0; i < n; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].c = &c;
		a[i].i = i;
		t[i] = tu_thread_start(cyc_thread, &a[i]);
	}
	for (int i = 0; i < n; i++)
		tu_thread_join(t[i]);
	for (int i = 0; i < n; i++) {
		if (a[i].result == -EDEADLK) {
			nfail++;
			if (expect_detect) {
				CHECK_EQ_U64(a[i].rep_event, RQSPIN_EV_CYCLE);
				CHECK(a[i].rep_self_ok);
			}
		} else if (a[i].result == -ETIMEDOUT) {
			ntimeout++;
		} else {
			RU_CHECK_RET(a[i].result, 0);
		}
	}
	if (expect_detect) {
		if (ntimeout)
			fprintf(stderr, "%d-cycle: %d thread(s) timed out\n", n, ntimeout);
		CHECK_EQ_U64(ntimeout, 0);
		CHECK(nfail >= 1);
		if (nfail == 1) {
			/* The others waited, tables intact, while it reported. */
			for (int i = 0; i < n; i++) {
				if (a[i].result != -EDEADLK)
					continue;
				if (!a[i].rep_full_ok)
					fprintf(stderr, "%d-cycle: bad report (nthreads %u)\n", n,
						a[i].rep_nthreads);
				CHECK(a[i].rep_full_ok);
			}
			(*sole)++;
		}
	} else {
		CHECK(nfail + ntimeout >= 1);
		printf("  %d-cycle round: %d -EDEADLK, %d -ETIMEDOUT\n", n, nfail, ntimeout);
	}
	for (int i = 0; i < n; i++) {
		CHECK_EQ_U64(ru_word(&c.locks[i]), 0);
		RU_CHECK_RET(rqspin_lock(&c.locks[i]), 0);
	}
	for (int i = n - 1; i >= 0; i--)
		rqspin_unlock(&c.locks[i]);
	return nfail;
}

static void run(int n, unsigned rounds)
{
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	unsigned sole = 0, fails = 0;
	uint64_t t0 = tu_now_ns();

	for (unsigned r = 0; r < rounds; r++)
		fails += (unsigned)round_once(n, true, &sole);
	s1 = ru_stats();
	printf("%d-cycle: %u rounds, %u -EDEADLK (%u rounds with a sole failer), cycle stat +%llu, "
	       "%llu ms\n",
	       n, rounds, fails, sole, (unsigned long long)(s1.cycle - s0.cycle),
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS));
	CHECK_EQ_U64(s1.cycle - s0.cycle, fails);
	CHECK_EQ_U64(s1.abba, s0.abba);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	CHECK(s1.cycle > 0);
}

int main(void)
{
	uint64_t def = rqspin_get_default_timeout();

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	CHECK(RQSPIN_REPORT_MAX_CYCLE <= MAXN - 1);
	/* The kernel's 250 ms (stretched under TSan): detection must beat it
	 * by far. */
	RU_CHECK_RET(rqspin_set_default_timeout(RU_KERNEL_TIMEOUT_NS), 0);
	rqspin_set_report_hook(ru_capture_hook, NULL);
	run(3, TU_ITERS(60u) < 10 ? 10 : TU_ITERS(60u));
	run(4, TU_ITERS(40u) < 6 ? 6 : TU_ITERS(40u));
	run(RQSPIN_REPORT_MAX_CYCLE, TU_ITERS(20u) < 4 ? 4 : TU_ITERS(20u));

	/* Past the longest followed chain: resolved by timeouts (short ones
	 * here) or by a detection, but never a hang. */
	RU_CHECK_RET(rqspin_set_default_timeout(50 * RU_MS), 0);
	{
		unsigned dummy = 0;

		for (int r = 0; r < 3; r++)
			(void)round_once(RQSPIN_REPORT_MAX_CYCLE + 1, false, &dummy);
		printf("%d-cycle: resolved, no hang\n", RQSPIN_REPORT_MAX_CYCLE + 1);
	}
	rqspin_set_report_hook(NULL, NULL);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	printf("rqspin_cycle: PASS\n");
	return 0;
}
