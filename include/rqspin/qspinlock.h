/* SPDX-License-Identifier: MIT */
/*
 * qspinlock: a userspace port of the Linux kernel's queued spinlock.
 *
 * A 4-byte lock (the size of pthread_spinlock_t); zero is unlocked. The
 * uncontended lock is one acquire compare-and-swap, the unlock one release
 * store. Contended waiters use a pending bit and then an MCS queue of
 * per-thread nodes (one per signal-nesting level); they spin for a short
 * budget and then stop burning the CPU (queued waiters sleep on a futex), so
 * the lock does not collapse when threads outnumber cores.
 *
 * qspinlock never fails and has no deadlock detection: taking a lock the
 * caller already holds (for instance from a signal handler that interrupted
 * the holder) waits forever, exactly as the kernel's spinlock does. Use
 * rqspinlock (rqspinlock.h) where that can happen. Likewise, in a child of
 * fork() a qspinlock that another thread held or waited for at the time of
 * the fork is never released (as with pthread mutexes); locks that were
 * free work normally.
 *
 * Memory ordering: qspin_lock/qspin_trylock (on success) are acquire
 * operations and qspin_unlock is a release operation, so everything done
 * inside one critical section happens-before the next holder's.
 */
#ifndef RQSPIN_QSPINLOCK_H
#define RQSPIN_QSPINLOCK_H

#include <stdbool.h>
#include <rqspin/defs.h>
/* The lock word's layout (the type below embeds it). */
#include <rqspin/static/lock_word.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qspinlock {
	union rqspin__word w;
} qspinlock_t;

#define QSPINLOCK_INIT { { 0 } }

/*
 * Initialise (or re-initialise) an unlocked lock. Equivalent to
 * QSPINLOCK_INIT or zero-filled memory. Must not race with users of the
 * lock. Async-signal-safe.
 */
static inline void qspin_lock_init(qspinlock_t *lock);

/*
 * Acquire the lock, waiting as long as it takes (see the file comment).
 * Async-signal-safe in the sense that it keeps no state a handler could
 * corrupt, and a handler may take *other* qspinlocks while the interrupted
 * code holds or waits for one (up to 4 nesting levels queue normally;
 * deeper levels spin on the lock word). A handler that takes a lock its
 * interrupted code holds deadlocks: use rqspinlock for that.
 * lock must not be NULL (debug builds abort with a message).
 */
static inline void qspin_lock(qspinlock_t *lock);

/*
 * Try once to acquire the lock. Returns true when acquired. It fails when
 * the lock is held, when a waiter is pending or queued (it never jumps a
 * queue that has waiters), never spins. Async-signal-safe; never deadlocks.
 */
static inline bool qspin_trylock(qspinlock_t *lock);

/*
 * Release the lock: a single release store of the locked byte (waiters
 * watch the word themselves; nobody needs a wake-up from here). Any thread
 * may release a lock, not only the one that took it. Releasing a lock that
 * is not held is a bug: debug builds abort with a message; release builds
 * store zero, which is harmless on a free lock but breaks mutual exclusion
 * if another thread has meanwhile taken it. Async-signal-safe.
 */
static inline void qspin_unlock(qspinlock_t *lock);

/* True when the lock is held (a snapshot: for assertions and statistics).
 * Async-signal-safe. */
static inline bool qspin_is_locked(const qspinlock_t *lock);

#ifdef __cplusplus
}
#endif

/* The definitions of the inline functions above. */
#include <rqspin/static/qspinlock.h>

#endif /* RQSPIN_QSPINLOCK_H */
