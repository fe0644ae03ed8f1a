/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the pieces shared by the inline fast
 * paths of rqspin/qspinlock.h and rqspin/rqspinlock.h -- the lock word's
 * layout, the per-thread record, the fast-path counters and the sanitizer
 * and Valgrind hooks. Everything named rqspin__* (two underscores) is part
 * of the ABI the inline functions rely on, not API: do not call it directly.
 *
 * The fast paths use the GCC/Clang __atomic builtins on plain integers, not
 * C11 _Atomic, so that these headers compile unchanged as C11 and as C++
 * (C++ has no _Atomic). The builtins are what <stdatomic.h> expands to; the
 * library's slow paths use <stdatomic.h> on the same words.
 */
#ifndef RQSPIN_STATIC_LOCK_WORD_H
#define RQSPIN_STATIC_LOCK_WORD_H

#include <stdbool.h>
#include <stdint.h>
#include <rqspin/defs.h>
#include <rqspin/static/compiler.h>
#include <rqspin/static/held.h>

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "librqspin supports x86_64 and aarch64"
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "librqspin's lock word layout assumes a little-endian CPU"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The lock word, kernel layout (32 bits, zero = unlocked):
 *   bits  0- 7  locked byte (1 = held; see RQSPIN__LOCKED_* for others)
 *   bit   8     pending: one waiter spins here before the queue
 *   bit   9     hand-off: the pending waiter asks running threads to stop
 *                 taking the lock ahead of it (barging; pthread_spin shim)
 *   bits 16-17  tail index: nesting level of the MCS node of the last waiter
 *   bits 18-31  tail slot + 1: thread slot of the last waiter (0 = no queue)
 */
union rqspin__word {
	uint32_t val;
	struct {
		uint8_t locked;
		uint8_t pending;
		uint16_t tail;
	} b;
	struct {
		uint16_t locked_pending;
		uint16_t tail;
	} h;
};

#define RQSPIN__LOCKED_VAL 1u
/* A lock whose holder exited without unlocking (rqspinlock only). */
#define RQSPIN__LOCKED_OWNER_DEAD 0xdeu
#define RQSPIN__LOCKED_MASK 0xffu
#define RQSPIN__PENDING_VAL (1u << 8)
#define RQSPIN__PENDING_MASK 0xff00u
#define RQSPIN__HANDOFF_VAL (1u << 9)
#define RQSPIN__LOCKED_PENDING_MASK 0xffffu
#define RQSPIN__TAIL_IDX_OFFSET 16
#define RQSPIN__TAIL_IDX_BITS 2
#define RQSPIN__TAIL_SLOT_OFFSET 18
#define RQSPIN__TAIL_SLOT_BITS 14
#define RQSPIN__TAIL_MASK 0xffff0000u

/*
 * The per-thread record the fast paths touch. It is the first member of
 * the library's per-thread slot record (never unmapped, so other threads
 * may read a held table at any time for deadlock checks).
 */
struct rqspin__thread_hot {
	struct rqspin_held_locks held;
	uint64_t fast_acquired; /* written by the owner thread only */
};

/* initial-exec: a general-dynamic TLS access in a shared object can call
 * malloc on first touch, which a signal handler must not do. */
extern __thread struct rqspin__thread_hot *rqspin__tls_self
	__attribute__((tls_model("initial-exec")));

/* Gives the calling thread its record: a registry slot when one is free,
 * else a thread-local fallback. Async-signal-safe. Never returns NULL. */
RQSPIN_API struct rqspin__thread_hot *rqspin__self_slow(void);

static inline struct rqspin__thread_hot *rqspin__self(void)
{
	struct rqspin__thread_hot *t = rqspin__tls_self;

	if (RQSPIN__UNLIKELY(!t))
		t = rqspin__self_slow();
	return t;
}

/* Count an uncontended acquisition (after the CAS, off its critical
 * path). The counters are written by their own thread only, but a signal
 * handler on that thread may count too, so the increment must not be a
 * separate load and store. On x86-64 a single non-locked add is both
 * indivisible for our handlers and seen whole by readers, at a fraction
 * of a locked RMW's cost; elsewhere a relaxed atomic add. */
RQSPIN_API void rqspin__count_fast_cold(void);

static inline void rqspin__counter_inc(uint64_t *c)
{
#if defined(__x86_64__) && !defined(RQSPIN__TSAN)
	__asm__ __volatile__("addq $1, %0" : "+m"(*c));
#else
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
#endif
}

