/* SPDX-License-Identifier: MIT */
/*
 * Thread churn: thousands of short-lived threads, created in waves and
 * joined each wave, each taking contended qspinlocks a few hundred times.
 * Registry slots must be given back at thread exit and reused, so the
 * registry stays as small as the peak number of live threads:
 *  - counters are exact (mutual exclusion across slot reuse: a new thread
 *    may get the slot, hence the MCS nodes, of one that just left);
 *  - slots_high_water stays <= 64 (peak concurrency is WAVE + main);
 *  - slots_in_use is back to at most 1 (main) after each wave's joins.
 * Some threads take their very first lock inside a signal handler (the
 * slot is then claimed in the handler), some only use the fast path, some
 * never lock, some leave with pthread_exit().
 */
#include <rqspin/lock_diag.h>
#include <rqspin/qspinlock.h>

#include "test_util.h"

#define WAVE 16
#define NLOCKS 3

struct guarded {
	qspinlock_t lock;
	volatile uint64_t a, b; /* equal outside the critical section */
} __attribute__((aligned(128)));

static struct guarded g_locks[NLOCKS];
static struct guarded g_private[WAVE]; /* one per wave position: uncontended */
static uint64_t g_sig_count;           /* protected by g_locks[0] */
static tu_barrier g_bar;

struct targ {
	unsigned serial;
	unsigned iters;
	uint64_t picks[NLOCKS]; /* written by the thread, read after join */
	uint64_t priv;
	bool sig_first;
};

static void critical(struct guarded *g)
{
	uint64_t a = g->a;

	CHECK(a == g->b);
	g->a = a + 1;
	g->b = g->b + 1;
}

static void first_lock_handler(int sig)
{
	int e = errno;

	(void)sig;
	qspin_lock(&g_locks[0].lock);
	critical(&g_locks[0]);
	g_sig_count++;
	qspin_unlock(&g_locks[0].lock);
	errno = e;
}

static void *churn_thread(void *p)
{
	struct targ *a = p;
	tu_rng rng;

	tu_rng_seed(&rng, a->serial);
	if (a->sig_first)
		CHECK(raise(SIGUSR1) == 0); /* first lock call in a handler */
	tu_barrier_wait(&g_bar);
	switch (a->serial % 8) {
	case 7: /* never locks */
		break;
	case 6: /* only uncontended locks (fast path) */
		for (unsigned i = 0; i < a->iters; i++) {
			struct guarded *g = &g_private[a->serial % WAVE];

			qspin_lock(&g->lock);
			critical(g);
			qspin_unlock(&g->lock);
			a->priv++;
		}
		break;
	default:
		for (unsigned i = 0; i < a->iters; i++) {
			unsigned k = tu_rng_below(&rng, NLOCKS);

			qspin_lock(&g_locks[k].lock);
			critical(&g_locks[k]);
			qspin_unlock(&g_locks[k].lock);
			a->picks[k]++;
		}
		break;
	}
	if (a->serial % 5 == 0)
		pthread_exit(NULL);
	return NULL;
}

int main(void)
{
	const unsigned total = TU_ITERS(5000u) / WAVE * WAVE;
	const unsigned iters = 300;
	static struct targ args[WAVE];
	uint64_t want[NLOCKS] = { 0 }, want_priv[WAVE] = { 0 }, sig_first = 0;
	uint64_t hw_first = 0, t0 = tu_now_ns();
	struct rqspin_lock_stats s;

	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);
	tu_set_handler(SIGUSR1, first_lock_handler, SA_RESTART, NULL);

	/* Main takes a slot too. */
	qspin_lock(&g_locks[0].lock);
	qspin_unlock(&g_locks[0].lock);

	for (unsigned base = 0; base < total; base += WAVE) {
		pthread_t t[WAVE];

		tu_barrier_init(&g_bar, WAVE);
		for (unsigned i = 0; i < WAVE; i++) {
			memset(&args[i], 0, sizeof(args[i]));
			args[i].serial = base + i;
			args[i].iters = iters;
			args[i].sig_first = (base + i) % 7 == 3;
			t[i] = tu_thread_start(churn_thread, &args[i]);
		}
		for (unsigned i = 0; i < WAVE; i++) {
			tu_thread_join(t[i]);
			for (int k = 0; k < NLOCKS; k++)
				want[k] += args[i].picks[k];
			want_priv[args[i].serial % WAVE] += args[i].priv;
			sig_first += args[i].sig_first;
		}
		rqspin_lock_stats_get(&s);
		if (base == 0)
			hw_first = s.slots_high_water;
		/* Exited threads gave their slots back: only main's is left. */
		if (s.slots_in_use > 1) {
			fprintf(stderr, "after wave %u: slots_in_use %llu\n", base / WAVE,
				(unsigned long long)s.slots_in_use);
			CHECK(s.slots_in_use <= 1);
		}
		CHECK_LE_U64(s.slots_high_water, 64);
	}

	want[0] += sig_first; /* the handlers' critical sections */
	for (int k = 0; k < NLOCKS; k++) {
		CHECK(!qspin_is_locked(&g_locks[k].lock));
		CHECK_EQ_U64(g_locks[k].a, want[k]);
		CHECK_EQ_U64(g_locks[k].b, want[k]);
	}
	for (int k = 0; k < WAVE; k++)
		CHECK_EQ_U64(g_private[k].a, want_priv[k]);
	CHECK_EQ_U64(g_sig_count, sig_first);

	rqspin_lock_stats_get(&s);
	printf("qspin_churn: %u threads in waves of %d ok: slots in use %llu, high water %llu "
	       "(%llu after the first wave), limit %llu; %.0f ms\n",
	       total, WAVE, (unsigned long long)s.slots_in_use,
	       (unsigned long long)s.slots_high_water, (unsigned long long)hw_first,
	       (unsigned long long)s.slot_limit, (double)(tu_now_ns() - t0) / 1e6);
	CHECK_LE_U64(s.slots_in_use, 1);
	CHECK_LE_U64(s.slots_high_water, 64);
	/* Reuse, not growth: at most a wave's worth beyond the first wave. */
	CHECK_LE_U64(s.slots_high_water, hw_first + WAVE);
	return 0;
}
