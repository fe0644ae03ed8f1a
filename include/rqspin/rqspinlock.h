/* SPDX-License-Identifier: MIT */
/*
 * rqspinlock: the resilient queued spinlock. The same 4-byte lock word and
 * queue as qspinlock, but an acquisition that cannot complete returns an
 * error instead of hanging:
 *
 *   0            acquired.
 *   -EDEADLK     deadlock: the caller already holds the lock (AA, e.g. a
 *                signal handler that interrupted the holder or a waiter),
 *                two threads wait for each other's locks (ABBA), or a longer
 *                cycle of threads does (A->B->C->A), or the lock is held
 *                by such a cycle; or the caller is a signal handler that
 *                interrupted this thread's own queued wait for a lock, and
 *                its single try failed (the kernel's rule for NMIs: the
 *                interrupted waiter may be a link its queue needs, so the
 *                handler must not wait). Not acquired.
 *   -ETIMEDOUT   the lock made no progress for the timeout. Not acquired.
 *   -EOWNERDEAD  the previous holder thread exited while holding the lock.
 *                The lock IS acquired by the caller (as with a robust
 *                pthread mutex): the data it protects may be inconsistent;
 *                repair or discard it, then rqspin_unlock().
 *
 * After any failure the lock stays usable. Timeouts follow the kernel: a
 * pending waiter gives up after the timeout T, the queue head after 2T,
 * waiters queued behind the head leave when the head does (in FIFO order);
 * the no-queue fallback (more threads than the registry can hold) after 4T.
 * T is the process default (250 ms, see rqspin_set_default_timeout and the
 * RQSPIN_TIMEOUT_MS environment variable) unless given per call.
 *
 * In a child of fork(), rqspinlocks that vanished threads held become
 * owner-dead (-EOWNERDEAD for the next taker); a waiter that would queue
 * behind a vanished waiter gets -ETIMEDOUT at once.
 *
 * Each thread records the rqspinlocks it holds in a 31-entry table (other
 * threads read it to find deadlocks). Release locks in the reverse order of
 * acquisition (LIFO): debug builds abort on an out-of-order unlock; release
 * builds handle it correctly at a small cost. Locks held beyond the 31st
 * are not tracked: a deadlock involving them ends in -ETIMEDOUT.
 */
#ifndef RQSPIN_RQSPINLOCK_H
#define RQSPIN_RQSPINLOCK_H

#include <errno.h>
#include <signal.h>
#include <rqspin/lock_common.h>
/* sigset_t is POSIX; a strict -std=c11 build of glibc's <signal.h> hides
 * it, so take it from where glibc defines it. */
#if defined(__GLIBC__) && !defined(__sigset_t_defined)
#include <bits/types/sigset_t.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rqspinlock {
	union rqspin__word w;
} rqspinlock_t;

#define RQSPINLOCK_INIT { { 0 } }

/* Pass as timeout_ns to use the process-wide default. */
#define RQSPIN_TIMEOUT_DEFAULT 0ull
/* The kernel's default, RES_DEF_TIMEOUT. */
#define RQSPIN_DEFAULT_TIMEOUT_NS 250000000ull

/* ABI for the inline functions below (the held entry is already pushed). */
RQSPIN_API int rqspin__lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns);
RQSPIN_API void rqspin__held_remove(struct rqspin__thread_hot *self, const void *lock);

static inline void rqspin__held_push(struct rqspin__thread_hot *self, const void *lock)
{
	uint32_t cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);

	/* Only this thread and its own signal handlers write the table. A
	 * handler that runs between the load and the store pushes and pops
	 * its own entries and leaves cnt as it found it, so a plain
	 * load/store pair is enough (no RMW). The count must be published
	 * to our handlers before the entry is written, else a handler could
	 * take the same index and clear it on its way out: the signal fence
	 * is that compiler barrier. Remote readers only look below cnt and
	 * tolerate stale entries, so relaxed ordering suffices for them. */
	__atomic_store_n(&self->held.cnt, cnt + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (RQSPIN__LIKELY(cnt < RQSPIN_NR_HELD))
		__atomic_store_n(&self->held.locks[cnt], lock, __ATOMIC_RELAXED);
}

static inline void rqspin__held_pop(struct rqspin__thread_hot *self, const void *lock)
{
	uint32_t cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);

	if (RQSPIN__UNLIKELY(cnt == 0 || (cnt <= RQSPIN_NR_HELD &&
					  __atomic_load_n(&self->held.locks[cnt - 1],
							  __ATOMIC_RELAXED) != lock))) {
		rqspin__held_remove(self, lock); /* out of order, or not held */
		return;
	}
	if (cnt <= RQSPIN_NR_HELD)
		__atomic_store_n(&self->held.locks[cnt - 1], (const void *)0, __ATOMIC_RELAXED);
	/* Mirror of push: the entry is cleared before our handlers can see
	 * the index as free. No hardware barrier: the kernel's final unlock
	 * accepts that a remote reader may briefly see a stale entry (a rare
	 * false ABBA between threads that were about to deadlock anyway). */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.cnt, cnt - 1, __ATOMIC_RELAXED);
}

