/* SPDX-License-Identifier: MIT */
/*
 * Cross-thread unlock of a lock its owner holds untracked: past its
 * 31-entry table, or moved into the table as an anonymous (NULL) entry by
 * an out-of-order unlock. No table names the lock, so the unlock used to
 * go nowhere: the owner kept a phantom hold for good. Then every cross-
 * thread unlock the owner made waited out the default timeout (it might
 * hold the lock it releases itself, untracked), and 31 such phantoms
 * filled its table: a relock of a lock it held got -ETIMEDOUT instead of
 * -EDEADLK at once. With exactly one thread holding untracked locks, the
 * release is now posted to it.
 *
 *   past   the owner holds 32 locks; the other thread unlocks the 32nd;
 *   moved  the owner holds 33, unlocks the 5th (the 32nd moves into the
 *          table as NULL); the other thread unlocks the 32nd.
 * After each, the owner unlocks the rest: its table must be empty, and
 * its own cross-thread unlock of a lock the other thread holds must not
 * wait out the (2 s) timeout. Then 31 rounds of "past" and an AA relock.
 */
#include <errno.h>

#include <rqspin/rqspinlock.h>

#include "rqspin_util.h"

#define NLOCKS (RQSPIN_NR_HELD + 2)
#define TIMEOUT (2 * RU_SEC)

static rqspinlock_t L[NLOCKS], V = RQSPINLOCK_INIT;
static pthread_barrier_t step;

/* The other thread: release L[victim] for the owner, then hold V for the
 * owner to release. */
static void *other_main(void *arg)
{
	int victim = (int)(intptr_t)arg;

	pthread_barrier_wait(&step); /* the owner holds its locks */
	rqspin_unlock(&L[victim]);
	pthread_barrier_wait(&step);
	CHECK(rqspin_lock(&V) == 0);
	pthread_barrier_wait(&step); /* the owner releases V */
	pthread_barrier_wait(&step);
	return NULL;
}

static void round_trip(int nheld, int out_of_order, int victim)
{
	pthread_t t = tu_thread_start(other_main, (void *)(intptr_t)victim);
	uint64_t t0;

	for (int i = 0; i < nheld; i++)
		CHECK(rqspin_lock(&L[i]) == 0);
	if (out_of_order >= 0)
		rqspin_unlock(&L[out_of_order]);
	pthread_barrier_wait(&step);
	pthread_barrier_wait(&step); /* L[victim] released for us */
	for (int i = nheld - 1; i >= 0; i--)
		if (i != out_of_order && i != victim)
			rqspin_unlock(&L[i]);
	if (rqspin_held_locks()->cnt != 0) {
		fprintf(stderr, "owner holds nothing, table count %u\n", rqspin_held_locks()->cnt);
		CHECK(rqspin_held_locks()->cnt == 0);
	}
	pthread_barrier_wait(&step); /* the other thread holds V */
	t0 = tu_now_ns();
	rqspin_unlock(&V);
	CHECK(tu_now_ns() - t0 < TIMEOUT / 2);
	pthread_barrier_wait(&step);
	tu_thread_join(t);
	for (int i = 0; i < NLOCKS; i++)
		CHECK(!rqspin_is_locked(&L[i]));
}

int main(void)
{
	rqspinlock_t a = RQSPINLOCK_INIT;
	uint64_t t0;

	CHECK(rqspin_set_default_timeout(TIMEOUT) == 0);
	CHECK(pthread_barrier_init(&step, NULL, 2) == 0);
	for (int i = 0; i < NLOCKS; i++)
		rqspin_lock_init(&L[i]);
	round_trip(RQSPIN_NR_HELD + 1, -1, RQSPIN_NR_HELD);    /* past */
	round_trip(RQSPIN_NR_HELD + 2, 4, RQSPIN_NR_HELD);     /* moved */
	for (int r = 0; r < RQSPIN_NR_HELD; r++)
		round_trip(RQSPIN_NR_HELD + 1, -1, RQSPIN_NR_HELD);
	CHECK(rqspin_lock(&a) == 0);
	t0 = tu_now_ns();
	CHECK(rqspin_lock_timeout(&a, TIMEOUT) == -EDEADLK);
	CHECK(tu_now_ns() - t0 < TIMEOUT / 2);
	rqspin_unlock(&a);
	CHECK(rqspin_held_locks()->cnt == 0);
	printf("rqspin_cross_unlock_untracked: ok\n");
	return 0;
}
