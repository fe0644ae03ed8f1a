/* SPDX-License-Identifier: MIT */
/*
 * A lock handed off: this thread locks L, another thread unlocks it, over
 * and over, while this thread also takes and releases other locks. Each
 * cross-thread release leaves a RELEASED mark in this thread's table once
 * the next slow operation drains it, and the mark lies below the new hold
 * of L; an inline unlock exposes marks at the top without trimming them
 * and the next inline lock buries them again. After about 29 rounds the
 * table was all marks: every further lock went past it (untracked), so a
 * re-lock of one of them waited for the timeout instead of failing with
 * -EDEADLK at once, and the held count never came down. A full table's
 * marks are now reused by new holds (rqspin__held_push_full).
 *
 *  1. 80 rounds: lock L; lock X, lock Y, unlock X (out of order: a slow
 *     unlock, which drains), re-lock X (AA: -EDEADLK), unlock Y; the
 *     other thread unlocks L. No lock may go past the table.
 *  2. With the table full of marks under a live hold: 40 further locks
 *     and unlocks in random (non-LIFO) orders, AA on each of them, and a
 *     signal handler that locks, re-locks (AA) and unlocks in the middle.
 *  3. At the end nothing is held: only marks remain, and every lock is
 *     free and works.
 */
#include <signal.h>

#include "rqspin_util.h"

#define ROUNDS 80
#define MANY 12
#define AA_TIMEOUT (2 * RU_SEC) /* the wrong answer costs this, not a hang */

static rqspinlock_t L, X, Y, H, many[MANY];
static struct ru_actor unlocker;

static bool table_tracks_all(void)
{
	return rqspin_held_locks()->cnt <= RQSPIN_NR_HELD;
}

static uint32_t marks(void)
{
	const struct rqspin_held_locks *t = rqspin_held_locks();
	uint32_t n = 0;

	for (uint32_t i = 0; i < t->cnt && i < RQSPIN_NR_HELD; i++)
		n += t->locks[i] == RQSPIN__HELD_RELEASED;
	return n;
}

/* Have this thread take in the releases others made of its locks: a slow
 * unlock (X is not the top entry) drains them. */
static void drain_now(void)
{
	RU_CHECK_RET(rqspin_lock(&X), 0);
	RU_CHECK_RET(rqspin_lock(&Y), 0);
	rqspin_unlock(&X);
	rqspin_unlock(&Y);
}

static void expect_aa(rqspinlock_t *l, const char *what, int round)
{
	int r = rqspin_lock_timeout(l, AA_TIMEOUT);

	RU_EXPECT(r == -EDEADLK, "round %d: re-lock of %s gave %s, want -EDEADLK (table cnt %u)",
		  round, what, ru_err_name(r), rqspin_held_locks()->cnt);
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(l);
}

static void handoff_round(int round)
{
	RU_CHECK_RET(rqspin_lock(&L), 0);
	RU_CHECK_RET(rqspin_lock(&X), 0);
	RU_CHECK_RET(rqspin_lock(&Y), 0);
	rqspin_unlock(&X); /* not the top entry: the slow unlock, which drains */
	RU_CHECK_RET(rqspin_lock(&X), 0);
	RU_EXPECT(table_tracks_all(), "round %d: X went past the table (cnt %u)", round,
		  rqspin_held_locks()->cnt);
	expect_aa(&X, "X", round);
	rqspin_unlock(&X);
	rqspin_unlock(&Y);
	/* L is left to the other thread. */
	ru_actor_do(&unlocker, RU_UNLOCK, &L);
	CHECK_EQ_U64(ru_word(&L), 0);
}

static volatile sig_atomic_t handler_result = 1;

static void on_signal(int sig)
{
	(void)sig;
	int r = rqspin_lock(&H);

	if (r) {
		handler_result = r;
		return;
	}
	/* Re-lock from the handler: AA, at once. */
	r = rqspin_lock_timeout(&H, AA_TIMEOUT);
	handler_result = r == -EDEADLK ? 0 : (r ? r : -1);
	if (r == 0)
		rqspin_unlock(&H);
	rqspin_unlock(&H);
}

/* Part 2: locks taken while a live hold of L keeps marks under it. */
static void random_orders(tu_rng *rng)
{
	int order[MANY];

	RU_CHECK_RET(rqspin_lock(&L), 0);
	for (int round = 0; round < 40; round++) {
		for (int i = 0; i < MANY; i++)
			RU_CHECK_RET(rqspin_lock(&many[i]), 0);
		RU_EXPECT(table_tracks_all(), "part 2 round %d: past the table (cnt %u)", round,
			  rqspin_held_locks()->cnt);
		expect_aa(&many[tu_rng_below(rng, MANY)], "one of many", round);
		if (round % 8 == 0) {
			handler_result = 1;
			CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
			RU_EXPECT(handler_result == 0, "part 2 round %d: handler got %d", round,
				  (int)handler_result);
		}
		for (int i = 0; i < MANY; i++)
			order[i] = i;
		tu_shuffle(rng, order, MANY);
		for (int i = 0; i < MANY; i++)
			rqspin_unlock(&many[order[i]]);
		/* Another handoff of L under the other locks' marks. */
		ru_actor_do(&unlocker, RU_UNLOCK, &L);
		RU_CHECK_RET(rqspin_lock(&L), 0);
	}
	expect_aa(&L, "L", -1);
	rqspin_unlock(&L);
}

int main(void)
{
	tu_rng rng;

	tu_watchdog(300);
	tu_rng_seed(&rng, 0x5eed1234);
	ru_set_handler(SIGUSR1, on_signal);
	ru_actor_start(&unlocker, 1);

	for (int r = 0; r < ROUNDS; r++)
		handoff_round(r);
	drain_now();
	printf("part 1: %u marks, cnt %u after %d handoffs\n", marks(), rqspin_held_locks()->cnt,
	       ROUNDS);
	RU_EXPECT(ru_table_holds_nothing(), "part 1: the table still names a hold");

	random_orders(&rng);
	drain_now();
	printf("part 2: %u marks, cnt %u\n", marks(), rqspin_held_locks()->cnt);
	RU_EXPECT(ru_table_holds_nothing(), "part 2: the table still names a hold");

	/* Part 3: every lock free and usable, from here and from the actor. */
	CHECK_EQ_U64(ru_word(&L), 0);
	CHECK_EQ_U64(ru_word(&X), 0);
	CHECK_EQ_U64(ru_word(&Y), 0);
	CHECK_EQ_U64(ru_word(&H), 0);
	for (int i = 0; i < MANY; i++) {
		CHECK_EQ_U64(ru_word(&many[i]), 0);
		RU_CHECK_RET(ru_actor_do(&unlocker, RU_LOCK, &many[i]), 0);
		ru_actor_do(&unlocker, RU_UNLOCK, &many[i]);
	}
	ru_actor_exit(&unlocker);
	return ru_finish("rqspin_handoff_marks");
}
