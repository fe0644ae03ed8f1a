/* SPDX-License-Identifier: MIT */
/*
 * fork() from a multithreaded process that hammers qspinlocks.
 *
 * Four hammer threads take contended locks H[0..3] all the time (so at
 * fork some of them may be held, have a pending waiter or a queue of
 * threads that do not exist in the child). Forks happen from the main
 * thread while the others run, from one of the hammer threads between two
 * critical sections, and from a thread that holds a private lock F across
 * the fork. The child:
 *  - sees only its own registry slot in use (the others are reset);
 *  - unlocks F if it was held at fork, and locks/unlocks it again;
 *  - locks and unlocks several locks that were free at fork (some of them
 *    had been used by now-vanished threads, with pending bit and queue);
 *  - creates threads that contend on one of those locks (registry slots of
 *    the vanished threads are reused) and checks exact mutual exclusion;
 *  - sometimes forks again (a grandchild, from the now multithreaded
 *    child) which does the same lock work;
 *  - exits 0 (any failure aborts; a hang is cut by alarm()).
 * The parent waits for every child and checks its status, then stops the
 * hammer threads and checks their counters.
 *
 * Registered NO_TSAN: ThreadSanitizer does not support a multithreaded
 * fork whose child creates threads.
 */
#include <rqspin/lock_diag.h>
#include <rqspin/qspinlock.h>

#include <sys/wait.h>

#include "test_util.h"

#define NHAMMER 4
#define NHLOCKS 4
#define NFREE 4
#define NCHILD_THREADS 4

struct guarded {
	qspinlock_t lock;
	volatile uint64_t a, b; /* equal outside the critical section */
} __attribute__((aligned(128)));

/* Hammered by the parent's threads. */
static struct guarded g_H[NHLOCKS];
/* Free at every fork: used before the first fork (to leave pending/tail
 * history behind) and by children only. */
static struct guarded g_free[NFREE];
/* Held across some forks by the forking thread. */
static struct guarded g_F;

static void critical(struct guarded *g)
{
	uint64_t a = g->a;

	CHECK(a == g->b);
	g->a = a + 1;
	g->b = g->b + 1;
}

static atomic_int g_stop;
static atomic_int g_fork_request; /* 1: hammer thread 0 should fork */
static atomic_int g_fork_status;  /* wait status of that child + 1 */
static uint64_t g_hammer_iters[NHAMMER];

/* ---- child side ------------------------------------------------------------- */

static unsigned g_child_iters;

static void *child_thread(void *p)
{
	struct guarded *g = p;

	for (unsigned i = 0; i < g_child_iters; i++) {
		qspin_lock(&g->lock);
		critical(g);
		qspin_unlock(&g->lock);
		if (i % 128 == 0)
			sched_yield();
	}
	return NULL;
}

/* skip: a lock that a thread of the forking process may have held at fork
 * (it is held for good in this process, as a mutex would be), or -1. */
static void child_lock_work(int skip)
{
	for (int i = 0; i < NFREE; i++) {
		if (i == skip)
			continue;
		CHECK(!qspin_is_locked(&g_free[i].lock));
		qspin_lock(&g_free[i].lock);
		critical(&g_free[i]);
		CHECK(!qspin_trylock(&g_free[i].lock));
		qspin_unlock(&g_free[i].lock);
		CHECK(qspin_trylock(&g_free[i].lock));
		qspin_unlock(&g_free[i].lock);
	}
}

static void child_threads(int which)
{
	struct guarded *g = &g_free[which % NFREE];
	pthread_t t[NCHILD_THREADS];
	uint64_t before = g->a;

	for (int i = 0; i < NCHILD_THREADS; i++)
		t[i] = tu_thread_start(child_thread, g);
	for (int i = 0; i < NCHILD_THREADS; i++)
		tu_thread_join(t[i]);
	CHECK_EQ_U64(g->a - before, (uint64_t)NCHILD_THREADS * g_child_iters);
	CHECK_EQ_U64(g->b, g->a);
}

static int wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) != pid)
		CHECK(errno == EINTR);
	return status;
}

static void check_status(int status, const char *what)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			fprintf(stderr, "%s: child killed by signal %d\n", what,
				WTERMSIG(status));
		else
			fprintf(stderr, "%s: child exit status %d\n", what, WEXITSTATUS(status));
		CHECK(!"child failed");
	}
}

/* Runs in the child right after fork. held_f: F was held by the forking
 * thread. depth 0: child, 1: grandchild (forked while two threads of the
 * child contended on g_free[(n + 1) % NFREE], so that lock may be held by
 * a thread that does not exist there). */