/*
 * Initialise an unlocked lock (same as RQSPINLOCK_INIT or zeroed memory).
 * Must not race with users of the lock. Async-signal-safe.
 */
static inline void rqspin_lock_init(rqspinlock_t *lock)
{
	__atomic_store_n(&lock->w.val, 0, __ATOMIC_RELAXED);
}

/*
 * Acquire the lock, giving up with an error after timeout_ns (the pending
 * waiter's budget; see the file comment; RQSPIN_TIMEOUT_DEFAULT for the
 * process default). Returns 0, -EDEADLK, -ETIMEDOUT or -EOWNERDEAD as in
 * the file comment; -EINVAL for a NULL lock.
 * Async-signal-safe: a handler may call it at any point, including while
 * the interrupted code holds or waits for the same lock (-EDEADLK, at
 * once), and it never hangs.
 */
RQSPIN_MUST_CHECK static inline int rqspin_lock_timeout(rqspinlock_t *lock, uint64_t timeout_ns)
{
	struct rqspin__thread_hot *self = rqspin__self();
	uint32_t val = 0;
	int ret = 0;

	if (RQSPIN__UNLIKELY(!lock))
		return -EINVAL;
	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	/* Entry before the CAS (kernel, Nov 2025): a handler that lands right
	 * after a successful CAS must find the lock in our table (AA). */
	rqspin__held_push(self, lock);
	/* acquire on success: pairs with the release in rqspin_unlock. */
	if (RQSPIN__LIKELY(__atomic_compare_exchange_n(&lock->w.val, &val, RQSPIN__LOCKED_VAL, 0,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		rqspin__count_fast_on(self);
	else
		ret = rqspin__lock_slowpath(lock, val, timeout_ns);
	RQSPIN__TSAN_POST_LOCK(lock, (ret == 0 || ret == -EOWNERDEAD) ? RQSPIN__TSAN_TRY
								      : RQSPIN__TSAN_TRY_FAILED);
	return ret;
}

/* rqspin_lock_timeout() with the process-wide default timeout. */
RQSPIN_MUST_CHECK static inline int rqspin_lock(rqspinlock_t *lock)
{
	return rqspin_lock_timeout(lock, RQSPIN_TIMEOUT_DEFAULT);
}

/*
 * Process-shared rqspinlocks: for a lock word in memory that several
 * processes map (MAP_SHARED, shm_open), used by threads of all of them.
 * rqspin_lock_init_pshared() marks the word; the rqspin_* lock functions
 * then work on it unchanged (same calls, same return codes), but
 * wait with a second protocol that does not link per-process queue
 * nodes: waiters spin, then yield, then sleep with a bounded back-off
 * (at most 1 ms) and re-check the word.
 *
 *  - -EDEADLK: AA and ABBA/cycles among the threads of the calling
 *    process (it cannot see the other processes' held tables); a cycle
 *    across processes ends in -ETIMEDOUT.
 *  - -ETIMEDOUT: not acquired within 4T (T as in the file comment: all
 *    waiters are equal here, as in the no-queue fallback).
 *  - -EOWNERDEAD: the holder thread is gone (its process died, was
 *    killed, or the thread exited holding the lock): the caller took the
 *    lock over. Found by the holder's thread id, stored in the word on
 *    every acquisition, which waiters probe about once per millisecond
 *    (a killed process not yet reaped, a zombie, once the word has not
 *    changed for 10 ms: that look reads /proc).
 *
 * Limits: all processes using the lock must share one PID namespace
 * (thread ids are compared as numbers); a holder whose thread id was
 * reused by a new thread before a waiter noticed its death looks alive
 * (the waiter times out instead); thread ids of 2^22 and above (beyond
 * the kernel's PID_MAX_LIMIT) are stored as 0: such holders are never
 * found dead. Waiting is not FIFO: a waiter may be overtaken.
 *
 * The word (32 bits; a private word never sets bits 9..15):
 *   bits  0- 7  locked byte: 0 free, RQSPIN__PSHARED_LOCKED held,
 *               RQSPIN__LOCKED_OWNER_DEAD abandoned
 *   bits  9-14  holder thread id, bits 0..5
 *   bit  15     RQSPIN__PSHARED_MARK, permanent
 *   bits 16-31  holder thread id, bits 6..21
 * The holder's value (2, not 1) keeps the private path's owner-death
 * marking, which runs in forked children for threads that did not
 * survive the fork, away from pshared words: in a child the parent's
 * holders are still alive. rqspin_unlock stores 0 to the locked byte as
 * for a private word; the mark and the last holder's id stay.
 */
#define RQSPIN__PSHARED_MARK (1u << 15)
#define RQSPIN__PSHARED_LOCKED 2u

/* ABI for rqspin_trylock: a process-shared word, observed as val. */
RQSPIN_API bool rqspin__pshared_trylock(rqspinlock_t *lock, uint32_t val);

/*
 * Initialise an unlocked process-shared lock. Must not race with users of
 * the lock (in any process). Async-signal-safe.
 */
static inline void rqspin_lock_init_pshared(rqspinlock_t *lock)
{
	__atomic_store_n(&lock->w.val, RQSPIN__PSHARED_MARK, __ATOMIC_RELAXED);
}

/* True when lock was initialised by rqspin_lock_init_pshared().
 * Async-signal-safe. */
static inline bool rqspin_is_pshared(const rqspinlock_t *lock)
{
	return (__atomic_load_n(&lock->w.val, __ATOMIC_RELAXED) & RQSPIN__PSHARED_MARK) != 0;
}

/*
 * Try once; true when acquired. Never waits, never fails otherwise.
 * Async-signal-safe. NULL lock: false.
 */
RQSPIN_MUST_CHECK static inline bool rqspin_trylock(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self = rqspin__self();
	uint32_t val = 0;

	if (RQSPIN__UNLIKELY(!lock))
		return false;
	/* Test the locked byte first (see qspin_trylock); the CAS checks
	 * the whole word. */
	if (__atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) != 0)
		return false;
	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	rqspin__held_push(self, lock);
	/* acquire on success: pairs with the release in rqspin_unlock. */
	if (__atomic_compare_exchange_n(&lock->w.val, &val, RQSPIN__LOCKED_VAL, 0,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED) ||
	    ((val & RQSPIN__PSHARED_MARK) && rqspin__pshared_trylock(lock, val))) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return true;
	}
	rqspin__held_pop(self, lock);
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
	return false;
}

/*
 * Release a lock the calling thread acquired (0 or -EOWNERDEAD). Unlike
 * qspinlock, an rqspinlock must be released by the thread that took it
 * (its held table tracks it). Debug builds abort on an unlock of a lock
 * that is not held or out of LIFO order. Async-signal-safe.
 */
static inline void rqspin_unlock(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self = rqspin__self();

#if RQSPIN_DEBUG
	if (!lock || __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) == 0)
		rqspin__misuse("rqspin_unlock: lock is not held", lock);
#endif
	RQSPIN__TSAN_PRE_UNLOCK(lock);
	/* release: publishes the critical section to the next acquirer. The
	 * store comes before the table update (kernel, Nov 2025): a handler
	 * landing in between sees the lock in our table as held although it
	 * is free, and gets a (harmless) -EDEADLK instead of a timeout. */
	__atomic_store_n(&lock->w.b.locked, 0, __ATOMIC_RELEASE);
	rqspin__held_pop(self, lock);
	RQSPIN__TSAN_POST_UNLOCK(lock);
}

