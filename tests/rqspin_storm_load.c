/* SPDX-License-Identifier: MIT */
/*
 * Signal storm under CPU load: a correct program gets no -ETIMEDOUT
 * because its lock owners are preempted by background work.
 *
 * Like rqspin_signal_storm (per-thread one-shot timers about every
 * millisecond, re-armed by the handler, whose handlers take locks), but
 * with two CPU-bound background threads running the whole time, so on the
 * 2-CPU target every lock owner is regularly preempted for a scheduler
 * time slice or more. T = 10 ms. Modes, both free of deadlocks between
 * threads:
 *   AA     workers take A; handlers take A too (a handler that interrupted
 *          its own thread holding or waiting for A gets -EDEADLK, AA);
 *   SPLIT  workers take A; handlers take C (a handler nested in its own
 *          thread's queued wait may get -EDEADLK: one try).
 * Checked: workers only ever get 0; handlers 0 or -EDEADLK; nobody gets
 * -ETIMEDOUT; mutual exclusion through a non-atomic owner word and
 * counter per lock, counted against the successes. 4 and 8 workers,
 * bounded by iterations.
 */
#include "rqspin_util.h"

#define T_NS (10 * RU_MS)
#define NHOGS 2

enum mode { M_AA, M_SPLIT, M_COUNT };
static const char *const mode_name[M_COUNT] = { "AA", "SPLIT" };

struct guarded {
	rqspinlock_t l;
	volatile uint64_t owner;
	uint64_t count; /* protected by l */
} __attribute__((aligned(64)));

static struct guarded G[2]; /* A, C */
static _Atomic uint64_t ok[2];
static _Atomic uint64_t w_err, w_timeout, h_runs, h_deadlk, h_timeout, h_other;
static _Atomic int cur_mode;
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
	int e = errno, k, r;

	(void)sig;
	if (!my_id)
		return;
	atomic_fetch_add(&h_runs, 1);
	k = atomic_load_explicit(&cur_mode, memory_order_relaxed) == M_AA ? 0 : 1;
	r = rqspin_lock(&G[k].l);
	if (r == 0) {
		cs(&G[k], my_id + 1, 20000);
		atomic_fetch_add(&ok[k], 1);
		rqspin_unlock(&G[k].l);
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
		int r = rqspin_lock(&G[0].l);

		CHECK(++attempts < a->iters * 100 + 1000);
		if (r == 0) {
			cs(&G[0], my_id, 200000);
			atomic_fetch_add(&ok[0], 1);
			rqspin_unlock(&G[0].l);
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

static void run(enum mode m, int nthreads, unsigned iters)
{
	struct warg a[8];
	pthread_t th[8], hg[NHOGS];
	uint64_t t0 = tu_now_ns();
	struct rqspin_lock_stats s0 = ru_stats(), s1;

	CHECK(nthreads <= 8);
	for (int k = 0; k < 2; k++) {
		rqspin_lock_init(&G[k].l);
		G[k].owner = 0;
		G[k].count = 0;
		atomic_store(&ok[k], 0);
	}
	atomic_store(&w_err, 0);
	atomic_store(&w_timeout, 0);
	atomic_store(&h_runs, 0);
	atomic_store(&h_deadlk, 0);
	atomic_store(&h_timeout, 0);
	atomic_store(&h_other, 0);
	atomic_store(&cur_mode, m);
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

	printf("%-5s %d workers x %u + %d CPU hogs: %llu ms; worker errors %llu (-ETIMEDOUT "
	       "%llu); handler runs %llu: -EDEADLK %llu -ETIMEDOUT %llu other %llu; stats "
	       "timeout +%llu aa +%llu nest_fail +%llu\n",
	       mode_name[m], nthreads, iters, NHOGS,
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)atomic_load(&w_err), (unsigned long long)atomic_load(&w_timeout),
	       (unsigned long long)atomic_load(&h_runs), (unsigned long long)atomic_load(&h_deadlk),
	       (unsigned long long)atomic_load(&h_timeout), (unsigned long long)atomic_load(&h_other),
	       (unsigned long long)(s1.timeout - s0.timeout), (unsigned long long)(s1.aa - s0.aa),
	       (unsigned long long)(s1.nest_fail - s0.nest_fail));
	for (int k = 0; k < 2; k++) {
		CHECK_EQ_U64(G[k].owner, 0);
		CHECK_EQ_U64(G[k].count, atomic_load(&ok[k]));
		CHECK_EQ_U64(ru_word(&G[k].l), 0);
	}
	CHECK_GE_U64(atomic_load(&ok[0]), (uint64_t)nthreads * iters);
	RU_EXPECT(atomic_load(&w_err) == 0 && atomic_load(&h_timeout) == 0 &&
			  atomic_load(&h_other) == 0 && s1.timeout == s0.timeout,
		  "%s, %d workers under CPU load: workers failed %llu times (%llu -ETIMEDOUT), "
		  "handlers -ETIMEDOUT %llu times; want no -ETIMEDOUT from a correct program",
		  mode_name[m], nthreads, (unsigned long long)atomic_load(&w_err),
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
	run(M_AA, 4, iters);
	run(M_SPLIT, 4, iters);
	run(M_AA, 8, iters / 2);
	run(M_SPLIT, 8, iters / 2);
	return ru_finish("rqspin_storm_load");
}
