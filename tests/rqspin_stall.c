/* SPDX-License-Identifier: MIT */
/*
 * Stalled owners and the kernel stress module's "handoff tail" scenario.
 *
 *  1. Stalled owner: a thread holds L until the test lets it go, long
 *     after every waiter has returned. A pending waiter, the queue head and
 *     several queued (parked) waiters all return -ETIMEDOUT - the pending
 *     waiter after its timeout, the head after twice the default, the
 *     queued ones when the head dissolves the queue - and none hangs.
 *     Afterwards the lock word is just "locked" (no pending bit, no tail),
 *     and once the owner unlocks, several threads share the lock with exact
 *     mutual exclusion. Run twice in two variants: the pending waiter
 *     outlasting the head (per-call timeout), and everyone on the default
 *     (the head takes the pending bit over when the pending waiter leaves).
 *
 *  2. Handoff tail (bpf_test_rqspinlock.c mode 3, fixed upstream by
 *     7a3c0289c3c8): the owner holds A; a pending waiter spins on A; a
 *     queue waiter holds B and queues on A as head *and* tail; the owner
 *     then attempts B. That is an ABBA: the head must return -EDEADLK
 *     without waiting for a successor that will never come, and must reset
 *     the tail so A stays usable. (The pending waiter, queued behind the
 *     cycle, may back off with -EDEADLK too; it must not time out.)
 *     a) kernel-faithful: the owner only records the attempt on B in its
 *        held table, the way the module calls grab_held_lock_entry(), so
 *        only the head can see the deadlock;
 *     b) genuine: the owner really calls rqspin_lock(B); either side may
 *        detect the ABBA first, both outcomes must resolve.
 */
#include "rqspin_util.h"

#define T_NS (100 * RU_MS)

static void check_exclusion(rqspinlock_t *l, int nthreads);

/* ---- 1. stalled owner ---------------------------------------------------- */

#define NQ 4

static void stall_round(bool pending_outlasts, unsigned round)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	struct ru_actor o, p, h, q[NQ];
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	uint64_t p_timeout = pending_outlasts ? 4 * T_NS : T_NS;
	uint32_t prev;
	bool classes_ok = true; /* every waiter joined in the intended role */

	ru_actor_start(&o, 0);
	ru_actor_start(&p, 1);
	ru_actor_start(&h, 2);
	for (int i = 0; i < NQ; i++)
		ru_actor_start(&q[i], 3 + i);

	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &l), 0);

	p.timeout = p_timeout;
	ru_actor_post(&p, RU_LOCK_TIMEOUT, &l);
	RU_WAIT_FOR(ru_word(&l) & RU_PENDING_MASK, 30, "pending waiter");

	ru_actor_post(&h, RU_LOCK, &l);
	RU_WAIT_FOR(ru_tail(&l) != 0 || ru_actor_is_done(&p), 30, "queue head");
	prev = ru_tail(&l);
	if (!prev)
		classes_ok = false; /* very slow machine: p left first */
	for (int i = 0; i < NQ; i++) {
		ru_actor_post(&q[i], RU_LOCK, &l);
		RU_WAIT_FOR(ru_tail(&l) != prev || ru_actor_is_done(&h), 30, "queued waiter");
		if (ru_actor_is_done(&h))
			classes_ok = false;
		prev = ru_tail(&l);
	}

	/* Everyone returns -ETIMEDOUT while the owner still holds L. */
	RU_CHECK_RET(ru_actor_wait(&p, 60), -ETIMEDOUT);
	RU_CHECK_RET(ru_actor_wait(&h, 60), -ETIMEDOUT);
	for (int i = 0; i < NQ; i++)
		RU_CHECK_RET(ru_actor_wait(&q[i], 60), -ETIMEDOUT);
	CHECK(ru_actor_is_done(&o));
	printf("stall %u (%s): pending %llu ms, head %llu ms, queued %llu..%llu ms%s\n", round,
	       pending_outlasts ? "pending outlasts the head" : "default timeouts",
	       (unsigned long long)(ru_actor_elapsed(&p) / RU_MS),
	       (unsigned long long)(ru_actor_elapsed(&h) / RU_MS),
	       (unsigned long long)(ru_actor_elapsed(&q[0]) / RU_MS),
	       (unsigned long long)(ru_actor_elapsed(&q[NQ - 1]) / RU_MS),
	       classes_ok ? "" : " (setup was slow: roles differ)");
	/* Lower bounds only: the pending waiter's budget, the head's 2T. */
	CHECK_GE_U64(ru_actor_elapsed(&p), p_timeout);
	if (classes_ok)
		CHECK_GE_U64(ru_actor_elapsed(&h), 2 * T_NS);
	/* Consistent: held, no pending bit, no tail. */
	CHECK_EQ_U64(ru_word(&l), 1);
	s1 = ru_stats();
	CHECK_EQ_U64(s1.timeout - s0.timeout, 2 + NQ);
	CHECK_EQ_U64(s1.aa + s1.abba + s1.cycle, s0.aa + s0.abba + s0.cycle);

	RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &l), 0);
	CHECK_EQ_U64(ru_word(&l), 0);
	/* The same threads (same MCS nodes) take it normally again. */
	RU_CHECK_RET(ru_actor_do(&h, RU_LOCK, &l), 0);
	RU_CHECK_RET(ru_actor_do(&h, RU_UNLOCK, &l), 0);
	for (int i = 0; i < NQ; i++) {
		RU_CHECK_RET(ru_actor_do(&q[i], RU_LOCK, &l), 0);
		RU_CHECK_RET(ru_actor_do(&q[i], RU_UNLOCK, &l), 0);
	}
	ru_actor_exit(&o);
	ru_actor_exit(&p);
	ru_actor_exit(&h);
	for (int i = 0; i < NQ; i++)
		ru_actor_exit(&q[i]);
	check_exclusion(&l, 4);
}

