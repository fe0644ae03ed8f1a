/* SPDX-License-Identifier: MIT */
/* Held-lock tables: AA checks and bookkeeping (rqspinlock only). See held.c
 * for who writes a table and the states of its entries. */
#ifndef RQSPIN_HELD_H
#define RQSPIN_HELD_H

#include <stdbool.h>
#include <stdint.h>

#include <rqspin/rqspinlock.h>

#include "lock/registry.h"

static inline uint32_t held_count(const struct rqspin_thread *t)
{
	return __atomic_load_n(&t->hot.held.cnt, __ATOMIC_RELAXED);
}

/* For another thread's table. acquire: pairs with the release store of
 * the count in rqs_held_release_entry, so entries read after this see at
 * least what the owner cleared before that count. */
static inline uint32_t held_count_acquire(const struct rqspin_thread *t)
{
	return __atomic_load_n(&t->hot.held.cnt, __ATOMIC_ACQUIRE);
}

static inline const void *held_entry(const struct rqspin_thread *t, uint32_t i)
{
	return __atomic_load_n(&t->hot.held.locks[i], __ATOMIC_RELAXED);
}

/* The lock an entry names, attempt or hold (RELEASED and NULL as they are). */
static inline const void *entry_lock(const void *e)
{
	return (const void *)((uintptr_t)e & ~RQSPIN__HELD_ATTEMPT);
}

static inline bool entry_is_attempt(const void *e)
{
	return ((uintptr_t)e & RQSPIN__HELD_ATTEMPT) != 0;
}

static inline const void *attempt_entry(const void *lock)
{
	return (const void *)((uintptr_t)lock | RQSPIN__HELD_ATTEMPT);
}

static inline const void *held_waiting_for(const struct rqspin_thread *t)
{
	return atomic_load_explicit(&t->waiting_for, memory_order_relaxed);
}

/* Does t's table say t holds lock? Entries of either kind count; attempt:
 * t's newest entry for lock is the acquisition in progress, not a hold.
 * Cross-thread releases posted to t are subtracted. Untracked holds (past
 * the table) are invisible. */
bool rqs_held_by(const struct rqspin_thread *t, const void *lock, bool attempt);

/* Does t's table show a plain entry for lock (not one marked as the
 * slow path's attempt), beyond the releases posted to t? */
bool rqs_held_owns(const struct rqspin_thread *t, const void *lock);

/* Read by another thread: did t's hold of lock begin before its wait for
 * waiting (its waiting_for)? A hold recorded above that wait's entry is a
 * signal handler's, taken on its fast path while the wait it interrupted
 * stays published: t runs that handler, and will release the lock, so it
 * is no link of a deadlock. An attempt entry below the wait counts (an
 * interrupted wait's pending bit blocks like a hold, as in rqs_held_by).
 * True when the table cannot tell (the wait's entry past the table). */
bool rqs_held_while_waiting(const struct rqspin_thread *t, const void *lock, const void *waiting);

/* Before a slow path waits (pending bit, queue, the entry watch past its
 * first 64 pauses, the shim's watch past 20 us): our entry for lock (the
 * top one) is marked as an attempt, so that no other thread takes us for
 * its holder while we wait (a signal handler that interrupts the wait
 * replaces waiting_for). Not on entry to the slow path, nor before its
 * steal spins: marking there cost 35% of rqspin's throughput at 4-8
 * threads (the later take of the lock shifted the acquisitions from
 * steals to the queue). */
void rqs_held_mark_attempt(struct rqspin_thread *self, const void *lock);

/* Is our newest entry for lock its attempt? */
bool rqs_held_newest_marked(const struct rqspin_thread *self, const void *lock);

/* Is our top entry lock's attempt, marked by the caller of a slow path
 * (the shim's watch)? */
