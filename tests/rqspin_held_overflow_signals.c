/* SPDX-License-Identifier: MIT */
/*
 * The held table past its 31 entries, unlocked in random orders, while
 * nested signal handlers take and release locks of their own.
 *
 * Each of two workers holds 25-40 locks per round (so the top of the
 * table is often untracked: counted, not recorded) and releases them in
 * a random order. A per-thread POSIX timer fires every 50 us; its
 * handler (SA_NODEFER, so handlers nest up to three deep) takes 1-3
 * locks of its depth's own set and releases them in LIFO order, which is
 * what rqspinlock.h asks of a handler. Checked:
 *   - in every handler, the table's count when it returns equals the
 *     count when it was entered (it interrupted a push, a pop, an
 *     out-of-order removal or an untracked unlock anywhere);
 *   - every handler's lock call succeeds (its locks are its own);
 *   - during the unlocks every entry is NULL, a RELEASED mark (an
 *     out-of-order unlock in a full table marks its entry in place) or a
 *     lock the worker still holds;
 *   - after every round the worker's count, read afresh (which drops the
 *     marks on top), is 0, every entry is NULL and every lock of the round
 *     is free (no entry leaks, none is lost).
 * Bounded by rounds, not time; the outcome does not depend on where the
 * signals land.
 */
#include <signal.h>

#include "rqspin_util.h"

#define NTHREADS 2
#define NLOCKS 40
#define MIN_DEPTH 25
#define NEST 3
#define HANDLER_LOCKS 4
#define TIMER_NS (50 * 1000ull)

static rqspinlock_t locks[NTHREADS][NLOCKS];
static rqspinlock_t hlocks[NTHREADS][NEST][HANDLER_LOCKS];

static __thread int self_idx;
static __thread volatile int depth;
static __thread unsigned long handled;
static _Atomic unsigned long handled_total;
static _Atomic unsigned handler_count_changed, handler_lock_failed;

static void handler(int sig)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();
	uint32_t cnt_in = h->cnt;
	unsigned n, i, first;
	int d;

	(void)sig;
	if (depth >= NEST)
		return;
	d = depth++;
	first = (unsigned)(handled * 7) % HANDLER_LOCKS;
	n = 1 + (unsigned)(handled % 3);
	for (i = 0; i < n; i++) {
		if (rqspin_lock(&hlocks[self_idx][d][(first + i) % HANDLER_LOCKS]) != 0) {
			atomic_fetch_add(&handler_lock_failed, 1);
			n = i;
			break;
		}
	}
	while (n-- > 0)
		rqspin_unlock(&hlocks[self_idx][d][(first + n) % HANDLER_LOCKS]);
	if (h->cnt != cnt_in)
		atomic_fetch_add(&handler_count_changed, 1);
	handled++;
	depth--;
}

/* Every tracked entry is NULL, a mark, or a lock of ours not unlocked. */
static bool entries_held(const struct rqspin_held_locks *h, const bool *unlocked)
{
	uint32_t n = h->cnt < RQSPIN_NR_HELD ? h->cnt : RQSPIN_NR_HELD;

	for (uint32_t i = 0; i < n; i++) {
		const void *e = h->locks[i];
		const rqspinlock_t *l = e;

		if (!e || e == RQSPIN__HELD_RELEASED)
			continue;
		if (l < &locks[self_idx][0] || l >= &locks[self_idx][NLOCKS] ||
		    unlocked[l - &locks[self_idx][0]])
			return false;
	}
	return true;
}

static void *worker(void *arg)
{
	const struct rqspin_held_locks *h;
	unsigned seed = 12345u + (unsigned)(uintptr_t)arg;
	unsigned rounds = TU_ITERS(200000), r;
	int order[NLOCKS];
	timer_t tm;

	self_idx = (int)(uintptr_t)arg;
	/* Registers the thread before any handler runs. */
	h = rqspin_held_locks();
	tm = ru_timer_start(ru_gettid(), SIGRTMIN, TIMER_NS, TIMER_NS);
	for (r = 0; r < rounds; r++) {
		int n = MIN_DEPTH + (int)(rand_r(&seed) % (NLOCKS - MIN_DEPTH + 1)), i;
		bool clean = true, unlocked[NLOCKS] = { false };

		for (i = 0; i < n; i++) {
			RU_CHECK_RET(rqspin_lock(&locks[self_idx][i]), 0);
			order[i] = i;
		}
		for (i = n - 1; i > 0; i--) {
			int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
		for (i = 0; i < n; i++) {
			rqspin_unlock(&locks[self_idx][order[i]]);
			unlocked[order[i]] = true;
			if (!entries_held(h, unlocked))
				clean = false;
		}
		h = rqspin_held_locks();
		if (h->cnt != 0)
			clean = false;
		for (i = 0; i < RQSPIN_NR_HELD; i++)
			if (h->locks[i] != NULL)
				clean = false;
		for (i = 0; i < n; i++)
			if (rqspin_is_locked(&locks[self_idx][i]))
				clean = false;
		RU_EXPECT(clean, "thread %d round %u (%d locks): count %u after the unlocks",
			  self_idx, r, n, h->cnt);
		if (!clean)
			break;
	}
	ru_timer_stop(tm);
	atomic_fetch_add(&handled_total, handled);
	return NULL;
}

int main(void)
{
	pthread_t t[NTHREADS];
	int i;

	tu_set_handler(SIGRTMIN, handler, SA_RESTART | SA_NODEFER, NULL);
	tu_watchdog(120);
	for (i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (i = 0; i < NTHREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	printf("handlers run: %lu\n", atomic_load(&handled_total));
	RU_EXPECT(atomic_load(&handled_total) > 0, "no handler ran");
	RU_EXPECT(atomic_load(&handler_count_changed) == 0,
		  "%u handlers returned with a different table count",
		  atomic_load(&handler_count_changed));
	RU_EXPECT(atomic_load(&handler_lock_failed) == 0, "%u handler lock calls failed",
		  atomic_load(&handler_lock_failed));
	return ru_finish("rqspin_held_overflow_signals");
}
