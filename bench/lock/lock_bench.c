/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench lock` and `rqspin-bench all`: option parsing, the run
 * schedule, one measurement (run_once), and the summary.
 *
 * Schedule: for each repeat r: the uncontended pass over every lock, then
 * for each thread count, every lock once; the lock order is rotated by r
 * (A B C, B C A, ...) so drift and position effects hit every lock alike.
 *
 * One measurement: create the lock and N workers, wait until all are at
 * the start gate, open it, sleep for the duration, set stop, read every
 * worker's count (the throughput window), then join the workers with a
 * deadline. Workers check stop between acquisitions only, so a FIFO lock
 * whose queue is full of descheduled waiters may take a while to drain;
 * workers that are not back within --stall-timeout-ms are reported as
 * stalled, detached, and the lock is not run again at that many threads or
 * more. The process then ends with _exit so it cannot hang on them.
 */
#include "lock_bench.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "load.h"
#include "lock_report.h"
#include "output.h"
#include "progress.h"
#include "suite.h"

#define DEF_DURATION_MS 400
#define DEF_REPEATS 5
#define DEF_CS 20
#define DEF_THINK "50,0"
#define DEF_SAMPLE 64
#define DEF_UNCONTENDED_MS 100
#define DEF_STALL_MS 10000
#define QUICK_DURATION_MS 20
#define QUICK_REPEATS 2
#define QUICK_UNCONTENDED_MS 10
#define DEF_BASELINE "pthread_spin"

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

static void help(FILE *f)
{
	fprintf(f,
		"Runs every selected lock at every thread count for --duration-ms, --repeats\n"
		"times, interleaved (each repeat runs every lock, in a rotated order), once per\n"
		"--think value (a scenario: 50 is a lock taken between other work, 0 a tight\n"
		"loop), and reports per lock and thread count: acquisitions/s (median of the\n"
		"repeats, min-max), the ratio to the baseline, Jain's fairness index and the\n"
		"smallest per-thread share of a fair share (aggregated over the repeats),\n"
		"sampled acquisition latency (p50/p99/p99.9/max) and lock failures (rqspin),\n"
		"plus the uncontended lock+unlock cost of each lock. Critical sections update\n"
		"plain shared memory; a lost update means mutual exclusion broke. Each\n"
		"scenario gets the targets of the locks as PASS/FAIL verdicts.\n\n"
		"Options:\n"
		"  --locks LIST          comma-separated lock names, or 'all' (the default:\n"
		"                        every lock below but 'none')\n"
		"  --threads LIST        thread counts, e.g. 1,2,4,8 (default)\n"
		"  --think LIST          private work steps between acquisitions, one scenario\n"
		"                        per value (default " DEF_THINK ")\n"
		"  --duration-ms N       one measurement (default %d)\n"
		"  --repeats N           interleaved repeats (default %d)\n"
		"  --cs N                shared-array updates in the critical section (default %d)\n"
		"  --baseline LOCK       lock of the ratio column (default " DEF_BASELINE
		", else the first)\n"
		"  --sample N            time every Nth acquisition, a power of two, 0 = none\n"
		"                        (default %d)\n"
		"  --uncontended-ms N    uncontended pass per repeat and lock, 0 = none (default %d)\n"
		"  --stall-timeout-ms N  wait for workers after the stop before calling the\n"
		"                        lock stalled (default %d)\n"
		"  --quick               smoke-test sizes: %d ms x %d repeats, %d ms uncontended\n"
		"  --plot FILE.png       charts throughput and p99.9 latency vs threads\n\n"
		"Locks:\n",
		DEF_DURATION_MS, DEF_REPEATS, DEF_CS, DEF_SAMPLE, DEF_UNCONTENDED_MS, DEF_STALL_MS,
		QUICK_DURATION_MS, QUICK_REPEATS, QUICK_UNCONTENDED_MS);
	for (size_t i = 0; i < lock_peers_count; i++)
		fprintf(f, "  %-14s %s\n", lock_peers[i]->name, lock_peers[i]->desc);
	fprintf(f, "\nExit status 1 also when mutual exclusion broke or a librqspin lock stalled.\n");
}

/* The suite's configuration: the options point into it. */
static struct lb_config cfg;
static bool set_dur, set_rep, set_unc;
static const char *baseline_name;
static struct lock_selection lock_sel = { &cfg.locks, &cfg.nlocks };

static void cleanup(void)
{
	free(cfg.locks);
	free(cfg.threads);
	free(cfg.thinks);
	cfg.locks = NULL;
	cfg.threads = NULL;
	cfg.thinks = NULL;
}

static bool parse_sample(const char *value, void *dest)
{
	unsigned *v = dest;

	if (!cli_parse_uint("--sample", value, 0, 1u << 30, v))
		return false;
	if (*v & (*v - 1)) {
		cli_error("--sample: %u is not a power of two", *v);
		return false;
	}
	return true;
}

static size_t options(struct cli_opt *opts, size_t max)
{
	const struct cli_opt o[] = {
		{ "locks", CLI_CUSTOM, &lock_sel, 0, 0, NULL, lock_peers_parse_opt, NULL },
		{ "threads", CLI_UINT_LIST, &cfg.threads, 1, LB_MAX_THREADS, &cfg.nthreads, NULL,
		  NULL },
		{ "think", CLI_UINT_LIST, &cfg.thinks, 0, 100000000, &cfg.nthinks, NULL, NULL },
		{ "duration-ms", CLI_UINT, &cfg.duration_ms, 1, 3600000, NULL, NULL, &set_dur },
		{ "repeats", CLI_UINT, &cfg.repeats, 1, 1000, NULL, NULL, &set_rep },
		{ "cs", CLI_UINT, &cfg.cs, 0, 1000000, NULL, NULL, NULL },
		{ "baseline", CLI_STRING, &baseline_name, 0, 0, NULL, NULL, NULL },
		{ "sample", CLI_CUSTOM, &cfg.sample_every, 0, 0, NULL, parse_sample, NULL },
		{ "uncontended-ms", CLI_UINT, &cfg.uncontended_ms, 0, 3600000, NULL, NULL,
		  &set_unc },
		{ "stall-timeout-ms", CLI_UINT, &cfg.stall_timeout_ms, 1, 3600000, NULL, NULL,
		  NULL },
	};
	size_t n = sizeof(o) / sizeof(o[0]);

	cleanup();
	memset(&cfg, 0, sizeof(cfg));
	cfg.duration_ms = DEF_DURATION_MS;
	cfg.repeats = DEF_REPEATS;
	cfg.cs = DEF_CS;
	cfg.sample_every = DEF_SAMPLE;
	cfg.uncontended_ms = DEF_UNCONTENDED_MS;
	cfg.stall_timeout_ms = DEF_STALL_MS;
	set_dur = set_rep = set_unc = false;
	baseline_name = NULL;
	return cli_opts_copy(opts, max, o, n);
}

static bool prepare(const struct bench_opts *bo)
{
	cfg.o = bo;
	if (!cfg.locks && !lock_peers_parse("all", &cfg.locks, &cfg.nlocks))
		return false;
	if (!cfg.threads && !cli_parse_uint_list("--threads", "1,2,4,8", 1, LB_MAX_THREADS,
						 &cfg.threads, &cfg.nthreads))
		return false;
	if (!cfg.thinks && !cli_parse_uint_list("--think", DEF_THINK, 0, 100000000, &cfg.thinks,
						&cfg.nthinks))
		return false;
	if (bo->quick) {
		if (!set_dur)
			cfg.duration_ms = QUICK_DURATION_MS;
		if (!set_rep)
			cfg.repeats = QUICK_REPEATS;
		if (!set_unc)
			cfg.uncontended_ms = QUICK_UNCONTENDED_MS;
	}
	if (baseline_name) {
		const struct lock_peer *p = lock_peer_find(baseline_name);

		for (size_t i = 0; p && i < cfg.nlocks; i++)
			if (cfg.locks[i] == p)
				cfg.baseline = p;
		if (!cfg.baseline) {
			cli_error("--baseline: '%s' is not one of the selected locks", baseline_name);
			return false;
		}
	} else {
		const struct lock_peer *p = lock_peer_find(DEF_BASELINE);

		cfg.baseline = cfg.locks[0];
		for (size_t i = 0; p && i < cfg.nlocks; i++)
			if (cfg.locks[i] == p)
				cfg.baseline = p;
	}
	return true;
}

/*
 * The model of the run time (progress.h): a measurement takes its duration
 * plus about 1.5 ms of thread start, gate and join per thread on an idle
 * 2-core reference machine, stretching with the load (bench_load_factor;
 * measured with lock --quick: 4.0 s idle, 5.2 s with a hog per CPU and
 * 5.3 s with two); an uncontended pass, its slices plus 20 ms per lock.
 */
static double cell_cost_s(const struct lb_config *c, unsigned nthr)
{
	return c->duration_ms / 1000.0 + nthr * 0.0015 * bench_load_factor(c->o);
}

static double unc_pass_cost_s(const struct lb_config *c)
{
	return c->uncontended_ms ? (double)c->nlocks * (c->uncontended_ms / 1000.0 + 0.02) : 0;
}

/* A repeat of one --think scenario: every lock at every thread count. */
static double rep_cost_s(const struct lb_config *c)
{
	double s = 0;

	for (size_t i = 0; i < c->nthreads; i++)
		s += (double)c->nlocks * cell_cost_s(c, c->threads[i]);
	return s;
}

/* The uncontended pass runs with the first scenario only. */
static double estimate_s(const struct bench_opts *bo)
{
	(void)bo;
	return (double)cfg.repeats * (cfg.nthinks * rep_cost_s(&cfg) + unc_pass_cost_s(&cfg));
}

/* ------------------------------------------------------------------------ */
/* One measurement                                                           */

enum run_status { RUN_OK, RUN_STALLED, RUN_ERROR };

struct run_out {
	double elapsed_s;
	uint64_t *window;   /* [nthr] acquisitions per thread until the stop */
	uint64_t acquired;  /* all acquisitions */
	double worker_ns;   /* 1 thread: the worker's own time from start to exit */
	uint64_t counter;   /* the shared counter at the end */
	struct hist *hist;  /* merged into */
	uint64_t fail[LW_NFAIL];
	struct rqspin_lock_stats lib;
};

static uint64_t now_ns(void)
{
	return lw_now_ns();
}

static void stats_add(struct rqspin_lock_stats *into, const struct rqspin_lock_stats *d)
{
#define A(f) into->f += d->f
	A(fast);
	A(pending);
	A(queued);
	A(stolen);
	A(parked);
	A(yielded);
	A(nonode);
	A(aa);
	A(abba);
	A(cycle);
	A(nest_fail);
	A(timeout);
	A(owner_dead);
	A(deadlock_checks);
	A(stall_checks);
	A(deadline_extended);
#undef A
	into->slots_in_use = d->slots_in_use;
	into->slots_high_water = d->slots_high_water;
	into->slot_limit = d->slot_limit;
}

/*
 * The CPU of the current repeat's one-thread runs (-1: none). Both locks of
 * a ratio are then measured on the same CPU: on the 2-vCPU VMs a
 * single-threaded loop ran ~1.6x slower on one vCPU than on the other, so
 * unpinned one-thread rows compared where each run landed (the 1-thread
 * rqspin/qspin verdict read 0.6-1.07 between runs). Repeat r uses the r-th
 * usable CPU, as the shim's and the allocator's pairs do.
 */
static int single_cpu = -1;

static enum run_status run_once(const struct lock_peer *p, unsigned nthr, unsigned cs,
				unsigned think, uint64_t mask, unsigned dur_ms, unsigned stall_ms,
				struct run_out *out)
{
	struct lw_shared *sh = aligned_alloc(BL_CACHELINE, sizeof(*sh));
	struct lw_thread *th = aligned_alloc(BL_CACHELINE, nthr * sizeof(*th));
	struct lw_gate *gate = malloc(sizeof(*gate));
	pthread_t *tid = calloc(nthr, sizeof(*tid));
	bool *joined = calloc(nthr, sizeof(*joined));
	struct rqspin_lock_stats before, after;
	void *obj = NULL;
	unsigned created = 0;
	enum run_status st = RUN_OK;
	bool gate_ready = false;
	uint64_t t0, t1;

	if (!sh || !th || !gate || !tid || !joined || !(obj = p->create(nthr))) {
		cli_error("%s: out of memory", p->name);
		st = RUN_ERROR;
		goto free_all;
	}
	memset(sh, 0, sizeof(*sh));
	memset(th, 0, nthr * sizeof(*th));
	pthread_mutex_init(&gate->m, NULL);
	pthread_cond_init(&gate->cv, NULL);
	gate_ready = true;
	gate->ready = 0;
	gate->go = false;
	atomic_init(&sh->stop, false);
	for (unsigned i = 0; i < nthr; i++) {
		th[i].sh = sh;
		th[i].obj = obj;
		th[i].ctx = p->ctx(obj, i);
		th[i].gate = gate;
		th[i].cs = cs;
		th[i].think = think;
		th[i].sample_mask = mask;
		th[i].seed = stats_splitmix64(i + 1);
		atomic_init(&th[i].count, 0);
	}
	if (p->flags & LP_LIBRQSPIN)
		rqspin_lock_stats_get(&before);
	for (; created < nthr; created++) {
		pthread_attr_t attr, *ap = NULL;
		int rc;

		if (nthr == 1 && single_cpu >= 0 && pthread_attr_init(&attr) == 0) {
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET(single_cpu, &one);
			/* Best effort: unpinned, the run still counts. */
			ap = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) == 0 ? &attr
											 : NULL;
			if (!ap)
				pthread_attr_destroy(&attr);
		}
		rc = pthread_create(&tid[created], ap, p->worker, &th[created]);
		if (ap)
			pthread_attr_destroy(ap);

		if (rc) {
			cli_error("%s: cannot create thread %u of %u: %s", p->name, created + 1,
				  nthr, strerror(rc));
			st = RUN_ERROR;
			break;
		}
	}

	/* Start: everybody at the gate, then open it. The clock starts
	 * before the gate opens: taken after, it could be late by a whole
	 * time slice, since the woken workers may preempt this thread. */
	t0 = lw_gate_open(gate, created, &sh->stop, st == RUN_ERROR);
	if (st == RUN_OK)
		lw_sleep_until(t0 + dur_ms * 1000000ull);
	atomic_store(&sh->stop, true);
	t1 = now_ns();
	out->elapsed_s = (double)(t1 - t0) / 1e9;
	for (unsigned i = 0; i < created; i++)
		out->window[i] = atomic_load_explicit(&th[i].count, memory_order_relaxed);

	/* Join with one deadline for all. */
	if (!lw_join_by(tid, joined, created, stall_ms) && st == RUN_OK)
		st = RUN_STALLED;
	if (st == RUN_STALLED) {
		/* Leave them their memory (leaked on purpose) and let them go. */
		lw_detach_unjoined(tid, joined, created);
		free(joined);
		free(tid);
		return st;
	}
	if (st == RUN_ERROR)
		goto free_all;

	out->counter = sh->counter;
	out->acquired = 0;
	out->worker_ns = (double)(th[0].t_end - th[0].t_begin);
	for (unsigned i = 0; i < nthr; i++) {
		out->acquired += atomic_load_explicit(&th[i].count, memory_order_relaxed);
		hist_merge(out->hist, &th[i].hist);
		for (int k = 0; k < LW_NFAIL; k++)
			out->fail[k] += th[i].fail[k];
	}
	if (p->flags & LP_LIBRQSPIN) {
		rqspin_lock_stats_get(&after);
		stats_lib_delta(&out->lib, &before, &after);
	}

free_all:
	if (obj)
		p->destroy(obj);
	if (gate_ready) {
		pthread_mutex_destroy(&gate->m);
		pthread_cond_destroy(&gate->cv);
	}
	free(gate);
	free(joined);
	free(tid);
	free(th);
	free(sh);
	return st;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */

static bool results_alloc(struct lb_results *r, const struct lb_config *c, unsigned think,
			  bool with_unc)
{
	size_t reps = c->repeats;

	memset(r, 0, sizeof(*r));
	r->cfg = c;
	r->think = think;
	r->ncells = c->nthreads * c->nlocks;
	r->cells = calloc(r->ncells, sizeof(*r->cells));
	if (!r->cells)
		return false;
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		for (size_t li = 0; li < c->nlocks; li++) {
			struct lb_cell *cell = lb_cell_at(r, ti, li);

			cell->lock = c->locks[li];
			cell->threads = c->threads[ti];
			cell->ops = calloc(reps, sizeof(double));
			cell->ops_rep = calloc(reps, sizeof(double));
			cell->jain_rep = calloc(reps, sizeof(double));
			cell->min_share_rep = calloc(reps, sizeof(double));
			cell->per_thread = calloc(cell->threads, sizeof(uint64_t));
			if (!cell->ops || !cell->ops_rep || !cell->jain_rep || !cell->min_share_rep ||
			    !cell->per_thread)
				return false;
			for (size_t k = 0; k < reps; k++)
				cell->ops_rep[k] = NAN;
		}
	}
	if (c->uncontended_ms && with_unc) {
		r->unc = calloc(c->nlocks, sizeof(*r->unc));
		if (!r->unc)
			return false;
		for (size_t li = 0; li < c->nlocks; li++) {
			r->unc[li].lock = c->locks[li];
			r->unc[li].ns = calloc(reps, sizeof(double));
			r->unc[li].ns_rep = calloc(reps, sizeof(double));
			if (!r->unc[li].ns || !r->unc[li].ns_rep)
				return false;
			for (size_t k = 0; k < reps; k++)
				r->unc[li].ns_rep[k] = NAN;
		}
	}
	return true;
}

static void results_free(struct lb_results *r)
{
	for (size_t i = 0; r->cells && i < r->ncells; i++) {
		free(r->cells[i].ops);
		free(r->cells[i].ops_rep);
		free(r->cells[i].jain_rep);
		free(r->cells[i].min_share_rep);
		free(r->cells[i].per_thread);
	}
	free(r->cells);
	for (size_t li = 0; r->unc && li < r->cfg->nlocks; li++) {
		free(r->unc[li].ns);
		free(r->unc[li].ns_rep);
	}
	free(r->unc);
	memset(r, 0, sizeof(*r));
}

static void summarize(struct lb_results *r)
{
	const struct lb_config *c = r->cfg;

	for (size_t i = 0; i < r->ncells; i++) {
		struct lb_cell *cell = &r->cells[i];

		cell->ops_med = stats_median(cell->ops, cell->nrep);
		cell->ops_min = stats_min(cell->ops, cell->nrep);
		cell->ops_max = stats_max(cell->ops, cell->nrep);
		cell->jain = cell->nrep ? stats_jain(cell->per_thread, cell->threads) : NAN;
		cell->min_share = cell->nrep ? stats_min_share(cell->per_thread, cell->threads) : NAN;
		cell->min_share_worst = stats_min(cell->min_share_rep, cell->nrep);
		if (cell->lock->flags & LP_CAN_FAIL)
			for (int k = 0; k < LW_NFAIL; k++)
				r->lib_failures |= cell->fail[k] != 0;
	}
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		const struct lb_cell *base = NULL;

		for (size_t li = 0; li < c->nlocks; li++)
			if (c->locks[li] == c->baseline)
				base = lb_cell_at(r, ti, li);
		for (size_t li = 0; li < c->nlocks; li++) {
			struct lb_cell *cell = lb_cell_at(r, ti, li);

			cell->ratio = base ? stats_paired_ratio(cell->ops_rep, base->ops_rep,
								c->repeats, NULL, NULL, NULL)
					   : NAN;
		}
	}
	for (size_t li = 0; r->unc && li < c->nlocks; li++) {
		struct lb_unc *u = &r->unc[li];

		u->med = stats_median(u->ns, u->n);
		u->min = stats_min(u->ns, u->n);
		u->max = stats_max(u->ns, u->n);
	}
}

/* ------------------------------------------------------------------------ */
/* The schedule                                                              */

static uint64_t sample_mask(unsigned every)
{
	return every ? (uint64_t)every - 1 : UINT64_MAX;
}

/* One slice of the uncontended pass: ns per lock+unlock, or NaN. */
static double run_uncontended(struct lb_results *r, struct lb_unc *u, unsigned ms)
{
	const struct lb_config *c = r->cfg;
	uint64_t window = 0;
	struct hist *h = malloc(sizeof(*h));
	struct run_out out = { .window = &window, .hist = h };
	enum run_status st;
	double ns = NAN;

	if (!h)
		return NAN;
	hist_reset(h);
	st = run_once(u->lock, 1, 0, 0, UINT64_MAX, ms, c->stall_timeout_ms, &out);
	if (st == RUN_OK && out.acquired > 0) {
		/* The worker's own clock and count: exact even if this thread
		 * was descheduled around the start or the stop. */
		ns = out.worker_ns / (double)out.acquired;
		if (out.counter != out.acquired) {
			cli_progress(c->o->quiet, "\n");
			cli_error("MUTUAL EXCLUSION BROKEN: %s, 1 thread: counter %llu, acquisitions %llu",
				  u->lock->name, (unsigned long long)out.counter,
				  (unsigned long long)out.acquired);
			r->broken = true;
		}
	} else if (st == RUN_STALLED) {
		u->stalled = true;
		r->any_stalled = true;
		if (u->lock->flags & LP_LIBRQSPIN)
			r->lib_stalled = true;
		cli_progress(c->o->quiet, "\n");
		cli_error("%s: a single uncontended thread did not stop within %u ms", u->lock->name,
			  c->stall_timeout_ms);
	}
	free(h);
	return ns;
}

/* The uncontended pass of one repeat: LB_UNC_SLICES rounds over all locks
 * (rotated), each lock's fastest slice kept. */
static void run_uncontended_pass(struct lb_results *r, unsigned rep)
{
	const struct lb_config *c = r->cfg;
	size_t nl = c->nlocks;
	unsigned ms = c->uncontended_ms / LB_UNC_SLICES;
	double *best = malloc(nl * sizeof(*best));

	if (!best)
		return;
	if (ms == 0)
		ms = 1;
	for (size_t li = 0; li < nl; li++)
		best[li] = NAN;
	for (unsigned s = 0; s < LB_UNC_SLICES; s++) {
		for (size_t k = 0; k < nl; k++) {
			size_t li = (k + rep + s) % nl;
			double ns;

			if (r->unc[li].stalled)
				continue;
			ns = run_uncontended(r, &r->unc[li], ms);
			if (isfinite(ns) && !(ns >= best[li]))
				best[li] = ns;
		}
	}
	for (size_t li = 0; li < nl; li++) {
		struct lb_unc *u = &r->unc[li];

		if (!isfinite(best[li]))
			continue;
		u->ns[u->n++] = best[li];
		u->ns_rep[rep] = best[li];
	}
	free(best);
}

/* Runs cell once (repeat rep); returns false if the lock stalled. */
static bool run_cell(struct lb_results *r, struct lb_cell *cell, unsigned rep)
{
	const struct lb_config *c = r->cfg;
	uint64_t *window = calloc(cell->threads, sizeof(uint64_t));
	struct run_out out = { .window = window, .hist = &cell->hist };
	enum run_status st;
	uint64_t sum = 0;

	if (!window) {
		cell->error = true;
		return true;
	}
	st = run_once(cell->lock, cell->threads, c->cs, r->think, sample_mask(c->sample_every),
		      c->duration_ms, c->stall_timeout_ms, &out);
	if (st == RUN_ERROR) {
		cell->error = true;
		free(window);
		return true;
	}
	/* The window counts are valid even when workers then stalled. */
	for (unsigned i = 0; i < cell->threads; i++) {
		sum += window[i];
		cell->per_thread[i] += window[i];
	}
	cell->ops[cell->nrep] = (double)sum / out.elapsed_s;
	cell->ops_rep[rep] = cell->ops[cell->nrep];
	cell->jain_rep[cell->nrep] = stats_jain(window, cell->threads);
	cell->min_share_rep[cell->nrep] = stats_min_share(window, cell->threads);
	cell->nrep++;
	free(window);
	if (st == RUN_STALLED) {
		cell->stalled = true;
		r->any_stalled = true;
		if (cell->lock->flags & LP_LIBRQSPIN)
			r->lib_stalled = true;
		cli_progress(c->o->quiet, "\n"); /* end the progress line */
		cli_error("%s, %u threads: workers did not return within %u ms of the stop: "
			  "reported as stalled, not run again at >= %u threads",
			  cell->lock->name, cell->threads, c->stall_timeout_ms, cell->threads);
		return false;
	}
	cell->acquired += out.acquired;
	for (int k = 0; k < LW_NFAIL; k++)
		cell->fail[k] += out.fail[k];
	stats_add(&cell->lib, &out.lib);
	if (out.counter != out.acquired) {
		cell->broken = true;
		cell->lost_updates += out.acquired > out.counter ? out.acquired - out.counter
								   : out.counter - out.acquired;
		r->broken = true;
		cli_progress(c->o->quiet, "\n");
		cli_error("MUTUAL EXCLUSION BROKEN: %s, %u threads: shared counter %llu, "
			  "acquisitions %llu",
			  cell->lock->name, cell->threads, (unsigned long long)out.counter,
			  (unsigned long long)out.acquired);
	}
	return true;
}

static void run_schedule(struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	size_t nl = c->nlocks;
	/* Smallest thread count at which each lock stalled (0 = never). */
	unsigned *stalled_at = calloc(nl, sizeof(unsigned));
	uint64_t start = now_ns();
	struct load_snap load0, load1;
	char buf[16];

	cli_progress(c->o->quiet, "[lock] think %u: %zu locks x %zu thread counts x %u repeats x %u ms\n",
		     r->think, nl, c->nthreads, c->repeats, c->duration_ms);
	load_snapshot(&load0);
	for (unsigned rep = 0; rep < c->repeats; rep++) {
		single_cpu = load_nth_cpu(rep);
		if (r->unc) {
			cli_progress(c->o->quiet, "[%u/%u] uncontended:", rep + 1, c->repeats);
			run_uncontended_pass(r, rep);
			for (size_t li = 0; li < nl; li++)
				if (isfinite(r->unc[li].ns_rep[rep]))
					cli_progress(c->o->quiet, " %s %.1fns", r->unc[li].lock->name,
						 r->unc[li].ns_rep[rep]);
			progress_step(c->o->quiet, unc_pass_cost_s(c));
		}
		for (size_t ti = 0; ti < c->nthreads; ti++) {
			unsigned nthr = c->threads[ti];

			cli_progress(c->o->quiet, "[%u/%u] %u thread%s:", rep + 1, c->repeats, nthr,
				 nthr == 1 ? "" : "s");
			for (size_t k = 0; k < nl; k++) {
				size_t li = (k + rep) % nl;
				struct lb_cell *cell = lb_cell_at(r, ti, li);

				if (stalled_at && stalled_at[li] && nthr >= stalled_at[li]) {
					if (!cell->nrep)
						cell->skipped = true;
					continue;
				}
				if (cell->error)
					continue;
				if (!run_cell(r, cell, rep) && stalled_at)
					stalled_at[li] = nthr;
				if (cell->nrep)
					cli_progress(c->o->quiet, " %s %s%s", cell->lock->name,
						 fmt_si(buf, sizeof(buf), cell->ops[cell->nrep - 1]),
						 cell->stalled ? "(stalled)" : "");
			}
			progress_step(c->o->quiet, (double)nl * cell_cost_s(c, nthr));
		}
	}
	single_cpu = -1;
	free(stalled_at);
	r->wall_s = (double)(now_ns() - start) / 1e9;
	load_snapshot(&load1);
	r->load = load_between(&load0, &load1);
}

/* ------------------------------------------------------------------------ */

static void results_free_all(struct lb_results *rs, size_t n)
{
	for (size_t k = 0; rs && k < n; k++)
		results_free(&rs[k]);
	free(rs);
}

/* Every scenario, then the reports. */
static int run(const struct bench_opts *bo, struct verdict_list *v)
{
	const struct lb_config *c = &cfg;
	struct lb_results *rs = calloc(c->nthinks, sizeof(*rs));
	bool broken = false, lib_stalled = false, any_stalled = false;
	int rc = CLI_EXIT_OK;

	for (size_t k = 0; rs && k < c->nthinks; k++) {
		if (!results_alloc(&rs[k], c, c->thinks[k], k == 0)) {
			results_free_all(rs, c->nthinks);
			rs = NULL;
		}
	}
	if (!rs) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	for (size_t k = 0; k < c->nthinks; k++) {
		struct lb_results *r = &rs[k];

		sysinfo_collect(&r->sys);
		if (k == 0 && !bo->quiet) {
			fprintf(stderr, "%s %s\n", cli_prog, bo->run);
			sysinfo_print(stderr, &r->sys, "  ");
		}
		run_schedule(r);
		summarize(r);
		lb_verdicts(r);

		report_header(stdout, r);
		if (r->unc)
			report_uncontended(stdout, r);
		report_table(stdout, r);
		report_libstats(stdout, r);
		report_verdicts(stdout, r);
		fflush(stdout);
		for (size_t i = 0; i < r->verdicts.n; i++)
			if (v->n < VERDICT_MAX)
				v->v[v->n++] = r->verdicts.v[i];
		broken |= r->broken;
		lib_stalled |= r->lib_stalled;
		any_stalled |= r->any_stalled;
		if (r->lib_stalled)
			break; /* threads of ours still spin in there: no more measurements */
	}

	if (bo->json_path) {
		if (report_json(bo->json_path, rs, c->nthinks, v) == 0)
			printf("JSON written to %s\n", bo->json_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (bo->csv_path) {
		if (report_csv(bo->csv_path, rs, c->nthinks) == 0)
			printf("CSV written to %s\n", bo->csv_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (bo->plot_path) {
		int prc = report_plot(bo->plot_path, rs, c->nthinks);

		if (prc == 0)
			printf("Plot written to %s\n", bo->plot_path);
		else if (prc < 0 || strcmp(bo->run, "lock") == 0)
			rc = CLI_EXIT_FAIL; /* asked for explicitly, or gnuplot failed */
	}
	if (broken) {
		cli_error("FAILED: mutual exclusion broke (see above)");
		rc = CLI_EXIT_FAIL;
	}
	if (lib_stalled) {
		cli_error("FAILED: a librqspin lock stalled (workers did not return)");
		rc = CLI_EXIT_FAIL;
	}
	if (any_stalled) {
		/* Stalled workers still run (or spin): do not wait for them or
		 * run exit handlers under their feet. */
		fflush(NULL);
		_exit(rc);
	}
	results_free_all(rs, c->nthinks);
	return rc;
}

const struct bench_suite bench_suite_lock = {
	.name = "lock",
	.summary = "throughput, fairness and latency of qspin/rqspin vs peer locks",
	.help = help,
	.options = options,
	.prepare = prepare,
	.estimate_s = estimate_s,
	.run = run,
	.cleanup = cleanup,
	.own_plot = true,
	/* Idle, then with one CPU-bound process per CPU (fewer repeats, no
	 * uncontended pass: the loaded run is about the contended figures). */
	.all_runs = {
		{ .tag = "lock", .args = { "--duration-ms", "250", "--repeats", "3", NULL } },
		{ .tag = "lock-loaded",
		  .args = { "--duration-ms", "150", "--repeats", "2", "--uncontended-ms", "0", NULL },
		  .quick_args = { "--uncontended-ms", "0", NULL },
		  .hog_per_cpu = true },
	},
};