static inline bool rqs_held_top_marked(const struct rqspin_thread *self, const void *lock)
{
	uint32_t cnt = held_count(self);
	const void *top;

	if (!cnt || cnt > RQSPIN_NR_HELD)
		return false;
	top = held_entry(self, cnt - 1);
	/* In a full table our entry may have taken over a mark below the
	 * top (rqspin__held_push_full): the newest entry for lock. */
	if (cnt == RQSPIN_NR_HELD && entry_lock(top) != lock)
		return rqs_held_newest_marked(self, lock);
	return top == attempt_entry(lock);
}

/* The slow path took the lock: its attempt entry becomes a hold. */
void rqs_held_confirm(struct rqspin_thread *self, const void *lock);

/* Might t hold any lock besides its attempt? (A thread that holds nothing
 * is in no deadlock cycle.) */
bool rqs_held_holds_any_slow(const struct rqspin_thread *t, bool attempt);

/* The slow path asks both questions below on every call; with one entry
 * (the common case: the lock being taken) the answers need no call. At
 * 4-8 threads on 2 CPUs nearly every acquisition goes through the slow
 * path, between two other threads' critical sections. */
static inline bool rqs_held_holds_any(const struct rqspin_thread *t, bool attempt)
{
	uint32_t cnt = held_count(t);

	if (cnt == 0 || (attempt && cnt == 1))
		return false;
	return rqs_held_holds_any_slow(t, attempt);
}

/* AA: the calling thread, acquiring lock, already holds it. rqs_held_by
 * discounts the newest entry naming lock (the attempt), so a tracked
 * table with at most one such entry answers no. */
static inline bool held_aa(const struct rqspin_thread *self, const void *lock)
{
	uint32_t cnt = held_count(self), i, n = 0;

	if (cnt <= RQSPIN_NR_HELD) {
		for (i = 0; i < cnt; i++)
			n += entry_lock(held_entry(self, i)) == lock;
		if (n <= 1)
			return false;
	}
	return rqs_held_by(self, lock, true);
}

/* Remove the hold entries (not attempts) of lock from our table but the
 * newest `keep`: the caller saw the word of this process-shared lock free
 * or naming another holder, so another process released the lock for us.
 * The newest hold entry below the caller's own must stay: it may be a
 * lock or unlock call of the code a signal handler interrupted, between
 * its push and its CAS or its release store and its pop. A release that a
 * thread of this process posted for us is consumed first. */
/* Note a process-shared lock the thread has just taken
 * (rqspin_thread.pshared_taken); async-signal-safe. */
void rqs_held_note_pshared(struct rqspin_thread *self, const void *lock);

void rqs_held_drop_stale(struct rqspin_thread *self, const void *lock, uint32_t keep);

/* Drop our entry for lock after a failed acquisition (the top one, or
 * released in place when it is not on top). */
void rqs_held_release_entry(struct rqspin_thread *self, const void *lock);

/* In a forked child: turn a vanished thread's entry for lock into a
 * RELEASED mark. True for the one caller that did (it owns the repair). */
bool rqs_held_claim_ghost_entry(struct rqspin_thread *ghost, const void *lock);

/*
 * Locks that exited threads held past their tables (untracked: counted,
 * not named), and were not released since. rqs_held_abandon counts them;
 * a waiter that finds its lock held by nobody may take one of them over
 * (slowpath.c, orphan_repair) when rqs_held_untracked_anywhere() says no
 * live or vanished thread holds untracked locks: then nobody but an
 * exited thread can hold it. rqs_held_orphan_take consumes one (false if
 * there is none), rqs_held_orphan_return gives it back.
 */
uint64_t rqs_held_orphans(void);
bool rqs_held_untracked_anywhere(void);
bool rqs_held_orphan_take(void);
void rqs_held_orphan_return(void);

/* Mark the entries other threads released (their posted cells). */
void rqs_held_drain_slow(struct rqspin_thread *self);

static inline void rqs_held_drain(struct rqspin_thread *self)
{
	/* acquire: as in posted() (held.c). */
	if (atomic_load_explicit(&self->nposted, memory_order_acquire))
		rqs_held_drain_slow(self);
}

#endif
