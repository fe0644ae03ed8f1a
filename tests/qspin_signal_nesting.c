/* SPDX-License-Identifier: MIT */
/*
 * Signal handlers that take OTHER qspinlocks while the interrupted code
 * holds or waits for one.
 *
 * Part 1 (deterministic nesting): a target thread waits in the MCS queue
 * of lock L0; a signal interrupts that wait and its handler queues on L1;
 * a second signal interrupts that handler, which queues on L2; then L3,
 * and a 5th level on L4, past the 4 MCS nodes per thread, which takes the
 * no-node fallback. The main thread holds L0..L4 the whole time and steers:
 * it sends the next signal only after it has seen the previous level queue
 * (the lock word's tail index names the nesting level), then releases the
 * locks (innermost first, or outermost first in alternate rounds) and
 * checks that the levels completed innermost first. A helper thread per
 * lock holds the pending bit so that the target really queues. (Under
 * ThreadSanitizer only one handler level: see g_nlevels.)
 *
 * Part 2 (random points): worker threads contend on lock A (so they sit in
 * the pending/queue/parked slow path), while signals arrive at random
 * points: SIGUSR1 from the main thread (pthread_kill) whose handler takes
 * lock B, and SIGUSR2 from a per-thread timer (timer_create with
 * SIGEV_THREAD_ID) whose handler takes lock C. Lock order A < B < C is
 * kept by blocking SIGUSR1 in the SIGUSR2 handler. The non-atomic counters
 * of A, B and C must be exact at the end; handler runs are counted per
 * thread. Signals are stopped before the workers exit.
 */
#include <rqspin/lock_diag.h>
#include <rqspin/qspinlock.h>

#include <sys/syscall.h>
#include <time.h>

#include "guarded.h"
#include "test_util.h"

#define NLEVELS 5 /* 0: normal code, 1..4: nested handlers (4 = no node) */

/*
 * Levels used in part 1. Under ThreadSanitizer only 2: TSan defers an
 * asynchronous signal that lands outside a blocking libc call and runs the
 * handler later with ALL signals blocked, so a handler can never be
 * interrupted by the next signal there, and a handler that (as here) waits
 * for the nested one would wait forever. One level of handler still runs.
 */
#ifdef TU_TSAN
static const int g_nlevels = 2;
#else
static const int g_nlevels = NLEVELS;
#endif

static uint32_t word(const qspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_ACQUIRE);
}

static uint32_t tail_idx(uint32_t w)
{
	return (w >> RQSPIN__TAIL_IDX_OFFSET) & ((1u << RQSPIN__TAIL_IDX_BITS) - 1);
}

/* ---- part 1 ------------------------------------------------------------------ */

static qspinlock_t g_L[NLEVELS];
static uint64_t g_cnt[NLEVELS];       /* protected by g_L[i] */
static atomic_int g_entered[NLEVELS]; /* level i started waiting */
static atomic_int g_done[NLEVELS];    /* level i got, used and released L[i] */
static atomic_int g_seq;
static int g_order[NLEVELS];          /* completion order */
static int g_sig[NLEVELS];            /* signal that starts level i (i >= 1) */

static void level(int i)
{
	atomic_store(&g_entered[i], 1);
	qspin_lock(&g_L[i]);
	CHECK(qspin_is_locked(&g_L[i]));
	g_cnt[i]++;
	/* Inner levels finished before this one got its lock. */
	for (int j = i + 1; j < g_nlevels; j++)
		CHECK(atomic_load(&g_done[j]) == 1);
	g_order[i] = atomic_fetch_add(&g_seq, 1);
	qspin_unlock(&g_L[i]);
	atomic_store(&g_done[i], 1);
}

static void nest_handler(int sig)
{
	int e = errno;

	for (int i = 1; i < g_nlevels; i++) {
		if (g_sig[i] == sig) {
			level(i);
			errno = e;
			return;
		}
	}
	CHECK(!"unexpected signal");
}

static void *target(void *p)
{
	(void)p;
	level(0);
	return NULL;
}

static void *pending_helper(void *p)
{
	qspinlock_t *l = p;

	qspin_lock(l);
	g_cnt[l - g_L]++;
	qspin_unlock(l);
	return NULL;
}

