/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the fast paths of the functions that
 * rqspin/rqspinlock.h declares and documents, the held-table updates they
 * make, and the process-shared word's layout. Included by that header; do
 * not include it alone.
 */
#ifndef RQSPIN_STATIC_RQSPINLOCK_H
#define RQSPIN_STATIC_RQSPINLOCK_H

#include <rqspin/rqspinlock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI for the inline functions below (the held entry is already pushed). */
RQSPIN_API int rqspin__lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns);
/* trylock found a pending bit: in a forked child it may be a vanished
 * thread's, which nobody else would clear; true when it took the lock. */
RQSPIN_API bool rqspin__trylock_pending(rqspinlock_t *lock, uint32_t val);
/* Push when the table is full (cnt >= RQSPIN_NR_HELD). */
RQSPIN_API void rqspin__held_push_full(struct rqspin__thread_hot *self, const void *lock);
/* Drop the entry of a lock whose acquisition failed (trylock). */
RQSPIN_API void rqspin__held_pop_slow(struct rqspin__thread_hot *self, const void *lock);
/* A waiter's entry for lock: marked as an attempt when a slow path starts
 * to wait, a hold again once it took the lock (RQSPIN__HELD_ATTEMPT). */
RQSPIN_API void rqspin__held_mark_attempt(struct rqspin__thread_hot *self, const void *lock);
RQSPIN_API void rqspin__held_confirm(struct rqspin__thread_hot *self, const void *lock);
/* Unlock of a lock that is not the top entry: out of order, untracked, or
 * taken by another thread. Does the release store itself. */
RQSPIN_API void rqspin__unlock_slow(struct rqspin__thread_hot *self, void *lock);
/* The same operations under Valgrind (rqspin/static/lock_word.h). */
RQSPIN_API int rqspin__lock_vg(rqspinlock_t *lock, uint64_t timeout_ns);
RQSPIN_API bool rqspin__trylock_vg(rqspinlock_t *lock);
RQSPIN_API void rqspin__unlock_vg(rqspinlock_t *lock);

/*
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

static inline void rqspin__held_push(struct rqspin__thread_hot *self, const void *lock)
{
	uint32_t cnt;

	/* Only this thread and its own signal handlers write the table. A
	 * handler pushes and pops its own entries, but it may also trim
	 * RELEASED marks off our top (held.c): a count stored as the load
	 * plus one would then bring trimmed slots back as NULL, an untracked
	 * hold that nobody releases. So the count is bumped in one
	 * instruction as far as our handlers go, and the index is the value
	 * it had then. The count must be published to our handlers before the
	 * entry is written, else a handler could take the same index and
	 * clear it on its way out: the signal fence is that compiler
	 * barrier. Remote readers tolerate a stale or missing top entry
	 * (deadlock checks read twice), so relaxed suffices for them.
	 * A full table is found after the bump, which is then taken back
	 * (one instruction too): a plain load of the count ahead of the
	 * bump cost an uncontended pair 0.3-0.4 ns on x86-64 (the drop-in
	 * pthread_spin_lock, measured). A handler that lands between the
	 * two sees one more lock past the table, an untracked hold, for
	 * those few instructions. */
	cnt = rqspin__counter_bump32(&self->held.cnt);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (RQSPIN__UNLIKELY(cnt >= RQSPIN_NR_HELD)) {
		rqspin__counter_drop32(&self->held.cnt);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		rqspin__held_push_full(self, lock);
		return;
	}
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

static inline void rqspin_lock_init(rqspinlock_t *lock)
{
	__atomic_store_n(&lock->w.val, 0, __ATOMIC_RELAXED);
}

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

RQSPIN_MUST_CHECK static inline int rqspin_lock(rqspinlock_t *lock)
{
	return rqspin_lock_timeout(lock, RQSPIN_TIMEOUT_DEFAULT);
}

static inline void rqspin_lock_init_pshared(rqspinlock_t *lock)
{
	__atomic_store_n(&lock->w.val, RQSPIN__PSHARED_MARK, __ATOMIC_RELAXED);
}

static inline bool rqspin_is_pshared(const rqspinlock_t *lock)
{
	return (__atomic_load_n(&lock->w.val, __ATOMIC_RELAXED) & RQSPIN__PSHARED_MARK) != 0;
}

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

static inline bool rqspin_is_locked(const rqspinlock_t *lock)
{
	return __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) != 0;
}

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_STATIC_RQSPINLOCK_H */
