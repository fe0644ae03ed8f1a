/* SPDX-License-Identifier: MIT */
/*
 * rqspin_lock_stats_get() for qspinlock traffic:
 *  - a single-thread lock/unlock loop of N adds exactly N to `fast` and
 *    nothing to the slow-path counters;
 *  - a thread's counts survive its exit (folded in when it leaves, no loss,
 *    no double count when its slot is reused);
 *  - a deterministic contended scenario (lock held, one waiter observed on
 *    the pending bit, a second one observed in the queue) adds exactly one
 *    `pending` and one `queued` acquisition per round;
 *  - a free-running contended run moves the slow-path counters, and every
 *    acquisition is counted once (fast + pending + queued + stolen + nonode);
 *  - the call works inside a signal handler (documented async-signal-safe).
 */
#include <rqspin/lock_diag.h>
#include <rqspin/qspinlock.h>

#include "test_util.h"

typedef struct rqspin_lock_stats stats_t;

static stats_t stats(void)
{
	stats_t s;

	memset(&s, 0xff, sizeof(s));
	rqspin_lock_stats_get(&s);
	return s;
}

static uint64_t acquisitions(const stats_t *s)
{
	return s->fast + s->pending + s->queued + s->stolen + s->nonode;
}

static void print_delta(const char *what, const stats_t *a, const stats_t *b)
{
	printf("%-22s fast %llu pending %llu queued %llu stolen %llu parked %llu yielded %llu "
	       "nonode %llu | slots in use %llu high water %llu limit %llu\n",
	       what, (unsigned long long)(b->fast - a->fast),
	       (unsigned long long)(b->pending - a->pending),
	       (unsigned long long)(b->queued - a->queued),
	       (unsigned long long)(b->stolen - a->stolen),
	       (unsigned long long)(b->parked - a->parked),
	       (unsigned long long)(b->yielded - a->yielded),
	       (unsigned long long)(b->nonode - a->nonode),
	       (unsigned long long)b->slots_in_use, (unsigned long long)b->slots_high_water,
	       (unsigned long long)b->slot_limit);
}

/* Every counter is monotonic. */
static void check_monotonic(const stats_t *a, const stats_t *b)
{
	CHECK_GE_U64(b->fast, a->fast);
	CHECK_GE_U64(b->pending, a->pending);
	CHECK_GE_U64(b->queued, a->queued);
	CHECK_GE_U64(b->stolen, a->stolen);
	CHECK_GE_U64(b->parked, a->parked);
	CHECK_GE_U64(b->yielded, a->yielded);
	CHECK_GE_U64(b->nonode, a->nonode);
}

static void check_sane(const stats_t *s)
{
	CHECK(s->slot_limit > 0);
	CHECK_LE_U64(s->slots_high_water, s->slot_limit);
	CHECK_LE_U64(s->slots_in_use, s->slots_high_water);
	/* qspinlock never fails: no rqspinlock failure counters move. */
	CHECK_EQ_U64(s->aa + s->abba + s->cycle + s->nest_fail + s->timeout + s->owner_dead, 0);
}

/* ---- single thread --------------------------------------------------------- */

static qspinlock_t g_lock = QSPINLOCK_INIT;
static uint64_t g_count; /* protected by g_lock */

static void single_loop(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		qspin_lock(&g_lock);
		g_count++;
		qspin_unlock(&g_lock);
	}
}

static void *single_thread(void *p)
{
	single_loop((unsigned)(uintptr_t)p);
	return NULL;
}

static void test_single(void)
{
	const unsigned n = TU_ITERS(200000u);
	stats_t a = stats(), b;

	check_sane(&a);
	single_loop(n);
	b = stats();
	print_delta("single thread:", &a, &b);
	check_sane(&b);
	check_monotonic(&a, &b);
	/* Nobody else locks anything: exactly n fast acquisitions. */
	CHECK_EQ_U64(b.fast - a.fast, n);
	CHECK_EQ_U64(b.pending - a.pending, 0);
	CHECK_EQ_U64(b.queued - a.queued, 0);
	CHECK_EQ_U64(b.stolen - a.stolen, 0);
	CHECK_EQ_U64(b.nonode - a.nonode, 0);
	CHECK_EQ_U64(b.parked - a.parked, 0);
	CHECK(b.slots_in_use >= 1); /* main has locked: it has a slot */

	/* Threads that exit one after the other (reusing a slot): their
	 * counts are kept once each. */
	for (unsigned k = 1; k <= 4; k++) {
		stats_t c = stats(), d;
		unsigned m = n / 4 + k;

		tu_thread_join(tu_thread_start(single_thread, (void *)(uintptr_t)m));
		d = stats();
		check_sane(&d);
		check_monotonic(&c, &d);
		CHECK_EQ_U64(d.fast - c.fast, m);
		CHECK_EQ_U64(acquisitions(&d) - acquisitions(&c), m);
		CHECK_LE_U64(d.slots_in_use, c.slots_in_use);
	}
	CHECK_EQ_U64(g_count, n + 4ull * (n / 4) + 10);
}

/* ---- deterministic pending + queued ---------------------------------------- */