/* ---- mutual exclusion check ----------------------------------------------- */

struct excl {
	rqspinlock_t *l;
	unsigned iters;
	volatile int in_cs;
	uint64_t counter; /* protected by l */
	_Atomic unsigned errors;
};

static void *excl_thread(void *arg)
{
	struct excl *e = arg;

	for (unsigned i = 0; i < e->iters; i++) {
		int r = rqspin_lock(e->l);

		if (r) {
			atomic_fetch_add(&e->errors, 1);
			continue;
		}
		CHECK(e->in_cs == 0);
		e->in_cs = 1;
		e->counter++;
		e->in_cs = 0;
		rqspin_unlock(e->l);
	}
	return NULL;
}

static void check_exclusion(rqspinlock_t *l, int nthreads)
{
	struct excl e = { .l = l, .iters = TU_ITERS(20000u) };
	pthread_t t[8];

	CHECK(nthreads <= 8);
	for (int i = 0; i < nthreads; i++)
		t[i] = tu_thread_start(excl_thread, &e);
	for (int i = 0; i < nthreads; i++)
		tu_thread_join(t[i]);
	CHECK_EQ_U64(atomic_load(&e.errors), 0);
	CHECK_EQ_U64(e.counter, (uint64_t)nthreads * e.iters);
	CHECK_EQ_U64(ru_word(l), 0);
}

/* ---- 2. handoff tail ------------------------------------------------------- */

static rqspinlock_t A = RQSPINLOCK_INIT, B = RQSPINLOCK_INIT;

/* The pending waiter on A, once the owner has let A go: it gets A, or -
 * when its own check found the cycle it was waiting behind and it backed
 * off (a waiter behind a deadlock may fail with -EDEADLK) - an error. */
static void finish_pending(struct ru_actor *p, unsigned *fails)
{
	int r = ru_actor_wait(p, 30);

	if (r == 0) {
		RU_CHECK_RET(ru_actor_do(p, RU_UNLOCK, &A), 0);
	} else {
		RU_CHECK_RET(r, -EDEADLK);
		(*fails)++;
	}
}

