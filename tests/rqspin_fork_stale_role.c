/* SPDX-License-Identifier: MIT */
/*
 * A thread forked away between announcing itself as a lock's pending
 * waiter (its role) and setting the pending bit leaves a ghost whose role
 * claims a bit it never set. The child must not take a live waiter's bit
 * for that ghost's.
 *
 * Parent: thread G shows ROLE_PENDING for lock L without the bit (the
 * state of a thread between its set_role and its fetch_or, or of a queue
 * head that lost its claim; white-box: set by hand), while the main
 * thread forks. Child (G is a ghost there):
 *  1. the main thread C takes L and M;
 *  2. thread B waits on L as its pending waiter (the bit is B's);
 *  3. a signal handler on B waits on M: B's waiting_for is M now, so no
 *     live thread's table shows a pending wait on L;
 *  4. C unlocks L and tries rqspin_trylock(L): it must fail, the bit is
 *     B's;
 *  5. C unlocks M: B's handler takes M and returns, B takes L; both
 *     calls succeed and the words end 0.
 * Before the fix, step 4 took the bit for G's (its role unchanged since
 * the fork), cleared it and took L from under B. The outcome does not
 * depend on timing: B's bit can only be cleared by B, after its handler
 * returns, which C allows only at step 5.
 *
 * Links the static library and reads src/lock (the ghost's role).
 * Registered NO_TSAN and NO_ASAN (fork with threads, a lock call in a
 * handler), like rqspin_fork_repair.
 */
#include "rqspin_util.h"

#include "lock/registry.h"
#include "rqspin_fork_hidden.h"

#define CHILD_LIMIT_MS 60000  /* the child is killed after this: a hang */

static rqspinlock_t Z = RQSPINLOCK_INIT;

/* ---- the child ------------------------------------------------------------- */

static int child_main(void)
{
	pthread_t bt;
	int r, code = 0;

	if (ru_word(&L) != 0) {
		tu_write_str("child: L's word is not 0 at the fork\n");
		return 2;
	}
	r = rqspin_lock(&L);
	if (r == 0)
		r = rqspin_lock(&M);
	if (r != 0) {
		ru_child_say("lock L and M (want 0)", r);
		return 2;
	}
	bt = hidden_pending_start();

	rqspin_unlock(&L);
	if (rqspin_trylock(&L)) {
		tu_write_str("child: trylock(L) took L from its live pending waiter (B, in a "
			     "handler) for a ghost's stale role: want false\n");
		rqspin_unlock(&L);
		code = 3;
	}

	rqspin_unlock(&M);
	tu_thread_join(bt);
	if (atomic_load(&h_ret) != 0 || atomic_load(&b_ret) != 0) {
		ru_child_say("B's handler on M (want 0)", atomic_load(&h_ret));
		ru_child_say("B on L (want 0)", atomic_load(&b_ret));
		code = code ? code : 4;
	}
	if (ru_word(&L) != 0 || ru_word(&M) != 0) {
		tu_write_str("child: a lock word is not 0 at the end\n");
		code = code ? code : 5;
	}
	if (!code)
		tu_write_str("child: trylock failed, B took L after its handler\n");
	return code;
}

/* ---- the parent ------------------------------------------------------------ */

static _Atomic int g_stage; /* 1: role shown, 2: the fork is done */

/* G: the role of a pending waiter of L without its bit, across the fork. */
static void *g_main(void *arg)
{
	struct rqspin_thread *me;
	const void *saved_wait;
	uint32_t saved_role;

	(void)arg;
	CHECK_EQ_U64(rqspin_lock(&Z), 0); /* registers G */
	rqspin_unlock(&Z);
	me = (struct rqspin_thread *)rqspin__tls_self;
	CHECK(me != NULL);
	saved_wait = atomic_load(&me->waiting_for);
	saved_role = atomic_load(&me->role);
	atomic_store(&me->waiting_for, (const void *)&L.w);
	atomic_store(&me->role, (uint32_t)ROLE_PENDING);
	atomic_store(&g_stage, 1);
	while (atomic_load(&g_stage) != 2)
		tu_sleep_us(200);
	atomic_store(&me->role, saved_role);
	atomic_store(&me->waiting_for, saved_wait);
	return NULL;
}

int main(void)
{
	pthread_t gt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(180);
	gt = tu_thread_start(g_main, NULL);
	RU_WAIT_FOR(atomic_load(&g_stage) == 1, 30, "G's role shown");

	ru_fork_run("rqspin_fork_stale_role", child_main, CHILD_LIMIT_MS);
	atomic_store(&g_stage, 2);
	tu_thread_join(gt);

	/* In the parent the locks work as before. */
	RU_CHECK_RET(rqspin_lock(&L), 0);
	rqspin_unlock(&L);
	CHECK_EQ_U64(ru_word(&L), 0);
	return ru_finish("rqspin_fork_stale_role");
}