static qspinlock_t g_c = QSPINLOCK_INIT;
static uint64_t g_c_count; /* protected by g_c */

static void *contender(void *p)
{
	(void)p;
	qspin_lock(&g_c);
	g_c_count++;
	qspin_unlock(&g_c);
	return NULL;
}

static uint32_t word(const qspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_ACQUIRE);
}

static void test_pending_queued(void)
{
	const unsigned rounds = TU_ITERS(200u);
	stats_t a = stats(), b;

	for (unsigned r = 0; r < rounds; r++) {
		pthread_t t1, t2;

		qspin_lock(&g_c);
		/* First waiter: sets the pending bit (nothing else can). */
		t1 = tu_thread_start(contender, NULL);
		TU_WAIT_UNTIL(word(&g_c) & RQSPIN__PENDING_MASK);
		CHECK_EQ_U64(word(&g_c) & RQSPIN__TAIL_MASK, 0);
		/* Second waiter: the pending bit is taken, so it queues. */
		t2 = tu_thread_start(contender, NULL);
		TU_WAIT_UNTIL(word(&g_c) & RQSPIN__TAIL_MASK);
		CHECK(word(&g_c) & RQSPIN__PENDING_MASK);
		qspin_unlock(&g_c);
		tu_thread_join(t1);
		tu_thread_join(t2);
		CHECK_EQ_U64(word(&g_c), 0);
	}
	b = stats();
	print_delta("pending + queued:", &a, &b);
	check_sane(&b);
	check_monotonic(&a, &b);
	CHECK_EQ_U64(g_c_count, 2ull * rounds);
	CHECK_EQ_U64(b.fast - a.fast, rounds);       /* main */
	CHECK_EQ_U64(b.pending - a.pending, rounds); /* t1 of each round */
	CHECK_EQ_U64(b.queued - a.queued, rounds);   /* t2 of each round */
	CHECK_EQ_U64(acquisitions(&b) - acquisitions(&a), 3ull * rounds);
}

/* ---- free-running contention ---------------------------------------------- */

static qspinlock_t g_h = QSPINLOCK_INIT;
static volatile uint64_t g_h_count; /* protected by g_h */
static tu_barrier g_bar;

static void *hammer(void *p)
{
	unsigned n = (unsigned)(uintptr_t)p;

	tu_barrier_wait(&g_bar);
	for (unsigned i = 0; i < n; i++) {
		qspin_lock(&g_h);
		g_h_count = g_h_count + 1;
		qspin_unlock(&g_h);
	}
	return NULL;
}

static void test_contended(void)
{
	const unsigned nthreads = 8, n = TU_ITERS(500000u);
	pthread_t t[8];
	stats_t a = stats(), mid, b;

	/* Free-running threads need not contend (under qemu each can finish
	 * inside one time slice): main holds the lock until a waiter has
	 * taken the pending bit, so at least one slow-path acquisition is
	 * certain. */
	tu_barrier_init(&g_bar, nthreads);
	qspin_lock(&g_h);
	for (unsigned i = 0; i < nthreads; i++)
		t[i] = tu_thread_start(hammer, (void *)(uintptr_t)n);
	TU_WAIT_UNTIL(word(&g_h) & RQSPIN__PENDING_MASK);
	qspin_unlock(&g_h);
	/* A read racing with the traffic: sane, and no counter goes back. */
	mid = stats();
	check_sane(&mid);
	check_monotonic(&a, &mid);
	for (unsigned i = 0; i < nthreads; i++)
		tu_thread_join(t[i]);
	b = stats();
	print_delta("8 threads contended:", &a, &b);
	check_sane(&b);
	check_monotonic(&mid, &b);
	CHECK_EQ_U64(g_h_count, (uint64_t)nthreads * n);
	CHECK_EQ_U64(acquisitions(&b) - acquisitions(&a), (uint64_t)nthreads * n + 1);
	CHECK(b.pending + b.queued + b.stolen > a.pending + a.queued + a.stolen);
	CHECK_LE_U64(b.slots_in_use, a.slots_in_use);
}

/* ---- from a signal handler -------------------------------------------------- */

static volatile sig_atomic_t g_handler_ran;
static stats_t g_handler_stats;

static void stats_handler(int sig)
{
	int e = errno;

	(void)sig;
	qspin_lock(&g_lock);
	qspin_unlock(&g_lock);
	rqspin_lock_stats_get(&g_handler_stats);
	g_handler_ran = 1;
	errno = e;
}

static void test_in_handler(void)
{
	stats_t a = stats();

	tu_set_handler(SIGUSR1, stats_handler, SA_RESTART, NULL);
	CHECK(raise(SIGUSR1) == 0);
	CHECK(g_handler_ran);
	check_sane(&g_handler_stats);
	CHECK_EQ_U64(g_handler_stats.fast, a.fast + 1);
	tu_reset_handler(SIGUSR1);
}

int main(void)
{
	tu_watchdog(120);
	setvbuf(stdout, NULL, _IONBF, 0);
	test_single();
	test_pending_queued();
	test_contended();
	test_in_handler();
	puts("qspin_stats ok");
	return 0;
}