/* Owner holds A, pending waiter on A, head+tail holds B and waits on A. */
static void handoff_setup(struct ru_actor *o, struct ru_actor *p, struct ru_actor *qh)
{
	RU_CHECK_RET(ru_actor_do(o, RU_LOCK, &A), 0);
	ru_actor_post(p, RU_LOCK, &A);
	RU_WAIT_FOR(ru_word(&A) & RU_PENDING_MASK, 30, "pending waiter on A");
	RU_CHECK_RET(ru_actor_do(qh, RU_LOCK, &B), 0);
	ru_actor_post(qh, RU_LOCK, &A);
	RU_WAIT_FOR(ru_tail(&A) != 0, 30, "head+tail on A");
	/* Let the head settle into its wait (and its first checks). */
	tu_sleep_us(2000);
	CHECK(!ru_actor_is_done(p) && !ru_actor_is_done(qh));
}

static void handoff_genuine(unsigned round, unsigned *head_first, unsigned *owner_first)
{
	struct ru_actor o, p, qh;
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	int ro, rq;
	unsigned fails = 0;

	ru_actor_start(&o, 0);
	ru_actor_start(&p, 1);
	ru_actor_start(&qh, 2);
	handoff_setup(&o, &p, &qh);

	ru_actor_post(&o, RU_LOCK, &B);
	RU_WAIT_FOR(ru_actor_is_done(&o) || ru_actor_is_done(&qh), 30,
		    "the ABBA to be detected");
	if (ru_actor_is_done(&qh)) {
		/* The head detected it: it left A's queue (tail reset) and
		 * still holds B. */
		rq = ru_actor_wait(&qh, 30);
		RU_CHECK_RET(rq, -EDEADLK);
		CHECK_EQ_U64(ru_word(&A) & ~RU_PENDING_MASK, 1);
		(*head_first)++;
		fails++;
		RU_CHECK_RET(ru_actor_do(&qh, RU_UNLOCK, &B), 0);
		ro = ru_actor_wait(&o, 30); /* 0, or -EDEADLK if it saw it too */
		if (ro == 0) {
			RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &B), 0);
		} else {
			RU_CHECK_RET(ro, -EDEADLK);
			fails++;
		}
		RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &A), 0);
		finish_pending(&p, &fails);
	} else {
		/* The owner detected it first and backs off. */
		ro = ru_actor_wait(&o, 30);
		RU_CHECK_RET(ro, -EDEADLK);
		(*owner_first)++;
		fails++;
		RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &A), 0);
		finish_pending(&p, &fails);
		rq = ru_actor_wait(&qh, 30);
		if (rq == 0) {
			RU_CHECK_RET(ru_actor_do(&qh, RU_UNLOCK, &A), 0);
		} else {
			RU_CHECK_RET(rq, -EDEADLK);
			fails++;
		}
		RU_CHECK_RET(ru_actor_do(&qh, RU_UNLOCK, &B), 0);
	}
	CHECK_EQ_U64(ru_word(&A), 0);
	CHECK_EQ_U64(ru_word(&B), 0);
	s1 = ru_stats();
	CHECK_EQ_U64((s1.abba - s0.abba) + (s1.cycle - s0.cycle), fails);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	(void)round;
	ru_actor_exit(&o);
	ru_actor_exit(&p);
	ru_actor_exit(&qh);
}

int main(void)
{
	unsigned rounds = TU_SLOWDOWN > 1 ? 2 : 5, head_first = 0, owner_first = 0;
	uint64_t def = rqspin_get_default_timeout();

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);

	RU_CHECK_RET(rqspin_set_default_timeout(T_NS), 0);
	for (unsigned r = 0; r < 2; r++) {
		stall_round(true, r);
		stall_round(false, r);
	}

	/* Handoff tail: long timeouts, so only a detection (or a hang) can
	 * end the head's wait and nobody else times out meanwhile. */
	RU_CHECK_RET(rqspin_set_default_timeout(10 * RU_SEC), 0);
	for (unsigned r = 0; r < rounds * 2; r++)
		handoff_genuine(r, &head_first, &owner_first);
	printf("handoff tail (genuine attempt): head detected first in %u rounds, owner in %u\n",
	       head_first, owner_first);
	check_exclusion(&A, 4);
	check_exclusion(&B, 4);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	printf("rqspin_stall: PASS\n");
	return 0;
}
