/* SPDX-License-Identifier: MIT */
/* Held-lock tables: AA checks and bookkeeping (rqspinlock only). */
#ifndef RQSPIN_HELD_H
#define RQSPIN_HELD_H

#include <stdbool.h>
#include <stdint.h>

#include "lock/registry.h"

/* Entries [0, n) of t's table are locks t holds (or, for the top entry
 * when t is acquiring, the lock it waits for); see held_tracked(). */
static inline uint32_t held_count(const struct rqspin_thread *t)
{
	return __atomic_load_n(&t->hot.held.cnt, __ATOMIC_RELAXED);
}

static inline const void *held_entry(const struct rqspin_thread *t, uint32_t i)
{
	return __atomic_load_n(&t->hot.held.locks[i], __ATOMIC_RELAXED);
}

/* Is lock among the locks t holds, not counting the top entry (t's
 * current attempt)? With more than RQSPIN_NR_HELD locks the attempt was
 * not recorded, so all recorded entries are held locks. */
bool held_contains(const struct rqspin_thread *t, uint32_t cnt, const void *lock);

/* AA: the calling thread already holds lock. */
static inline bool held_aa(const struct rqspin_thread *self, const void *lock)
{
	return held_contains(self, held_count(self), lock);
}

/* Drop the top entry after a failed acquisition. The entry is cleared
 * and a release fence orders that before the count update, so a remote
 * thread cannot see the count reused for a new lock while this stale
 * entry is still visible (a false ABBA; the kernel's smp_wmb). */
void held_release_entry(struct rqspin_thread *self);

#endif
