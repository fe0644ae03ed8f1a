/* SPDX-License-Identifier: MIT */
/*
 * Signal storm under CPU load: a correct program gets no -ETIMEDOUT
 * because its lock owners are preempted by background work.
 *
 * Like rqspin_signal_storm (per-thread one-shot timers about every
 * millisecond, re-armed by the handler, whose handlers take locks), but
 * with two CPU-bound background threads running the whole time, so on the
 * 2-CPU target every lock owner is regularly preempted for a scheduler
 * time slice or more. T = 10 ms. Workers take A; handlers take A too (a
 * handler that interrupted its own thread holding or waiting for A gets
 * -EDEADLK, AA). No lock owner here ever blocks: it runs its critical
 * section or is preempted, so a timeout is never the right answer. (A
 * mode where handlers wait for another lock is left out on purpose: a
 * worker holding A whose handler sleeps in that lock's queue is a blocked
 * owner, and its waiters may rightly time out.)
 * Checked: workers only ever get 0; handlers 0 or -EDEADLK; nobody gets
 * -ETIMEDOUT; mutual exclusion through a non-atomic owner word and
 * counter, counted against the successes. 4, 6 and 8 workers, bounded by
 * iterations.
 */
#include "rqspin_util.h"

#define T_NS (10 * RU_MS)
#define NHOGS 2


struct guarded {
	rqspinlock_t l;
	volatile uint64_t owner;
	uint64_t count; /* protected by l */
} __attribute__((aligned(64)));

static struct guarded A;
static _Atomic uint64_t ok; /* successful critical sections */
static _Atomic uint64_t w_err, w_timeout, h_runs, h_deadlk, h_timeout, h_other;
static _Atomic int hogs_stop;

static __thread timer_t my_timer;
static __thread volatile sig_atomic_t my_stopping;
static __thread uint64_t my_id;

static void cs(struct guarded *g, uint64_t id, uint64_t hold_ns)
{
	CHECK(g->owner == 0);
	g->owner = id;
	g->count++;
	ru_busy_ns(hold_ns);
	CHECK(g->owner == id);
	g->owner = 0;
}

static void on_timer(int sig)
{
	int e = errno, r;

	(void)sig;
	if (!my_id)
		return;
	atomic_fetch_add(&h_runs, 1);
	r = rqspin_lock(&A.l);
	if (r == 0) {
		cs(&A, my_id + 1, 20000);
		atomic_fetch_add(&ok, 1);
		rqspin_unlock(&A.l);
	} else if (r == -EDEADLK) {
		atomic_fetch_add(&h_deadlk, 1);
	} else if (r == -ETIMEDOUT) {
		atomic_fetch_add(&h_timeout, 1);
	} else {
		atomic_fetch_add(&h_other, 1);
	}
	if (!my_stopping)
		ru_timer_arm(my_timer, RU_MS, 0);
	errno = e;
}

struct warg {
	int idx;
	unsigned iters;
};

static void *worker(void *p)
{
	struct warg *a = p;
	unsigned done = 0, attempts = 0;
	timer_t t;

	my_id = 2 * (uint64_t)ru_gettid();
	my_stopping = 0;
	t = ru_timer_create(ru_gettid(), SIGUSR1);
	my_timer = t;
	atomic_signal_fence(memory_order_seq_cst);
	ru_timer_arm(t, RU_MS + (uint64_t)a->idx * 37000, 0);
	while (done < a->iters) {
		int r = rqspin_lock(&A.l);

		CHECK(++attempts < a->iters * 100 + 1000);
		if (r == 0) {
			cs(&A, my_id, 200000);
			atomic_fetch_add(&ok, 1);
			rqspin_unlock(&A.l);
			done++;
		} else {
			atomic_fetch_add(&w_err, 1);
			if (r == -ETIMEDOUT)
				atomic_fetch_add(&w_timeout, 1);
			if (atomic_load(&w_err) <= 3)
				fprintf(stderr, "worker %d: rqspin_lock: %s\n", a->idx, ru_err_name(r));
		}
		ru_busy_ns(50000);
	}
	my_stopping = 1;
	atomic_signal_fence(memory_order_seq_cst);
	ru_timer_stop(t);
	return NULL;
}

