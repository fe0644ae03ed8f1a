/* SPDX-License-Identifier: MIT */
/*
 * The shim's barging bound (slowpath.c, "Barging"): the waiter that holds
 * the pending bit asks for the hand-off once it has waited HANDOFF_NS, and
 * then spins for the lock instead of sleeping through the release.
 *
 * A holder thread barges for ever: lock, ~5 us of work, unlock, lock
 * again at once, so a waiter gets the lock only by asking for it. The
 * waiter counts its naps (the stats' `yielded`) per acquisition. Past its
 * spin budget (~30 us) a waiter naps between checks; the hand-off is due
 * after 50 us, so an acquisition needs about one nap. The old code looked
 * at the clock only every 8th nap and kept napping after it had asked,
 * which took 9 or more naps (~600 us with the default 50 us timer slack),
 * with the lock lying free during the last one.
 *
 * The waiter holds another lock (outer), so it skips the shim's
 * glibc-like watch and enters the slow path at once (pthread_shim.c, "The
 * watch"); a watch would take the lock as the holder lets go, no naps.
 *
 * Naps, not time: a waiter preempted while it spins naps less, not more.
 * A holder preempted while the waiter waits costs naps in old and new code
 * alike, so only trials where the holder kept running (its iterations
 * during the wait match the wait's length) are judged, by their median;
 * on a machine too busy for enough such trials the test skips.
 */
#include <pthread.h>
#include <stdlib.h>

#include <rqspin/lock_diag.h>

#include "test_util.h"

#define TRIALS 41
#define MIN_JUDGED 9
#define HOLD_NS 5000u
#define MAX_MEDIAN_NAPS 5u

static pthread_spinlock_t lock, outer;
static atomic_uint stop;
static atomic_ullong holder_iters;
static uint64_t counter; /* protected by lock, deliberately plain */

static void *holder(void *arg)
{
	(void)arg;
	/* Relaxed: only ends the loop; the join orders the rest. */
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t end;

		CHECK(pthread_spin_lock(&lock) == 0);
		counter++;
		end = tu_now_ns() + HOLD_NS;
		while (tu_now_ns() < end)
			;
		CHECK(pthread_spin_unlock(&lock) == 0);
		/* Relaxed: a progress count, read only as a number. */
		atomic_fetch_add_explicit(&holder_iters, 1, memory_order_relaxed);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	uint64_t naps[TRIALS], mine = 0;
	unsigned judged = 0;
	pthread_t h;

	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_init(&outer, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_lock(&outer) == 0);
	h = tu_thread_start(holder, NULL);
	for (int i = 0; i < TRIALS; i++) {
		struct rqspin_lock_stats before, after;
		uint64_t t0, t1, it0, it1;

		tu_sleep_us(2000); /* the holder runs alone for a while */
		rqspin_lock_stats_get(&before);
		it0 = atomic_load_explicit(&holder_iters, memory_order_relaxed);
		t0 = tu_now_ns();
		CHECK(pthread_spin_lock(&lock) == 0);
		t1 = tu_now_ns();
		it1 = atomic_load_explicit(&holder_iters, memory_order_relaxed);
		rqspin_lock_stats_get(&after);
		counter++;
		mine++;
		CHECK(pthread_spin_unlock(&lock) == 0);
		/* The holder ran throughout: at least half the sections the
		 * wait had room for (one per HOLD_NS, less the one in hand). */
		if ((it1 - it0 + 1) * HOLD_NS * 2 >= t1 - t0)
			naps[judged++] = after.yielded - before.yielded;
	}
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	tu_thread_join(h);
	CHECK(pthread_spin_unlock(&outer) == 0);
	CHECK(counter > mine); /* the holder ran too */

	if (judged < MIN_JUDGED) {
		printf("SKIP: the holder was preempted in all but %u of %d trials\n", judged,
		       TRIALS);
		return 77;
	}
	qsort(naps, judged, sizeof(naps[0]), cmp_u64);
	printf("shim_handoff_bound: %u trials judged; naps per acquisition min %llu median "
	       "%llu max %llu\n",
	       judged, (unsigned long long)naps[0], (unsigned long long)naps[judged / 2],
	       (unsigned long long)naps[judged - 1]);
	CHECK_LE_U64(naps[judged / 2], MAX_MEDIAN_NAPS);
	CHECK(pthread_spin_destroy(&lock) == 0);
	return 0;
}
