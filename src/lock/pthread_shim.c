/* SPDX-License-Identifier: MIT */
/*
 * librqspin-pthread.so: pthread_spin_* on top of rqspinlock, for programs
 * that cannot be changed. Preload it (LD_PRELOAD) or link it before libc.
 *
 * pthread_spinlock_t is 4 bytes, like the lock word; this shim owns the
 * encoding (zero = unlocked, unlike glibc's x86-64 spinlock where 1 is
 * unlocked), so every lock must be initialised with pthread_spin_init, as
 * POSIX requires, and never shared with code that bypasses the shim.
 *
 * Semantics:
 * Like glibc's, these take non-NULL locks (glibc declares them nonnull).
 *  - pthread_spin_init: 0. PTHREAD_PROCESS_SHARED fails with ENOTSUP: the
 *    MCS queue links per-process thread slots, which another process
 *    cannot follow. EINVAL for other pshared values.
 *  - pthread_spin_lock: 0 when acquired (also when the previous holder
 *    thread exited: the caller takes the lock over). EDEADLK when the
 *    caller already holds the lock or would close a deadlock cycle (POSIX
 *    allows EDEADLK), unless RQSPIN_PTHREAD_DEADLOCK=abort asks to abort
 *    instead. On a timeout (no progress for the rqspin timeout) the
 *    policy RQSPIN_PTHREAD_TIMEOUT chooses: "wait" (default: report it
 *    when RQSPIN_REPORT is set, and keep waiting, so an unmodified program
 *    never runs its critical section unlocked) or "error" (return
 *    ETIMEDOUT, which POSIX does not list for this function).
 *  - pthread_spin_trylock: 0 or EBUSY.
 *  - pthread_spin_unlock: 0. Must be called by the locking thread (the
 *    held-lock table is per thread); POSIX leaves anything else undefined.
 *  - pthread_spin_destroy: EBUSY while locked (POSIX's recommendation),
 *    else 0.
 * All are async-signal-safe, which glibc's are not.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/rqspinlock.h>

#define SHIM_API __attribute__((visibility("default")))

_Static_assert(sizeof(pthread_spinlock_t) == sizeof(rqspinlock_t), "same size");

static bool timeout_is_error;
static bool deadlock_aborts;

__attribute__((constructor)) static void shim_init(void)
{
	const char *t = getenv("RQSPIN_PTHREAD_TIMEOUT");
	const char *d = getenv("RQSPIN_PTHREAD_DEADLOCK");

	timeout_is_error = t && !strcmp(t, "error");
	deadlock_aborts = d && !strcmp(d, "abort");
}

static inline rqspinlock_t *as_rqspin(pthread_spinlock_t *lock)
{
	return (rqspinlock_t *)(void *)lock;
}

SHIM_API int pthread_spin_init(pthread_spinlock_t *lock, int pshared)
{
	if (pshared == PTHREAD_PROCESS_SHARED)
		return ENOTSUP;
	if (pshared != PTHREAD_PROCESS_PRIVATE)
		return EINVAL;
	rqspin_lock_init(as_rqspin(lock));
	return 0;
}

SHIM_API int pthread_spin_destroy(pthread_spinlock_t *lock)
{
	return rqspin_is_locked(as_rqspin(lock)) ? EBUSY : 0;
}

SHIM_API int pthread_spin_lock(pthread_spinlock_t *lock)
{
	int ret;

	for (;;) {
		ret = rqspin_lock(as_rqspin(lock));
		switch (ret) {
		case 0:
		case -EOWNERDEAD:
			return 0;
		case -EDEADLK:
			if (deadlock_aborts)
				rqspin__misuse("pthread_spin_lock: deadlock", (const void *)as_rqspin(lock));
			return EDEADLK;
		case -ETIMEDOUT:
			if (timeout_is_error)
				return ETIMEDOUT;
			continue; /* reported already; keep waiting */
		default:
			return -ret;
		}
	}
}

SHIM_API int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	return rqspin_trylock(as_rqspin(lock)) ? 0 : EBUSY;
}

SHIM_API int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	rqspin_unlock(as_rqspin(lock));
	return 0;
}