static void nesting_round(bool inner_first)
{
	pthread_t helper[NLEVELS], t;

	const int n = g_nlevels;

	for (int i = 0; i < n; i++) {
		atomic_store(&g_entered[i], 0);
		atomic_store(&g_done[i], 0);
		qspin_lock(&g_L[i]);
	}
	atomic_store(&g_seq, 0);
	/* A pending waiter on every lock: later arrivals must queue. */
	for (int i = 0; i < n; i++) {
		helper[i] = tu_thread_start(pending_helper, &g_L[i]);
		TU_WAIT_UNTIL(word(&g_L[i]) & RQSPIN__PENDING_MASK);
	}

	t = tu_thread_start(target, NULL);
	for (int i = 0; i < n; i++) {
		if (i > 0)
			CHECK_OK(pthread_kill(t, g_sig[i]));
		TU_WAIT_UNTIL(atomic_load(&g_entered[i]));
		if (i < 4) {
			/* Levels 0-3 queue with MCS node i: the tail names it. */
			TU_WAIT_UNTIL(word(&g_L[i]) & RQSPIN__TAIL_MASK);
			CHECK_EQ_U64(tail_idx(word(&g_L[i])), (uint64_t)i);
		}
	}
	if (n > 4) {
		/* Level 4 has no node: it spins/yields on the word, never
		 * queues. Give it a moment to get there (not needed for
		 * correctness). */
		for (int k = 0; k < 100; k++)
			sched_yield();
		CHECK_EQ_U64(word(&g_L[4]) & RQSPIN__TAIL_MASK, 0);
	}
	for (int i = 0; i < n; i++)
		CHECK(atomic_load(&g_done[i]) == 0);

	if (inner_first) {
		/* Release innermost first, waiting for each level to finish. */
		for (int i = n - 1; i >= 0; i--) {
			qspin_unlock(&g_L[i]);
			TU_WAIT_UNTIL(atomic_load(&g_done[i]));
		}
	} else {
		/* Release outermost first: the outer waits are granted (or
		 * handed over to the interrupted waiter's node) while the
		 * handlers still wait on the inner locks. */
		for (int i = 0; i < n; i++) {
			qspin_unlock(&g_L[i]);
			if (i == 0) {
				/* The pending helper takes L0 and leaves; the
				 * target stays queued (it is busy in its
				 * handlers): L0 is free with a waiter queued,
				 * and trylock must not jump that queue. */
				uint32_t w;

				tu_thread_join(helper[0]);
				w = word(&g_L[0]);
				CHECK_EQ_U64(w & RQSPIN__LOCKED_PENDING_MASK, 0);
				CHECK(w & RQSPIN__TAIL_MASK);
				CHECK(!qspin_is_locked(&g_L[0]));
				CHECK(!qspin_trylock(&g_L[0]));
				CHECK(atomic_load(&g_done[0]) == 0);
			}
			sched_yield();
		}
	}
	tu_thread_join(t);
	for (int i = inner_first ? 0 : 1; i < n; i++)
		tu_thread_join(helper[i]);
	for (int i = 0; i < n; i++) {
		CHECK(atomic_load(&g_done[i]) == 1);
		CHECK_EQ_U64(g_order[i], (uint64_t)(n - 1 - i)); /* innermost first */
		CHECK_EQ_U64(word(&g_L[i]), 0);
	}
}

static void part1(void)
{
	const unsigned rounds = TU_ITERS(40u);
	struct rqspin_lock_stats a, b;
	uint64_t t0 = tu_now_ns();

	g_sig[1] = SIGUSR1;
	g_sig[2] = SIGUSR2;
	g_sig[3] = SIGRTMIN;
	g_sig[4] = SIGRTMIN + 1;
	for (int i = 1; i < g_nlevels; i++)
		tu_set_handler(g_sig[i], nest_handler, SA_RESTART, NULL);

	rqspin_lock_stats_get(&a);
	for (unsigned r = 0; r < rounds; r++)
		nesting_round(r % 2 == 0);
	rqspin_lock_stats_get(&b);
	for (int i = 0; i < g_nlevels; i++)
		CHECK_EQ_U64(g_cnt[i], 2ull * rounds); /* helper + target */
	/* Level 4 of every round went through the no-node path. */
	if (g_nlevels > 4)
		CHECK_GE_U64(b.nonode - a.nonode, rounds);
	for (int i = 1; i < g_nlevels; i++)
		tu_reset_handler(g_sig[i]);
	printf("part 1: %u rounds of %d-level nesting ok (nonode +%llu, queued +%llu; %.0f ms)\n",
	       rounds, g_nlevels, (unsigned long long)(b.nonode - a.nonode),
	       (unsigned long long)(b.queued - a.queued), (double)(tu_now_ns() - t0) / 1e6);
}

/* ---- part 2 ------------------------------------------------------------------ */

#define NWORKERS 6


static struct guarded g_A, g_B, g_C;

static void critical(struct guarded *g, uint32_t r)
{
	guarded_locked_update(g, r, 0);
}

struct worker {
	pthread_t thread;
	unsigned id;
	unsigned iters;
	_Atomic uint64_t b_runs; /* written by this thread's handlers only */
	_Atomic uint64_t c_runs;
	tu_rng hrng;             /* used by this thread's handlers only */
	atomic_int ready;
} __attribute__((aligned(128)));

static struct worker g_w[NWORKERS];
static __thread struct worker *tl_me;
static atomic_int g_done_workers;
static atomic_int g_stop_signals;

