/* SPDX-License-Identifier: MIT */
/*
 * A thread that exits holding more locks than its 31-entry table: the
 * tracked ones are marked owner-dead at its exit; the others have no
 * entry anywhere. Before the fix they stayed held for good (every later
 * lock call: -ETIMEDOUT). Now a waiter that finds such a lock held by
 * nobody takes it over with -EOWNERDEAD (at its deadline), but only when
 * no live thread holds untracked locks that it could be:
 *
 *  1. thread X takes L[0..NL) (NL > 31), unlocks a few of the tracked
 *     ones out of order (so untracked holds move into its table as
 *     unnamed entries) and exits. Every lock X still held must come back
 *     with -EOWNERDEAD, the last one excepted for now;
 *  2. thread Y takes M[0..NL) and stays. A lock call on one of Y's
 *     untracked locks must end in -ETIMEDOUT, never -EOWNERDEAD, although
 *     one of X's orphans (the last L) is still unclaimed;
 *  3. Y unlocks everything; the last L then comes back with -EOWNERDEAD,
 *     and every lock is usable (0) afterwards;
 *  4. an orphan released by another thread is not credited to a live
 *     thread: X2 exits holding N[0..NL), thread A holds P[0..32] (one
 *     untracked), main unlocks N[NL-1] (an orphan) and A takes and drops
 *     one more lock (its table drains). Main's lock call on A's untracked
 *     P[31] must end in -ETIMEDOUT: before the fix the release was posted
 *     to A (the one live thread with untracked holds), A's count dropped
 *     below its real holds, and the call took P[31] over under A
 *     (-EOWNERDEAD: two owners).
 * Not under TSan: it never saw X release its untracked locks (nobody can
 * tell it which they are), and reports the takeover as a double lock.
 */
#include "rqspin_util.h"

#define NL 40
#define FIRST_OUT 3 /* X unlocks L[0..FIRST_OUT) before it exits */
#define T_NS (20 * RU_MS)

static rqspinlock_t L[NL], M[NL], N[NL], P[NL], Z;
static _Atomic int y_stage, a_stage;

static void *thread_x(void *arg)
{
	(void)arg;
	for (int i = 0; i < NL; i++)
		RU_CHECK_RET(rqspin_lock(&L[i]), 0);
	for (int i = 0; i < FIRST_OUT; i++)
		rqspin_unlock(&L[i]);
	return NULL; /* exits holding L[FIRST_OUT..NL) */
}

static void *thread_y(void *arg)
{
	(void)arg;
	for (int i = 0; i < NL; i++)
		RU_CHECK_RET(rqspin_lock(&M[i]), 0);
	atomic_store(&y_stage, 1);
	while (atomic_load(&y_stage) != 2)
		tu_sleep_us(100);
	for (int i = NL; i-- > 0;)
		rqspin_unlock(&M[i]);
	atomic_store(&y_stage, 3);
	return NULL;
}

static void *thread_x2(void *arg)
{
	(void)arg;
	for (int i = 0; i < NL; i++)
		RU_CHECK_RET(rqspin_lock(&N[i]), 0);
	return NULL;
}

static void *thread_a(void *arg)
{
	(void)arg;
	for (int i = 0; i < 32; i++)
		RU_CHECK_RET(rqspin_lock(&P[i]), 0);
	atomic_store(&a_stage, 1);
	RU_WAIT_FOR(atomic_load(&a_stage) == 2, 30, "main released an orphan");
	/* Past the table: the push drains what was posted to us. */
	RU_CHECK_RET(rqspin_lock(&Z), 0);
	rqspin_unlock(&Z);
	atomic_store(&a_stage, 3);
	RU_WAIT_FOR(atomic_load(&a_stage) == 4, 30, "main's look at P[31]");
	for (int i = 32; i-- > 0;)
		rqspin_unlock(&P[i]);
	return NULL;
}

/* Lock l, which a dead thread held: -EOWNERDEAD, then unlock. */
static void take_over(rqspinlock_t *l)
{
	RU_CHECK_RET(rqspin_lock(l), -EOWNERDEAD);
	rqspin_unlock(l);
}

int main(void)
{
	pthread_t x, y;
	uint64_t t0;
	int ret;

	CHECK(rqspin_set_default_timeout(T_NS) == 0);
	for (int i = 0; i < NL; i++) {
		rqspin_lock_init(&L[i]);
		rqspin_lock_init(&M[i]);
	}

	/* 1 */
	x = tu_thread_start(thread_x, NULL);
	tu_thread_join(x);
	for (int i = FIRST_OUT; i < NL - 1; i++)
		take_over(&L[i]);

	/* 2 */
	y = tu_thread_start(thread_y, NULL);
	RU_WAIT_FOR(atomic_load(&y_stage) == 1, 30, "Y holds its locks");
	t0 = tu_now_ns();
	ret = rqspin_lock(&M[NL - 2]);
	printf("a live thread's untracked lock: %s after %.1f ms\n", ru_err_name(ret),
	       (double)(tu_now_ns() - t0) / 1e6);
	RU_CHECK_RET(ret, -ETIMEDOUT);
	atomic_store(&y_stage, 2);
	RU_WAIT_FOR(atomic_load(&y_stage) == 3, 30, "Y lets go");
	tu_thread_join(y);

	/* 3 */
	take_over(&L[NL - 1]);
	for (int i = 0; i < NL; i++) {
		RU_CHECK_RET(rqspin_lock(&L[i]), 0);
		RU_CHECK_RET(rqspin_lock(&M[i]), 0);
	}
	for (int i = NL; i-- > 0;) {
		rqspin_unlock(&M[i]);
		rqspin_unlock(&L[i]);
	}
	for (int i = 0; i < NL; i++)
		CHECK_EQ_U64(ru_word(&L[i]) | ru_word(&M[i]), 0);

	/* 4 */
	x = tu_thread_start(thread_x2, NULL);
	tu_thread_join(x);
	y = tu_thread_start(thread_a, NULL);
	RU_WAIT_FOR(atomic_load(&a_stage) == 1, 30, "A holds its locks");
	rqspin_unlock(&N[NL - 1]); /* an orphan, released by us */
	atomic_store(&a_stage, 2);
	RU_WAIT_FOR(atomic_load(&a_stage) == 3, 30, "A drained");
	ret = rqspin_lock(&P[31]);
	printf("a live thread's untracked lock after an orphan's release: %s\n", ru_err_name(ret));
	RU_CHECK_RET(ret, -ETIMEDOUT);
	atomic_store(&a_stage, 4);
	tu_thread_join(y);
	for (int i = 0; i < NL - 1; i++)
		take_over(&N[i]);
	for (int i = 0; i < NL; i++) {
		RU_CHECK_RET(rqspin_lock(&N[i]), 0);
		rqspin_unlock(&N[i]);
		CHECK_EQ_U64(ru_word(&N[i]) | ru_word(&P[i]), 0);
	}
	printf("rqspin_exit_untracked: ok\n");
	return 0;
}
