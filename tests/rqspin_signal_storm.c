/* SPDX-License-Identifier: MIT */
/*
 * Signal storm: the kernel's NMI stress module (bpf_test_rqspinlock.c) in
 * userspace. Each worker thread has its own POSIX timer (timer_create with
 * SIGEV_THREAD_ID) firing about every millisecond; the handler takes locks
 * too, interrupting its worker anywhere - holding a lock, spinning as the
 * pending waiter or queue head, parked in the queue, inside lock/unlock.
 * The timer is one-shot and the handler re-arms it when it returns (the
 * analogue of the kernel's perf NMI throttling): a handler that waits for a
 * timeout can last longer than the period, and back-to-back handlers would
 * starve their own worker - which may be the queue head everybody else
 * waits for - for ever.
 *
 * Workers hold their locks for a few hundred microseconds (busy loop), the
 * handlers for a few tens. Modes (the module's, plus a nested one):
 *   AA      worker A,              handler A
 *   ABBA    even: worker A / handler B, odd: worker B / handler A
 *   NESTED  worker A then B,       handler B then A
 *   ABBCCA  by index % 3: (A,B), (B,C), (C,A)
 *
 * Checked: every acquisition either succeeds exclusively (an owner word and
 * a non-atomic counter per lock, counted against the successes of workers
 * and handlers) or fails with -EDEADLK or -ETIMEDOUT; nothing hangs (the
 * watchdog); each worker completes its count of successful critical
 * sections within a bounded number of attempts. Each mode runs with 4
 * threads and oversubscribed with 16 on the 2-core target. Bounded by
 * iteration counts; timers are deleted before the workers exit. The
 * failure statistics must match the failures seen exactly.
 *
 * Debugging aids: STORM_MODE=<0..3> runs one mode, STORM_PROGRESS=1
 * prints progress every second.
 */
#include "rqspin_util.h"

enum mode { M_AA, M_ABBA, M_NESTED, M_ABBCCA, M_COUNT };
static const char *const mode_name[M_COUNT] = { "AA", "ABBA", "NESTED", "ABBCCA" };

struct guarded {
	rqspinlock_t l;
	volatile uint64_t owner; /* id of the context inside, 0 = none */
	uint64_t count;          /* protected by l */
} __attribute__((aligned(64)));

static struct guarded G[3];
static _Atomic uint64_t ok_worker[3], ok_handler[3];
static _Atomic uint64_t h_runs, h_ok, h_deadlk, h_timeout, w_deadlk, w_timeout;
static _Atomic int cur_mode;
static uint64_t worker_hold_ns, handler_hold_ns, worker_gap_ns;
static uint64_t handler_ok_total;

static __thread int my_idx;
static __thread timer_t my_timer;
static __thread volatile sig_atomic_t my_stopping;
static uint64_t timer_interval_ns;
static __thread uint64_t my_id; /* 2*tid; the handler uses 2*tid+1 */

/* The locks a context takes, in order. Returns how many. */
static int pick(bool handler, int out[2])
{
	int i = my_idx;

	switch (atomic_load_explicit(&cur_mode, memory_order_relaxed)) {
	case M_AA:
		out[0] = 0;
		return 1;
	case M_ABBA:
		out[0] = (i % 2) ^ handler;
		return 1;
	case M_NESTED:
		out[0] = handler ? 1 : 0;
		out[1] = handler ? 0 : 1;
		return 2;
	default: /* ABBCCA */
		out[0] = (i + handler) % 3;
		return 1;
	}
}

static void cs_enter(struct guarded *g, uint64_t id)
{
	CHECK(g->owner == 0);
	g->owner = id;
	g->count++;
}

static void cs_exit(struct guarded *g, uint64_t id)
{
	CHECK(g->owner == id);
	g->owner = 0;
}

/* Take the locks in order, hold, release in reverse. Async-signal-safe.
 * Returns 0 or the first error (everything taken is released then). */
static int run_cs(bool handler)
{
	uint64_t id = my_id + handler;
	int idx[2], n = pick(handler, idx), k, r = 0;

	for (k = 0; k < n; k++) {
		r = rqspin_lock(&G[idx[k]].l);
		if (r) {
			RU_CHECK_FAILCODE(r);
			break;
		}
		cs_enter(&G[idx[k]], id);
	}
	if (k == n)
		ru_busy_ns(handler ? handler_hold_ns : worker_hold_ns);
	while (k-- > 0) {
		atomic_fetch_add(handler ? &ok_handler[idx[k]] : &ok_worker[idx[k]], 1);
		cs_exit(&G[idx[k]], id);
		rqspin_unlock(&G[idx[k]].l);
	}
	return r;
}

