/* SPDX-License-Identifier: MIT */
/*
 * rqspinlock: the resilient queued spinlock. The same 4-byte lock word and
 * queue as qspinlock, but an acquisition that cannot complete returns an
 * error instead of hanging:
 *
 *   0            acquired.
 *   -EDEADLK     deadlock: the caller already holds the lock (AA, e.g. a
 *                signal handler that interrupted the holder or a waiter;
 *                a handler over a waiter that finds the lock free, with
 *                no pending waiter, takes it instead, as any thread may),
 *                or the caller is part of a cycle of waiting threads: it
 *                holds a lock that the holder of this one waits for,
 *                directly (ABBA) or through others (A->B->C->A); or the
 *                caller is a signal handler that interrupted this thread's
 *                own queued wait for a lock, and its single try failed
 *                (the kernel's rule for NMIs: the interrupted waiter may be
 *                a link its queue needs, so the handler must not wait).
 *                Not acquired. Only members of a cycle fail: a thread that
 *                holds no other lock never gets -EDEADLK except for AA and
 *                the nested-handler try above. One case the tables cannot
 *                tell apart: a handler that interrupted its thread in the
 *                first microseconds of a lock call of A (before the call
 *                marks its entry as a wait) and then waits for B makes the
 *                thread look like A's holder, so a thread that holds B
 *                and waits for A, or the handler itself, may get -EDEADLK
 *                (ABBA) although A's holder is elsewhere. Only programs
 *                whose handlers take locks in the reverse order of the
 *                code they interrupt meet it, and such a program can
 *                deadlock for real in another interleaving.
 *   -ETIMEDOUT   the thread the caller waits for made no progress for the
 *                timeout (below). Not acquired.
 *   -EOWNERDEAD  the previous holder thread exited while holding the lock
 *                (still held once its thread-specific-data destructors have
 *                run: one of them may release it), or, in a child of
 *                fork(), vanished in the fork. The lock
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
 * Timeouts: the budget is T for the pending waiter, 2T for a queued one
 * (the head, and each waiter behind it, counted from when it queued) and
 * 4T for the no-queue fallback (more threads than the registry holds).
 * When the head's budget runs out, or a waiter behind it runs out of its
 * own while the thread waited for is blocked or stopped (it asks the head,
 * through the queue, and the head looks again), the queue dissolves in
 * FIFO order: each waiter whose budget has run out fails with -ETIMEDOUT,
 * the others queue again with what is left of theirs. (A waiter behind
 * the head leaves a running owner to the head's judgement below.)
 * T is the process default (250 ms, see rqspin_set_default_timeout and the
 * RQSPIN_TIMEOUT_MS environment variable) unless given per call; a budget
 * too large to add to the clock (e.g. UINT64_MAX) means "no timeout,
 * deadlock detection only". When the budget runs out, the thread waited
 * for (the holder, or the pending waiter a queue head waits behind) is
 * looked up in the held tables and the kernel is asked about it
 * (/proc/TID/stat and its CPU-time clock):
 *   - blocked (asleep, e.g. in a system call or a futex), stopped or
 *     traced: -ETIMEDOUT now, i.e. within about [T, 1.1T] of waiting,
 *     provided the tables still name it after that look (one that let
 *     the lock go and then slept is not a stall: look again in 1 ms);
 *   - runnable or running: the wait goes on. A preempted owner (busy
 *     machine, CPU quota, real-time thread on its CPU) never fails its
 *     waiters. An owner that keeps running without releasing fails them
 *     once it has used a whole budget (T, 2T, 4T) of CPU time since the
 *     first deadline: after at least 2T of waiting (pending waiter).
 *   - gone (it exited since the tables named it: it released the lock
 *     and left, and the lock is changing hands), or /proc not mounted:
 *     one more budget of wall time, once per wait, then -ETIMEDOUT;
 *   - unknown (untracked holder, a thread without a registry slot, a lock
 *     used by another process): wall time, -ETIMEDOUT at the deadline.
 *
 * Held-lock table: each thread records the rqspinlocks it holds in a
 * 31-entry table (other threads read it to find deadlocks and stalls).
 * Any unlock order is exact (LIFO is cheapest: the unlock then touches
 * only the top entry). Past 31 locks the extra ones are counted but not
 * recorded: an AA or a cycle involving them ends in -ETIMEDOUT (or waits,
 * if the owner runs) instead of -EDEADLK, and a blocked holder of one of
 * them is timed by wall clock. No entry outlives its lock: thread exit
 * marks owner-dead only the locks the thread still holds. A thread that
 * exits holding untracked locks leaves them counted, not named: the
 * pending waiter of a lock held by nobody at its deadline (two looks 1 ms
 * apart) takes it over with -EOWNERDEAD, unless some live thread holds
 * untracked locks too (it could be their holder: -ETIMEDOUT, as before) or
 * has no registry slot. A cross-thread unlock of such a lock counts as
 * the release of one of them.
 *
 * Cross-thread unlock: a lock may be released by a thread other than the
 * one that took it; the owner's entry is dropped (posted to the owner,
 * which removes it at its next slow-path call) before the lock is free,
 * so the owner never mistakes it for a hold. Threads waiting for the lock
 * are never taken for its owner; a thread in the first microseconds of a
 * lock call (before it waits) or a few instructions into an unlock may
 * be, so the unlock waits (yielding) until that thread has moved on: if
 * it stays there for longer than the default timeout (kept off the CPU,
 * or in a signal handler), the release may be credited to it, and the
 * owner then reports false AA on that lock. ThreadSanitizer's mutex model does
 * not allow such unlocks: TSan builds report them.
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
#include <stdbool.h>
#include <rqspin/defs.h>
/* The lock word's and the held table's layouts (the types embed them). */
#include <rqspin/static/lock_word.h>
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