static void *hog(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&hogs_stop, memory_order_relaxed))
		for (volatile int k = 0; k < 10000; k++)
			;
	return NULL;
}

static void run(int nthreads, unsigned iters)
{
	struct warg a[8];
	pthread_t th[8], hg[NHOGS];
	uint64_t t0 = tu_now_ns();
	struct rqspin_lock_stats s0 = ru_stats(), s1;

	CHECK(nthreads <= 8);
	rqspin_lock_init(&A.l);
	A.owner = 0;
	A.count = 0;
	atomic_store(&ok, 0);
	atomic_store(&w_err, 0);
	atomic_store(&w_timeout, 0);
	atomic_store(&h_runs, 0);
	atomic_store(&h_deadlk, 0);
	atomic_store(&h_timeout, 0);
	atomic_store(&h_other, 0);
	atomic_store(&hogs_stop, 0);

	for (int i = 0; i < NHOGS; i++)
		hg[i] = tu_thread_start(hog, NULL);
	for (int i = 0; i < nthreads; i++) {
		a[i] = (struct warg){ .idx = i, .iters = iters };
		th[i] = tu_thread_start(worker, &a[i]);
	}
	for (int i = 0; i < nthreads; i++)
		tu_thread_join(th[i]);
	atomic_store(&hogs_stop, 1);
	for (int i = 0; i < NHOGS; i++)
		tu_thread_join(hg[i]);
	s1 = ru_stats();

	printf("%d workers x %u + %d CPU hogs: %llu ms; worker errors %llu (-ETIMEDOUT "
	       "%llu); handler runs %llu: -EDEADLK %llu -ETIMEDOUT %llu other %llu; stats "
	       "timeout +%llu aa +%llu nest_fail +%llu\n",
	       nthreads, iters, NHOGS,
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)atomic_load(&w_err), (unsigned long long)atomic_load(&w_timeout),
	       (unsigned long long)atomic_load(&h_runs), (unsigned long long)atomic_load(&h_deadlk),
	       (unsigned long long)atomic_load(&h_timeout), (unsigned long long)atomic_load(&h_other),
	       (unsigned long long)(s1.timeout - s0.timeout), (unsigned long long)(s1.aa - s0.aa),
	       (unsigned long long)(s1.nest_fail - s0.nest_fail));
	CHECK_EQ_U64(A.owner, 0);
	CHECK_EQ_U64(A.count, atomic_load(&ok));
	CHECK_EQ_U64(ru_word(&A.l), 0);
	CHECK_GE_U64(atomic_load(&ok), (uint64_t)nthreads * iters);
	RU_EXPECT(atomic_load(&w_err) == 0 && atomic_load(&h_timeout) == 0 &&
			  atomic_load(&h_other) == 0 && s1.timeout == s0.timeout,
		  "%d workers under CPU load: workers failed %llu times (%llu -ETIMEDOUT), "
		  "handlers -ETIMEDOUT %llu times; want no -ETIMEDOUT from a correct program",
		  nthreads, (unsigned long long)atomic_load(&w_err),
		  (unsigned long long)atomic_load(&w_timeout),
		  (unsigned long long)atomic_load(&h_timeout));
}

int main(void)
{
	unsigned iters = TU_SLOWDOWN > 1 ? 60 : 300;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(240);
	RU_CHECK_RET(rqspin_set_default_timeout(T_NS * TU_SLOWDOWN), 0);
	ru_set_handler(SIGUSR1, on_timer);
	run(4, iters);
	run(6, iters * 2 / 3);
	run(8, iters / 2);
	return ru_finish("rqspin_storm_load");
}
