/* SPDX-License-Identifier: MIT */
/*
 * qspinlock mutual exclusion.
 *
 * Each lock protects plain (non-atomic) data: two counters that must be
 * equal and a small array whose sum must equal a stored checksum. Inside
 * the critical section a thread first checks the invariants, then breaks
 * them temporarily (read-modify-write with a window in between) and
 * restores them before unlocking. Any overlap of two critical sections
 * shows up as a failed invariant or a lost update (final count).
 *
 * Phases: one lock at 1, 2, 4 and 16 threads (16 oversubscribes a 2-core
 * machine, so waiters get descheduled and the slow path must park/yield),
 * then 4 locks picked by a per-thread PRNG with per-lock counters, with a
 * share of acquisitions done by a trylock loop.
 */
#include <rqspin/qspinlock.h>

#include "guarded.h"
#include "test_util.h"


/* The critical section body; the lock is held. */
static void critical(struct guarded *g, uint32_t r)
{
	guarded_update(g, r, 7);
}

static void acquire(qspinlock_t *l, bool use_trylock)
{
	if (use_trylock) {
		unsigned tries = 0;

		while (!qspin_trylock(l)) {
			if (++tries % 16 == 0)
				sched_yield();
		}
	} else {
		qspin_lock(l);
	}
	CHECK(qspin_is_locked(l));
}

/* ---- phase 1: one lock ---------------------------------------------------- */

static struct guarded g_single;
static tu_barrier g_start;

struct single_arg {
	unsigned iters;
	unsigned id;
};

static void *single_worker(void *p)
{
	struct single_arg *a = p;
	tu_rng rng;

	tu_rng_seed(&rng, a->id);
	tu_barrier_wait(&g_start);
	for (unsigned i = 0; i < a->iters; i++) {
		uint32_t r = (uint32_t)tu_rng_next(&rng);

		acquire(&g_single.lock, (r >> 24) % 8 == 0);
		critical(&g_single, r);
		qspin_unlock(&g_single.lock);
	}
	return NULL;
}

static void run_single(unsigned nthreads, unsigned iters)
{
	struct single_arg args[16];
	uint64_t t0 = tu_now_ns();

	CHECK(nthreads <= 16);
	guarded_init(&g_single);
	tu_barrier_init(&g_start, nthreads);
	for (unsigned i = 0; i < nthreads; i++)
		args[i] = (struct single_arg){ .iters = iters, .id = i + 1 };
	tu_run_threads((int)nthreads, single_worker, args, sizeof(args[0]));
	CHECK(!qspin_is_locked(&g_single.lock));
	CHECK_EQ_U64(g_single.a, (uint64_t)nthreads * iters);
	CHECK_EQ_U64(g_single.b, (uint64_t)nthreads * iters);
	CHECK_EQ_U64(g_single.lock.w.val, 0); /* no stale pending/tail bits */
	printf("single lock: %2u threads x %u iterations ok (%.1f ms)\n", nthreads, iters,
	       (double)(tu_now_ns() - t0) / 1e6);
}

/* ---- phase 2: several locks --------------------------------------------- */

#define NLOCKS 4
static struct guarded g_multi[NLOCKS];

struct multi_arg {
	unsigned iters;
	unsigned id;
	uint64_t picks[NLOCKS]; /* how often this thread took each lock */
};

static void *multi_worker(void *p)
{
	struct multi_arg *a = p;
	tu_rng rng;

	tu_rng_seed(&rng, 1000 + a->id);
	tu_barrier_wait(&g_start);
	for (unsigned i = 0; i < a->iters; i++) {
		uint32_t r = (uint32_t)tu_rng_next(&rng);
		unsigned k = tu_rng_below(&rng, NLOCKS);

		acquire(&g_multi[k].lock, (r >> 24) % 8 == 0);
		critical(&g_multi[k], r);
		qspin_unlock(&g_multi[k].lock);
		a->picks[k]++;
	}
	return NULL;
}

static void run_multi(unsigned nthreads, unsigned iters)
{
	struct multi_arg args[16];
	uint64_t t0 = tu_now_ns();

	CHECK(nthreads <= 16);
	for (int k = 0; k < NLOCKS; k++)
		guarded_init(&g_multi[k]);
	tu_barrier_init(&g_start, nthreads);
	memset(args, 0, sizeof(args));
	for (unsigned i = 0; i < nthreads; i++) {
		args[i].iters = iters;
		args[i].id = i;
	}
	tu_run_threads((int)nthreads, multi_worker, args, sizeof(args[0]));
	uint64_t total = 0;
	for (int k = 0; k < NLOCKS; k++) {
		uint64_t want = 0;

		for (unsigned i = 0; i < nthreads; i++)
			want += args[i].picks[k];
		CHECK(!qspin_is_locked(&g_multi[k].lock));
		CHECK_EQ_U64(g_multi[k].lock.w.val, 0);
		CHECK_EQ_U64(g_multi[k].a, want);
		CHECK_EQ_U64(g_multi[k].b, want);
		total += want;
	}
	CHECK_EQ_U64(total, (uint64_t)nthreads * iters);
	printf("%d locks: %2u threads x %u iterations ok (%.1f ms)\n", NLOCKS, nthreads, iters,
	       (double)(tu_now_ns() - t0) / 1e6);
}

int main(void)
{
	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);

	static const unsigned threads[] = { 1, 2, 4, 16 };
	for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++)
		run_single(threads[i], TU_ITERS(4000000u) / threads[i]);
	run_multi(8, TU_ITERS(500000u));
	run_multi(16, TU_ITERS(250000u));
	return 0;
}
