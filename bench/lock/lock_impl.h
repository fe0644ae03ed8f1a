/* SPDX-License-Identifier: MIT */
/*
 * The locks the benchmarks compare, each as three static inline functions
 * with one signature, so benchmark loops can inline them:
 *
 *   int  bl_<name>_lock(void *obj, void *ctx)     0, or a negative errno
 *                                                 (only rqspin fails)
 *   void bl_<name>_unlock(void *obj, void *ctx)
 *   bool bl_<name>_trylock(void *obj, void *ctx)  (when BL_<NAME>_HAS_TRYLOCK)
 *
 * obj is the lock object (struct bl_<name>, cache-line aligned), ctx the
 * calling thread's context (an MCS/CLH node; unused by the other locks).
 * lock_peers.c puts them behind a vtable; micro_lock.c calls them directly.
 */
#ifndef BENCH_LOCK_IMPL_H
#define BENCH_LOCK_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>

#include <rqspin/qspinlock.h>
#include <rqspin/rqspinlock.h>

#include "clock.h"

#ifdef RQSPIN_BENCH_HAVE_CK
#include <ck_spinlock.h>
#endif

/* Two lines: Intel's adjacent-line prefetcher pairs 64-byte lines. */
#define BL_CACHELINE 128

#define BL_ALWAYS_INLINE inline __attribute__((always_inline))
#define BL_UNUSED(x) ((void)(x))

/* ThreadSanitizer cannot see ck's inline-asm atomics: tell it which calls
 * are lock operations, so the critical-section data is not reported. */
#if defined(__SANITIZE_THREAD__)
#define BL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BL_TSAN 1
#endif
#endif
#ifdef BL_TSAN
#include <sanitizer/tsan_interface.h>
#define BL_TSAN_PRE_LOCK(l, f) __tsan_mutex_pre_lock((void *)(l), (f))
#define BL_TSAN_POST_LOCK(l, f) __tsan_mutex_post_lock((void *)(l), (f), 0)
#define BL_TSAN_PRE_UNLOCK(l) __tsan_mutex_pre_unlock((void *)(l), 0)
#define BL_TSAN_POST_UNLOCK(l) __tsan_mutex_post_unlock((void *)(l), 0)
#define BL_TSAN_TRY __tsan_mutex_try_lock
#define BL_TSAN_TRY_FAILED (__tsan_mutex_try_lock | __tsan_mutex_try_lock_failed)
#else
#define BL_TSAN_PRE_LOCK(l, f) ((void)0)
#define BL_TSAN_POST_LOCK(l, f) ((void)0)
#define BL_TSAN_PRE_UNLOCK(l) ((void)0)
#define BL_TSAN_POST_UNLOCK(l) ((void)0)
#define BL_TSAN_TRY 0u
#define BL_TSAN_TRY_FAILED 0u
#endif

/* ---- qspin: librqspin's queued spinlock --------------------------------- */
struct bl_qspin {
	alignas(BL_CACHELINE) qspinlock_t l;
};
#define BL_QSPIN_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_qspin_lock(void *o, void *c)
{
	BL_UNUSED(c);
	qspin_lock(&((struct bl_qspin *)o)->l);
	return 0;
}
static BL_ALWAYS_INLINE void bl_qspin_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	qspin_unlock(&((struct bl_qspin *)o)->l);
}
static BL_ALWAYS_INLINE bool bl_qspin_trylock(void *o, void *c)
{
	BL_UNUSED(c);
	return qspin_trylock(&((struct bl_qspin *)o)->l);
}

/* ---- rqspin: librqspin's resilient queued spinlock ---------------------- */
struct bl_rqspin {
	alignas(BL_CACHELINE) rqspinlock_t l;
};
#define BL_RQSPIN_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_rqspin_lock(void *o, void *c)
{
	BL_UNUSED(c);
	return rqspin_lock(&((struct bl_rqspin *)o)->l);
}
static BL_ALWAYS_INLINE void bl_rqspin_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	rqspin_unlock(&((struct bl_rqspin *)o)->l);
}
static BL_ALWAYS_INLINE bool bl_rqspin_trylock(void *o, void *c)
{
	BL_UNUSED(c);
	return rqspin_trylock(&((struct bl_rqspin *)o)->l);
}

/* ---- pthread_spin (glibc: test-and-test-and-set, no backoff) ------------ */
struct bl_pthread_spin {
	alignas(BL_CACHELINE) pthread_spinlock_t l;
};
#define BL_PTHREAD_SPIN_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_pthread_spin_lock(void *o, void *c)
{
	BL_UNUSED(c);
	return -pthread_spin_lock(&((struct bl_pthread_spin *)o)->l);
}
static BL_ALWAYS_INLINE void bl_pthread_spin_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	pthread_spin_unlock(&((struct bl_pthread_spin *)o)->l);
}
static BL_ALWAYS_INLINE bool bl_pthread_spin_trylock(void *o, void *c)
{
	BL_UNUSED(c);
	return pthread_spin_trylock(&((struct bl_pthread_spin *)o)->l) == 0;
}

