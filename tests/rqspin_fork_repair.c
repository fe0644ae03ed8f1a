/* SPDX-License-Identifier: MIT */
/*
 * In a forked child, the repair of a vanished thread's pending bit must
 * never clear a live waiter's bit.
 *
 * Parent: X holds L, G waits on L as its pending waiter; the main thread
 * forks. Child (X and G are ghosts there):
 *  1. the main thread C takes L over (-EOWNERDEAD: X's hold becomes
 *     owner-dead, G's pending bit is cleared), then takes M;
 *  2. thread B waits on L as the pending waiter (C holds L);
 *  3. a signal handler on B waits on M (C holds M): B's waiting_for is M
 *     now, so no table shows a live pending waiter of L any more, while
 *     the bit on L is B's;
 *  4. C unlocks L (the word is just B's pending bit) and tries
 *     rqspin_trylock(L): it must fail;
 *  5. thread A calls rqspin_lock(L) and waits; it must not get L before
 *     B, whose bit it is (0.3 s of checks by A meanwhile);
 *  6. C unlocks M: B's handler returns, B takes L, then A does; every call
 *     succeeds, and the words end 0.
 * Before the fix, G's ROLE_PENDING outlived G's bit, so steps 4 and 5
 * took B's bit for G's: the trylock cleared it and took L, and A's queue
 * repair cleared it and A took L ahead of B (two owners when B's
 * pending_take looks at the word between A's claim and A's unlock). The
 * outcome does not depend on timing: only B clears B's bit, after its
 * handler returns, which C allows only at step 6. (The race the SPIN model
 * found, a repair between another repair's scan and its clearing CAS, has
 * no deterministic window; tests/model/ covers it.)
 *
 * Registered NO_TSAN and NO_ASAN (fork with threads, a lock call in a
 * handler), like rqspin_fork_ghost.
 */
#include "rqspin_util.h"
#include "rqspin_fork_hidden.h"

#define CHILD_LIMIT_MS 60000  /* the child is killed after this: a hang */
#define A_HEAD_START_US 300000

/* ---- the child ------------------------------------------------------------- */

static _Atomic int a_order; /* 1-based, 0 = not yet */
static _Atomic int a_ret = 1;

static void *a_main(void *arg)
{
	int r = rqspin_lock_timeout(&L, LONG_NS);

	(void)arg;
	if (r == 0) {
		atomic_store(&a_order, atomic_fetch_add(&order, 1) + 1);
		rqspin_unlock(&L);
	}
	atomic_store(&a_ret, r);
	return NULL;
}

static int child_main(void)
{
	pthread_t bt, at;
	int r, code = 0;
	bool got;

	r = rqspin_lock_timeout(&L, LONG_NS);
	if (r != -EOWNERDEAD) {
		ru_child_say("takeover of L (want -EOWNERDEAD)", r);
		return 2;
	}
	r = rqspin_lock(&M);
	if (r != 0) {
		ru_child_say("lock M (want 0)", r);
		return 2;
	}
	bt = hidden_pending_start();

	rqspin_unlock(&L);
	got = rqspin_trylock(&L);
	if (got) {
		tu_write_str("child: trylock(L) took L from its live pending waiter (B, in a "
			     "handler): want false\n");
		rqspin_unlock(&L);
		code = 3;
	}

	at = tu_thread_start(a_main, NULL);
	tu_sleep_us(A_HEAD_START_US);
	if (atomic_load(&a_order) != 0) {
		tu_write_str("child: A took L while B (in a handler) held its pending bit\n");
		code = 4;
	}

	rqspin_unlock(&M);
	tu_thread_join(bt);
	tu_thread_join(at);
	if (atomic_load(&h_ret) != 0 || atomic_load(&b_ret) != 0 || atomic_load(&a_ret) != 0) {
		ru_child_say("B's handler on M (want 0)", atomic_load(&h_ret));
		ru_child_say("B on L (want 0)", atomic_load(&b_ret));
		ru_child_say("A on L (want 0)", atomic_load(&a_ret));
		code = code ? code : 5;
	}
	if (!code && !(atomic_load(&b_order) == 1 && atomic_load(&a_order) == 2)) {
		tu_write_str("child: L's order was not B, then A\n");
		code = 6;
	}
	if (ru_word(&L) != 0 || ru_word(&M) != 0) {
		tu_write_str("child: a lock word is not 0 at the end\n");
		code = code ? code : 7;
	}
	if (!code)
		tu_write_str("child: trylock failed, A waited for B, B then A took L\n");
	return code;
}

/* ---- the parent ------------------------------------------------------------ */

int main(void)
{
	struct ru_actor x, g;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(180);
	ru_actor_start(&x, 1);
	RU_CHECK_RET(ru_actor_do(&x, RU_LOCK, &L), 0);
	ru_actor_start(&g, 2);
	g.timeout = 60 * RU_SEC;
	ru_actor_post(&g, RU_LOCK_TIMEOUT, &L);
	RU_WAIT_FOR(ru_word(&L) & RU_PENDING_MASK, 30, "G pending on L");
	tu_sleep_us(2000);

	ru_fork_run("rqspin_fork_repair", child_main, CHILD_LIMIT_MS);

	/* In the parent everything carries on. */
	RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &L), 0);
	r = ru_actor_wait(&g, 60);
	RU_EXPECT(r == 0, "parent: G got %s, want 0", ru_err_name(r));
	if (r == 0)
		RU_CHECK_RET(ru_actor_do(&g, RU_UNLOCK, &L), 0);
	ru_actor_exit(&g);
	ru_actor_exit(&x);
	CHECK_EQ_U64(ru_word(&L), 0);
	return ru_finish("rqspin_fork_repair");
}
