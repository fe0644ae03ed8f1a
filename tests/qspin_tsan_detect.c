/* SPDX-License-Identifier: MIT */
/*
 * Registered only in the ThreadSanitizer build, with halt_on_error=1: TSan
 * must report a race on data the qspinlock does NOT protect (the lock's
 * annotations must not hide races), so this program exits non-zero under
 * TSan; the tests expect exactly that (WILL_FAIL / a PASS_REGULAR_EXPRESSION
 * on the report). If it returns 0, TSan missed the race.
 *
 * Why the race is planted this way: "racy++ after every unlock" in both
 * threads is reported only for some interleavings (a write after an unlock
 * can be ordered before the other thread's accesses by incidental
 * synchronisation in the slow path), and a race with a thread that has
 * already exited is sometimes not reported by this TSan runtime (observed:
 * about 1 run in 40). Both made the old version pass unreported on a loaded
 * CI machine. Here the racy writes are unordered on every interleaving and
 * both threads are alive at the second one:
 *   thread A: contended lock loop; g_racy = 1; relaxed flag a_done;
 *             wait for relaxed flag b_done; exit
 *   thread B: contended lock loop; wait for a_done; lock; unlock;
 *             g_racy = 2; relaxed flag b_done
 * The flags are relaxed atomics, which TSan treats as creating no
 * happens-before edge. B's lock acquires from A's last unlock, which precedes
 * A's write, and A releases nothing after the write. A lock that released or
 * acquired more than its own critical sections would order the two writes
 * and hide the race. (0 misses in 300 runs with two CPU hogs running.)
 */
#include <rqspin/qspinlock.h>

#include "test_util.h"

static qspinlock_t g_lock = QSPINLOCK_INIT;
static uint64_t g_safe;  /* protected by g_lock */
static uint64_t g_racy;  /* deliberately NOT protected */
static atomic_int g_a_done;
static atomic_int g_b_done;
static tu_barrier g_bar;

static void contended_loop(void)
{
	for (int i = 0; i < 10000; i++) {
		qspin_lock(&g_lock);
		g_safe++;
		qspin_unlock(&g_lock);
	}
}

static void *thread_a(void *p)
{
	(void)p;
	tu_barrier_wait(&g_bar);
	contended_loop();
	g_racy = 1; /* the race, first half */
	/* relaxed: this flag must create no happens-before edge (see above) */
	atomic_store_explicit(&g_a_done, 1, memory_order_relaxed);
	/* stay alive until B has written (see above) */
	while (!atomic_load_explicit(&g_b_done, memory_order_relaxed))
		sched_yield();
	return NULL;
}

static void *thread_b(void *p)
{
	(void)p;
	tu_barrier_wait(&g_bar);
	contended_loop();
	/* relaxed: see thread_a; bounded by A finishing its 10000 iterations */
	while (!atomic_load_explicit(&g_a_done, memory_order_relaxed))
		sched_yield();
	qspin_lock(&g_lock);
	g_safe++;
	qspin_unlock(&g_lock);
	g_racy = 2; /* the race, second half */
	atomic_store_explicit(&g_b_done, 1, memory_order_relaxed);
	return NULL;
}

int main(void)
{
	pthread_t a, b;

	tu_barrier_init(&g_bar, 2);
	if (pthread_create(&a, NULL, thread_a, NULL) || pthread_create(&b, NULL, thread_b, NULL)) {
		fprintf(stderr, "pthread_create failed\n");
		return 2;
	}
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("no race reported (safe %llu, racy %llu)\n", (unsigned long long)g_safe,
	       (unsigned long long)g_racy);
	return 0;
}
