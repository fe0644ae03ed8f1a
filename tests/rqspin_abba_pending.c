/* SPDX-License-Identifier: MIT */
/*
 * ABBA through a pending waiter that a signal handler interrupted (the
 * userspace form of an NMI landing on a pending waiter).
 *
 * Thread P is the pending waiter of L; its handler waits - queued behind
 * two other waiters, so it does not poll - for M. Thread S holds M. L's
 * owner unlocks: L is free, but P's pending bit keeps it taken, and P
 * cannot take it until its handler gets M from S. S then waits for L as
 * its queue head. S holds M and waits for L; L is blocked by P, whose
 * handler waits for M: a deadlock, and S is the only waiter in it that
 * polls. The kernel's queue head checks for ABBA while the lock is locked
 * *or pending* (check_deadlock_ABBA with _Q_LOCKED_PENDING_MASK) and finds
 * L among P's held entries; S must likewise return -EDEADLK, not time out
 * after 2T. X and Y, the waiters on M ahead of P's handler, use long
 * per-call timeouts: the deadlock must end by a detection (S's, or a
 * waiter that finds it is queued behind the cycle), with nobody timing out.
 */
#include "rqspin_util.h"

static rqspinlock_t *_Atomic h_lock;
static _Atomic int h_result = 1;

static void on_sig(int sig)
{
	int e = errno, r;

	(void)sig;
	r = rqspin_lock_timeout(atomic_load(&h_lock), 10 * RU_SEC);
	if (r == 0)
		rqspin_unlock(atomic_load(&h_lock));
	atomic_store(&h_result, r);
	errno = e;
}

static void test_pending_suspended(void)
{
	rqspinlock_t L = RQSPINLOCK_INIT, M = RQSPINLOCK_INIT;
	struct ru_actor o, p, s, x, y;
	struct rqspin_lock_stats s0, s1;
	uint64_t def = rqspin_get_default_timeout();
	uint32_t y_tail;

	RU_CHECK_RET(rqspin_set_default_timeout(100 * RU_MS), 0);
	ru_set_handler(SIGUSR1, on_sig);
	atomic_store(&h_lock, &M);
	atomic_store(&h_result, 1);
	ru_actor_start(&o, 0);
	ru_actor_start(&p, 1);
	ru_actor_start(&s, 2);
	ru_actor_start(&x, 3);
	ru_actor_start(&y, 4);
	p.timeout = x.timeout = y.timeout = 10 * RU_SEC;
	s0 = ru_stats();

	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &L), 0);
	ru_actor_post(&p, RU_LOCK_TIMEOUT, &L);
	RU_WAIT_FOR(ru_word(&L) & RU_PENDING_MASK, 30, "P pending on L");
	RU_CHECK_RET(ru_actor_do(&s, RU_LOCK, &M), 0);
	ru_actor_post(&x, RU_LOCK_TIMEOUT, &M);
	RU_WAIT_FOR(ru_word(&M) & RU_PENDING_MASK, 30, "X pending on M");
	ru_actor_post(&y, RU_LOCK_TIMEOUT, &M);
	RU_WAIT_FOR(ru_tail(&M) != 0, 30, "Y queue head of M");
	y_tail = ru_tail(&M);
	/* P's handler queues on M behind Y: it does not poll. */
	CHECK(pthread_kill(p.th, SIGUSR1) == 0);
	RU_WAIT_FOR(ru_tail(&M) != y_tail, 30, "P's handler queued on M");
	/* L becomes free, but P's pending bit (P is stuck in its handler)
	 * keeps it taken. */
	RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &L), 0);
	CHECK_EQ_U64(ru_word(&L), 0x100);
	/* S, holding M, now waits for L as its queue head: S waits for P's
	 * pending bit, P's handler waits for S's M. */
	ru_actor_post(&s, RU_LOCK, &L);

	/* Unwind as the waiters return, releasing what each one got: S (L
	 * if it got it, then M), X and Y (M), P (L); P's handler releases M
	 * itself. Whoever detects the deadlock backs off and the rest follow. */
	{
		struct ru_actor *who[4] = { &s, &x, &y, &p };
		const char *name[4] = { "S", "X", "Y", "P" };
		int res[4];
		bool done[4] = { false, false, false, false };
		unsigned left = 4, deadlk = 0, timedout = 0;
		uint64_t end = tu_now_ns() + 60 * TU_SLOWDOWN * RU_SEC;

		while (left) {
			CHECK(tu_now_ns() < end);
			for (int k = 0; k < 4; k++) {
				if (done[k] || !ru_actor_is_done(who[k]))
					continue;
				done[k] = true;
				left--;
				res[k] = ru_actor_wait(who[k], 1);
				if (k == 0 && res[k] == 0)
					RU_CHECK_RET(ru_actor_do(&s, RU_UNLOCK, &L), 0);
				if (k == 0)
					RU_CHECK_RET(ru_actor_do(&s, RU_UNLOCK, &M), 0);
				else if (res[k] == 0)
					RU_CHECK_RET(ru_actor_do(who[k], RU_UNLOCK, k == 3 ? &L : &M), 0);
			}
			tu_sleep_us(100);
		}
		RU_WAIT_FOR(atomic_load(&h_result) != 1, 60, "P's handler");
		printf("pending-suspended ABBA: S %s after %llu ms (2T = 200 ms); X %s, Y %s, "
		       "P %s, P's handler %s\n",
		       ru_err_name(res[0]), (unsigned long long)(ru_actor_elapsed(&s) / RU_MS),
		       ru_err_name(res[1]), ru_err_name(res[2]), ru_err_name(res[3]),
		       ru_err_name(atomic_load(&h_result)));
		if (res[0] == -ETIMEDOUT)
			fprintf(stderr, "S, the queue head of L, did not see the ABBA through "
					"P's pending bit (the check stops when L's locked "
					"byte is clear) and timed out\n");
		for (int k = 0; k < 4; k++) {
			if (res[k] == -EDEADLK)
				deadlk++;
			else if (res[k] == -ETIMEDOUT)
				timedout++;
			else if (res[k] != 0)
				fprintf(stderr, "%s: %s\n", name[k], ru_err_name(res[k]));
		}
		if (atomic_load(&h_result) == -EDEADLK)
			deadlk++;
		else
			RU_CHECK_RET(atomic_load(&h_result), 0);
		/* Resolved by a detection, with nobody timing out. */
		CHECK_EQ_U64(timedout, 0);
		CHECK(deadlk >= 1);
		CHECK_EQ_U64(ru_word(&L), 0);
		CHECK_EQ_U64(ru_word(&M), 0);
		s1 = ru_stats();
		CHECK_EQ_U64((s1.abba - s0.abba) + (s1.cycle - s0.cycle), deadlk);
		CHECK_EQ_U64(s1.timeout, s0.timeout);
	}
	ru_actor_exit(&o);
	ru_actor_exit(&p);
	ru_actor_exit(&s);
	ru_actor_exit(&x);
	ru_actor_exit(&y);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(60);
	for (unsigned r = 0; r < 3; r++)
		test_pending_suspended();
	printf("rqspin_abba_pending: PASS\n");
	return 0;
}
