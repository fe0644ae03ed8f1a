/* SPDX-License-Identifier: MIT */
/*
 * Mutual exclusion under the shim's barging (slowpath.c, "Barging"), in
 * every build flavour: the shim's source is linked into this program, whose
 * pthread_spin_* then are the shim's (a program's own definitions come
 * before libc's, and before the sanitizer runtimes' interceptors).
 *
 * Threads lock in a tight loop, with trylock in between, and every 16th
 * critical section is long enough that the waiter holding the pending bit
 * passes its bound and asks for the hand-off while running threads barge.
 * A plain counter and a shadow copy checked inside every critical section
 * find any overlap; a sampler counts how often the hand-off bit was seen,
 * so the test knows that the bounded-barging path ran.
 */
#include <pthread.h>

#include "test_util.h"

#define THREADS 4
#define HANDOFF_BIT (1u << 9)

static pthread_spinlock_t lock;
static uint64_t counter, shadow; /* protected by lock, deliberately plain */
static uint64_t handoffs_seen;
static int stop_sampler;

static void critical(uint64_t busy_ns)
{
	uint64_t end;

	CHECK_EQ_U64(counter, shadow);
	counter++;
	/* Wide enough that two owners at once meet here. */
	for (int i = 0; i < 32; i++)
		__asm__ __volatile__("" ::: "memory");
	if (busy_ns) {
		end = tu_now_ns() + busy_ns;
		while (tu_now_ns() < end)
			;
	}
	CHECK_EQ_U64(counter, shadow + 1);
	shadow++;
}

static void *worker(void *arg)
{
	uint64_t iters = (uint64_t)(uintptr_t)arg;

	for (uint64_t i = 0; i < iters; i++) {
		if (i % 5 == 4) {
			if (pthread_spin_trylock(&lock) != 0)
				continue;
		} else {
			CHECK(pthread_spin_lock(&lock) == 0);
		}
		/* Longer than the hand-off bound (50 us) now and then. */
		critical(i % 16 == 0 ? 120000 : 0);
		CHECK(pthread_spin_unlock(&lock) == 0);
	}
	return NULL;
}

static void *sampler(void *arg)
{
	(void)arg;
	/* Relaxed: a statistic; the word is read as the program could. */
	while (!__atomic_load_n(&stop_sampler, __ATOMIC_RELAXED)) {
		if (__atomic_load_n((volatile unsigned *)&lock, __ATOMIC_RELAXED) & HANDOFF_BIT)
			__atomic_fetch_add(&handoffs_seen, 1, __ATOMIC_RELAXED);
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS], s;
	uint64_t iters = TU_ITERS(20000u);

	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_create(&s, NULL, sampler, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)iters) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	__atomic_store_n(&stop_sampler, 1, __ATOMIC_RELAXED);
	CHECK(pthread_join(s, NULL) == 0);
	CHECK_EQ_U64(counter, shadow);
	CHECK(counter > iters); /* trylocks may fail, locks may not */
	/* The bound was reached (long holds with waiters behind them). */
	CHECK(handoffs_seen > 0);
	/* And the word is clean again. */
	CHECK(pthread_spin_trylock(&lock) == 0);
	CHECK(pthread_spin_unlock(&lock) == 0);
	CHECK(pthread_spin_destroy(&lock) == 0);
	return 0;
}