/*
 * Initialise an unlocked lock (same as RQSPINLOCK_INIT or zeroed memory).
 * Must not race with users of the lock. Async-signal-safe.
 */
static inline void rqspin_lock_init(rqspinlock_t *lock);

/*
 * Acquire the lock, giving up with an error after timeout_ns (the pending
 * waiter's budget; see the file comment; RQSPIN_TIMEOUT_DEFAULT for the
 * process default). Returns 0, -EDEADLK, -ETIMEDOUT or -EOWNERDEAD as in
 * the file comment; -EINVAL for a NULL lock.
 * Async-signal-safe: a handler may call it at any point, including while
 * the interrupted code holds or waits for the same lock (-EDEADLK, at
 * once), and it never hangs.
 */
RQSPIN_MUST_CHECK static inline int rqspin_lock_timeout(rqspinlock_t *lock, uint64_t timeout_ns);

/* rqspin_lock_timeout() with the process-wide default timeout. */
RQSPIN_MUST_CHECK static inline int rqspin_lock(rqspinlock_t *lock);

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
 * found dead. Waiting is not FIFO: a waiter may be overtaken. A lock
 * that a thread of another process released for this thread stays in
 * this thread's held table (one of its RQSPIN_NR_HELD entries) until the
 * thread next takes that lock, or exits: no other process can reach it.
 * Thread exit does not touch such an entry's memory (it may be unmapped
 * by then) for the last 32 process-shared locks the thread took; a
 * thread that took more leaves the older ones to be read, as if held.
 */

/*
 * Initialise an unlocked process-shared lock. Must not race with users of
 * the lock (in any process). Async-signal-safe.
 */
static inline void rqspin_lock_init_pshared(rqspinlock_t *lock);

/* True when lock was initialised by rqspin_lock_init_pshared().
 * Async-signal-safe. */
static inline bool rqspin_is_pshared(const rqspinlock_t *lock);

/*
 * Try once; true when acquired. Never waits, never fails otherwise.
 * Async-signal-safe. NULL lock: false.
 */
RQSPIN_MUST_CHECK static inline bool rqspin_trylock(rqspinlock_t *lock);

/*
 * Release a lock (acquired with 0 or -EOWNERDEAD). The usual caller is the
 * thread that took it, in any order (LIFO is cheapest); another thread may
 * release it too (its held entry is dropped from the owner's table; such
 * an unlock may yield the CPU while another thread is a few instructions
 * into a lock or unlock call of the same lock, see "Cross-thread unlock"
 * above). Debug builds (RQSPIN_DEBUG) abort on NULL and on a lock that is
 * not locked. Async-signal-safe; a signal handler releases only locks it
 * took itself, and every lock it took before it returns (as an interrupt
 * handler in the kernel must): the held table's inline pop assumes that
 * a handler leaves the table's count as it found it (the push also
 * allows it lower: a handler may drop RELEASED marks off the top). A lock
 * kept across a handler's return, or released by a later handler, may
 * drop out of the thread's table, and so may a lock the interrupted code
 * was taking (no AA detection for it, no owner-dead takeover if the
 * thread exits holding it); the table itself stays consistent.
 */
static inline void rqspin_unlock(rqspinlock_t *lock);

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
static inline bool rqspin_is_locked(const rqspinlock_t *lock);

/* The calling thread's held-lock table, read-only (for diagnostics and
 * tests), after dropping the RELEASED marks on its top: a thread that
 * has released every lock reads a count of 0. Marks below a held entry
 * stay (rqspin/static/held.h). Async-signal-safe. */
RQSPIN_API const struct rqspin_held_locks *rqspin_held_locks(void);

#ifdef __cplusplus
}
#endif

/* The definitions of the inline functions above. */
#include <rqspin/static/rqspinlock.h>

#endif /* RQSPIN_RQSPINLOCK_H */
