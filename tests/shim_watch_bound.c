/* SPDX-License-Identifier: MIT */
/*
 * The shim's watch (pthread_shim.c, "The watch"): a waiter that holds no
 * other lock spins as glibc's lock does for up to 20 ms of its own
 * running time before it enters the slow path; a waiter that holds
 * another lock enters it at once, so that its deadlock checks run.
 *
 * The main thread holds the lock; a waiter thread calls pthread_spin_lock.
 * Entering the slow path with only the holder ahead, the waiter takes the
 * pending bit within a few microseconds. The main thread polls the word
 * for that bit and then reads the CPU time the waiter has spent in that
 * call:
 *   - holding nothing else: the bit must appear (the watch is bounded;
 *     without a bound this test times out) and only after the waiter has
 *     run WATCHED_CPU_NS (the watch ran; without it, microseconds);
 *   - the same in the thread's first lock call, which registers the
 *     thread (that call once went straight to the slow path);
 *   - holding another lock: the bit must appear before the waiter has run
 *     WATCHED_CPU_NS (no watch).
 * Last, a lock whose holder thread exited holding it: the waiter takes it
 * over (0, and a report line) having run less than WATCHED_CPU_NS (the
 * watch stops at the owner-dead mark instead of spinning its 20 ms).
 * CPU time, not wall time: a loaded machine delays both, changes neither.
 * Except at the watch's wall-time cap (200 ms), which a waiter that gets
 * under 5% of a CPU reaches first: such a trial says nothing and is run
 * again; a machine that busy for every trial skips the test.
 */
#include <pthread.h>
#include <time.h>

#include "test_util.h"

#define PENDING_BIT (1u << 8)
#define WATCHED_CPU_NS 10000000ull /* half the watch */
#define WAIT_LIMIT_NS (120 * 1000000000ull)
#define WATCH_WALL_NS 200000000ull
#define TRIALS 5

static pthread_spinlock_t lock, other;
static enum { FIRST_CALL, NOTHING_ELSE, HOLDING_OTHER } how;
static _Atomic uint64_t cpu_before; /* the waiter's, before its lock call */
static _Atomic uint64_t wall_before;

static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	CHECK(clock_gettime(clock, &ts) == 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t word_of(pthread_spinlock_t *l)
{
	/* Relaxed: the word is only read, as a program could. */
	return __atomic_load_n((volatile uint32_t *)l, __ATOMIC_RELAXED);
}

static void *waiter(void *arg)
{
	(void)arg;
	if (how != FIRST_CALL)
		CHECK(pthread_spin_lock(&other) == 0);
	if (how == NOTHING_ELSE)
		CHECK(pthread_spin_unlock(&other) == 0);
	atomic_store(&wall_before, tu_now_ns());
	atomic_store(&cpu_before, cpu_ns(CLOCK_THREAD_CPUTIME_ID));
	CHECK(pthread_spin_lock(&lock) == 0);
	CHECK(pthread_spin_unlock(&lock) == 0);
	if (how == HOLDING_OTHER)
		CHECK(pthread_spin_unlock(&other) == 0);
	return NULL;
}

/* The waiter's CPU time in its lock call when it took the pending bit;
 * *capped: the wall-time cap may have ended its watch first. */
static uint64_t cpu_at_pending(int case_, bool *capped)
{
	uint64_t start = tu_now_ns(), cpu;
	clockid_t clock;
	pthread_t t;

	how = case_;
	atomic_store(&cpu_before, 0);
	CHECK(pthread_spin_lock(&lock) == 0);
	t = tu_thread_start(waiter, NULL);
	CHECK(pthread_getcpuclockid(t, &clock) == 0);
	while (!(word_of(&lock) & PENDING_BIT)) {
		CHECK(tu_now_ns() - start < WAIT_LIMIT_NS);
		tu_sleep_us(100);
	}
	cpu = cpu_ns(clock);
	*capped = tu_now_ns() - atomic_load(&wall_before) >= WATCH_WALL_NS;
	CHECK(atomic_load(&cpu_before) != 0);
	cpu -= atomic_load(&cpu_before);
	CHECK(pthread_spin_unlock(&lock) == 0);
	tu_thread_join(t);
	return cpu;
}

/* A watched case: its CPU time from the first trial the cap did not cut
 * short; 0 when every trial was. */
static uint64_t cpu_watched(int case_)
{
	for (int i = 0; i < TRIALS; i++) {
		bool capped;
		uint64_t cpu = cpu_at_pending(case_, &capped);

		if (cpu >= WATCHED_CPU_NS || !capped)
			return cpu;
	}
	return 0;
}

static void *dies_holding(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lock) == 0);
	return NULL; /* exits holding it: the lock is marked owner-dead */
}

static void *takes_over(void *arg)
{
	uint64_t *cpu = arg;

	/* Register first (a thread's first call), holding nothing after. */
	CHECK(pthread_spin_lock(&other) == 0);
	CHECK(pthread_spin_unlock(&other) == 0);
	*cpu = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	CHECK(pthread_spin_lock(&lock) == 0);
	*cpu = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - *cpu;
	CHECK(pthread_spin_unlock(&lock) == 0);
	return NULL;
}

int main(void)
{
	uint64_t first, watched, direct, dead;
	bool capped;

	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_init(&other, PTHREAD_PROCESS_PRIVATE) == 0);
	first = cpu_watched(FIRST_CALL);
	watched = cpu_watched(NOTHING_ELSE);
	direct = cpu_at_pending(HOLDING_OTHER, &capped);
	tu_thread_join(tu_thread_start(dies_holding, NULL));
	tu_thread_join(tu_thread_start(takes_over, &dead));
	printf("shim_watch_bound: the waiter's CPU time in its lock call at the pending bit: "
	       "%llu us in its first call, %llu us holding nothing else, %llu us holding "
	       "another lock; %llu us to take over a dead holder's lock\n",
	       (unsigned long long)(first / 1000), (unsigned long long)(watched / 1000),
	       (unsigned long long)(direct / 1000), (unsigned long long)(dead / 1000));
	if (first == 0 || watched == 0) {
		printf("SKIP: the waiter got under 5%% of a CPU in all %d trials\n", TRIALS);
		return 77;
	}
	CHECK_GE_U64(first, WATCHED_CPU_NS);
	CHECK_GE_U64(watched, WATCHED_CPU_NS);
	CHECK(direct < WATCHED_CPU_NS);
	CHECK(dead < WATCHED_CPU_NS);
	CHECK_EQ_U64(word_of(&lock), 0);
	CHECK(pthread_spin_destroy(&lock) == 0);
	CHECK(pthread_spin_destroy(&other) == 0);
	return 0;
}