/* The same for a 32-bit count, returning its old value: the held table's
 * push (rqspin/static/rqspinlock.h), which a signal handler must never
 * see between the count's load and its store. */
static inline uint32_t rqspin__counter_bump32(uint32_t *c)
{
#if defined(__x86_64__) && !defined(RQSPIN__TSAN)
	uint32_t old = 1;

	__asm__ __volatile__("xaddl %0, %1" : "+r"(old), "+m"(*c));
	return old;
#else
	return __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
#endif
}

/* Takes back a bump (a push that found the table full), in one
 * instruction as far as our signal handlers go. */
static inline void rqspin__counter_drop32(uint32_t *c)
{
#if defined(__x86_64__) && !defined(RQSPIN__TSAN)
	__asm__ __volatile__("subl $1, %0" : "+m"(*c));
#else
	__atomic_fetch_sub(c, 1, __ATOMIC_RELAXED);
#endif
}

static inline void rqspin__count_fast_on(struct rqspin__thread_hot *t)
{
	rqspin__counter_inc(&t->fast_acquired);
}

static inline void rqspin__count_fast(void)
{
	struct rqspin__thread_hot *t = rqspin__tls_self;

	if (RQSPIN__LIKELY(t))
		rqspin__count_fast_on(t);
	else
		rqspin__count_fast_cold();
}

/* Valgrind (docs/valgrind.md): non-zero when the process runs under
 * Valgrind, set by the library at load time and never changed. Then the
 * inline lock functions call their out-of-line twins (rqspin__*_vg), which
 * describe each operation to helgrind or DRD; natively the cost is this
 * one load and a predictable branch. The library's own twins compile
 * without the test (RQSPIN__VALGRIND_INSIDE). */
extern RQSPIN_API int rqspin__valgrind;
#ifdef RQSPIN__VALGRIND_INSIDE
#define RQSPIN__ON_VALGRIND() 0
#else
#define RQSPIN__ON_VALGRIND() RQSPIN__UNLIKELY(rqspin__valgrind)
#endif

/* Misuse reports (abort with a message). Used by debug builds. */
RQSPIN_API __attribute__((noreturn, cold)) void
rqspin__misuse(const char *what, const void *lock);

/* rqspinlock is owner-unlocked: it uses TSan's mutex annotations (as
 * try-locks, so TSan's own lock-order checker stays out of deadlocks the
 * lock handles itself). qspinlock may be released by any thread, which
 * TSan's mutex model forbids, so it only marks the happens-before edge
 * from unlock to the next lock (RQSPIN__TSAN_ACQUIRE/RELEASE). */
#ifdef RQSPIN__TSAN
#include <sanitizer/tsan_interface.h>
#define RQSPIN__TSAN_ACQUIRE(l) __tsan_acquire((void *)(l))
#define RQSPIN__TSAN_RELEASE(l) __tsan_release((void *)(l))
#define RQSPIN__TSAN_PRE_LOCK(l, f) __tsan_mutex_pre_lock((void *)(l), (f))
#define RQSPIN__TSAN_POST_LOCK(l, f) __tsan_mutex_post_lock((void *)(l), (f), 0)
#define RQSPIN__TSAN_PRE_UNLOCK(l) __tsan_mutex_pre_unlock((void *)(l), 0)
#define RQSPIN__TSAN_POST_UNLOCK(l) __tsan_mutex_post_unlock((void *)(l), 0)
#define RQSPIN__TSAN_TRY __tsan_mutex_try_lock
#define RQSPIN__TSAN_TRY_FAILED (__tsan_mutex_try_lock | __tsan_mutex_try_lock_failed)
#else
#define RQSPIN__TSAN_ACQUIRE(l) ((void)0)
#define RQSPIN__TSAN_RELEASE(l) ((void)0)
#define RQSPIN__TSAN_PRE_LOCK(l, f) ((void)0)
#define RQSPIN__TSAN_POST_LOCK(l, f) ((void)0)
#define RQSPIN__TSAN_PRE_UNLOCK(l) ((void)0)
#define RQSPIN__TSAN_POST_UNLOCK(l) ((void)0)
#define RQSPIN__TSAN_TRY 0u
#define RQSPIN__TSAN_TRY_FAILED 0u
#endif

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_STATIC_LOCK_WORD_H */