/* ---- pthread_mutex (default type: futex, spin-free) --------------------- */
struct bl_pthread_mutex {
	alignas(BL_CACHELINE) pthread_mutex_t l;
};
#define BL_PTHREAD_MUTEX_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_pthread_mutex_lock(void *o, void *c)
{
	BL_UNUSED(c);
	return -pthread_mutex_lock(&((struct bl_pthread_mutex *)o)->l);
}
static BL_ALWAYS_INLINE void bl_pthread_mutex_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	pthread_mutex_unlock(&((struct bl_pthread_mutex *)o)->l);
}
static BL_ALWAYS_INLINE bool bl_pthread_mutex_trylock(void *o, void *c)
{
	BL_UNUSED(c);
	return pthread_mutex_trylock(&((struct bl_pthread_mutex *)o)->l) == 0;
}

/* ---- ttas: test-and-test-and-set with bounded exponential backoff ------- */
struct bl_ttas {
	alignas(BL_CACHELINE) uint32_t v;
};
#define BL_TTAS_HAS_TRYLOCK 1
#define BL_TTAS_BACKOFF_MAX 256u /* pause instructions */

static BL_ALWAYS_INLINE int bl_ttas_lock(void *o, void *c)
{
	uint32_t *v = &((struct bl_ttas *)o)->v;
	unsigned backoff = 1;

	BL_UNUSED(c);
	for (;;) {
		/* Test (shared read) before test-and-set (exclusive line). */
		if (__atomic_load_n(v, __ATOMIC_RELAXED) == 0 &&
		    __atomic_exchange_n(v, 1, __ATOMIC_ACQUIRE) == 0)
			return 0;
		for (unsigned i = 0; i < backoff; i++)
			bench_cpu_relax();
		if (backoff < BL_TTAS_BACKOFF_MAX)
			backoff <<= 1;
	}
}
static BL_ALWAYS_INLINE void bl_ttas_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	__atomic_store_n(&((struct bl_ttas *)o)->v, 0, __ATOMIC_RELEASE);
}
static BL_ALWAYS_INLINE bool bl_ttas_trylock(void *o, void *c)
{
	uint32_t *v = &((struct bl_ttas *)o)->v;

	BL_UNUSED(c);
	return __atomic_load_n(v, __ATOMIC_RELAXED) == 0 &&
	       __atomic_exchange_n(v, 1, __ATOMIC_ACQUIRE) == 0;
}

/* ---- cas_floor: one acquire CAS to lock, one release store to unlock -----
 * The same instructions as the qspin fast paths and nothing else (retrying
 * the CAS is its only way to wait): the single-thread cost floor. */
