/* SPDX-License-Identifier: MIT */
/*
 * No registry slot leaks when a signal handler's lock call lands in its
 * own thread's first registration.
 *
 * Many short-lived threads (4000 natively, in batches of 16): each arms a per-thread timer
 * (SIGEV_THREAD_ID) with a very short period whose handler takes and
 * releases a lock, and then makes its own first lock call, so handlers
 * often interrupt the thread while it registers (between claiming a slot
 * and publishing it). Each thread blocks the signal and deletes its timer
 * before it exits. After all threads are joined, slots_in_use must be back
 * to its value before the run.
 *
 * Registered NO_TSAN (thousands of threads under its memory overhead).
 */
#include "rqspin_util.h"

#define NTHREADS 4000
#define BATCH 16

static rqspinlock_t H = RQSPINLOCK_INIT; /* the handlers' lock */
static rqspinlock_t M = RQSPINLOCK_INIT; /* the threads' own lock */
static _Atomic uint64_t handler_runs, handler_errors, thread_errors;
static atomic_int last_thread_error;
static uint64_t interval_ns;

static void on_timer(int sig)
{
	int e = errno, r;

	(void)sig;
	atomic_fetch_add_explicit(&handler_runs, 1, memory_order_relaxed);
	r = rqspin_lock(&H);
	if (r == 0)
		rqspin_unlock(&H);
	else if (r != -EDEADLK) /* AA when it interrupted the thread inside H: fine */
		atomic_fetch_add_explicit(&handler_errors, 1, memory_order_relaxed);
	errno = e;
}

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	sigset_t set;
	timer_t t;
	int r;

	t = ru_timer_create(ru_gettid(), SIGUSR1);
	/* First expiry within a few microseconds, so that it often lands in
	 * the registration of the first lock call below. */
	ru_timer_arm(t, 1000 + (seed * 7919u) % 20000u, interval_ns);
	for (volatile unsigned k = 0; k < (seed * 31u) % 3000u; k++)
		;
	r = rqspin_lock(&M);
	if (r == 0)
		rqspin_unlock(&M);
	else {
		atomic_fetch_add_explicit(&thread_errors, 1, memory_order_relaxed);
		atomic_store_explicit(&last_thread_error, r, memory_order_relaxed);
	}
	/* No handler after this point (it would register again while the
	 * thread is being torn down). */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	CHECK_OK(pthread_sigmask(SIG_BLOCK, &set, NULL));
	ru_timer_stop(t);
	return NULL;
}

int main(void)
{
	struct rqspin_lock_stats s0, s1;
	uint64_t t0 = tu_now_ns();
	const char *ev = getenv("SLOT_LEAK_INTERVAL_NS"); /* tuning aids */
	unsigned n = TU_ITERS(NTHREADS);

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	/* Under an emulator (RQSPIN_TEST_SLOWDOWN) a signal delivery takes
	 * longer than 20 us: the period grows with the slowdown, or the lock
	 * holder would spend all its time in handlers and its waiters time
	 * out. The lock timeout is stretched the same way. */
	interval_ns = ev ? strtoull(ev, NULL, 0) : 20000 * (uint64_t)TU_SLOWDOWN;
	RU_CHECK_RET(rqspin_set_default_timeout(RU_KERNEL_TIMEOUT_NS), 0);
	if (getenv("SLOT_LEAK_THREADS"))
		n = (unsigned)atoi(getenv("SLOT_LEAK_THREADS"));
	ru_set_handler(SIGUSR1, on_timer);
	s0 = ru_stats(); /* the main thread takes no lock, so no slot */

	for (unsigned i = 0; i < n; i += BATCH) {
		pthread_t th[BATCH];

		for (unsigned k = 0; k < BATCH; k++)
			th[k] = tu_thread_start(churn, (void *)(uintptr_t)(i + k));
		for (unsigned k = 0; k < BATCH; k++)
			tu_thread_join(th[k]);
	}
	s1 = ru_stats();
	printf("%u threads (timer interval %llu ns) in %llu ms: handler runs %llu; slots in use "
	       "%llu before, %llu after (high water %llu)\n",
	       n, (unsigned long long)interval_ns,
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)atomic_load(&handler_runs),
	       (unsigned long long)s0.slots_in_use, (unsigned long long)s1.slots_in_use,
	       (unsigned long long)s1.slots_high_water);
	CHECK_EQ_U64(atomic_load(&handler_errors), 0);
	if (atomic_load(&thread_errors))
		printf("threads' own lock calls failed %llu times, the last with %d\n",
		       (unsigned long long)atomic_load(&thread_errors), atomic_load(&last_thread_error));
	CHECK_EQ_U64(atomic_load(&thread_errors), 0);
	RU_EXPECT(s1.slots_in_use == s0.slots_in_use,
		  "registry slots leaked: %llu in use after all %u threads exited, %llu before",
		  (unsigned long long)s1.slots_in_use, n, (unsigned long long)s0.slots_in_use);
	tu_reset_handler(SIGUSR1);
	return ru_finish("rqspin_slot_leak");
}
