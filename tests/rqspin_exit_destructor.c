/* SPDX-License-Identifier: MIT */
/*
 * A thread may end a critical section in one of its thread-specific-data
 * destructors (a per-thread guard released at exit). The library's own
 * exit destructor runs before the program's in each round, and it used to
 * mark every lock the thread still held owner-dead there: a waiter took
 * the lock over (-EOWNERDEAD) while the program's destructor was still
 * inside, and that destructor's unlock then freed the waiter's lock.
 *
 *  1. The holder exits; its key destructor updates the guarded pair with
 *     a pause between the halves, then unlocks. The waiter gets 0 (not
 *     -EOWNERDEAD) and finds the pair whole; five times.
 *  2. A holder that exits without any destructor releasing the lock still
 *     leaves it owner-dead: the waiter gets -EOWNERDEAD.
 */
#include <rqspin/rqspinlock.h>

#include "test_util.h"

static rqspinlock_t L = RQSPINLOCK_INIT;
static pthread_key_t guard_key;
static volatile uint64_t pair_a, pair_b; /* a == b outside L */
static tu_event held;

static void guard_release(void *p)
{
	(void)p;
	pair_a++;
	tu_sleep_us(30000);
	pair_b++;
	rqspin_unlock(&L);
}

static void *holder(void *arg)
{
	bool with_guard = arg != NULL;

	CHECK(rqspin_lock(&L) == 0);
	if (with_guard)
		CHECK_OK(pthread_setspecific(guard_key, (void *)1));
	tu_event_set(&held, 1);
	tu_sleep_us(10000);
	return NULL; /* exits holding L */
}

static int wait_for_holder_exit(bool with_guard)
{
	pthread_t h;
	int r;

	tu_event_set(&held, 0);
	h = tu_thread_start(holder, with_guard ? (void *)1 : NULL);
	tu_event_wait(&held, 1);
	r = rqspin_lock_timeout(&L, 20ull * 1000 * 1000 * 1000);
	if (r == 0 || r == -EOWNERDEAD) {
		CHECK_EQ_U64(pair_a, pair_b);
		rqspin_unlock(&L);
	}
	tu_thread_join(h);
	return r;
}

int main(void)
{
	tu_watchdog(120);
	/* After the library's own key (created when it was loaded). */
	CHECK_OK(pthread_key_create(&guard_key, guard_release));
	for (int i = 0; i < 5; i++) {
		int r = wait_for_holder_exit(true);

		if (r != 0)
			fprintf(stderr, "round %d: the waiter got %d while the holder's destructor "
				"was inside the critical section\n", i, r);
		CHECK(r == 0);
	}
	CHECK_EQ_U64(pair_a, 5);
	CHECK_EQ_U64(pair_b, 5);
	printf("part 1: a lock released by a key destructor at exit is not taken over\n");
	CHECK(wait_for_holder_exit(false) == -EOWNERDEAD);
	CHECK(!rqspin_is_locked(&L));
	printf("part 2: a lock nobody releases at exit is still owner-dead\n");
	printf("rqspin_exit_destructor: PASS\n");
	return 0;
}
