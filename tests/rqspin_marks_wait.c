/* SPDX-License-Identifier: MIT */
/*
 * White-box: a new hold may reuse a RELEASED mark of a full table, but
 * never one below the entry of a wait its thread has published. A signal
 * handler that interrupts a slow path in its first spins (the entry is
 * still plain, waiting_for already names the lock) would otherwise put
 * its hold below that wait's entry, where other threads' deadlock
 * searches read it as taken before the wait (rqs_held_while_waiting):
 * a false link of a cycle, and a false -EDEADLK for a thread that only
 * waits for the handler to finish.
 *
 * The table is made full of marks under one live entry, A: 31 locks
 * taken, 29 of them unlocked by another thread, the 30th out of order.
 * Then this thread acts as such a handler: it publishes a wait for A by
 * hand (as the interrupted slow path had) and takes W. W's entry must not
 * lie below A's, and the search's question must answer no. Without the
 * wait published, W reuses a mark (below A: the order no longer matters).
 */
#include <rqspin/lock_diag.h>
#include <rqspin/rqspinlock.h>

#include "lock/held.h"
#include "lock/registry.h"
#include "rqspin_util.h"

static rqspinlock_t locks[RQSPIN_NR_HELD], W;
static struct ru_actor other;

static int index_of(const void *lock)
{
	const struct rqspin_held_locks *t = rqspin_held_locks();

	for (uint32_t i = 0; i < t->cnt && i < RQSPIN_NR_HELD; i++)
		if (t->locks[i] == lock)
			return (int)i;
	return -1;
}

int main(void)
{
	struct rqspin_thread *self = (struct rqspin_thread *)rqspin__self();
	const struct rqspin_held_locks *t = rqspin_held_locks();
	rqspinlock_t *A = &locks[RQSPIN_NR_HELD - 1];
	int ia, iw;

	tu_watchdog(120);
	ru_actor_start(&other, 1);
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		RU_CHECK_RET(rqspin_lock(&locks[i]), 0);
	for (int i = 0; i < RQSPIN_NR_HELD - 2; i++)
		ru_actor_do(&other, RU_UNLOCK, &locks[i]);
	/* Out of order: the slow unlock drains the posts, then marks its
	 * own entry in place (a full table). */
	rqspin_unlock(&locks[RQSPIN_NR_HELD - 2]);
	CHECK_EQ_U64(t->cnt, RQSPIN_NR_HELD);
	ia = index_of(A);
	CHECK(ia == RQSPIN_NR_HELD - 1);
	for (int i = 0; i < ia; i++)
		CHECK(t->locks[i] == RQSPIN__HELD_RELEASED);

	/* A "handler" over a published, not yet marked, wait for A. */
	atomic_store(&self->waiting_for, A);
	RU_CHECK_RET(rqspin_lock(&W), 0);
	iw = index_of(&W);
	RU_EXPECT(iw < 0 || iw > ia, "W took over slot %d, below the wait's entry at %d", iw, ia);
	RU_EXPECT(!rqs_held_while_waiting(self, &W, A),
		  "W reads as held before the wait for A (a false deadlock link)");
	rqspin_unlock(&W);
	atomic_store(&self->waiting_for, NULL);
	CHECK(index_of(&W) < 0);

	/* No wait published: W reuses a mark, and AA on it holds. */
	RU_CHECK_RET(rqspin_lock(&W), 0);
	iw = index_of(&W);
	RU_EXPECT(iw >= 0, "W went past a table full of marks (cnt %u)", t->cnt);
	RU_CHECK_RET(rqspin_lock_timeout(&W, 2 * RU_SEC), -EDEADLK);
	rqspin_unlock(&W);
	CHECK_EQ_U64(t->cnt, RQSPIN_NR_HELD);

	rqspin_unlock(A);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 0);
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		CHECK_EQ_U64(ru_word(&locks[i]), 0);
	CHECK_EQ_U64(ru_word(&W), 0);
	ru_actor_exit(&other);
	return ru_finish("rqspin_marks_wait");
}