static void b_handler(int sig) /* SIGUSR1: takes B */
{
	int e = errno;
	struct worker *me = tl_me;

	(void)sig;
	CHECK(me != NULL);
	critical(&g_B, (uint32_t)tu_rng_next(&me->hrng));
	atomic_fetch_add_explicit(&me->b_runs, 1, memory_order_relaxed);
	errno = e;
}

static void c_handler(int sig) /* SIGUSR2: takes C; SIGUSR1 blocked meanwhile */
{
	int e = errno;
	struct worker *me = tl_me;

	(void)sig;
	CHECK(me != NULL);
	critical(&g_C, (uint32_t)tu_rng_next(&me->hrng));
	atomic_fetch_add_explicit(&me->c_runs, 1, memory_order_relaxed);
	errno = e;
}

static void *worker_main(void *p)
{
	struct worker *me = p;
	struct sigevent sev;
	struct itimerspec its;
	timer_t timer;
	tu_rng rng;

	tu_rng_seed(&rng, me->id);
	tu_rng_seed(&me->hrng, 100 + me->id);
	tl_me = me;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR2;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
	memset(&its, 0, sizeof(its));
	its.it_value.tv_nsec = 50000 + 7000 * (long)me->id;
	its.it_interval.tv_nsec = 150000 + 13000 * (long)me->id;
	CHECK(timer_settime(timer, 0, &its, NULL) == 0);
	atomic_store(&me->ready, 1);

	for (unsigned i = 0; i < me->iters; i++) {
		uint32_t r = (uint32_t)tu_rng_next(&rng);

		critical(&g_A, r);
		if (r % 64 == 0)
			sched_yield();
	}
	/* Both kinds of handler have run at least once before we stop. */
	TU_WAIT_UNTIL(atomic_load(&me->c_runs) > 0 && atomic_load(&me->b_runs) > 0);
	CHECK(timer_delete(timer) == 0);
	atomic_fetch_add(&g_done_workers, 1);
	TU_WAIT_UNTIL(atomic_load(&g_stop_signals));
	return NULL;
}

static void part2(void)
{
	static const int block_b[] = { SIGUSR1, 0 };
	uint64_t kills = 0, sum_b = 0, sum_c = 0, t0 = tu_now_ns();

	tu_set_handler(SIGUSR1, b_handler, SA_RESTART, NULL);
	tu_set_handler(SIGUSR2, c_handler, SA_RESTART, block_b);
	for (int i = 0; i < NWORKERS; i++) {
		g_w[i].id = (unsigned)i + 1;
		g_w[i].iters = TU_ITERS(300000u);
		g_w[i].thread = tu_thread_start(worker_main, &g_w[i]);
	}
	for (int i = 0; i < NWORKERS; i++)
		TU_WAIT_UNTIL(atomic_load(&g_w[i].ready));

	/* Signal the workers round robin until all have finished; every
	 * worker waits for g_stop_signals, so every target is alive. */
	for (unsigned k = 0; atomic_load(&g_done_workers) < NWORKERS; k++) {
		CHECK_OK(pthread_kill(g_w[k % NWORKERS].thread, SIGUSR1));
		kills++;
		if (k % NWORKERS == NWORKERS - 1)
			tu_sleep_us(100);
	}
	atomic_store(&g_stop_signals, 1);
	for (int i = 0; i < NWORKERS; i++)
		tu_thread_join(g_w[i].thread);

	for (int i = 0; i < NWORKERS; i++) {
		CHECK(atomic_load(&g_w[i].b_runs) > 0);
		CHECK(atomic_load(&g_w[i].c_runs) > 0);
		sum_b += atomic_load(&g_w[i].b_runs);
		sum_c += atomic_load(&g_w[i].c_runs);
	}
	CHECK_EQ_U64(g_A.a, (uint64_t)NWORKERS * TU_ITERS(300000u));
	CHECK_EQ_U64(g_A.b, g_A.a);
	CHECK_EQ_U64(g_B.a, sum_b);
	CHECK_EQ_U64(g_B.b, sum_b);
	CHECK_EQ_U64(g_C.a, sum_c);
	CHECK_EQ_U64(g_C.b, sum_c);
	CHECK(!qspin_is_locked(&g_A.lock) && !qspin_is_locked(&g_B.lock) &&
	      !qspin_is_locked(&g_C.lock));
	tu_reset_handler(SIGUSR1);
	tu_reset_handler(SIGUSR2);
	printf("part 2: %d workers, A %llu, B %llu handler runs (%llu kills), C %llu timer "
	       "handler runs ok (%.0f ms)\n",
	       NWORKERS, (unsigned long long)g_A.a, (unsigned long long)sum_b,
	       (unsigned long long)kills, (unsigned long long)sum_c,
	       (double)(tu_now_ns() - t0) / 1e6);
}

int main(void)
{
	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);
	part1();
	part2();
	return 0;
}
