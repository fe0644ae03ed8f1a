/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench torture`: the kernel's locktorture in userspace, and the
 * signal modes of its rqspinlock stress module (bpf_test_rqspinlock.c).
 *
 * Plain mode (locktorture's spin_lock writers): N threads hammer one lock
 * with random hold times - busy waits, mostly short, with an occasional
 * long one (locktorture's write delay: 1 in --long-hold-every holds lasts
 * --long-hold-us) - and random think times between acquisitions. Every
 * critical section checks mutual exclusion twice, with plain memory only
 * the lock protects: an owner field (must be 0 on entry, is set to the
 * thread's id, must still be that id before the release) and a counter
 * (one load at entry, one store at exit; at the end it must equal the
 * number of successful acquisitions). Every lock() call is timed into a
 * histogram, per thread counts give fairness (Jain's index, the smallest
 * share of a fair share), and rqspin failures are counted by error.
 *
 * Signal modes (rqspin only), the stress module's NMI test: every worker
 * has its own POSIX timer (timer_create, SIGEV_THREAD_ID) firing about
 * every --timer-us; its handler takes a lock too, holds it
 * --handler-hold-us, releases it, and re-arms the one-shot timer (the
 * analogue of perf's NMI throttling: back-to-back handlers that wait for a
 * timeout would starve their own worker, which may be the holder everybody
 * waits for). Workers hold their lock a few hundred microseconds. Locks by
 * mode (worker / handler):
 *   aa      A / A
 *   abba    odd threads A / B, even threads B / A
 *   abbcca  by thread % 3: (A,B), (B,C), (C,A)
 * Counts, histograms and errors are kept per context (normal, handler).
 *
 * Bounded: workers check a stop flag between acquisitions (and handlers
 * before taking a lock); at the stop each worker blocks the signal and
 * deletes its timer before it returns; the main thread joins with a
 * deadline (--stall-timeout-ms) and reports workers that did not return as
 * stalled (the process then ends with _exit).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "lock_worker.h"
#include "load.h"
#include "output.h"
#include "progress.h"
#include "torture.h"

#define TT_SIG SIGUSR1
#define TT_MAX_THREADS 1024
#define TT_MAX_LOCKS 3

#define DEF_DURATION_MS 3000
#define QUICK_DURATION_MS 150
#define DEF_HOLD_US 2
#define DEF_MODE_HOLD_US 400
#define DEF_LONG_HOLD_US 500
#define DEF_LONG_EVERY 1000
#define DEF_THINK_US 2
#define DEF_MODE_THINK_US 50
#define DEF_HANDLER_HOLD_US 20
#define DEF_TIMER_US 1000
#define DEF_STALL_MS 10000
#define DEF_LOCKS "qspin,rqspin,pthread_spin"

const char *const tt_mode_name[TT_NMODES] = { "plain", "aa", "abba", "abbcca" };
const char *const tt_ctx_name[TT_NCTX] = { "normal", "handler" };

/* ------------------------------------------------------------------------ */
/* One run                                                                   */

/* A lock and the plain data only it protects. */
struct tt_guard {
	alignas(BL_CACHELINE) void *obj;
	volatile uint64_t owner;   /* id of the context inside, 0 = none */
	volatile uint64_t counter; /* successful acquisitions */
};

struct tt_shared {
	alignas(BL_CACHELINE) atomic_bool stop;
	alignas(BL_CACHELINE) _Atomic uint64_t violations;
	const struct lock_peer *p;
	enum tt_mode mode;
	unsigned ng;
	struct tt_guard g[TT_MAX_LOCKS];
	struct lw_gate gate;
	uint64_t hold_lo_ns, hold_hi_ns, long_ns, think_ns, handler_ns, timer_ns;
	unsigned long_every;
};

struct tt_thread {
	alignas(BL_CACHELINE) struct tt_shared *sh;
	unsigned idx;
	uint64_t id; /* the worker's; its handler uses id + 1 */
	void *ctx;
	uint64_t rng;
	timer_t timer;
	bool have_timer;
	int setup_err;
	volatile sig_atomic_t stopping;
	/* Written by the worker, and by its handler for TT_HANDLER only;
	 * read after the join. */
	uint64_t ok[TT_NCTX];
	uint64_t fail[TT_NCTX][TT_NFAIL];
	uint64_t lock_ok[TT_NCTX][TT_MAX_LOCKS];
	uint64_t handler_runs, long_holds;
	struct hist lat_ok[TT_NCTX], lat_fail[TT_NCTX];
};

static __thread struct tt_thread *tt_self;

static inline uint64_t tt_rand(uint64_t *s)
{
	/* xorshift64* */
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* The lock a context of thread idx takes (index into g). */
static unsigned tt_lock_index(enum tt_mode m, unsigned idx, enum tt_ctx x)
{
	switch (m) {
	case TT_ABBA:
		/* odd: worker A, handler B; even: worker B, handler A */
		return (idx % 2) ? (unsigned)x : 1u - (unsigned)x;
	case TT_ABBCCA:
		return (idx + (unsigned)x) % 3;
	default:
		return 0;
	}
}

static int fail_kind(int err)
{
	switch (err) {
	case -EDEADLK:
		return LW_FAIL_EDEADLK;
	case -ETIMEDOUT:
		return LW_FAIL_ETIMEDOUT;
	case -EOWNERDEAD:
		return LW_FAIL_EOWNERDEAD;
	default:
		return LW_FAIL_OTHER;
	}
}

/* Lock, check, hold, check, unlock. Async-signal-safe for rqspin (the only
 * lock taken in handlers). Returns lock()'s result. */
static int tt_cs(struct tt_thread *t, enum tt_ctx x, uint64_t hold_ns)
{
	struct tt_shared *sh = t->sh;
	unsigned li = tt_lock_index(sh->mode, t->idx, x);
	struct tt_guard *g = &sh->g[li];
	uint64_t id = t->id + (uint64_t)x, t0, t1, c;
	int r;

	t0 = bench_now_ns();
	r = sh->p->lock(g->obj, t->ctx);
	t1 = bench_now_ns();
	if (r) {
		t->fail[x][fail_kind(r)]++;
		if (r != -EOWNERDEAD) { /* -EOWNERDEAD: acquired anyway */
			hist_add(&t->lat_fail[x], t1 - t0);
			return r;
		}
	}
	hist_add(&t->lat_ok[x], t1 - t0);
	if (g->owner != 0)
		atomic_fetch_add_explicit(&sh->violations, 1, memory_order_relaxed);
	g->owner = id;
	c = g->counter;
	bench_busy_ns(hold_ns);
	g->counter = c + 1;
	if (g->owner != id)
		atomic_fetch_add_explicit(&sh->violations, 1, memory_order_relaxed);
	g->owner = 0;
	sh->p->unlock(g->obj, t->ctx);
	t->ok[x]++;
	t->lock_ok[x][li]++;
	return r;
}

static void tt_arm(struct tt_thread *t, uint64_t ns)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(ns / 1000000000u);
	its.it_value.tv_nsec = (long)(ns % 1000000000u);
	timer_settime(t->timer, 0, &its, NULL); /* async-signal-safe */
}

static void tt_on_signal(int sig)
{
	int e = errno;
	struct tt_thread *t = tt_self;

	(void)sig;
	if (t && !t->stopping) {
		struct tt_shared *sh = t->sh;

		if (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
			t->handler_runs++;
			(void)tt_cs(t, TT_HANDLER, sh->handler_ns);
		}
		/* One-shot, re-armed here: see the file comment. */
		if (!t->stopping)
			tt_arm(t, sh->timer_ns);
	}
	errno = e;
}

static uint64_t tt_hold(struct tt_thread *t)
{
	struct tt_shared *sh = t->sh;
	uint64_t span = sh->hold_hi_ns - sh->hold_lo_ns;

	if (sh->long_every && tt_rand(&t->rng) % sh->long_every == 0) {
		t->long_holds++;
		return sh->long_ns;
	}
	return sh->hold_lo_ns + (span ? tt_rand(&t->rng) % (span + 1) : 0);
}

static void *tt_worker(void *arg)
{
	struct tt_thread *t = arg;
	struct tt_shared *sh = t->sh;

	tt_self = t;
	if (sh->mode != TT_PLAIN) {
		struct sigevent sev;

		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = TT_SIG;
		sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
		if (timer_create(CLOCK_MONOTONIC, &sev, &t->timer) == 0)
			t->have_timer = true;
		else
			t->setup_err = errno;
	}
	lw_gate_wait(&sh->gate);
	if (t->have_timer)
		/* Spread the first expiries over the period. */
		tt_arm(t, sh->timer_ns + (t->idx * 37000ull) % sh->timer_ns);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed) && !t->setup_err) {
		(void)tt_cs(t, TT_NORMAL, tt_hold(t));
		if (sh->think_ns)
			bench_busy_ns(tt_rand(&t->rng) % (sh->think_ns + 1));
	}
	if (t->have_timer) {
		sigset_t set;

		/* No handler from here on: a signal still pending stays
		 * blocked and is dropped when the thread exits. */
		t->stopping = 1;
		atomic_signal_fence(memory_order_seq_cst);
		sigemptyset(&set);
		sigaddset(&set, TT_SIG);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
		timer_delete(t->timer);
	}
	tt_self = NULL;
	return NULL;
}

enum tt_status { TT_OK, TT_STALLED, TT_ERROR };

static enum tt_status tt_run_cell(const struct tt_config *c, struct tt_cell *cell)
{
	const struct lock_peer *p = cell->lock;
	unsigned n = cell->threads;
	struct tt_shared *sh = aligned_alloc(BL_CACHELINE, sizeof(*sh));
	struct tt_thread *th = aligned_alloc(BL_CACHELINE, n * sizeof(*th));
	pthread_t *tid = calloc(n, sizeof(*tid));
	bool *joined = calloc(n, sizeof(*joined));
	struct sigaction sa, old_sa;
	bool handler_set = false, gate_ready = false;
	struct rqspin_lock_stats before, after;
	enum tt_status st = TT_OK;
	unsigned created = 0;
	uint64_t t0, t1, sum_ok = 0, sum_counter = 0;

	if (!sh || !th || !tid || !joined) {
		cli_error("torture: out of memory");
		st = TT_ERROR;
		goto out;
	}
	memset(sh, 0, sizeof(*sh));
	memset(th, 0, n * sizeof(*th));
	atomic_init(&sh->stop, false);
	atomic_init(&sh->violations, 0);
	sh->p = p;
	sh->mode = c->mode;
	sh->ng = c->mode == TT_ABBA ? 2 : c->mode == TT_ABBCCA ? 3 : 1;
	sh->hold_hi_ns = (uint64_t)c->hold_us * 1000;
	sh->hold_lo_ns = c->mode == TT_PLAIN ? 0 : sh->hold_hi_ns / 2;
	sh->long_ns = (uint64_t)c->long_hold_us * 1000;
	sh->long_every = c->long_hold_every;
	sh->think_ns = (uint64_t)c->think_us * 1000;
	sh->handler_ns = (uint64_t)c->handler_hold_us * 1000;
	sh->timer_ns = (uint64_t)(c->timer_us ? c->timer_us : 1) * 1000;
	for (unsigned i = 0; i < sh->ng; i++) {
		if (!(sh->g[i].obj = p->create(n))) {
			cli_error("torture: %s: cannot create the lock", p->name);
			st = TT_ERROR;
			goto out;
		}
	}
	pthread_mutex_init(&sh->gate.m, NULL);
	pthread_cond_init(&sh->gate.cv, NULL);
	gate_ready = true;
	for (unsigned i = 0; i < n; i++) {
		th[i].sh = sh;
		th[i].idx = i;
		th[i].id = 2 * (uint64_t)(i + 1);
		th[i].ctx = p->ctx(sh->g[0].obj, i);
		th[i].rng = stats_splitmix64(i + 1) | 1;
	}
	if (c->mode != TT_PLAIN) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = tt_on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(TT_SIG, &sa, &old_sa) != 0) {
			cli_error("torture: sigaction: %s", strerror(errno));
			st = TT_ERROR;
			goto out;
		}
		handler_set = true;
	}
	if (p->flags & LP_LIBRQSPIN)
		rqspin_lock_stats_get(&before);
	for (; created < n; created++) {
		int rc = pthread_create(&tid[created], NULL, tt_worker, &th[created]);

		if (rc) {
			cli_error("torture: %s: cannot create thread %u of %u: %s", p->name,
				  created + 1, n, strerror(rc));
			st = TT_ERROR;
			break;
		}
	}
	t0 = lw_gate_open(&sh->gate, created, &sh->stop, st == TT_ERROR);
	if (st == TT_OK)
		lw_sleep_until(t0 + (uint64_t)c->duration_ms * 1000000u);
	atomic_store(&sh->stop, true);
	t1 = bench_now_ns();
	cell->elapsed_s = (double)(t1 - t0) / 1e9;

	if (!lw_join_by(tid, joined, created, c->stall_timeout_ms) && st == TT_OK)
		st = TT_STALLED;
	if (st == TT_STALLED) {
		/* Leave them their memory, the handler and the locks (leaked
		 * on purpose); the process ends with _exit. */
		lw_detach_unjoined(tid, joined, created);
		cell->stalled = true;
		free(joined);
		free(tid);
		return st;
	}
	if (p->flags & LP_LIBRQSPIN) {
		rqspin_lock_stats_get(&after);
		stats_lib_delta(&cell->lib, &before, &after);
	}
	for (unsigned i = 0; i < created; i++) {
		const struct tt_thread *t = &th[i];

		if (t->setup_err && st == TT_OK) {
			cli_error("torture: timer_create: %s", strerror(t->setup_err));
			st = TT_ERROR;
		}
		cell->per_thread[i] = t->ok[TT_NORMAL];
		cell->idle_workers += t->ok[TT_NORMAL] == 0;
		cell->handler_runs += t->handler_runs;
		cell->long_holds += t->long_holds;
		for (int x = 0; x < TT_NCTX; x++) {
			cell->ok[x] += t->ok[x];
			for (int k = 0; k < TT_NFAIL; k++)
				cell->fail[x][k] += t->fail[x][k];
			for (unsigned li = 0; li < sh->ng; li++)
				sum_ok += t->lock_ok[x][li];
			hist_merge(&cell->lat_ok[x], &t->lat_ok[x]);
			hist_merge(&cell->lat_fail[x], &t->lat_fail[x]);
		}
	}
	for (unsigned li = 0; li < sh->ng; li++)
		sum_counter += sh->g[li].counter;
	cell->owner_violations = atomic_load(&sh->violations);
	cell->lost_updates = sum_ok > sum_counter ? sum_ok - sum_counter : sum_counter - sum_ok;
	cell->broken = cell->owner_violations || cell->lost_updates;
	cell->jain = stats_jain(cell->per_thread, n);
	cell->min_share = stats_min_share(cell->per_thread, n);
	cell->ran = st != TT_ERROR;
	cell->error = st == TT_ERROR;

out:
	if (handler_set)
		sigaction(TT_SIG, &old_sa, NULL);
	if (sh) {
		for (unsigned i = 0; i < sh->ng; i++)
			if (sh->g[i].obj)
				p->destroy(sh->g[i].obj);
		if (gate_ready) {
			pthread_mutex_destroy(&sh->gate.m);
			pthread_cond_destroy(&sh->gate.cv);
		}
	}
	free(joined);
	free(tid);
	free(th);
	free(sh);
	return st;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

static uint64_t cell_fails(const struct tt_cell *cell, int x)
{
	uint64_t s = 0;

	for (int k = 0; k < TT_NFAIL; k++)
		s += cell->fail[x][k];
	return s;
}

static const char *cell_note(const struct tt_cell *cell)
{
	if (cell->broken)
		return "MUTEX BROKEN";
	if (cell->stalled)
		return "stalled";
	if (cell->error)
		return "error";
	if (!cell->ran)
		return "not run";
	if (cell->idle_workers)
		return "idle workers";
	return "ok";
}

static void tt_print(FILE *f, const struct tt_results *r)
{
	const struct tt_config *c = r->cfg;
	int nctx = c->mode == TT_PLAIN ? 1 : TT_NCTX;
	bool lib = false;

	fprintf(f, "rqspin-bench %s: torture, mode %s\n", c->o->run, tt_mode_name[c->mode]);
	sysinfo_print(f, &r->sys, "  ");
	if (c->mode == TT_PLAIN)
		fprintf(f,
			"  run:      %u ms per lock and thread count; hold 0..%u us, 1 in %u holds %u "
			"us; think 0..%u us%s; %.0f s\n",
			c->duration_ms, c->hold_us, c->long_hold_every, c->long_hold_us, c->think_us,
			c->o->quick ? ", quick" : "", r->wall_s);
	else
		fprintf(f,
			"  run:      %u ms per thread count; worker hold %u..%u us (1 in %u: %u us), "
			"think 0..%u us; per-thread timer every %u us, handler hold %u us%s; %.0f s\n",
			c->duration_ms, c->hold_us / 2, c->hold_us, c->long_hold_every, c->long_hold_us,
			c->think_us, c->timer_us, c->handler_hold_us, c->o->quick ? ", quick" : "",
			r->wall_s);
	if (r->load.ok)
		fprintf(f,
			"  load:     other processes used %.0f%% of the CPU time during the run, "
			"hypervisor steal %.0f%%\n",
			100 * r->load.other, 100 * r->load.steal);
	fputc('\n', f);

	fprintf(f,
		"Acquisitions (successful lock() calls), throughput, fairness over the workers\n"
		"(Jain, smallest share of a fair share), latency of every successful lock() call,\n"
		"failures by error and the latency of failed calls; check = owner field and\n"
		"counter\n");
	fprintf(f, "  %-13s %3s %-7s %9s %8s %6s %6s %7s %7s %7s %7s %7s %7s %7s %7s %7s  %s\n",
		"lock", "thr", "ctx", "acq", "acq/s", "jain", "minshr", "p50", "p99", "p99.9", "max",
		"EDEADLK", "ETIMEDO", "EOWNERD", "f.p50", "f.max", "check");
	for (size_t i = 0; i < r->ncells; i++) {
		const struct tt_cell *cell = &r->cells[i];

		if (!cell->ran) {
			fprintf(f, "  %-13s %3u %-7s %9s %8s  %s\n", cell->lock->name, cell->threads,
				"-", "-", "-", cell_note(cell));
			continue;
		}
		lib |= (cell->lock->flags & LP_LIBRQSPIN) != 0;
		for (int x = 0; x < nctx; x++) {
			const struct hist *h = &cell->lat_ok[x], *hf = &cell->lat_fail[x];
			char acq[16], rate[16], a[16], b[16], d[16], e[16], fp[16], fm[16], js[16],
				ms[16];

			snprintf(acq, sizeof(acq), "%llu", (unsigned long long)cell->ok[x]);
			fmt_si(rate, sizeof(rate), (double)cell->ok[x] / cell->elapsed_s);
			fmt_ns(a, sizeof(a), h->n ? (double)hist_quantile(h, 0.5) : NAN);
			fmt_ns(b, sizeof(b), h->n ? (double)hist_quantile(h, 0.99) : NAN);
			fmt_ns(d, sizeof(d), h->n ? (double)hist_quantile(h, 0.999) : NAN);
			fmt_ns(e, sizeof(e), h->n ? (double)h->max : NAN);
			fmt_ns(fp, sizeof(fp), hf->n ? (double)hist_quantile(hf, 0.5) : NAN);
			fmt_ns(fm, sizeof(fm), hf->n ? (double)hf->max : NAN);
			if (x == TT_NORMAL) {
				snprintf(js, sizeof(js), "%.3f", cell->jain);
				snprintf(ms, sizeof(ms), "%.2f", cell->min_share);
			} else {
				strcpy(js, "");
				strcpy(ms, "");
			}
			fprintf(f,
				"  %-13s %3u %-7s %9s %8s %6s %6s %7s %7s %7s %7s %7llu %7llu %7llu "
				"%7s %7s  %s\n",
				cell->lock->name, cell->threads, tt_ctx_name[x], acq, rate, js, ms, a,
				b, d, e, (unsigned long long)cell->fail[x][LW_FAIL_EDEADLK],
				(unsigned long long)cell->fail[x][LW_FAIL_ETIMEDOUT],
				(unsigned long long)cell->fail[x][LW_FAIL_EOWNERDEAD], fp, fm,
				x == TT_NORMAL ? cell_note(cell) : "");
		}
		if (cell->broken)
			fprintf(f, "  %-13s     owner violations %llu, lost updates %llu\n", "",
				(unsigned long long)cell->owner_violations,
				(unsigned long long)cell->lost_updates);
	}
	if (c->mode != TT_PLAIN) {
		uint64_t runs = 0;

		for (size_t i = 0; i < r->ncells; i++)
			runs += r->cells[i].handler_runs;
		fprintf(f, "  handler runs: %llu (each takes one lock)\n", (unsigned long long)runs);
	}
	fputc('\n', f);

	if (lib) {
		fprintf(f, "librqspin events (rqspin_lock_stats_get, over each run)\n");
		fprintf(f, "  %-7s %3s %9s %8s %8s %8s %8s %8s %7s %7s %7s %7s %7s %7s\n", "lock",
			"thr", "fast", "pending", "queued", "stolen", "parked", "yielded", "nonode", "aa",
			"abba", "cycle", "nest", "timeout");
		for (size_t i = 0; i < r->ncells; i++) {
			const struct tt_cell *cell = &r->cells[i];
			const struct rqspin_lock_stats *s = &cell->lib;

			if (!cell->ran || !(cell->lock->flags & LP_LIBRQSPIN))
				continue;
			fprintf(f,
				"  %-7s %3u %9llu %8llu %8llu %8llu %8llu %8llu %7llu %7llu %7llu %7llu "
				"%7llu %7llu\n",
				cell->lock->name, cell->threads, (unsigned long long)s->fast,
				(unsigned long long)s->pending, (unsigned long long)s->queued,
				(unsigned long long)s->stolen, (unsigned long long)s->parked,
				(unsigned long long)s->yielded, (unsigned long long)s->nonode,
				(unsigned long long)s->aa, (unsigned long long)s->abba,
				(unsigned long long)s->cycle, (unsigned long long)s->nest_fail,
				(unsigned long long)s->timeout);
		}
		fputc('\n', f);
	}
	{
		char title[96];

		snprintf(title, sizeof(title), "Verdicts (torture, mode %s):", tt_mode_name[c->mode]);
		vl_print(f, title, &r->verdicts, &r->load);
	}
}

static int tt_json(const char *path, const struct tt_results *r)
{
	const struct tt_config *c = r->cfg;
	FILE *f = output_open("--json", path);
	struct json j;

	if (!f)
		return -1;
	bench_json_begin(&j, f, "torture", c->o, &r->sys, &r->load);
	json_begin_object(&j, "config");
	json_string(&j, "mode", tt_mode_name[c->mode]);
	lock_peers_json(&j, "locks", c->locks, c->nlocks);
	json_uint_array(&j, "threads", c->threads, c->nthreads);
	json_uint(&j, "duration_ms", c->duration_ms);
	json_uint(&j, "hold_us", c->hold_us);
	json_uint(&j, "long_hold_us", c->long_hold_us);
	json_uint(&j, "long_hold_every", c->long_hold_every);
	json_uint(&j, "think_us", c->think_us);
	if (c->mode != TT_PLAIN) {
		json_uint(&j, "handler_hold_us", c->handler_hold_us);
		json_uint(&j, "timer_us", c->timer_us);
	}
	json_uint(&j, "stall_timeout_ms", c->stall_timeout_ms);
	json_end_object(&j);
	json_double(&j, "wall_seconds", r->wall_s);
	json_begin_array(&j, "results");
	for (size_t i = 0; i < r->ncells; i++) {
		const struct tt_cell *cell = &r->cells[i];

		json_begin_object(&j, NULL);
		json_string(&j, "lock", cell->lock->name);
		json_uint(&j, "threads", cell->threads);
		json_string(&j, "status", cell->broken    ? "broken"
					  : cell->stalled ? "stalled"
					  : cell->error   ? "error"
					  : cell->ran     ? "ok"
							  : "not-run");
		json_double(&j, "elapsed_s", cell->elapsed_s);
		json_bool(&j, "mutual_exclusion_ok", !cell->broken);
		json_uint(&j, "owner_violations", cell->owner_violations);
		json_uint(&j, "lost_updates", cell->lost_updates);
		json_uint(&j, "long_holds", cell->long_holds);
		json_double(&j, "jain", cell->ran ? cell->jain : NAN);
		json_double(&j, "min_share", cell->ran ? cell->min_share : NAN);
		json_uint(&j, "idle_workers", cell->idle_workers);
		json_begin_array(&j, "per_thread_acquisitions");
		for (unsigned t = 0; cell->ran && t < cell->threads; t++)
			json_uint(&j, NULL, cell->per_thread[t]);
		json_end_array(&j);
		if (c->mode != TT_PLAIN)
			json_uint(&j, "handler_runs", cell->handler_runs);
		json_begin_object(&j, "contexts");
		for (int x = 0; x < (c->mode == TT_PLAIN ? 1 : TT_NCTX); x++) {
			json_begin_object(&j, tt_ctx_name[x]);
			json_uint(&j, "acquisitions", cell->ok[x]);
			json_double(&j, "acquisitions_per_sec",
				    cell->elapsed_s > 0 ? (double)cell->ok[x] / cell->elapsed_s : NAN);
			json_begin_object(&j, "failures");
			json_uint(&j, "EDEADLK", cell->fail[x][LW_FAIL_EDEADLK]);
			json_uint(&j, "ETIMEDOUT", cell->fail[x][LW_FAIL_ETIMEDOUT]);
			json_uint(&j, "EOWNERDEAD", cell->fail[x][LW_FAIL_EOWNERDEAD]);
			json_uint(&j, "other", cell->fail[x][LW_FAIL_OTHER]);
			json_end_object(&j);
			output_json_hist(&j, "latency_ns", &cell->lat_ok[x], NULL);
			output_json_hist(&j, "failure_latency_ns", &cell->lat_fail[x], NULL);
			json_end_object(&j);
		}
		json_end_object(&j);
		if (cell->lock->flags & LP_LIBRQSPIN)
			output_json_libstats(&j, &cell->lib);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_bool(&j, "mutual_exclusion_ok", !r->broken);
	json_bool(&j, "stalled", r->any_stalled);
	bench_json_end(&j, &r->verdicts, !r->broken && !r->lib_stalled);
	return output_close(f, "--json", path);
}

static int tt_csv(const char *path, const struct tt_results *r)
{
	const struct tt_config *c = r->cfg;
	FILE *f = output_open("--csv", path);

	if (!f)
		return -1;
	fprintf(f, "lock,threads,mode,ctx,status,elapsed_s,acquisitions,acq_per_s,jain,min_share,"
		   "lat_p50_ns,lat_p99_ns,lat_p999_ns,lat_max_ns,fail_edeadlk,fail_etimedout,"
		   "fail_eownerdead,fail_other,fail_lat_p50_ns,fail_lat_max_ns,owner_violations,"
		   "lost_updates,duration_ms,hold_us,think_us\n");
	for (size_t i = 0; i < r->ncells; i++) {
		const struct tt_cell *cell = &r->cells[i];

		for (int x = 0; x < (c->mode == TT_PLAIN ? 1 : TT_NCTX); x++) {
			const struct hist *h = &cell->lat_ok[x], *hf = &cell->lat_fail[x];

			fprintf(f, "%s,%u,%s,%s,%s,%.4f,%llu,%.6g,", cell->lock->name, cell->threads,
				tt_mode_name[c->mode], tt_ctx_name[x],
				cell->broken    ? "broken"
				: cell->stalled ? "stalled"
				: cell->error   ? "error"
				: cell->ran     ? "ok"
						: "not-run",
				cell->elapsed_s, (unsigned long long)cell->ok[x],
				cell->elapsed_s > 0 ? (double)cell->ok[x] / cell->elapsed_s : 0.0);
			if (cell->ran && x == TT_NORMAL)
				fprintf(f, "%.4f,%.4f,", cell->jain, cell->min_share);
			else
				fputs(",,", f);
			if (h->n)
				fprintf(f, "%llu,%llu,%llu,%llu,",
					(unsigned long long)hist_quantile(h, 0.5),
					(unsigned long long)hist_quantile(h, 0.99),
					(unsigned long long)hist_quantile(h, 0.999),
					(unsigned long long)h->max);
			else
				fputs(",,,,", f);
			fprintf(f, "%llu,%llu,%llu,%llu,",
				(unsigned long long)cell->fail[x][LW_FAIL_EDEADLK],
				(unsigned long long)cell->fail[x][LW_FAIL_ETIMEDOUT],
				(unsigned long long)cell->fail[x][LW_FAIL_EOWNERDEAD],
				(unsigned long long)cell->fail[x][LW_FAIL_OTHER]);
			if (hf->n)
				fprintf(f, "%llu,%llu,", (unsigned long long)hist_quantile(hf, 0.5),
					(unsigned long long)hf->max);
			else
				fputs(",,", f);
			fprintf(f, "%llu,%llu,%u,%u,%u\n", (unsigned long long)cell->owner_violations,
				(unsigned long long)cell->lost_updates, c->duration_ms, c->hold_us,
				c->think_us);
		}
	}
	return output_close(f, "--csv", path);
}

/* ------------------------------------------------------------------------ */
/* Schedule and results                                                      */

static bool tt_results_alloc(struct tt_results *r, const struct tt_config *c)
{
	memset(r, 0, sizeof(*r));
	r->cfg = c;
	r->ncells = c->nthreads * c->nlocks;
	r->cells = calloc(r->ncells, sizeof(*r->cells));
	if (!r->cells)
		return false;
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		for (size_t li = 0; li < c->nlocks; li++) {
			struct tt_cell *cell = &r->cells[ti * c->nlocks + li];

			cell->lock = c->locks[li];
			cell->threads = c->threads[ti];
			cell->per_thread = calloc(cell->threads, sizeof(uint64_t));
			if (!cell->per_thread)
				return false;
		}
	}
	return true;
}

static void tt_results_free(struct tt_results *r)
{
	for (size_t i = 0; r->cells && i < r->ncells; i++)
		free(r->cells[i].per_thread);
	free(r->cells);
	memset(r, 0, sizeof(*r));
}

/* The model of the run time (progress.h): one thread count, every lock:
 * the measurements plus about 1 ms of thread start and join per thread. */
static double row_cost_s(const struct tt_config *c, unsigned nthr)
{
	return (double)c->nlocks * (c->duration_ms / 1000.0 + nthr * 0.001);
}

static void tt_schedule(struct tt_results *r)
{
	const struct tt_config *c = r->cfg;
	uint64_t start = bench_now_ns();
	struct load_snap l0, l1;
	unsigned *stalled_at = calloc(c->nlocks, sizeof(unsigned));

	cli_progress(c->o->quiet, "%s torture (%s): %zu locks x %zu thread counts x %u ms\n",
		 cli_prog, tt_mode_name[c->mode], c->nlocks, c->nthreads, c->duration_ms);
	load_snapshot(&l0);
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		cli_progress(c->o->quiet, "[torture %s] %u threads:", tt_mode_name[c->mode], c->threads[ti]);
		for (size_t li = 0; li < c->nlocks; li++) {
			struct tt_cell *cell = &r->cells[ti * c->nlocks + li];
			enum tt_status st;
			char b[16];

			if (stalled_at && stalled_at[li] && cell->threads >= stalled_at[li])
				continue;
			st = tt_run_cell(c, cell);
			if (st == TT_STALLED) {
				r->any_stalled = true;
				if (cell->lock->flags & LP_LIBRQSPIN)
					r->lib_stalled = true;
				if (stalled_at)
					stalled_at[li] = cell->threads;
				cli_progress(c->o->quiet, "\n");
				cli_error("torture: %s, %u threads: workers did not return within %u ms "
					  "of the stop: stalled",
					  cell->lock->name, cell->threads, c->stall_timeout_ms);
				continue;
			}
			if (cell->broken) {
				r->broken = true;
				cli_progress(c->o->quiet, "\n");
				cli_error("MUTUAL EXCLUSION BROKEN: torture %s, %u threads: %llu owner "
					  "violations, %llu lost updates",
					  cell->lock->name, cell->threads,
					  (unsigned long long)cell->owner_violations,
					  (unsigned long long)cell->lost_updates);
			}
			if (cell->ran) {
				double rate = (double)cell->ok[TT_NORMAL] / cell->elapsed_s;

				cli_progress(c->o->quiet, " %s %s/s%s", cell->lock->name, fmt_si(b, sizeof(b), rate),
					 cell_fails(cell, 0) + cell_fails(cell, 1) ? "(failures)" : "");
			}
		}
		progress_step(c->o->quiet, row_cost_s(c, c->threads[ti]));
	}
	free(stalled_at);
	r->wall_s = (double)(bench_now_ns() - start) / 1e9;
	load_snapshot(&l1);
	r->load = load_between(&l0, &l1);
}

/* Runs, prints, writes the files. Returns an exit status. */
static int tt_execute(const struct tt_config *c, struct verdict_list *v)
{
	struct tt_results r;
	int rc = CLI_EXIT_OK;

	if (!tt_results_alloc(&r, c)) {
		cli_error("out of memory");
		tt_results_free(&r);
		return CLI_EXIT_FAIL;
	}
	sysinfo_collect(&r.sys);
	tt_schedule(&r);
	torture_verdicts(&r);
	tt_print(stdout, &r);
	fflush(stdout);
	*v = r.verdicts;
	if (c->o->json_path) {
		if (tt_json(c->o->json_path, &r) == 0)
			printf("JSON written to %s\n", c->o->json_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (c->o->csv_path) {
		if (tt_csv(c->o->csv_path, &r) == 0)
			printf("CSV written to %s\n", c->o->csv_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (r.broken) {
		cli_error("FAILED: torture: mutual exclusion broke (see above)");
		rc = CLI_EXIT_FAIL;
	}
	if (r.lib_stalled) {
		cli_error("FAILED: torture: a librqspin lock stalled (workers did not return)");
		rc = CLI_EXIT_FAIL;
	}
	for (size_t i = 0; i < r.ncells; i++)
		if (r.cells[i].error)
			rc = CLI_EXIT_FAIL;
	if (r.any_stalled) {
		fflush(NULL);
		_exit(rc);
	}
	tt_results_free(&r);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

static void help(FILE *f)
{
	fprintf(f,
		"locktorture in userspace. N threads take one lock with random hold times (busy\n"
		"waits: mostly short, 1 in --long-hold-every lasts --long-hold-us) and random\n"
		"think times. Each critical section checks mutual exclusion with plain memory: an\n"
		"owner field (0 on entry, then the thread's id, still its id at the release) and\n"
		"a counter (must equal the successful acquisitions at the end). Reported per lock\n"
		"and thread count: acquisitions, Jain index and smallest share over the threads,\n"
		"latency of every lock() call, and rqspin failures by error.\n\n"
		"Signal modes (--mode aa|abba|abbcca, rqspin only; the kernel's rqspinlock stress\n"
		"module): every worker has a timer (SIGEV_THREAD_ID) firing every --timer-us whose\n"
		"handler takes a lock while workers hold theirs a few hundred us:\n"
		"  aa      worker and handler take A\n"
		"  abba    odd threads: worker A, handler B; even threads: worker B, handler A\n"
		"  abbcca  by thread %% 3: worker/handler (A,B), (B,C), (C,A)\n"
		"Counts, failures and latency are then reported per context (normal, handler).\n\n"
		"Options:\n"
		"  --mode MODE           plain (default), aa, abba or abbcca\n"
		"  --locks LIST          comma-separated locks, or 'all' (default:\n"
		"                        " DEF_LOCKS "; signal modes: rqspin)\n"
		"  --threads LIST        thread counts (default: 2 x usable CPUs, and 16)\n"
		"  --duration-ms N       per lock and thread count (default %d)\n"
		"  --hold-us N           hold time: plain 0..N us (default %d); signal modes\n"
		"                        N/2..N us (default %d)\n"
		"  --long-hold-us N      the occasional long hold (default %d)\n"
		"  --long-hold-every N   1 in N holds is long, 0 = never (default %d)\n"
		"  --think-us N          think time 0..N us between acquisitions (default %d;\n"
		"                        signal modes %d)\n"
		"  --handler-hold-us N   signal modes: the handler's hold (default %d)\n"
		"  --timer-us N          signal modes: timer period (default %d)\n"
		"  --stall-timeout-ms N  wait for workers after the stop (default %d)\n"
		"  --quick               smoke-test size: %d ms per run\n"
		"  --csv FILE            one CSV row per lock, thread count and context\n\n"
		"Locks:\n",
		DEF_DURATION_MS, DEF_HOLD_US, DEF_MODE_HOLD_US, DEF_LONG_HOLD_US,
		DEF_LONG_EVERY, DEF_THINK_US, DEF_MODE_THINK_US, DEF_HANDLER_HOLD_US, DEF_TIMER_US,
		DEF_STALL_MS, QUICK_DURATION_MS);
	for (size_t i = 0; i < lock_peers_count; i++)
		fprintf(f, "  %-14s %s\n", lock_peers[i]->name, lock_peers[i]->desc);
	fprintf(f, "\nExit status 1 also when mutual exclusion broke or a librqspin lock stalled.\n");
}

/* The suite's configuration: the options point into it. */
static struct tt_config cfg;
static bool set_dur, set_hold, set_think, set_locks;
static struct lock_selection lock_sel = { &cfg.locks, &cfg.nlocks };
static void cleanup(void)
{
	free(cfg.locks);
	free(cfg.threads);
	cfg.locks = NULL;
	cfg.threads = NULL;
}

static bool default_threads(struct tt_config *c)
{
	unsigned a = 2 * load_usable_cpus(), b = 16;

	c->threads = malloc(2 * sizeof(unsigned));
	if (!c->threads)
		return false;
	c->threads[0] = a < b ? a : b;
	c->threads[1] = a < b ? b : a;
	c->nthreads = a == b ? 1 : 2;
	return true;
}

static bool parse_mode(const char *value, void *dest)
{
	for (int k = 0; k < TT_NMODES; k++) {
		if (strcmp(value, tt_mode_name[k]) == 0) {
			*(enum tt_mode *)dest = (enum tt_mode)k;
			return true;
		}
	}
	cli_error("--mode: '%s' is not plain, aa, abba or abbcca", value);
	return false;
}

static size_t options(struct cli_opt *opts, size_t max)
{
	const struct cli_opt o[] = {
		{ "mode", CLI_CUSTOM, &cfg.mode, 0, 0, NULL, parse_mode, NULL },
		{ "locks", CLI_CUSTOM, &lock_sel, 0, 0, NULL, lock_peers_parse_opt, &set_locks },
		{ "threads", CLI_UINT_LIST, &cfg.threads, 1, TT_MAX_THREADS, &cfg.nthreads, NULL,
		  NULL },
		{ "duration-ms", CLI_UINT, &cfg.duration_ms, 1, 3600000, NULL, NULL, &set_dur },
		{ "hold-us", CLI_UINT, &cfg.hold_us, 0, 1000000, NULL, NULL, &set_hold },
		{ "long-hold-us", CLI_UINT, &cfg.long_hold_us, 0, 1000000, NULL, NULL, NULL },
		{ "long-hold-every", CLI_UINT, &cfg.long_hold_every, 0, 1000000000, NULL, NULL,
		  NULL },
		{ "think-us", CLI_UINT, &cfg.think_us, 0, 1000000, NULL, NULL, &set_think },
		{ "handler-hold-us", CLI_UINT, &cfg.handler_hold_us, 0, 100000, NULL, NULL, NULL },
		{ "timer-us", CLI_UINT, &cfg.timer_us, 10, 10000000, NULL, NULL, NULL },
		{ "stall-timeout-ms", CLI_UINT, &cfg.stall_timeout_ms, 1, 3600000, NULL, NULL,
		  NULL },
	};
	size_t n = sizeof(o) / sizeof(o[0]);

	cleanup();
	memset(&cfg, 0, sizeof(cfg));
	cfg.mode = TT_PLAIN;
	cfg.duration_ms = DEF_DURATION_MS;
	cfg.hold_us = DEF_HOLD_US;
	cfg.long_hold_us = DEF_LONG_HOLD_US;
	cfg.long_hold_every = DEF_LONG_EVERY;
	cfg.think_us = DEF_THINK_US;
	cfg.handler_hold_us = DEF_HANDLER_HOLD_US;
	cfg.timer_us = DEF_TIMER_US;
	cfg.stall_timeout_ms = DEF_STALL_MS;
	set_dur = set_hold = set_think = set_locks = false;
	return cli_opts_copy(opts, max, o, n);
}

static bool prepare(const struct bench_opts *bo)
{
	struct tt_config *c = &cfg;

	c->o = bo;
	if (c->mode != TT_PLAIN) {
		if (!set_locks && !lock_peers_parse("rqspin", &c->locks, &c->nlocks))
			return false;
		for (size_t i = 0; i < c->nlocks; i++) {
			if (strcmp(c->locks[i]->name, "rqspin") != 0) {
				cli_error("--mode %s: only rqspin can be taken in a signal handler that "
					  "interrupted its holder (got '%s')",
					  tt_mode_name[c->mode], c->locks[i]->name);
				return false;
			}
		}
		if (!set_hold)
			c->hold_us = DEF_MODE_HOLD_US;
		if (!set_think)
			c->think_us = DEF_MODE_THINK_US;
	} else if (!set_locks && !lock_peers_parse(DEF_LOCKS, &c->locks, &c->nlocks)) {
		return false;
	}
	if (!c->threads && !default_threads(c))
		return false;
	if (bo->quick && !set_dur)
		c->duration_ms = QUICK_DURATION_MS;
	return true;
}

static double estimate_s(const struct bench_opts *bo)
{
	double s = 0;

	(void)bo;
	for (size_t i = 0; i < cfg.nthreads; i++)
		s += row_cost_s(&cfg, cfg.threads[i]);
	return s;
}

static int run(const struct bench_opts *bo, struct verdict_list *v)
{
	(void)bo;
	return tt_execute(&cfg, v);
}

const struct bench_suite bench_suite_torture = {
	.name = "torture",
	.summary = "locktorture: random holds, mutual exclusion checks, failures by type",
	.help = help,
	.options = options,
	.prepare = prepare,
	.estimate_s = estimate_s,
	.run = run,
	.cleanup = cleanup,
	.all_runs = {
		{ .tag = "torture",
		  .args = { "--locks", "rqspin,qspin,pthread_spin", "--threads", "2,16",
			    "--duration-ms", "500", NULL },
		  .quick_args = { "--locks", "rqspin,qspin,pthread_spin", "--threads", "2,16",
				  "--duration-ms", "100", NULL } },
	},
};
