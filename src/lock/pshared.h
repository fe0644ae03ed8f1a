/* SPDX-License-Identifier: MIT */
/*
 * The process-shared lock protocol (the word's encoding and its limits are
 * documented with rqspin_lock_init_pshared in rqspinlock.h). The private
 * slow path hands a word with RQSPIN__PSHARED_MARK over to here.
 */
#ifndef RQSPIN_PSHARED_H
#define RQSPIN_PSHARED_H

#include <stdbool.h>
#include <stdint.h>

#include <rqspin/rqspinlock.h>

/* rqspin__lock_slowpath for a marked word: the caller's held entry is
 * pushed; on failure it is dropped here. val is the word the fast path's
 * CAS saw; timeout_ns is T (never 0). Same returns as rqspin_lock. */
int rqs_pshared_lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns);

struct rqspin_thread;

/* Could t hold lock, as its word says? True for a private word (it names
 * nobody), and for a process-shared one held under t's thread id (or
 * when t's id is too large to be stored). A thread of another process
 * that unlocks a process-shared lock cannot post the release to the
 * locker's table: the word is the truth for such an entry. */
bool rqs_pshared_may_hold(const void *lock, const struct rqspin_thread *t);

#endif