/*
 * rqspin_lock_timeout() with all signals blocked first; on success they
 * stay blocked until rqspin_unlock_sigrestore() (the userspace counterpart
 * of raw_res_spin_lock_irqsave). On failure the mask is restored before
 * returning. *oldset receives the previous mask. Returns the lock's codes,
 * or a negative errno from pthread_sigmask. Async-signal-safe.
 */
RQSPIN_API RQSPIN_MUST_CHECK int rqspin_lock_sigsave(rqspinlock_t *lock, sigset_t *oldset);
RQSPIN_API RQSPIN_MUST_CHECK int rqspin_lock_sigsave_timeout(rqspinlock_t *lock, sigset_t *oldset,
							     uint64_t timeout_ns);
/* Unlock, then restore the mask saved by rqspin_lock_sigsave().
 * Async-signal-safe. */
RQSPIN_API void rqspin_unlock_sigrestore(rqspinlock_t *lock, const sigset_t *oldset);

/*
 * Process-wide default timeout T in nanoseconds (initially 250 ms, or the
 * RQSPIN_TIMEOUT_MS environment variable read at load time). Returns 0, or
 * -EINVAL for 0 or for more than one hour. Async-signal-safe.
 */
RQSPIN_API int rqspin_set_default_timeout(uint64_t timeout_ns);
RQSPIN_API uint64_t rqspin_get_default_timeout(void);

/* True when held (a snapshot). Async-signal-safe. */
static inline bool rqspin_is_locked(const rqspinlock_t *lock)
{
	return __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) != 0;
}

/* The calling thread's held-lock table, read-only (for diagnostics and
 * tests). Async-signal-safe. */
RQSPIN_API const struct rqspin_held_locks *rqspin_held_locks(void);

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_RQSPINLOCK_H */
