/* SPDX-License-Identifier: MIT */
/* ABBA and longer deadlock cycles, found through the held-lock tables. */
#ifndef RQSPIN_DEADLOCK_H
#define RQSPIN_DEADLOCK_H

#include <rqspin/lock_diag.h>

#include "lock/registry.h"

/* The threads a waiter depends on: chain[0] is the waiter, chain[k+1]
 * holds waits[k], and waits[k+1] is what chain[k+1] waits for. */
struct deadlock_chain {
	unsigned n;
	const struct rqspin_thread *thread[RQSPIN_REPORT_MAX_CYCLE];
	const void *waits[RQSPIN_REPORT_MAX_CYCLE];
};

/*
 * Can waiting for lock ever succeed? Follows holders: the thread holding
 * lock, the lock that thread waits for (the top entry of its table), that
 * lock's holder, and so on, for up to RQSPIN_REPORT_MAX_CYCLE threads.
 *
 * Returns RQSPIN_EV_ABBA or RQSPIN_EV_CYCLE (by the cycle's length) when
 * the chain closes: either back on self (self is in the cycle), or on a
 * thread further along — then self waits behind a cycle of threads that
 * will never release (typically queued waiters behind other heads, which
 * do not check for deadlocks themselves), and failing self with -EDEADLK
 * lets a member of that cycle reach the front of its queue and break it.
 * Returns 0 when there is no cycle or the result is inconclusive; fills
 * *chain (may be NULL) on a find.
 *
 * The tables are read without locks, so a result can be stale; the chain
 * is walked twice and must agree, and both walks require each lock to be
 * busy (held or pending) when read. A rare false positive between threads that were
 * about to deadlock is accepted, as in the kernel.
 */
int deadlock_find(const struct rqspin_thread *self, const void *lock,
		  struct deadlock_chain *chain);

/* Copy t's identity and table into a report entry. */
void report_fill_thread(struct rqspin_report_thread *out, const struct rqspin_thread *t,
			const void *waits_for);

#endif
