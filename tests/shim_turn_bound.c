/* SPDX-License-Identifier: MIT */
/*
 * The shim's turn bound (pthread_shim.c, "Turns"): a thread that keeps
 * taking a free lock ahead of a queue whose head cannot run is sent to the
 * back of the queue once its turn is over, rather than barging for as long
 * as the head stays off the CPU.
 *
 * The head is kept off the CPU for sure: it is interrupted by a signal
 * whose handler blocks on a pipe. Set-up, with the lock held by main:
 *   A locks: it becomes the pending waiter;
 *   B locks: it queues behind A and is the queue's head;
 *   B's handler blocks (B can no longer take the pending bit);
 *   main unlocks: A takes the lock and leaves.
 * The word then says "a queue, no pending waiter, free". Main runs a tight
 * lock/unlock loop. Without turns every call barges (all of them return
 * in microseconds); with them, once main's turn is over its next lock
 * queues behind B and returns only after B's handler is released,
 * RELEASE_MS later. The loop's longest call tells the two apart, with a
 * margin of seconds over a preemption. Every section adds to a plain
 * counter, checked at the end.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <rqspin/rqspinlock.h>

#include "test_util.h"

#define RELEASE_MS 2000u
#define MIN_STALL_MS 1000u
#define LOOP_ITERS 2000000u

static pthread_spinlock_t lock;
static uint64_t counter; /* protected by lock, deliberately plain */
static int gate[2];      /* B's handler reads one byte from gate[0] */
static atomic_uint in_handler;

static uint32_t word(void)
{
	/* Relaxed: a look at the state, polled until it holds. */
	return __atomic_load_n((uint32_t *)&lock, __ATOMIC_RELAXED);
}

static void block_in_handler(int sig)
{
	char c;
	int e = errno;

	(void)sig;
	atomic_store_explicit(&in_handler, 1, memory_order_release);
	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;
	errno = e;
}

static void *locker(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lock) == 0);
	counter++;
	CHECK(pthread_spin_unlock(&lock) == 0);
	return NULL;
}

static void *releaser(void *arg)
{
	(void)arg;
	tu_sleep_us(RELEASE_MS * 1000u);
	CHECK(write(gate[1], "x", 1) == 1);
	return NULL;
}

static void wait_for_word(uint32_t mask, const char *what)
{
	uint64_t until = tu_now_ns() + 20000000000ull;

	while (!(word() & mask)) {
		if (tu_now_ns() > until) {
			fprintf(stderr, "shim_turn_bound: no %s in the word (%#x)\n", what, word());
			exit(1);
		}
		tu_sleep_us(100);
	}
}

int main(void)
{
	struct sigaction sa;
	pthread_t a, b, r;
	uint64_t longest = 0, t_loop;
	unsigned mine = 0;

	/* Main waits behind a blocked head for seconds by design: no
	 * timeout may end that wait first. */
	CHECK(rqspin_set_default_timeout(60ull * 1000000000ull) == 0);
	CHECK(pipe(gate) == 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = block_in_handler;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);

	CHECK(pthread_spin_lock(&lock) == 0);
	a = tu_thread_start(locker, NULL);
	wait_for_word(RQSPIN__PENDING_VAL, "pending waiter");
	b = tu_thread_start(locker, NULL);
	wait_for_word(RQSPIN__TAIL_MASK, "queue");
	CHECK(pthread_kill(b, SIGUSR1) == 0);
	while (!atomic_load_explicit(&in_handler, memory_order_acquire))
		tu_sleep_us(100);
	counter++;
	CHECK(pthread_spin_unlock(&lock) == 0);
	tu_thread_join(a);
	/* A queue whose head is off the CPU, no pending waiter, free. */
	CHECK((word() & RQSPIN__TAIL_MASK) != 0);
	CHECK((word() & (RQSPIN__PENDING_MASK | RQSPIN__LOCKED_MASK)) == 0);

	r = tu_thread_start(releaser, NULL);
	t_loop = tu_now_ns();
	for (unsigned i = 0; i < LOOP_ITERS; i++) {
		uint64_t t0 = tu_now_ns(), dt;

		CHECK(pthread_spin_lock(&lock) == 0);
		dt = tu_now_ns() - t0;
		counter++;
		mine++;
		CHECK(pthread_spin_unlock(&lock) == 0);
		longest = dt > longest ? dt : longest;
	}
	t_loop = tu_now_ns() - t_loop;
	tu_thread_join(r);
	tu_thread_join(b);
	printf("shim_turn_bound: %u sections in %llu ms, longest lock call %llu ms\n", mine,
	       (unsigned long long)(t_loop / 1000000u), (unsigned long long)(longest / 1000000u));
	/* main's sections, its first one, A's and B's. */
	CHECK_EQ_U64(counter, (uint64_t)mine + 3);
	CHECK_GE_U64(longest, MIN_STALL_MS * 1000000ull);
	CHECK(pthread_spin_destroy(&lock) == 0);
	return 0;
}
