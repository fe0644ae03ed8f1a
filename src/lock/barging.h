/* SPDX-License-Identifier: MIT */
/*
 * The lock call of the drop-in pthread_spin shim (librqspin-pthread.so):
 * rqspinlock with barging (slowpath.c, "Barging"). Exported for the shim
 * only; not part of the API.
 */
#ifndef RQSPIN_BARGING_H
#define RQSPIN_BARGING_H

#include <stdbool.h>
#include <stdint.h>

#include <rqspin/rqspinlock.h>

/* Words a barger must not touch: held (or owner-dead), hand-off asked,
 * or process-shared (its own protocol). */
#define RQSPIN__BARGE_KEEP_OUT                                                                 \
	(RQSPIN__LOCKED_MASK | RQSPIN__HANDOFF_VAL | RQSPIN__PSHARED_MARK)

/* How a barging slow path took the lock. */
#define RQSPIN__TOOK_IN_LINE 0 /* waited as the pending waiter or in the queue */
#define RQSPIN__TOOK_FREE 1    /* took it free, no queue waiting */
#define RQSPIN__TOOK_AHEAD 2   /* took it ahead of a queue */

/* rqspin__lock_slowpath, barging: the held entry is pushed; val is the
 * word the caller's CAS saw. in_line: take the lock ahead of no waiter,
 * queue behind them (the caller's turn is over, pthread_shim.c "Turns").
 * *took: on success, one of RQSPIN__TOOK_*. Same returns as rqspin_lock. */
RQSPIN_API int rqspin__lock_slowpath_barging(rqspinlock_t *lock, uint32_t val,
					     uint64_t timeout_ns, bool in_line, uint8_t *took);

/* The shim's exchange of the locked byte found a dead holder's mark and
 * so took the lock over (pthread_shim.c, take_byte): count and report it
 * as the slow path's take-over does. Returns -EOWNERDEAD. */
RQSPIN_API int rqspin__owner_dead_taken(rqspinlock_t *lock);

#endif
