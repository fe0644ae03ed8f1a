/* SPDX-License-Identifier: MIT */
/*
 * Mutual exclusion under the shim's barging (slowpath.c, "Barging"), in
 * every build flavour: the shim's source is linked into this program, whose
 * pthread_spin_* then are the shim's (a program's own definitions come
 * before libc's, and before the sanitizer runtimes' interceptors).
 *
 * Threads lock in a tight loop, with trylock in between, and every 64th
 * critical section is long enough that the waiter holding the pending bit
 * passes its bound and asks for the hand-off while running threads barge.
 * A plain counter and a shadow copy checked inside every critical section
 * find any overlap. A long critical section lasts until the hand-off bit
 * appears in the word (at most 2 ms, a bound on the hold, not a check), and
 * counts it: the test requires that the bounded-barging path ran.
 *
 * Odd-numbered workers hold a lock of their own throughout, so they skip
 * the shim's glibc-like watch and enter the slow path at once (they ask
 * for the hand-off); even ones watch first (pthread_shim.c, "The watch").
 *
 * First, deterministically: the fast path's byte CAS cannot see the
 * hand-off bit, so the load before it must keep it off a word that has it,
 * for pthread_spin_trylock and for pthread_spin_lock alike.
 */
#include <pthread.h>

#include "test_util.h"

#define THREADS 4
#define PENDING_BIT (1u << 8)
#define HANDOFF_BIT (1u << 9)

static pthread_spinlock_t lock;
static uint64_t counter, shadow; /* protected by lock, deliberately plain */
static uint64_t handoffs_seen; /* protected by lock */

static uint32_t word_of(pthread_spinlock_t *l)
{
	/* Relaxed: the word is only read, as a program could. */
	return __atomic_load_n((volatile uint32_t *)l, __ATOMIC_RELAXED);
}

static void critical(bool long_hold)
{
	CHECK_EQ_U64(counter, shadow);
	counter++;
	/* Wide enough that two owners at once meet here. */
	for (int i = 0; i < 32; i++)
		__asm__ __volatile__("" ::: "memory");
	if (long_hold) {
		uint64_t end = tu_now_ns() + 2000000;

		/* Past the hand-off bound (50 us), the waiter that holds the
		 * pending bit asks for the lock. */
		while (!(word_of(&lock) & HANDOFF_BIT) && tu_now_ns() < end)
			;
		if (word_of(&lock) & HANDOFF_BIT)
			handoffs_seen++; /* under the lock */
	}
	CHECK_EQ_U64(counter, shadow + 1);
	shadow++;
}

static _Atomic int fast_got;

static void *handoff_locker(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lock) == 0);
	atomic_store(&fast_got, 1);
	CHECK(pthread_spin_unlock(&lock) == 0);
	return NULL;
}

/* A free lock whose pending waiter asked for the hand-off: no barger may
 * take it. The "waiter" is this thread, which writes the bits by hand and
 * later gives up. */
static void handoff_keeps_fast_path_out(void)
{
	pthread_t t;

	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	__atomic_store_n((uint32_t *)&lock, PENDING_BIT | HANDOFF_BIT, __ATOMIC_RELAXED);
	CHECK(pthread_spin_trylock(&lock) == EBUSY);
	CHECK_EQ_U64(word_of(&lock), PENDING_BIT | HANDOFF_BIT);
	t = tu_thread_start(handoff_locker, NULL);
	tu_sleep_us(20000);
	/* It waits (queued behind the pending bit), and the locked byte is
	 * still free: a fast path that ignored the bit would have got it. */
	CHECK(atomic_load(&fast_got) == 0);
	CHECK_EQ_U64(word_of(&lock) & 0xffffu, PENDING_BIT | HANDOFF_BIT);
	/* The waiter gives up its bits; the locker then gets the lock. */
	__atomic_fetch_and((uint32_t *)&lock, ~(PENDING_BIT | HANDOFF_BIT), __ATOMIC_RELEASE);
	tu_thread_join(t);
	CHECK(atomic_load(&fast_got) == 1);
	CHECK_EQ_U64(word_of(&lock), 0);
	CHECK(pthread_spin_destroy(&lock) == 0);
}

static uint64_t iters;
static pthread_spinlock_t own[THREADS];

static void *worker(void *arg)
{
	uintptr_t me = (uintptr_t)arg;

	if (me % 2)
		CHECK(pthread_spin_lock(&own[me]) == 0);
	for (uint64_t i = 0; i < iters; i++) {
		if (i % 5 == 4) {
			if (pthread_spin_trylock(&lock) != 0)
				continue;
		} else {
			CHECK(pthread_spin_lock(&lock) == 0);
		}
		critical(i % 64 == 0);
		CHECK(pthread_spin_unlock(&lock) == 0);
	}
	if (me % 2)
		CHECK(pthread_spin_unlock(&own[me]) == 0);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];

	iters = TU_ITERS(20000u);
	handoff_keeps_fast_path_out();
	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	for (int i = 0; i < THREADS; i++) {
		CHECK(pthread_spin_init(&own[i], PTHREAD_PROCESS_PRIVATE) == 0);
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK_EQ_U64(counter, shadow);
	CHECK(counter > iters); /* trylocks may fail, locks may not */
	/* The bound was reached (long holds with waiters behind them). */
	CHECK(handoffs_seen > 0);
	printf("shim_barging: %llu sections, the hand-off bit seen in %llu long ones\n",
	       (unsigned long long)counter, (unsigned long long)handoffs_seen);
	/* And the word is clean again. */
	CHECK(pthread_spin_trylock(&lock) == 0);
	CHECK(pthread_spin_unlock(&lock) == 0);
	CHECK(pthread_spin_destroy(&lock) == 0);
	return 0;
}
