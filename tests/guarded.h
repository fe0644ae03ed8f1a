/* SPDX-License-Identifier: MIT */
/*
 * A record whose invariants hold only outside its critical section: a == b,
 * and arr[] sums to sum_check. The update checks them on entry, breaks them,
 * dawdles and restores them, so two threads inside at once are caught in
 * the act, not only through a lost update at the end. Plain (volatile)
 * fields: the lock alone must order them.
 */
#ifndef RQSPIN_TEST_GUARDED_H
#define RQSPIN_TEST_GUARDED_H

#include <stdint.h>
#include <string.h>

#include <rqspin/qspinlock.h>

#include "test_util.h"

#define GUARDED_NARR 8

struct guarded {
	qspinlock_t lock;
	volatile uint64_t a;
	volatile uint64_t b;
	volatile uint32_t arr[GUARDED_NARR];
	volatile uint32_t sum_check;
} __attribute__((aligned(128)));

static inline void guarded_init(struct guarded *g)
{
	memset((void *)g, 0, sizeof(*g));
	qspin_lock_init(&g->lock);
}

/* The critical section body; the caller holds g->lock. spin_mask bounds
 * the random delay while the invariants are broken. */
static inline void guarded_update(struct guarded *g, uint32_t r, uint32_t spin_mask)
{
	uint64_t a = g->a;
	uint32_t sum = 0;

	CHECK(a == g->b);
	for (int i = 0; i < GUARDED_NARR; i++)
		sum += g->arr[i];
	CHECK(sum == g->sum_check);
	g->a = a + 1;
	g->arr[r % GUARDED_NARR] += r;
	for (volatile uint32_t spin = 0; spin < (r & spin_mask); spin++)
		;
	g->sum_check = sum + r;
	g->b = g->b + 1;
	CHECK(g->a == g->b);
}

/* Lock, update, unlock. */
static inline void guarded_locked_update(struct guarded *g, uint32_t r, uint32_t spin_mask)
{
	qspin_lock(&g->lock);
	guarded_update(g, r, spin_mask);
	qspin_unlock(&g->lock);
}

#endif
