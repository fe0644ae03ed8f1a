/* SPDX-License-Identifier: MIT */
/*
 * rqspinlock: the resilient queued spinlock. The same 4-byte lock word and
 * queue as qspinlock, but an acquisition that cannot complete returns an
 * error instead of hanging:
 *
 *   0            acquired.
 *   -EDEADLK     deadlock: the caller already holds the lock (AA, e.g. a
 *                signal handler that interrupted the holder or a waiter),
 *                or the caller is part of a cycle of waiting threads: it
 *                holds a lock that the holder of this one waits for,
 *                directly (ABBA) or through others (A->B->C->A); or the
 *                caller is a signal handler that interrupted this thread's
 *                own queued wait for a lock, and its single try failed
 *                (the kernel's rule for NMIs: the interrupted waiter may be
 *                a link its queue needs, so the handler must not wait).
 *                Not acquired. Only members of a cycle fail: a thread that
 *                holds no other lock never gets -EDEADLK except for AA.
 *   -ETIMEDOUT   the thread the caller waits for made no progress for the
 *                timeout (below). Not acquired.
 *   -EOWNERDEAD  the previous holder thread exited while holding the lock
 *                (or, in a child of fork(), vanished in the fork). The lock
 *                IS acquired by the caller (as with a robust pthread
 *                mutex): the data it protects may be inconsistent; repair
 *                or discard it, then rqspin_unlock().
 *
 * After any failure the lock stays usable.
 *
 * Deadlock detection: AA is checked on entry. A waiter that holds other
 * locks searches the other threads' held tables for a cycle through itself
 * before it starts to wait, then after 10 us, 20 us, ... up to once per
 * millisecond while it is the pending waiter or the queue head. Every
 * cycle is closed by the last of its members to start waiting, and that
 * member finds it before waiting, so detection takes microseconds.
 *
 * Timeouts: the budget is T for the pending waiter, 2T for the queue head
 * and 4T for the no-queue fallback (more threads than the registry holds);
 * waiters queued behind the head leave when the head does (in FIFO order).
 * T is the process default (250 ms, see rqspin_set_default_timeout and the
 * RQSPIN_TIMEOUT_MS environment variable) unless given per call; a budget
 * too large to add to the clock (e.g. UINT64_MAX) means "no timeout,
 * deadlock detection only". When the budget runs out, the thread waited
 * for (the holder, or the pending waiter a queue head waits behind) is
 * looked up in the held tables and the kernel is asked about it
 * (/proc/TID/stat and its CPU-time clock):
 *   - blocked (asleep, e.g. in a system call or a futex), stopped or
 *     traced: -ETIMEDOUT now, i.e. within about [T, 1.1T] of waiting;
 *   - runnable or running: the wait goes on. A preempted owner (busy
 *     machine, CPU quota, real-time thread on its CPU) never fails its
 *     waiters. An owner that keeps running without releasing fails them
 *     once it has used a whole budget (T, 2T, 4T) of CPU time since the
 *     first deadline: after at least 2T of waiting (pending waiter).
 *   - unknown (untracked holder, a thread without a registry slot, a lock
 *     used by another process, /proc not mounted): wall time, -ETIMEDOUT
 *     at the deadline.
 *
 * Held-lock table: each thread records the rqspinlocks it holds in a
 * 31-entry table (other threads read it to find deadlocks and stalls).
 * Any unlock order is exact (LIFO is cheapest: the unlock then touches
 * only the top entry). Past 31 locks the extra ones are counted but not
 * recorded: an AA or a cycle involving them ends in -ETIMEDOUT (or waits,
 * if the owner runs) instead of -EDEADLK, and a blocked holder of one of
 * them is timed by wall clock. No entry outlives its lock: thread exit
 * marks owner-dead only the locks the thread still holds.
 *
 * Cross-thread unlock: a lock may be released by a thread other than the
 * one that took it; the owner's entry is dropped (posted to the owner,
 * which removes it at its next slow-path call) before the lock is free,
 * so the owner never mistakes it for a hold. ThreadSanitizer's mutex
 * model does not allow such unlocks: TSan builds report them.
 *
 * fork(): fork never writes a lock word (a lock in MAP_SHARED memory may
 * belong to the parent's threads). In the child, what vanished threads
 * left in a lock (held byte, pending bit, queue) is found when a child
 * thread waits on that lock: a lock a vanished thread held is taken over
 * with -EOWNERDEAD, its pending bit is cleared, and a waiter queued behind
 * a vanished one becomes the head. A child must not use a private lock
 * that the parent's threads keep using in shared memory.
 *
 * Debug builds (RQSPIN_DEBUG, on unless NDEBUG) abort in rqspin_unlock on
 * a NULL lock or one that is not locked; nothing else is checked.
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
/* trylock found a pending bit: in a forked child it may be a vanished
 * thread's, which nobody else would clear; true when it took the lock. */
RQSPIN_API bool rqspin__trylock_pending(rqspinlock_t *lock, uint32_t val);
/* Push when the table is full (cnt >= RQSPIN_NR_HELD). */
RQSPIN_API void rqspin__held_push_full(struct rqspin__thread_hot *self, const void *lock);
/* Drop the entry of a lock whose acquisition failed (trylock). */
RQSPIN_API void rqspin__held_pop_slow(struct rqspin__thread_hot *self, const void *lock);
/* Unlock of a lock that is not the top entry: out of order, untracked, or
 * taken by another thread. Does the release store itself. */
