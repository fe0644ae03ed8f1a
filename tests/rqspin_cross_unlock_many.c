/* SPDX-License-Identifier: MIT */
/*
 * Cross-thread unlocks of more locks than a held table holds. Thread A
 * takes NL > 31 locks (31 tracked, the rest untracked); thread B unlocks
 * them all, in an order other than A's reverse one (scrambled, forward),
 * before A's next slow path. Each release must reach A's table: the
 * tracked ones as posted cells, the untracked ones as a count. Before the
 * fix, the untracked ones took cells too; once the 31 cells were full,
 * the remaining releases were dropped, and A kept stale entries and a
 * phantom count. Then:
 *   - A's relock of a lock it holds came too late in its (phantom-filled)
 *     table to be seen: -ETIMEDOUT instead of -EDEADLK;
 *   - A's table showed locks it no longer held (false ABBA for others);
 *   - a lock A held when it exited was not taken over.
 * Checked after each round: A's relock of X gives -EDEADLK, A's table
 * then holds X alone, and at the end a lock A exits with comes back with
 * -EOWNERDEAD.
 */
#include "rqspin_util.h"

#define NL 40
#define T_NS (50 * RU_MS)

static rqspinlock_t L[NL], X;
static _Atomic int stage; /* 1: A holds L; 2: B released them */
static int order;

static unsigned nth(int i)
{
	return order == 0 ? (unsigned)(i * 7) % NL : (unsigned)i;
}

static void *thread_b(void *arg)
{
	(void)arg;
	RU_WAIT_FOR(atomic_load(&stage) == 1, 30, "A holds its locks");
	for (int i = 0; i < NL; i++)
		rqspin_unlock(&L[nth(i)]);
	atomic_store(&stage, 2);
	return NULL;
}

static void *thread_a(void *arg)
{
	bool last = arg != NULL;

	for (int i = 0; i < NL; i++)
		RU_CHECK_RET(rqspin_lock(&L[i]), 0);
	atomic_store(&stage, 1);
	RU_WAIT_FOR(atomic_load(&stage) == 2, 30, "B releases them");
	RU_CHECK_RET(rqspin_lock(&X), 0);
	/* The slow path drains the posts first, then finds X: AA. */
	RU_CHECK_RET(rqspin_lock(&X), -EDEADLK);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 1);
	CHECK(rqspin_held_locks()->locks[0] == &X);
	if (!last)
		rqspin_unlock(&X);
	return NULL; /* the last round exits holding X */
}

int main(void)
{
	CHECK(rqspin_set_default_timeout(T_NS) == 0);
	for (int r = 0; r < 4; r++) {
		pthread_t a, b;

		order = r % 2;
		atomic_store(&stage, 0);
		b = tu_thread_start(thread_b, NULL);
		a = tu_thread_start(thread_a, r == 3 ? (void *)1 : NULL);
		tu_thread_join(a);
		tu_thread_join(b);
		for (int i = 0; i < NL; i++)
			CHECK_EQ_U64(ru_word(&L[i]), 0);
	}
	RU_CHECK_RET(rqspin_lock(&X), -EOWNERDEAD);
	rqspin_unlock(&X);
	CHECK_EQ_U64(ru_word(&X), 0);
	printf("rqspin_cross_unlock_many: ok\n");
	return 0;
}
