/* SPDX-License-Identifier: MIT */
#include <stddef.h>

#include <rqspin/rqspinlock.h>

#include "lock/held.h"

bool held_contains(const struct rqspin_thread *t, uint32_t cnt, const void *lock)
{
	uint32_t n = cnt <= RQSPIN_NR_HELD ? (cnt ? cnt - 1 : 0) : RQSPIN_NR_HELD;
	uint32_t i;

	for (i = 0; i < n; i++)
		if (held_entry(t, i) == lock)
			return true;
	return false;
}

void held_release_entry(struct rqspin_thread *self)
{
	uint32_t cnt = held_count(self);

	if (cnt == 0)
		return;
	if (cnt <= RQSPIN_NR_HELD)
		__atomic_store_n(&self->hot.held.locks[cnt - 1], NULL, __ATOMIC_RELAXED);
	/* release fence: the NULL store above is ordered before the count
	 * store below for every thread that reads the count (and then the
	 * entries) — the kernel's smp_wmb in release_held_lock_entry. */
	atomic_thread_fence(memory_order_release);
	__atomic_store_n(&self->hot.held.cnt, cnt - 1, __ATOMIC_RELAXED);
}

/* Unlock of a lock that is not the top entry: LIFO was not kept, or the
 * lock is not in the table at all. Remove the newest matching entry and
 * close the gap; a lock not found is left alone (it was not taken by this
 * thread, or is beyond the tracked entries). */
void rqspin__held_remove(struct rqspin__thread_hot *hot, const void *lock)
{
	struct rqspin_thread *self = (struct rqspin_thread *)hot;
	uint32_t cnt = held_count(self);
	uint32_t n = cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;
	uint32_t i;

	for (i = n; i-- > 0;) {
		if (held_entry(self, i) != lock)
			continue;
		/* A signal handler landing during the shift sees a duplicate
		 * entry of a lock we hold anyway, and pushes above cnt. */
		for (; i + 1 < n; i++)
			__atomic_store_n(&self->hot.held.locks[i], held_entry(self, i + 1),
					 __ATOMIC_RELAXED);
		__atomic_store_n(&self->hot.held.locks[n - 1], NULL, __ATOMIC_RELAXED);
		atomic_signal_fence(memory_order_seq_cst);
		__atomic_store_n(&self->hot.held.cnt, cnt - 1, __ATOMIC_RELAXED);
		return;
	}
}

/* The thread is gone: whatever it still holds is abandoned. The lock
 * byte becomes RQSPIN__LOCKED_OWNER_DEAD so the next waiter takes the lock
 * over with -EOWNERDEAD instead of waiting for a timeout.
 *
 * At thread exit every entry is a held lock. In a forked child the thread
 * vanished mid-flight, and its top entry may be an attempt on a lock that
 * someone else holds; in the child that someone is either another vanished
 * thread (the lock is dead too) or the forking thread, keep_mine, whose
 * locks are spared (all of them must be tracked to know: with an
 * overflowed table, attempts are left alone). */
void held_abandon(struct rqspin_thread *t, const struct rqspin_thread *keep_mine)
{
	uint32_t cnt = held_count(t);
	uint32_t n = cnt < RQSPIN_NR_HELD ? cnt : RQSPIN_NR_HELD;
	uint32_t i;

	for (i = 0; i < n; i++) {
		union rqspin__word *w = (union rqspin__word *)held_entry(t, i);
		uint32_t val;

		if (!w)
			continue;
		if (keep_mine && i == cnt - 1 &&
		    (held_count(keep_mine) > RQSPIN_NR_HELD ||
		     held_contains(keep_mine, held_count(keep_mine) + 1, w)))
			continue;
		val = __atomic_load_n(&w->val, __ATOMIC_RELAXED);
		/* release: whatever the dead thread wrote under the lock is
		 * visible to the waiter that takes it over (acquire CAS). */
		while ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL) {
			if (__atomic_compare_exchange_n(&w->val, &val,
							(val & ~RQSPIN__LOCKED_MASK) |
								RQSPIN__LOCKED_OWNER_DEAD,
							1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
				/* At thread exit we run on the owner: tell TSan
				 * it let go, so the takeover is no double lock. */
				if (!keep_mine) {
					RQSPIN__TSAN_PRE_UNLOCK(w);
					RQSPIN__TSAN_POST_UNLOCK(w);
				}
				break;
			}
		}
		__atomic_store_n(&t->hot.held.locks[i], NULL, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&t->hot.held.cnt, 0, __ATOMIC_RELAXED);
}

const struct rqspin_held_locks *rqspin_held_locks(void)
{
	return &rqspin__self()->held;
}
