/* SPDX-License-Identifier: MIT */
/*
 * The process-shared lock protocol (the word's encoding and its limits are
 * documented with rqspin_lock_init_pshared in rqspinlock.h). The private
 * slow path hands a word with RQSPIN__PSHARED_MARK over to here.
 */
#ifndef RQSPIN_PSHARED_H
#define RQSPIN_PSHARED_H

#include <stdint.h>

#include <rqspin/rqspinlock.h>

/* rqspin__lock_slowpath for a marked word: the caller's held entry is
 * pushed; on failure it is dropped here. val is the word the fast path's
 * CAS saw; timeout_ns is T (never 0). Same returns as rqspin_lock. */
int rqs_pshared_lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns);

#endif
