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
 *     and every lock is usable (0) afterwards.
 * Not under TSan: it never saw X release its untracked locks (nobody can
 * tell it which they are), and reports the takeover as a double lock.
 */
#include "rqspin_util.h"

#define NL 40
#define FIRST_OUT 3 /* X unlocks L[0..FIRST_OUT) before it exits */
#define T_NS (20 * RU_MS)

static rqspinlock_t L[NL], M[NL];
static _Atomic int y_stage;

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
	printf("rqspin_exit_untracked: ok\n");
	return 0;
}