RQSPIN_API void rqspin__unlock_slow(struct rqspin__thread_hot *self, void *lock);
/* The same operations under Valgrind (lock_common.h). */
RQSPIN_API int rqspin__lock_vg(rqspinlock_t *lock, uint64_t timeout_ns);
RQSPIN_API bool rqspin__trylock_vg(rqspinlock_t *lock);
RQSPIN_API void rqspin__unlock_vg(rqspinlock_t *lock);

static inline void rqspin__held_push(struct rqspin__thread_hot *self, const void *lock)
{
	uint32_t cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);

	if (RQSPIN__UNLIKELY(cnt >= RQSPIN_NR_HELD)) {
		rqspin__held_push_full(self, lock);
		return;
	}
	/* Only this thread and its own signal handlers write the table. A
	 * handler that runs between the load and the store pushes and pops
	 * its own entries and leaves cnt as it found it, so a plain
	 * load/store pair is enough (no RMW). The count must be published
	 * to our handlers before the entry is written, else a handler could
	 * take the same index and clear it on its way out: the signal fence
	 * is that compiler barrier. Remote readers tolerate a stale or
	 * missing top entry (deadlock checks read twice), so relaxed suffices
	 * for them. */
	__atomic_store_n(&self->held.cnt, cnt + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.locks[cnt], lock, __ATOMIC_RELAXED);
	/* The entry must be in place before the acquiring CAS, for a handler
	 * that lands right after it (AA): a relaxed store may otherwise sink
	 * below the CAS's acquire. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Drop the top entry, lock, when it is on top (the common LIFO case);
 * anything else goes out of line. */
static inline bool rqspin__held_pop_top(struct rqspin__thread_hot *self, const void *lock)
{
	uint32_t cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);

	/* cnt - 1 < NR_HELD: 1 <= cnt <= NR_HELD, so the top is tracked. */
	if (RQSPIN__UNLIKELY(cnt - 1 >= RQSPIN_NR_HELD ||
			     __atomic_load_n(&self->held.locks[cnt - 1], __ATOMIC_RELAXED) != lock))
		return false;
	__atomic_store_n(&self->held.locks[cnt - 1], (const void *)0, __ATOMIC_RELAXED);
	/* Mirror of push: the entry is cleared before our handlers can see
	 * the index as free. No hardware barrier: the kernel's final unlock
	 * accepts that a remote reader may briefly see a stale entry (its
	 * checks read twice and require the lock to be busy). */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.cnt, cnt - 1, __ATOMIC_RELAXED);
	return true;
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
	struct rqspin__thread_hot *self;
	uint32_t val = 0;
	int ret = 0;

	if (RQSPIN__ON_VALGRIND())
		return rqspin__lock_vg(lock, timeout_ns);
	self = rqspin__self();
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
	struct rqspin__thread_hot *self;
	uint32_t val = 0;

	if (RQSPIN__ON_VALGRIND())
		return rqspin__trylock_vg(lock);
	self = rqspin__self();
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
	    ((val & RQSPIN__PSHARED_MARK) && rqspin__pshared_trylock(lock, val)) ||
	    RQSPIN__UNLIKELY((val & RQSPIN__PENDING_VAL) && !(val & RQSPIN__PSHARED_MARK) &&
			     rqspin__trylock_pending(lock, val))) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return true;
	}
	if (!rqspin__held_pop_top(self, lock))
		rqspin__held_pop_slow(self, lock);
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
	return false;
}

/*
 * Release a lock (acquired with 0 or -EOWNERDEAD). The usual caller is the
 * thread that took it, in any order (LIFO is cheapest); another thread may
 * release it too (its held entry is dropped from the owner's table). Debug
 * builds (RQSPIN_DEBUG) abort on NULL and on a lock that is not locked.
 * Async-signal-safe; a signal handler releases only locks it took itself.
 */
static inline void rqspin_unlock(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self;
	uint32_t cnt;

#if RQSPIN_DEBUG
	if (!lock || __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) == 0)
		rqspin__misuse("rqspin_unlock: lock is not held", lock);
#endif
	if (RQSPIN__ON_VALGRIND()) {
		rqspin__unlock_vg(lock);
		return;
	}
	self = rqspin__self();
	RQSPIN__TSAN_PRE_UNLOCK(lock);
	cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);
	if (RQSPIN__LIKELY(cnt - 1 < RQSPIN_NR_HELD &&
			   __atomic_load_n(&self->held.locks[cnt - 1], __ATOMIC_RELAXED) == lock)) {
		/* release: publishes the critical section to the next
		 * acquirer. The store comes before the table update (kernel,
		 * Nov 2025): a handler landing in between sees the lock in
		 * our table as held although it is free, and gets a harmless
		 * -EDEADLK; the other order would let it spin on a lock its
		 * own thread holds. The signal fence keeps the relaxed table
		 * stores below the release store. */
		__atomic_store_n(&lock->w.b.locked, 0, __ATOMIC_RELEASE);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&self->held.locks[cnt - 1], (const void *)0, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		__atomic_store_n(&self->held.cnt, cnt - 1, __ATOMIC_RELAXED);
	} else {
		rqspin__unlock_slow(self, lock);
	}
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