static void on_timer(int sig)
{
	int e = errno, r;

	(void)sig;
	if (!my_id) /* not a worker (cannot happen: timers are per thread) */
		return;
	atomic_fetch_add(&h_runs, 1);
	r = run_cs(true);
	if (r == 0)
		atomic_fetch_add(&h_ok, 1);
	else if (r == -EDEADLK)
		atomic_fetch_add(&h_deadlk, 1);
	else
		atomic_fetch_add(&h_timeout, 1);
	if (!my_stopping)
		ru_timer_arm(my_timer, timer_interval_ns, 0);
	errno = e;
}

struct warg {
	int idx;
	unsigned iters;
	uint64_t interval_ns;
	unsigned attempts;
	_Atomic unsigned done_, att_; /* progress, for STORM_PROGRESS */
};

static void *worker(void *p)
{
	struct warg *a = p;
	unsigned done = 0, limit = a->iters * 50 + 1000;
	timer_t t;

	my_idx = a->idx;
	my_id = 2 * (uint64_t)ru_gettid();
	my_stopping = 0;
	/* One-shot; the handler re-arms it, so publish the id first. */
	t = ru_timer_create(ru_gettid(), SIGUSR1);
	my_timer = t;
	atomic_signal_fence(memory_order_seq_cst);
	ru_timer_arm(t, a->interval_ns + (uint64_t)a->idx * 37000, 0);
	while (done < a->iters) {
		int r;

		a->attempts++;
		if (a->attempts > limit) {
			fprintf(stderr, "worker %d: no progress: %u of %u done after %u attempts\n",
				a->idx, done, a->iters, a->attempts);
			abort();
		}
		r = run_cs(false);
		/* Some time outside any lock, where the handler can get one. */
		ru_busy_ns(worker_gap_ns);
		if (r == 0)
			done++;
		else if (r == -EDEADLK)
			atomic_fetch_add(&w_deadlk, 1);
		else
			atomic_fetch_add(&w_timeout, 1);
		atomic_store_explicit(&a->done_, done, memory_order_relaxed);
		atomic_store_explicit(&a->att_, a->attempts, memory_order_relaxed);
	}
	my_stopping = 1;
	atomic_signal_fence(memory_order_seq_cst);
	ru_timer_stop(t);
	return NULL;
}

static void run(enum mode m, int nthreads, unsigned iters, uint64_t interval_ns)
{
	struct warg a[16];
	pthread_t th[16];
	uint64_t t0 = tu_now_ns(), hw = 0, hh = 0;
	struct rqspin_lock_stats s0 = ru_stats(), s1;

	CHECK(nthreads <= 16);
	for (int k = 0; k < 3; k++) {
		rqspin_lock_init(&G[k].l);
		G[k].owner = 0;
		G[k].count = 0;
		atomic_store(&ok_worker[k], 0);
		atomic_store(&ok_handler[k], 0);
	}
	atomic_store(&h_runs, 0);
	atomic_store(&h_ok, 0);
	atomic_store(&h_deadlk, 0);
	atomic_store(&h_timeout, 0);
	atomic_store(&w_deadlk, 0);
	atomic_store(&w_timeout, 0);
	atomic_store(&cur_mode, m);

	for (int i = 0; i < nthreads; i++) {
		a[i] = (struct warg){ .idx = i, .iters = iters, .interval_ns = interval_ns };
		th[i] = tu_thread_start(worker, &a[i]);
	}
	if (getenv("STORM_PROGRESS")) {
		for (;;) {
			unsigned sum = 0, att = 0;
			struct rqspin_lock_stats s;
			bool all = true;

			tu_sleep_us(1000000);
			for (int i = 0; i < nthreads; i++) {
				sum += atomic_load(&a[i].done_);
				att += atomic_load(&a[i].att_);
				all &= atomic_load(&a[i].done_) >= iters;
			}
			rqspin_lock_stats_get(&s);
			fprintf(stderr,
				"progress: done %u attempts %u handler runs %llu | aa %llu "
				"abba %llu cycle %llu nest %llu timeout %llu\n",
				sum, att, (unsigned long long)atomic_load(&h_runs),
				(unsigned long long)(s.aa - s0.aa), (unsigned long long)(s.abba - s0.abba),
				(unsigned long long)(s.cycle - s0.cycle),
				(unsigned long long)(s.nest_fail - s0.nest_fail),
				(unsigned long long)(s.timeout - s0.timeout));
			if (all)
				break;
		}
	}
	for (int i = 0; i < nthreads; i++)
		tu_thread_join(th[i]);
	s1 = ru_stats();

	for (int k = 0; k < 3; k++) {
		CHECK_EQ_U64(G[k].owner, 0);
		CHECK_EQ_U64(G[k].count, atomic_load(&ok_worker[k]) + atomic_load(&ok_handler[k]));
		CHECK_EQ_U64(ru_word(&G[k].l), 0);
		hw += atomic_load(&ok_worker[k]);
		hh += atomic_load(&ok_handler[k]);
	}
	/* Every worker finished its successful critical sections (a failed
	 * nested attempt may have held its first lock too). */
	CHECK_GE_U64(hw, (uint64_t)nthreads * iters * (m == M_NESTED ? 2 : 1));
	{
		unsigned max_att = 0;

		for (int i = 0; i < nthreads; i++)
			max_att = a[i].attempts > max_att ? a[i].attempts : max_att;
		printf("%-6s %2d threads x %u: %llu ms; worker -EDEADLK %llu -ETIMEDOUT %llu "
		       "(max attempts %u); handler runs %llu: ok %llu -EDEADLK %llu -ETIMEDOUT %llu; "
		       "stats aa +%llu abba +%llu cycle +%llu nest_fail +%llu timeout +%llu\n",
		       mode_name[m], nthreads, iters,
		       (unsigned long long)((tu_now_ns() - t0) / RU_MS),
		       (unsigned long long)atomic_load(&w_deadlk),
		       (unsigned long long)atomic_load(&w_timeout), max_att,
		       (unsigned long long)atomic_load(&h_runs), (unsigned long long)atomic_load(&h_ok),
		       (unsigned long long)atomic_load(&h_deadlk),
		       (unsigned long long)atomic_load(&h_timeout),
		       (unsigned long long)(s1.aa - s0.aa), (unsigned long long)(s1.abba - s0.abba),
		       (unsigned long long)(s1.cycle - s0.cycle),
		       (unsigned long long)(s1.nest_fail - s0.nest_fail),
		       (unsigned long long)(s1.timeout - s0.timeout));
	}
	/* The statistics saw exactly the failures we saw (each failed
	 * rqspin_lock is counted once, by cause). */
	{
		uint64_t deadlk_seen = atomic_load(&w_deadlk) + atomic_load(&h_deadlk);
		uint64_t timeout_seen = atomic_load(&w_timeout) + atomic_load(&h_timeout);
		uint64_t deadlk_counted = (s1.aa - s0.aa) + (s1.abba - s0.abba) +
					  (s1.cycle - s0.cycle) + (s1.nest_fail - s0.nest_fail);
		uint64_t timeout_counted = s1.timeout - s0.timeout;
		uint64_t runs = atomic_load(&h_runs);

		if (deadlk_counted != deadlk_seen || timeout_counted != timeout_seen)
			fprintf(stderr, "statistics: -EDEADLK seen %llu counted %llu, -ETIMEDOUT "
					"seen %llu counted %llu (see rqspin_stats_signal)\n",
				(unsigned long long)deadlk_seen, (unsigned long long)deadlk_counted,
				(unsigned long long)timeout_seen,
				(unsigned long long)timeout_counted);
		CHECK_EQ_U64(deadlk_counted, deadlk_seen);
		CHECK_EQ_U64(timeout_counted, timeout_seen);
		CHECK_EQ_U64(runs, atomic_load(&h_ok) + atomic_load(&h_deadlk) +
					   atomic_load(&h_timeout));
	}
	handler_ok_total += hh;
}

