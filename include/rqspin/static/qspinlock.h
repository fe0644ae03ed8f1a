/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the fast paths of the functions that
 * rqspin/qspinlock.h declares and documents. Included by that header; do
 * not include it alone.
 */
#ifndef RQSPIN_STATIC_QSPINLOCK_H
#define RQSPIN_STATIC_QSPINLOCK_H

#include <rqspin/qspinlock.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Out-of-line contended path. ABI for the inline functions below. */
RQSPIN_API void rqspin__qspin_lock_slowpath(qspinlock_t *lock, uint32_t val);
/* The same operations under Valgrind (rqspin/static/lock_word.h). */
RQSPIN_API void rqspin__qspin_lock_vg(qspinlock_t *lock);
RQSPIN_API bool rqspin__qspin_trylock_vg(qspinlock_t *lock);
RQSPIN_API void rqspin__qspin_unlock_vg(qspinlock_t *lock);

static inline void qspin_lock_init(qspinlock_t *lock)
{
	__atomic_store_n(&lock->w.val, 0, __ATOMIC_RELAXED);
}

static inline void qspin_lock(qspinlock_t *lock)
{
	uint32_t val = 0;

#if RQSPIN_DEBUG
	if (!lock)
		rqspin__misuse("qspin_lock: NULL lock", lock);
#endif
	if (RQSPIN__ON_VALGRIND()) {
		rqspin__qspin_lock_vg(lock);
		return;
	}
	/* acquire on success: pairs with the release in qspin_unlock. */
	if (RQSPIN__LIKELY(__atomic_compare_exchange_n(&lock->w.val, &val, RQSPIN__LOCKED_VAL, 0,
						       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		rqspin__count_fast();
	else
		rqspin__qspin_lock_slowpath(lock, val);
	RQSPIN__TSAN_ACQUIRE(lock);
}

static inline bool qspin_trylock(qspinlock_t *lock)
{
	uint32_t val = 0;

	if (RQSPIN__ON_VALGRIND())
		return rqspin__qspin_trylock_vg(lock);
	/* Test before the CAS, so a busy lock is not written to: a byte
	 * load, the width of the unlock's store, so it forwards from it. The
	 * CAS then checks the whole word. acquire on success: pairs with the
	 * release in qspin_unlock. */
	if (__atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) == 0 &&
	    __atomic_compare_exchange_n(&lock->w.val, &val, RQSPIN__LOCKED_VAL, 0,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		RQSPIN__TSAN_ACQUIRE(lock);
		return true;
	}
	return false;
}

static inline void qspin_unlock(qspinlock_t *lock)
{
#if RQSPIN_DEBUG
	if (!lock || __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) == 0)
		rqspin__misuse("qspin_unlock: lock is not held", lock);
#endif
	if (RQSPIN__ON_VALGRIND()) {
		rqspin__qspin_unlock_vg(lock);
		return;
	}
	RQSPIN__TSAN_RELEASE(lock);
	/* release: publishes the critical section to the next acquirer,
	 * whose acquire CAS (or acquire load in the slow path) reads it. */
	__atomic_store_n(&lock->w.b.locked, 0, __ATOMIC_RELEASE);
}

static inline bool qspin_is_locked(const qspinlock_t *lock)
{
	return __atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) != 0;
}

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_STATIC_QSPINLOCK_H */
