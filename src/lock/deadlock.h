/* SPDX-License-Identifier: MIT */
/* ABBA and longer deadlock cycles, found through the held-lock tables. */
#ifndef RQSPIN_DEADLOCK_H
#define RQSPIN_DEADLOCK_H

#include <rqspin/lock_diag.h>

#include "lock/held.h"
#include "lock/registry.h"

/* The threads a waiter depends on: chain[0] is the waiter, chain[k+1]
 * holds waits[k], and waits[k+1] is what chain[k+1] waits for. */
struct deadlock_chain {
	unsigned n;
	const struct rqspin_thread *thread[RQSPIN_REPORT_MAX_CYCLE];
	const void *waits[RQSPIN_REPORT_MAX_CYCLE];
};

/*
 * Is the caller, waiting for lock, part of a deadlock cycle? Follows
 * holders: the thread holding lock, the lock that thread waits for (its
 * waiting_for), that lock's holder, and so on, for up to
 * RQSPIN_REPORT_MAX_CYCLE threads, until the chain comes back to a lock
 * the caller holds.
 *
 * Only cycles through the caller count: a bystander queued behind a cycle
 * never fails; the members find the cycle themselves, since every cycle is
 * closed by the last member to start waiting, and each waiter searches
 * before it waits (after a full fence that follows its attempt entry, so
 * of two members that start to wait at once, at least one sees the other).
 * A caller that holds no other lock is in no cycle: returns 0 at once.
 *
 * Returns RQSPIN_EV_ABBA or RQSPIN_EV_CYCLE (by the cycle's length), or 0
 * when there is no cycle or the result is inconclusive; fills *chain (may
 * be NULL) on a find. The tables are read without locks, so each link of
 * the chain is read again after the walk and must agree, and each lock
 * must be busy when read.
 */
int rqs_deadlock_find(struct rqspin_thread *self, const void *lock, struct deadlock_chain *chain);

/* What a waiter publishes for the searches of other threads: the lock it
 * waits for and, when it holds another lock, its candidate bit. The
 * previous values (of the code a signal handler interrupted) are kept in
 * the token and restored by rqs_deadlock_wait_end. */
struct wait_token {
	const void *prev_waiting;
	bool holding;   /* holds another lock: may be in a cycle */
	bool candidate; /* this call set the candidate bit */
};
/* Inline: every slow-path call makes both (see rqs_held_holds_any). */
static inline void rqs_deadlock_wait_begin(struct rqspin_thread *self, const void *lock,
					   struct wait_token *t)
{
	t->prev_waiting = held_waiting_for(self);
	t->candidate = false;
	atomic_store_explicit(&self->waiting_for, lock, memory_order_relaxed);
	t->holding = rqs_held_holds_any(self, true);
	if (t->holding && self->slot != NO_SLOT)
		t->candidate = rqs_registry_candidate_mark(self->slot);
}

static inline void rqs_deadlock_wait_end(struct rqspin_thread *self, struct wait_token *t)
{
	if (t->candidate) {
		rqs_registry_candidate_clear(self->slot);
		t->candidate = false;
	}
	atomic_store_explicit(&self->waiting_for, t->prev_waiting, memory_order_relaxed);
}

/* A live thread other than self whose table says it holds lock, or NULL. */
const struct rqspin_thread *rqs_deadlock_holder(const struct rqspin_thread *self, const void *lock);
/* A thread in slot state `state`, other than self, waiting for lock in
 * role `role` (ROLE_NONE: any role), or NULL. */
const struct rqspin_thread *rqs_deadlock_waiter(const struct rqspin_thread *self, const void *lock,
					    uint32_t state, uint32_t role);
/* A live thread other than self that waits for lock in a role that can
 * take it (pending, no-node, or between its entry and its queueing): it
 * may hold it already while it still shows its wait. NULL if none. */
const struct rqspin_thread *rqs_deadlock_live_taker(const struct rqspin_thread *self,
						const void *lock);
/* A thread that vanished in fork() and still holds lock, or NULL. */
const struct rqspin_thread *rqs_deadlock_ghost_holder(const void *lock);
/* A thread that vanished in fork() whose newest entry for lock is still
 * its attempt (it waited for lock): it may have taken the lock before it
 * could withdraw the wait. NULL if none. */
const struct rqspin_thread *rqs_deadlock_ghost_taker(const void *lock);

/* A failed attempt of self on lock: count it by event (a thread_stats
 * counter), and build its report: the chain a cycle search found (not a
 * new walk: the other members may have backed out by now), else self. */
void rqs_failure_count(struct rqspin_thread *self, int event);
void rqs_failure_report_build(struct rqspin_report *rep, int event, int error, const void *lock,
			  uint64_t waited_ns, const struct rqspin_thread *self,
			  const struct deadlock_chain *chain);

/* Copy t's identity and table into a report entry. */
void rqs_report_fill_thread(struct rqspin_report_thread *out, const struct rqspin_thread *t,
			const void *waits_for);

#endif
