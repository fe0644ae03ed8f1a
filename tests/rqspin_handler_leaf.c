/* SPDX-License-Identifier: MIT */
/*
 * No false ABBA through a lock that a signal handler holds while the wait
 * it interrupted stays published.
 *
 * Lock order in the program: L2 before L7. H is taken only by signal
 * handlers, which take nothing while they hold it: no deadlock can arise.
 *   T1 holds L7.
 *   T2 holds L2 and waits for L7 (the pending waiter).
 *   T2's handler (SIGUSR1, over that wait) takes H on the fast path and
 *   holds it until T1's handler waits for H, and a while longer.
 *   T1's handler (SIGUSR2) locks H: it must wait and get it (0).
 * T2's table then reads L2, L7 (the wait), H; its waiting_for is still
 * L7. Read as "T2 holds H and waits for L7, which T1 holds", T1's handler
 * got -EDEADLK (ABBA) at once (10 of 10 runs before the fix). A hold
 * above the wait's entry is the running handler's: T2 is not waiting.
 * Afterwards T1 lets go of L7 and T2 gets it.
 */
#include <errno.h>
#include <signal.h>

#include <rqspin/rqspinlock.h>

#include "rqspin_util.h"

#define LONG_TIMEOUT (20 * RU_SEC)

static rqspinlock_t L2 = RQSPINLOCK_INIT, L7 = RQSPINLOCK_INIT, H = RQSPINLOCK_INIT;
static _Atomic bool t1_holds, t2_handler_holds, t1_handler_done, t1_release;
static _Atomic int t1_handler_ret = 99, t2_handler_ret = 99, t2_ret = 99;

static void on_t2(int sig)
{
	uint64_t until;

	(void)sig;
	atomic_store(&t2_handler_ret, rqspin_lock_timeout(&H, LONG_TIMEOUT));
	if (atomic_load(&t2_handler_ret) != 0)
		return;
	atomic_store(&t2_handler_holds, true);
	/* Until T1's handler waits for H (its pending bit), then 20 ms more:
	 * its deadlock checks run at once and again while it waits. */
	RU_WAIT_FOR(ru_word(&H) & RU_PENDING_MASK, 60, "T1's handler waits for H");
	until = tu_now_ns() + 20 * RU_MS;
	while (tu_now_ns() < until)
		;
	rqspin_unlock(&H);
}

static void on_t1(int sig)
{
	int r;

	(void)sig;
	r = rqspin_lock_timeout(&H, LONG_TIMEOUT);
	if (r == 0)
		rqspin_unlock(&H);
	atomic_store(&t1_handler_ret, r);
	atomic_store(&t1_handler_done, true);
}

static void *t1_main(void *arg)
{
	(void)arg;
	CHECK(rqspin_lock(&L7) == 0);
	atomic_store(&t1_holds, true);
	RU_WAIT_FOR(atomic_load(&t1_release), 120, "main lets T1 release L7");
	rqspin_unlock(&L7);
	return NULL;
}

static void *t2_main(void *arg)
{
	int r;

	(void)arg;
	CHECK(rqspin_lock(&L2) == 0);
	r = rqspin_lock_timeout(&L7, LONG_TIMEOUT);
	atomic_store(&t2_ret, r);
	if (r == 0)
		rqspin_unlock(&L7);
	rqspin_unlock(&L2);
	return NULL;
}

int main(void)
{
	struct sigaction sa = { 0 };
	pthread_t t1, t2;

	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_t2;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	sa.sa_handler = on_t1;
	CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);

	t1 = tu_thread_start(t1_main, NULL);
	RU_WAIT_FOR(atomic_load(&t1_holds), 60, "T1 holds L7");
	t2 = tu_thread_start(t2_main, NULL);
	RU_WAIT_FOR(ru_word(&L7) & RU_PENDING_MASK, 60, "T2 waits for L7");
	CHECK(pthread_kill(t2, SIGUSR1) == 0);
	RU_WAIT_FOR(atomic_load(&t2_handler_holds), 60, "T2's handler holds H");
	CHECK(pthread_kill(t1, SIGUSR2) == 0);
	RU_WAIT_FOR(atomic_load(&t1_handler_done), 120, "T1's handler is done");
	if (atomic_load(&t1_handler_ret) != 0)
		fprintf(stderr, "T1's handler: lock(H) gave %s, want 0\n",
			ru_err_name(atomic_load(&t1_handler_ret)));
	CHECK_EQ_U64(atomic_load(&t1_handler_ret), 0);
	atomic_store(&t1_release, true);
	tu_thread_join(t1);
	tu_thread_join(t2);
	CHECK_EQ_U64(atomic_load(&t2_handler_ret), 0);
	CHECK_EQ_U64(atomic_load(&t2_ret), 0);
	CHECK_EQ_U64(ru_word(&L2) | ru_word(&L7) | ru_word(&H), 0);
	printf("rqspin_handler_leaf: ok\n");
	return 0;
}
