/* SPDX-License-Identifier: MIT */
/*
 * The lock call of the drop-in pthread_spin shim (librqspin-pthread.so):
 * rqspinlock with barging (slowpath.c, "Barging"). Exported for the shim
 * only; not part of the API.
 */
#ifndef RQSPIN_BARGING_H
#define RQSPIN_BARGING_H

#include <rqspin/rqspinlock.h>

/* Words a barger must not touch: held (or owner-dead), hand-off asked,
 * or process-shared (its own protocol). */
#define RQSPIN__BARGE_KEEP_OUT                                                                 \
	(RQSPIN__LOCKED_MASK | RQSPIN__HANDOFF_VAL | RQSPIN__PSHARED_MARK)

/* rqspin__lock_slowpath, barging: the held entry is pushed; val is the
 * word the caller's CAS saw. Same returns as rqspin_lock. */
RQSPIN_API int rqspin__lock_slowpath_barging(rqspinlock_t *lock, uint32_t val,
					     uint64_t timeout_ns);

#endif
