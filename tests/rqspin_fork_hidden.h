/* SPDX-License-Identifier: MIT */
/*
 * Shared by the forked-child repair tests (rqspin_fork_repair,
 * rqspin_fork_stale_role): in the child, thread B becomes L's pending
 * waiter, then a signal handler on B waits on M (held by the caller), so
 * that no table shows B's wait on L any more while the bit on L is B's.
 * Include once per test program, after rqspin_util.h.
 */
#ifndef RQSPIN_TEST_FORK_HIDDEN_H
#define RQSPIN_TEST_FORK_HIDDEN_H

#define LONG_NS (30 * RU_SEC) /* no wait here may time out */

static rqspinlock_t L = RQSPINLOCK_INIT;
static rqspinlock_t M = RQSPINLOCK_INIT;

static _Atomic int order;  /* acquisitions of L after B's handler */
static _Atomic int b_order; /* 1-based, 0 = not yet */
static _Atomic int b_ret = 1, h_ret = 1;
static _Atomic bool in_handler;

/* B's handler: wait on M (held by the caller) while B is L's pending
 * waiter. */
static void hidden_on_usr1(int sig)
{
	int e = errno, r;

	(void)sig;
	atomic_store(&in_handler, true);
	r = rqspin_lock_timeout(&M, LONG_NS);
	if (r == 0)
		rqspin_unlock(&M);
	atomic_store(&h_ret, r);
	errno = e;
}

static void *hidden_b_main(void *arg)
{
	int r = rqspin_lock_timeout(&L, LONG_NS);

	(void)arg;
	if (r == 0) {
		atomic_store(&b_order, atomic_fetch_add(&order, 1) + 1);
		rqspin_unlock(&L);
	}
	atomic_store(&b_ret, r);
	return NULL;
}

/* The caller holds L and M: start B, let it become L's pending waiter,
 * then hide that wait behind its handler's wait on M. Returns B. */
static pthread_t hidden_pending_start(void)
{
	pthread_t bt;

	ru_set_handler(SIGUSR1, hidden_on_usr1);
	bt = tu_thread_start(hidden_b_main, NULL);
	RU_WAIT_FOR(ru_word(&L) & RU_PENDING_MASK, 30, "B pending on L");
	tu_sleep_us(2000);
	CHECK_OK(pthread_kill(bt, SIGUSR1));
	RU_WAIT_FOR(atomic_load(&in_handler) && (ru_word(&M) & RU_PENDING_MASK), 30,
		    "B's handler pending on M");
	tu_sleep_us(2000);
	return bt;
}

#endif