/* Per run: mode, threads, successful critical sections per worker (normal
 * build; scaled down under TSan), default timeout. Cycles among queued
 * (non-polling) waiters end in timeouts, as in the kernel: the deadlock
 * modes use a shorter timeout. */
static const struct {
	enum mode m;
	int threads;
	unsigned iters;
	unsigned t_ms;
} runs[] = {
	{ M_AA, 4, 200, 50 },      { M_AA, 16, 50, 50 },
	{ M_ABBA, 4, 200, 20 },    { M_ABBA, 16, 40, 20 },
	{ M_NESTED, 4, 150, 20 },  { M_NESTED, 16, 30, 20 },
	{ M_ABBCCA, 4, 200, 20 },  { M_ABBCCA, 16, 40, 20 },
};

int main(void)
{
	uint64_t def = rqspin_get_default_timeout();
	uint64_t interval = TU_SLOWDOWN > 1 ? 2 * RU_MS : RU_MS;
	const char *only = getenv("STORM_MODE"); /* debugging aid: run one mode */

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(300);
	worker_hold_ns = 200000;
	handler_hold_ns = 20000;
	worker_gap_ns = 50000;
	timer_interval_ns = interval;
	ru_set_handler(SIGUSR1, on_timer);

	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		/* The storm is bound by signals and timeouts more than by
		 * CPU, so TSan gets a third, not a tenth. */
		unsigned iters = runs[i].iters / (TU_SLOWDOWN > 1 ? 3 : 1);

		if (only && atoi(only) != (int)runs[i].m)
			continue;
		if (iters < 3)
			iters = 3;
		RU_CHECK_RET(rqspin_set_default_timeout(runs[i].t_ms * RU_MS), 0);
		run(runs[i].m, runs[i].threads, iters, interval);
	}
	/* Over all runs, handlers got locks too, not only errors. */
	printf("handler acquisitions over all runs: %llu\n", (unsigned long long)handler_ok_total);
	CHECK(handler_ok_total > 0);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	printf("rqspin_signal_storm: PASS\n");
	return 0;
}