struct bl_cas_floor {
	alignas(BL_CACHELINE) uint32_t v;
};
#define BL_CAS_FLOOR_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_cas_floor_lock(void *o, void *c)
{
	uint32_t *v = &((struct bl_cas_floor *)o)->v;
	uint32_t expect = 0;

	BL_UNUSED(c);
	while (!__atomic_compare_exchange_n(v, &expect, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		expect = 0;
		bench_cpu_relax();
	}
	return 0;
}
static BL_ALWAYS_INLINE void bl_cas_floor_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	__atomic_store_n(&((struct bl_cas_floor *)o)->v, 0, __ATOMIC_RELEASE);
}
static BL_ALWAYS_INLINE bool bl_cas_floor_trylock(void *o, void *c)
{
	uint32_t *v = &((struct bl_cas_floor *)o)->v;
	uint32_t expect = 0;

	BL_UNUSED(c);
	return __atomic_compare_exchange_n(v, &expect, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* ---- none: no lock at all. Not a peer: it exists to show that the
 * harness notices broken mutual exclusion (`--locks none` must fail). */
struct bl_none {
	alignas(BL_CACHELINE) uint32_t v;
};
#define BL_NONE_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_none_lock(void *o, void *c)
{
	BL_UNUSED(o);
	BL_UNUSED(c);
	return 0;
}
static BL_ALWAYS_INLINE void bl_none_unlock(void *o, void *c)
{
	BL_UNUSED(o);
	BL_UNUSED(c);
}
static BL_ALWAYS_INLINE bool bl_none_trylock(void *o, void *c)
{
	BL_UNUSED(o);
	BL_UNUSED(c);
	return true;
}

#ifdef RQSPIN_BENCH_HAVE_CK
/* ---- ck_mcs: Concurrency Kit MCS (caller-provided queue node) ----------- */
struct bl_ck_mcs {
	alignas(BL_CACHELINE) ck_spinlock_mcs_t tail;
};
/* Per-thread context: the thread's queue node, reused for every
 * acquisition (unlock completes before the next lock starts). */
struct bl_ck_mcs_ctx {
	alignas(BL_CACHELINE) ck_spinlock_mcs_context_t node;
};
#define BL_CK_MCS_HAS_TRYLOCK 1

static BL_ALWAYS_INLINE int bl_ck_mcs_lock(void *o, void *c)
{
	BL_TSAN_PRE_LOCK(o, 0);
	ck_spinlock_mcs_lock(&((struct bl_ck_mcs *)o)->tail, &((struct bl_ck_mcs_ctx *)c)->node);
	BL_TSAN_POST_LOCK(o, 0);
	return 0;
}
static BL_ALWAYS_INLINE void bl_ck_mcs_unlock(void *o, void *c)
{
	BL_TSAN_PRE_UNLOCK(o);
	ck_spinlock_mcs_unlock(&((struct bl_ck_mcs *)o)->tail, &((struct bl_ck_mcs_ctx *)c)->node);
	BL_TSAN_POST_UNLOCK(o);
}
static BL_ALWAYS_INLINE bool bl_ck_mcs_trylock(void *o, void *c)
{
	bool ok;

	BL_TSAN_PRE_LOCK(o, BL_TSAN_TRY);
	ok = ck_spinlock_mcs_trylock(&((struct bl_ck_mcs *)o)->tail,
				     &((struct bl_ck_mcs_ctx *)c)->node);
	BL_TSAN_POST_LOCK(o, ok ? BL_TSAN_TRY : BL_TSAN_TRY_FAILED);
	return ok;
}

/* ---- ck_ticket: Concurrency Kit ticket lock ----------------------------- */
struct bl_ck_ticket {
	alignas(BL_CACHELINE) ck_spinlock_ticket_t l;
};
#ifdef CK_F_SPINLOCK_TICKET_TRYLOCK
#define BL_CK_TICKET_HAS_TRYLOCK 1
#else
#define BL_CK_TICKET_HAS_TRYLOCK 0
#endif

static BL_ALWAYS_INLINE int bl_ck_ticket_lock(void *o, void *c)
{
	BL_UNUSED(c);
	BL_TSAN_PRE_LOCK(o, 0);
	ck_spinlock_ticket_lock(&((struct bl_ck_ticket *)o)->l);
	BL_TSAN_POST_LOCK(o, 0);
	return 0;
}
static BL_ALWAYS_INLINE void bl_ck_ticket_unlock(void *o, void *c)
{
	BL_UNUSED(c);
	BL_TSAN_PRE_UNLOCK(o);
	ck_spinlock_ticket_unlock(&((struct bl_ck_ticket *)o)->l);
	BL_TSAN_POST_UNLOCK(o);
}
#if BL_CK_TICKET_HAS_TRYLOCK
static BL_ALWAYS_INLINE bool bl_ck_ticket_trylock(void *o, void *c)
{
	bool ok;

	BL_UNUSED(c);
	BL_TSAN_PRE_LOCK(o, BL_TSAN_TRY);
	ok = ck_spinlock_ticket_trylock(&((struct bl_ck_ticket *)o)->l);
	BL_TSAN_POST_LOCK(o, ok ? BL_TSAN_TRY : BL_TSAN_TRY_FAILED);
	return ok;
}
#endif

/* ---- ck_clh: Concurrency Kit CLH ------------------------------------------
 * CLH nodes change hands: unlock gives the caller its predecessor's node.
 * So all nodes come from one pool owned by the lock object (one per
 * thread plus the initial "unowned" one) and live as long as the lock. */
struct bl_ck_clh_node {
	alignas(BL_CACHELINE) ck_spinlock_clh_t n;
};
struct bl_ck_clh_ctx {
	alignas(BL_CACHELINE) ck_spinlock_clh_t *mine;
};
struct bl_ck_clh {
	alignas(BL_CACHELINE) ck_spinlock_clh_t *tail;
	unsigned nthreads;
	struct bl_ck_clh_ctx *ctx;    /* [nthreads] */
	struct bl_ck_clh_node *nodes; /* [nthreads + 1] */
};
#define BL_CK_CLH_HAS_TRYLOCK 0

static BL_ALWAYS_INLINE int bl_ck_clh_lock(void *o, void *c)
{
	BL_TSAN_PRE_LOCK(o, 0);
	ck_spinlock_clh_lock(&((struct bl_ck_clh *)o)->tail, ((struct bl_ck_clh_ctx *)c)->mine);
	BL_TSAN_POST_LOCK(o, 0);
	return 0;
}
static BL_ALWAYS_INLINE void bl_ck_clh_unlock(void *o, void *c)
{
	BL_TSAN_PRE_UNLOCK(o);
	ck_spinlock_clh_unlock(&((struct bl_ck_clh_ctx *)c)->mine);
	BL_TSAN_POST_UNLOCK(o);
}
#endif /* RQSPIN_BENCH_HAVE_CK */

#endif /* BENCH_LOCK_IMPL_H */
