/* SPDX-License-Identifier: MIT */
/*
 * The measured loop of `rqspin-bench lock`, written once and instantiated
 * per lock (lock_peers.c) with the lock's inline functions, so every lock
 * runs the same loop with its operations inlined, not called through a
 * pointer:
 *
 *   until stop:  [every 2^k-th time: t0 = clock]  lock
 *                [t1 = clock, record t1 - t0]
 *                critical section: read the shared counter, `cs` updates of
 *                a shared array, write counter + 1
 *                unlock; count++; `think` steps of private work
 *
 * The shared counter and array are plain (non-atomic) memory: only the lock
 * protects them. The counter is read at the start of the critical section
 * and written at its end, so two overlapping critical sections lose an
 * update and the final counter falls short of the sum of the acquisitions.
 */
#ifndef BENCH_LOCK_WORKER_H
#define BENCH_LOCK_WORKER_H

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "lock_impl.h"
#include "stats.h"

#define LW_ARRAY_LEN 64 /* power of two; 8 cache lines of shared data */

/* Failure kinds counted per thread (rqspin is the only lock that fails). */
enum lw_fail { LW_FAIL_EDEADLK, LW_FAIL_ETIMEDOUT, LW_FAIL_EOWNERDEAD, LW_FAIL_OTHER, LW_NFAIL };

/*
 * Start gate: workers check in (ready++) and wait for go; the main thread
 * waits until all are ready, then opens the gate and starts the clock. A
 * run whose threads could not all be created opens the gate with stop set.
 */
struct lw_gate {
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned ready;
	bool go;
};

static inline void lw_gate_wait(struct lw_gate *g)
{
	pthread_mutex_lock(&g->m);
	g->ready++;
	pthread_cond_broadcast(&g->cv);
	while (!g->go)
		pthread_cond_wait(&g->cv, &g->m);
	pthread_mutex_unlock(&g->m);
}

/* lw_run.c (rqspin-bench only). lw_gate_open: once `created` workers are
 * at the gate, start the clock and open it (with *stop set first when the
 * run failed to start); returns the start time (lw_now_ns). lw_sleep_until:
 * sleep to an lw_now_ns time. lw_join_by: join the n workers with one
 * deadline stall_ms from now, setting joined[i]; false if some did not
 * return. lw_detach_unjoined: let those go. */
uint64_t lw_gate_open(struct lw_gate *g, unsigned created, atomic_bool *stop, bool failed);
void lw_sleep_until(uint64_t end_ns);
bool lw_join_by(const pthread_t *tid, bool *joined, unsigned n, unsigned stall_ms);
void lw_detach_unjoined(const pthread_t *tid, const bool *joined, unsigned n);

/* Shared by all workers of one run. */
struct lw_shared {
	alignas(BL_CACHELINE) atomic_bool stop;
	alignas(BL_CACHELINE) uint64_t counter; /* protected by the lock */
	uint64_t array[LW_ARRAY_LEN];           /* protected by the lock */
};

/* One worker; each on its own cache lines. */
struct lw_thread {
	/* Written by the worker, read by the main thread at the stop. */
	alignas(BL_CACHELINE) _Atomic uint64_t count;
	/* Written by the worker, read after it was joined. */
	uint64_t fail[LW_NFAIL];
	uint64_t t_begin, t_end; /* the worker's own clock: gate passed, loop left */
	struct hist hist;
	/* Set up by the main thread before the start. */
	struct lw_shared *sh;
	void *obj;
	void *ctx;
	struct lw_gate *gate;
	unsigned cs;
	unsigned think;
	uint64_t sample_mask; /* time acquisition i when (i & mask) == 0 */
	uint64_t seed;
};

static inline uint64_t lw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static BL_ALWAYS_INLINE void lw_critical(struct lw_shared *sh, unsigned cs)
{
	/* volatile: one load at the start and one store at the end, not
	 * merged into a single increment by the compiler. */
	volatile uint64_t *vc = &sh->counter;
	uint64_t c = *vc;

	for (unsigned i = 0; i < cs; i++)
		sh->array[(c + i) & (LW_ARRAY_LEN - 1)] += c ^ i;
	*vc = c + 1;
}

static BL_ALWAYS_INLINE void lw_think(uint64_t *x, unsigned think)
{
	uint64_t v = *x;

	for (unsigned i = 0; i < think; i++) {
		v ^= v << 13;
		v ^= v >> 7;
		v ^= v << 17;
		__asm__ __volatile__("" : "+r"(v)); /* keep every step */
	}
	*x = v;
}

static inline void lw_count_fail(struct lw_thread *t, int err)
{
	switch (err) {
	case -EDEADLK:
		t->fail[LW_FAIL_EDEADLK]++;
		break;
	case -ETIMEDOUT:
		t->fail[LW_FAIL_ETIMEDOUT]++;
		break;
	case -EOWNERDEAD:
		t->fail[LW_FAIL_EOWNERDEAD]++;
		break;
	default:
		t->fail[LW_FAIL_OTHER]++;
		break;
	}
}

typedef int (*lw_lock_fn)(void *obj, void *ctx);
typedef void (*lw_unlock_fn)(void *obj, void *ctx);

/* The loop. Called with constant lock/unlock functions from an
 * instantiation, so both are inlined. */
static BL_ALWAYS_INLINE void lw_loop(struct lw_thread *t, lw_lock_fn lock, lw_unlock_fn unlock)
{
	struct lw_shared *sh = t->sh;
	void *obj = t->obj, *ctx = t->ctx;
	const unsigned cs = t->cs, think = t->think;
	const uint64_t mask = t->sample_mask;
	/* iter starts at 1 so that mask = UINT64_MAX never samples. */
	uint64_t n = 0, iter = 1, x = t->seed | 1;

	lw_gate_wait(t->gate);
	t->t_begin = lw_now_ns();
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		int err;

		if (__builtin_expect((iter++ & mask) == 0, 0)) {
			uint64_t t0 = lw_now_ns();

			err = lock(obj, ctx);
			hist_add(&t->hist, lw_now_ns() - t0);
		} else {
			err = lock(obj, ctx);
		}
		if (__builtin_expect(err != 0, 0)) {
			lw_count_fail(t, err);
			if (err != -EOWNERDEAD) /* -EOWNERDEAD: acquired anyway */
				continue;
		}
		lw_critical(sh, cs);
		unlock(obj, ctx);
		/* Owner-only counter: a relaxed store, no RMW. */
		atomic_store_explicit(&t->count, ++n, memory_order_relaxed);
		lw_think(&x, think);
	}
	t->t_end = lw_now_ns();
}

#endif /* BENCH_LOCK_WORKER_H */