static __attribute__((noreturn)) void child_main(int n, bool held_f, int depth)
{
	struct rqspin_lock_stats s;

	alarm(60); /* a hang kills the child; the parent reports it */
	rqspin_lock_stats_get(&s);
	/* Only the forking thread exists here (it may not have a slot). */
	CHECK_LE_U64(s.slots_in_use, 1);

	if (held_f) {
		CHECK(qspin_is_locked(&g_F.lock));
		critical(&g_F);
		qspin_unlock(&g_F.lock);
		qspin_lock(&g_F.lock);
		critical(&g_F);
		qspin_unlock(&g_F.lock);
	}
	CHECK(!qspin_is_locked(&g_F.lock));
	child_lock_work(depth == 0 ? -1 : (n + 1) % NFREE);
	if (depth == 0 && n % 4 == 1) {
		/* Fork again while our own threads contend. */
		pthread_t t[2];
		pid_t pid;

		for (int i = 0; i < 2; i++)
			t[i] = tu_thread_start(child_thread, &g_free[(n + 1) % NFREE]);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			child_main(n, false, 1);
		check_status(wait_child(pid), "grandchild");
		for (int i = 0; i < 2; i++)
			tu_thread_join(t[i]);
	}
	child_threads(n);
	rqspin_lock_stats_get(&s);
	CHECK_LE_U64(s.slots_in_use, 1); /* the child's threads gave theirs back */
	_exit(0);
}

/* ---- parent side ------------------------------------------------------------ */

static pid_t do_fork(int n, bool hold_f)
{
	pid_t pid;

	if (hold_f) {
		qspin_lock(&g_F.lock);
		critical(&g_F);
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child_main(n, hold_f, 0);
	if (hold_f)
		qspin_unlock(&g_F.lock);
	return pid;
}

static void *hammer(void *p)
{
	int id = (int)(intptr_t)p;
	tu_rng rng;
	uint64_t n = 0;

	tu_rng_seed(&rng, (uint64_t)id);
	while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
		struct guarded *g = &g_H[tu_rng_below(&rng, NHLOCKS)];

		qspin_lock(&g->lock);
		critical(g);
		qspin_unlock(&g->lock);
		n++;
		if (id == 0 && atomic_load_explicit(&g_fork_request, memory_order_acquire)) {
			int k = atomic_load(&g_fork_request) - 1;
			pid_t pid = do_fork(1000 + k, k % 2 == 0);

			atomic_store(&g_fork_status, wait_child(pid) + 1);
			atomic_store_explicit(&g_fork_request, 0, memory_order_release);
		}
		if (n % 64 == 0)
			sched_yield();
	}
	g_hammer_iters[id] = n;
	return NULL;
}

/* Give the free locks some history (pending bit, queue tails of threads
 * that will be gone) before the first fork. */
static void *warm_free(void *p)
{
	(void)p;
	for (int k = 0; k < 2000; k++) {
		struct guarded *g = &g_free[k % NFREE];

		qspin_lock(&g->lock);
		critical(g);
		qspin_unlock(&g->lock);
	}
	return NULL;
}

int main(void)
{
	const int nforks = 60;
	pthread_t t[NHAMMER];
	uint64_t total = 0, t0 = tu_now_ns();

	setvbuf(stdout, NULL, _IONBF, 0);
	tu_watchdog(300);
	g_child_iters = 2000;

	tu_run_threads(4, warm_free, NULL, 0);
	for (int i = 0; i < NHAMMER; i++)
		t[i] = tu_thread_start(hammer, (void *)(intptr_t)i);

	for (int n = 0; n < nforks; n++) {
		switch (n % 3) {
		case 0: /* from main, others running */
			check_status(wait_child(do_fork(n, false)), "fork from main");
			break;
		case 1: /* from main, holding F */
			check_status(wait_child(do_fork(n, true)), "fork holding F");
			break;
		case 2: /* from a hammer thread (holding F every other time) */
			atomic_store(&g_fork_status, 0);
			atomic_store_explicit(&g_fork_request, n + 1, memory_order_release);
			TU_WAIT_UNTIL(atomic_load_explicit(&g_fork_request, memory_order_acquire) == 0);
			check_status(atomic_load(&g_fork_status) - 1, "fork from a hammer thread");
			break;
		}
	}

	atomic_store(&g_stop, 1);
	for (int i = 0; i < NHAMMER; i++)
		tu_thread_join(t[i]);
	for (int i = 0; i < NHAMMER; i++)
		total += g_hammer_iters[i];
	uint64_t sum = 0;
	for (int k = 0; k < NHLOCKS; k++) {
		CHECK(!qspin_is_locked(&g_H[k].lock));
		CHECK_EQ_U64(g_H[k].a, g_H[k].b);
		sum += g_H[k].a;
	}
	CHECK_EQ_U64(sum, total);
	CHECK(!qspin_is_locked(&g_F.lock));
	printf("qspin_fork: %d forks ok, hammer threads did %llu critical sections (%.0f ms)\n",
	       nforks, (unsigned long long)total, (double)(tu_now_ns() - t0) / 1e6);
	return 0;
}
