/* SPDX-License-Identifier: MIT */
/* ABBA and longer deadlock cycles, found through the held-lock tables. */
#ifndef RQSPIN_DEADLOCK_H
#define RQSPIN_DEADLOCK_H

#include <rqspin/lock_diag.h>

#include "lock/registry.h"

/*
 * Does waiting for lock close a cycle back to self? Follows holders: the
 * thread holding lock, the lock that thread waits for (the top entry of
 * its table), that lock's holder, and so on, for up to
 * RQSPIN_REPORT_MAX_CYCLE threads. A cycle is found when a thread on the
 * chain waits for a lock self holds. Returns 0 (none, or inconclusive),
 * RQSPIN_EV_ABBA (two threads) or RQSPIN_EV_CYCLE (three or more), and
 * then fills rep->threads/nthreads when rep is not NULL.
 *
 * The tables are read without locks, so a result can be stale; the chain
 * is walked twice and must agree, and both walks require each lock to be
 * locked when read. A rare false positive between threads that were
 * about to deadlock is accepted, as in the kernel.
 */
int deadlock_find(const struct rqspin_thread *self, const void *lock, struct rqspin_report *rep);

/* Copy t's identity and table into a report entry. */
void report_fill_thread(struct rqspin_report_thread *out, const struct rqspin_thread *t,
			const void *waits_for);

#endif
