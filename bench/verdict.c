/* SPDX-License-Identifier: MIT */
/*
 * The performance targets of the locks, checked as ratios measured in
 * the same run. A verdict appears only when the run measured what it needs
 * (the locks and the thread count). Each ratio is the median over the
 * repeats of the ratio within a repeat (both locks measured seconds apart),
 * which cancels the drift of a shared machine better than a ratio of
 * medians. Targets:
 *
 *  lock (verdict area "lock"), on the 2-core reference machine:
 *   - 1 thread: qspin lock+unlock costs <= 1.1x a bare CAS + release store
 *     (cas_floor), from the uncontended pass (else the 1-thread row);
 *   - 2 threads: qspin >= 0.9x pthread_spin throughput;
 *   - 8 threads: qspin >= 0.5x the better of pthread_spin and pthread_mutex,
 *     and no starvation: every thread >= 10% of its fair share.
 *  rqspinlock (area "rqspin"): rqspin >= 0.95x qspin at 1 thread, >= 0.9x at
 *   every other count; no rqspin failures with one lock and no nesting.
 *  Correctness (any run): mutual exclusion held; no librqspin lock stalled.
 *
 * The verdicts of the torture and deadlock suites are at the end of the file.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lock_bench.h"
#include "report.h"
#include "suite.h"

/* Clear *v and set its area, value and limit; it passes when value >= limit
 * (ge) or value <= limit, and fails when value is NaN. */
static struct verdict *verdict_set(struct verdict *v, const char *area, double value, double limit,
				   bool ge)
{
	memset(v, 0, sizeof(*v));
	v->area = area;
	v->value = value;
	v->limit = limit;
	if (isnan(value))
		v->status = V_FAIL;
	else
		v->status = (ge ? value >= limit : value <= limit) ? V_PASS : V_FAIL;
	return v;
}

static struct verdict *add(struct lb_results *r, const char *area, double value, double limit,
			   bool ge)
{
	if (r->nverdicts >= LB_MAX_VERDICTS)
		return NULL;
	return verdict_set(&r->verdicts[r->nverdicts++], area, value, limit, ge);
}

static void check_floor(struct lb_results *r)
{
	const struct lb_unc *q = lb_find_unc(r, "qspin"), *f = lb_find_unc(r, "cas_floor");
	struct verdict *v;

	if (q && f) {
		double lo, hi;
		size_t n;
		double ratio = stats_paired_ratio(q->ns_rep, f->ns_rep, r->cfg->repeats, &lo, &hi, &n);

		v = add(r, "lock", ratio, 1.1, false);
		if (!v)
			return;
		snprintf(v->target, sizeof(v->target),
			 "1 thread: qspin lock+unlock <= 1.1x cas_floor (uncontended)");
		snprintf(v->measured, sizeof(v->measured), "%.2f vs %.2f ns; %zu repeats %.2f..%.2f",
			 q->med, f->med, n, lo, hi);
		return;
	}
	{
		const struct lb_cell *qc = lb_find(r, "qspin", 1), *fc = lb_find(r, "cas_floor", 1);

		if (!qc || !fc)
			return;
		/* time per op = 1 / throughput */
		v = add(r, "lock",
			stats_paired_ratio(fc->ops_rep, qc->ops_rep, r->cfg->repeats, NULL, NULL, NULL),
			1.1, false);
		if (!v)
			return;
		snprintf(v->target, sizeof(v->target),
			 "1 thread: qspin time per acquisition <= 1.1x cas_floor");
		snprintf(v->measured, sizeof(v->measured), "%.2f ns vs %.2f ns (with cs/think)",
			 1e9 / qc->ops_med, 1e9 / fc->ops_med);
	}
}

static void check_ratio(struct lb_results *r, const char *area, const char *a, const char *b,
			unsigned threads, double limit)
{
	const struct lb_cell *ca = lb_find(r, a, threads), *cb = lb_find(r, b, threads);
	struct verdict *v;
	char x[16], y[16];
	double lo, hi;
	size_t n;

	if (!ca || !cb)
		return;
	v = add(r, area, stats_paired_ratio(ca->ops_rep, cb->ops_rep, r->cfg->repeats, &lo, &hi, &n),
		limit, true);
	if (!v)
		return;
	snprintf(v->target, sizeof(v->target), "%u thread%s: %s >= %.2gx %s", threads,
		 threads == 1 ? "" : "s", a, limit, b);
	snprintf(v->measured, sizeof(v->measured), "%s vs %s ops/s; %zu repeats %.2f..%.2f",
		 fmt_si(x, sizeof(x), ca->ops_med), fmt_si(y, sizeof(y), cb->ops_med), n, lo, hi);
}

static void check_8(struct lb_results *r)
{
	const struct lb_cell *q = lb_find(r, "qspin", 8);
	const struct lb_cell *s = lb_find(r, "pthread_spin", 8), *m = lb_find(r, "pthread_mutex", 8);
	const struct lb_cell *best = NULL;
	struct verdict *v;
	char x[16], y[16];

	if (!q)
		return;
	if (s && m)
		best = s->ops_med >= m->ops_med ? s : m;
	else
		best = s ? s : m;
	if (best) {
		/* The better peer of each repeat. */
		unsigned reps = r->cfg->repeats;
		double peer[reps ? reps : 1], lo, hi;
		size_t n;

		for (unsigned i = 0; i < reps; i++) {
			double a = s ? s->ops_rep[i] : NAN, b = m ? m->ops_rep[i] : NAN;

			peer[i] = isnan(a) ? b : isnan(b) ? a : a > b ? a : b;
		}
		v = add(r, "lock", stats_paired_ratio(q->ops_rep, peer, reps, &lo, &hi, &n), 0.5,
			true);
		if (v) {
			snprintf(v->target, sizeof(v->target), "8 threads: qspin >= 0.5x max(%s)",
				 s && m ? "pthread_spin, pthread_mutex" : best->lock->name);
			snprintf(v->measured, sizeof(v->measured),
				 "%s vs %s ops/s (%s); %zu repeats %.2f..%.2f",
				 fmt_si(x, sizeof(x), q->ops_med), fmt_si(y, sizeof(y), best->ops_med),
				 best->lock->name, n, lo, hi);
		}
	}
	v = add(r, "lock", q->min_share, 0.1, true);
	if (v) {
		snprintf(v->target, sizeof(v->target),
			 "8 threads: qspin no starvation, every thread >= 10%% of fair share");
		snprintf(v->measured, sizeof(v->measured),
			 "min share %.2f over %u x %u ms (worst repeat %.2f), Jain %.3f", q->min_share,
			 q->nrep, r->cfg->duration_ms, q->min_share_worst, q->jain);
	}
}

static void check_rqspin(struct lb_results *r)
{
	bool ran = false;
	uint64_t fails[LW_NFAIL] = { 0 }, total = 0;
	struct verdict *v;

	for (size_t ti = 0; ti < r->cfg->nthreads; ti++) {
		unsigned t = r->cfg->threads[ti];

		check_ratio(r, "rqspin", "rqspin", "qspin", t, t == 1 ? 0.95 : 0.9);
	}
	for (size_t i = 0; i < r->ncells; i++) {
		const struct lb_cell *c = &r->cells[i];

		if (strcmp(c->lock->name, "rqspin") != 0 || !c->nrep)
			continue;
		ran = true;
		for (int k = 0; k < LW_NFAIL; k++) {
			fails[k] += c->fail[k];
			total += c->fail[k];
		}
	}
	if (!ran)
		return;
	v = add(r, "rqspin", (double)total, 0, false);
	if (v) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target), "rqspin: no failures (one lock, no nesting)");
		snprintf(v->measured, sizeof(v->measured),
			 "%llu EDEADLK, %llu ETIMEDOUT, %llu EOWNERDEAD, %llu other",
			 (unsigned long long)fails[LW_FAIL_EDEADLK],
			 (unsigned long long)fails[LW_FAIL_ETIMEDOUT],
			 (unsigned long long)fails[LW_FAIL_EOWNERDEAD],
			 (unsigned long long)fails[LW_FAIL_OTHER]);
	}
}

static void check_correctness(struct lb_results *r)
{
	struct verdict *v;
	char bad[80] = "";
	size_t nbad = 0;

	for (size_t i = 0; i < r->ncells; i++) {
		const struct lb_cell *c = &r->cells[i];

		if (c->broken && nbad++ < 3) {
			size_t len = strlen(bad);

			snprintf(bad + len, sizeof(bad) - len, "%s%s@%u", len ? ", " : "", c->lock->name,
				 c->threads);
		}
	}
	v = add(r, "harness", (double)nbad, 0, false);
	if (v) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target), "mutual exclusion held (shared counter check)");
		snprintf(v->measured, sizeof(v->measured), "%s", nbad ? bad : "all locks");
		if (r->broken)
			v->status = V_FAIL;
	}
	for (size_t i = 0; i < r->ncells; i++) {
		const struct lb_cell *c = &r->cells[i];

		if (!c->stalled || !(c->lock->flags & LP_LIBRQSPIN))
			continue;
		v = add(r, "harness", NAN, 0, false);
		if (v) {
			snprintf(v->target, sizeof(v->target), "%s returns after the stop", c->lock->name);
			snprintf(v->measured, sizeof(v->measured), "stalled at %u threads", c->threads);
		}
	}
}

void verdicts_compute(struct lb_results *r)
{
	r->nverdicts = 0;
	check_floor(r);
	check_ratio(r, "lock", "qspin", "pthread_spin", 2, 0.9);
	check_8(r);
	check_rqspin(r);
	check_correctness(r);
}

/* ------------------------------------------------------------------------ */
/* The torture and deadlock suites (suite.h)                                 */

struct verdict *vl_add(struct verdict_list *l, const char *area, double value, double limit,
		       bool ge)
{
	if (l->n >= SUITE_MAX_VERDICTS)
		return NULL;
	return verdict_set(&l->v[l->n++], area, value, limit, ge);
}

void vl_count(const struct verdict_list *l, size_t *pass, size_t *fail)
{
	for (size_t i = 0; i < l->n; i++) {
		*pass += l->v[i].status == V_PASS;
		*fail += l->v[i].status == V_FAIL;
	}
}

void verdicts_print(FILE *f, const char *title, const struct verdict *vs, size_t n,
		    const struct load_share *load)
{
	size_t pass = 0, fail = 0;

	if (!n)
		return;
	fprintf(f, "%s\n", title);
	for (size_t i = 0; i < n; i++) {
		const struct verdict *v = &vs[i];
		char val[24];

		if (isnan(v->value))
			snprintf(val, sizeof(val), "-");
		else if (v->is_count)
			snprintf(val, sizeof(val), "%.0f", v->value);
		else
			snprintf(val, sizeof(val), "%.3f", v->value);
		fprintf(f, "  %-4s  %-7s  %-66s %7s  %s\n",
			v->status == V_PASS ? "PASS" : v->status == V_FAIL ? "FAIL" : "info", v->area,
			v->target, val, v->measured);
		pass += v->status == V_PASS;
		fail += v->status == V_FAIL;
	}
	fprintf(f, "  %zu passed, %zu failed", pass, fail);
	if (load && load->ok && load->other > LB_BUSY_SHARE)
		fprintf(f, " (on a busy machine: other processes used %.0f%% of the CPU time)",
			100 * load->other);
	fputs("\n\n", f);
}

/* The lock suite's verdict layout (report_verdicts). */
void vl_print(FILE *f, const char *title, const struct verdict_list *l,
	      const struct load_share *load)
{
	verdicts_print(f, title, l->v, l->n, load);
}

void vl_json(struct json *j, const char *key, const struct verdict_list *l)
{
	json_begin_array(j, key);
	for (size_t i = 0; i < l->n; i++) {
		const struct verdict *v = &l->v[i];

		json_begin_object(j, NULL);
		json_string(j, "area", v->area);
		json_string(j, "target", v->target);
		json_string(j, "status", v->status == V_PASS ? "pass" : v->status == V_FAIL ? "fail"
											: "info");
		json_double(j, "value", v->value);
		json_double(j, "limit", v->limit);
		json_string(j, "measured", v->measured);
		json_end_object(j);
	}
	json_end_array(j);
}

/*
 * torture (the locktorture-style runs and rqspinlock's signal storm):
 *  - mutual exclusion held in every run (owner field + shared counter);
 *  - no librqspin lock stalled after the stop;
 *  plain mode:
 *  - rqspin: no failures with one lock and no nesting, oversubscribed
 *    included ("no false failures");
 *  - fairness of qspin/rqspin at the largest thread count (info);
 *  aa / abba / abbcca modes (rqspin only):
 *  - every failure is -EDEADLK or -ETIMEDOUT (never another code);
 *  - every worker made progress (runs of at least 8T; info otherwise);
 *  - aa: no -ETIMEDOUT (with one lock every deadlock is an AA, found at
 *    once); abba/abbcca: the share of failures that are -EDEADLK (info:
 *    a cycle among waiters queued behind an innocent head ends only with
 *    that head's timeout, as in the kernel);
 *  - abbcca: the library detects 3-cycles (its cycle counter moves; beyond
 *    the kernel).
 */
static const struct tt_cell *tt_cell_find(const struct tt_results *r, const char *lock,
					  unsigned threads)
{
	for (size_t i = 0; i < r->ncells; i++)
		if (r->cells[i].ran && r->cells[i].threads == threads &&
		    strcmp(r->cells[i].lock->name, lock) == 0)
			return &r->cells[i];
	return NULL;
}

void torture_verdicts(struct tt_results *r)
{
	const struct tt_config *c = r->cfg;
	struct verdict_list *l = &r->verdicts;
	const char *mode = tt_mode_name[c->mode];
	char bad[80] = "";
	size_t nbad = 0;
	unsigned tmin = UINT32_MAX, tmax = 0;
	struct verdict *v;

	l->n = 0;
	for (size_t i = 0; i < c->nthreads; i++) {
		tmin = c->threads[i] < tmin ? c->threads[i] : tmin;
		tmax = c->threads[i] > tmax ? c->threads[i] : tmax;
	}
	for (size_t i = 0; i < r->ncells; i++) {
		const struct tt_cell *cell = &r->cells[i];

		if (cell->broken && nbad++ < 3) {
			size_t len = strlen(bad);

			snprintf(bad + len, sizeof(bad) - len, "%s%s@%u", len ? ", " : "",
				 cell->lock->name, cell->threads);
		}
	}
	v = vl_add(l, "harness", (double)nbad, 0, false);
	if (v) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target),
			 "torture %s: mutual exclusion held (owner field, counter)", mode);
		snprintf(v->measured, sizeof(v->measured), "%s", nbad ? bad : "all locks");
	}
	for (size_t i = 0; i < r->ncells; i++) {
		const struct tt_cell *cell = &r->cells[i];

		if (!cell->stalled || !(cell->lock->flags & LP_LIBRQSPIN))
			continue;
		v = vl_add(l, "harness", NAN, 0, false);
		if (v) {
			snprintf(v->target, sizeof(v->target), "torture: %s returns after the stop",
				 cell->lock->name);
			snprintf(v->measured, sizeof(v->measured), "stalled at %u threads",
				 cell->threads);
		}
	}

	if (c->mode == TT_PLAIN) {
		uint64_t f[TT_NFAIL] = { 0 }, total = 0, acq = 0;
		bool ran = false;

		for (size_t i = 0; i < r->ncells; i++) {
			const struct tt_cell *cell = &r->cells[i];

			if (!cell->ran || strcmp(cell->lock->name, "rqspin") != 0)
				continue;
			ran = true;
			acq += cell->ok[TT_NORMAL];
			for (int k = 0; k < TT_NFAIL; k++) {
				f[k] += cell->fail[TT_NORMAL][k];
				total += cell->fail[TT_NORMAL][k];
			}
		}
		if (ran && (v = vl_add(l, "rqspin", (double)total, 0, false))) {
			v->is_count = true;
			snprintf(v->target, sizeof(v->target),
				 "torture: rqspin no failures (one lock, %u..%u threads)", tmin, tmax);
			snprintf(v->measured, sizeof(v->measured),
				 "%llu EDEADLK, %llu ETIMEDOUT, %llu EOWNERDEAD in %llu acq",
				 (unsigned long long)f[LW_FAIL_EDEADLK],
				 (unsigned long long)f[LW_FAIL_ETIMEDOUT],
				 (unsigned long long)f[LW_FAIL_EOWNERDEAD], (unsigned long long)acq);
		}
		for (int k = 0; k < 2; k++) {
			const char *name = k ? "rqspin" : "qspin";
			const struct tt_cell *cell = tt_cell_find(r, name, tmax);

			if (!cell || tmax < 2 || !(v = vl_add(l, "info", cell->min_share, 0.1, true)))
				continue;
			v->status = V_INFO;
			snprintf(v->target, sizeof(v->target),
				 "torture: %s fairness at %u threads (min share >= 0.1)", name, tmax);
			snprintf(v->measured, sizeof(v->measured), "min share %.2f, Jain %.3f",
				 cell->min_share, cell->jain);
		}
		return;
	}

	/* Signal modes: rqspin only. */
	{
		uint64_t other = 0, tmo = 0, dl = 0, ok[TT_NCTX] = { 0 }, cycles = 0;
		unsigned idle = 0, workers = 0;

		for (size_t i = 0; i < r->ncells; i++) {
			const struct tt_cell *cell = &r->cells[i];

			if (!cell->ran)
				continue;
			idle += cell->idle_workers;
			workers += cell->threads;
			cycles += cell->lib.cycle;
			for (int x = 0; x < TT_NCTX; x++) {
				other += cell->fail[x][LW_FAIL_EOWNERDEAD] + cell->fail[x][LW_FAIL_OTHER];
				tmo += cell->fail[x][LW_FAIL_ETIMEDOUT];
				dl += cell->fail[x][LW_FAIL_EDEADLK];
				ok[x] += cell->ok[x];
			}
		}
		if ((v = vl_add(l, "rqspin", (double)other, 0, false))) {
			v->is_count = true;
			snprintf(v->target, sizeof(v->target),
				 "torture %s: every failure is -EDEADLK or -ETIMEDOUT", mode);
			snprintf(v->measured, sizeof(v->measured),
				 "%llu other codes; ok %llu normal, %llu handler",
				 (unsigned long long)other, (unsigned long long)ok[0],
				 (unsigned long long)ok[1]);
		}
		if ((v = vl_add(l, "rqspin", (double)idle, 0, false))) {
			/* A deadlock that ends in a head's timeout (2T) stops its
			 * workers that long: judge progress only over runs of at
			 * least 4 such timeouts. */
			uint64_t need_ms = 8 * rqspin_get_default_timeout() / 1000000u;

			v->is_count = true;
			snprintf(v->target, sizeof(v->target),
				 "torture %s: every worker makes progress", mode);
			snprintf(v->measured, sizeof(v->measured), "%u of %u workers never acquired%s",
				 idle, workers,
				 c->duration_ms < need_ms ? " (info: run shorter than 4 x 2T)" : "");
			if (c->duration_ms < need_ms) {
				v->status = V_INFO;
				v->area = "info";
			}
		}
		if (c->mode == TT_AA) {
			/* One lock: every deadlock is an AA, found at once. */
			if ((v = vl_add(l, "rqspin", (double)tmo, 0, false))) {
				v->is_count = true;
				snprintf(v->target, sizeof(v->target),
					 "torture aa: AA detected at once, no -ETIMEDOUT");
				snprintf(v->measured, sizeof(v->measured), "%llu EDEADLK, %llu ETIMEDOUT",
					 (unsigned long long)dl, (unsigned long long)tmo);
			}
		} else {
			/* Deadlocks among waiters queued behind an innocent
			 * head are only ended by that head's timeout (kernel
			 * behaviour): timeouts are expected here, so info. */
			double share = dl + tmo ? (double)dl / (double)(dl + tmo) : NAN;

			if ((v = vl_add(l, "info", share, 0, true))) {
				v->status = V_INFO;
				snprintf(v->target, sizeof(v->target),
					 "torture %s: failures that are -EDEADLK (not timeouts)", mode);
				snprintf(v->measured, sizeof(v->measured), "%llu EDEADLK, %llu ETIMEDOUT",
					 (unsigned long long)dl, (unsigned long long)tmo);
			}
		}
		if (c->mode == TT_ABBCCA && (v = vl_add(l, "rqspin", (double)cycles, 1, true))) {
			v->is_count = true;
			snprintf(v->target, sizeof(v->target),
				 "torture abbcca: 3-cycles detected as -EDEADLK (cycle events > 0)");
			snprintf(v->measured, sizeof(v->measured), "%llu cycle events (library counter)",
				 (unsigned long long)cycles);
		}
	}
}

/*
 * deadlock (rqspinlock's detection and timeout targets):
 *  - AA in a signal handler: median detection < 10 us;
 *  - ABBA and 3-cycle, from the barrier to the first -EDEADLK, per number
 *    of registered threads: p99 <= 50 us with up to 64, <= 1 ms with up to
 *    16 000 (dl_reg_limit_us); larger sizes, and sizes the machine could
 *    not start, are info;
 *  - timeout (pending waiter): fires within +10% of its setting, i.e.
 *    elapsed / T in [1.0, 1.1] at the median;
 *  - queue head at 2T (info: by design, docs/design.md "Timeouts");
 *  - the library's counters agree with the returns; reports name the
 *    cycle; every lock is free and usable afterwards (harness).
 */
static void dl_fmt_value(char *buf, size_t n, const struct dl_scen *s, double v)
{
	if (s->ratio)
		snprintf(buf, n, "%.3f", v);
	else
		fmt_ns(buf, n, v);
}

void deadlock_verdicts(struct dl_results *r)
{
	struct verdict_list *l = &r->verdicts;
	struct verdict *v;
	size_t stats_bad = 0, locks_bad = 0, rep_bad = 0, rep_n = 0, rep_partial = 0;
	char sb[80] = "", lb[80] = "";

	l->n = 0;
	for (size_t i = 0; i < r->nscen; i++) {
		struct dl_scen *s = &r->scen[i];
		char p50[16], p99[16], mx[16];
		bool none = s->done == 0;

		dl_fmt_value(p50, sizeof(p50), s, s->p50);
		dl_fmt_value(p99, sizeof(p99), s, s->p99);
		dl_fmt_value(mx, sizeof(mx), s, s->max);
		s->verdict = -1;
		v = NULL;
		switch (s->kind) {
		case DL_AA:
			v = vl_add(l, "rqspin", none ? NAN : s->p50 / 1e3, 10, false);
			if (!v)
				break;
			if (s->r_deadlk != s->done)
				v->status = V_FAIL;
			snprintf(v->target, sizeof(v->target),
				 "AA in a signal handler: median detection < 10 us (value: us)");
			snprintf(v->measured, sizeof(v->measured),
				 "p50 %s p99 %s max %s; %llu/%u EDEADLK", p50, p99, mx,
				 (unsigned long long)s->r_deadlk, s->done);
			break;
		case DL_ABBA:
		case DL_CYCLE: {
			double lim = dl_reg_limit_us(s->registered);
			const char *what = s->kind == DL_ABBA ? "ABBA" : "3-cycle";

			v = vl_add(l, "rqspin", none ? NAN : s->p99 / 1e3, lim, false);
			if (!v)
				break;
			if (s->reg_skipped) {
				v->status = V_INFO;
				snprintf(v->target, sizeof(v->target),
					 "%s, %u registered: not run", what, s->registered);
				snprintf(v->measured, sizeof(v->measured), "skipped: %s", s->reg_note);
				break;
			}
			if (isnan(lim)) {
				v->status = V_INFO;
				snprintf(v->target, sizeof(v->target),
					 "%s, %u registered: p99 detection (value: us)", what,
					 s->registered);
			} else {
				snprintf(v->target, sizeof(v->target),
					 "%s, %u registered: p99 detection <= %.0f us (value: us)", what,
					 s->registered, lim);
				if (s->no_failure)
					v->status = V_FAIL;
			}
			snprintf(v->measured, sizeof(v->measured),
				 "p50 %s p99 %s max %s; first failure EDEADLK in %u/%u", p50, p99, mx,
				 s->done - s->first_not_deadlk, s->done);
			break;
		}
		case DL_TIMEOUT: {
			double ms = (double)s->t_ns / 1e6;

			v = vl_add(l, "rqspin", none ? NAN : s->p50, 1.1, false);
			if (!v)
				break;
			if (!(s->p50 >= 1.0) || s->r_timedout != s->done)
				v->status = V_FAIL;
			snprintf(v->target, sizeof(v->target),
				 "timeout %g ms (pending waiter): p50 elapsed/T in [1.0, 1.1]", ms);
			snprintf(v->measured, sizeof(v->measured),
				 "p50 %s p99 %s max %s; %llu/%u ETIMEDOUT", p50, p99, mx,
				 (unsigned long long)s->r_timedout, s->done);
			break;
		}
		case DL_HEAD: {
			double ms = (double)s->t_ns / 1e6;

			v = vl_add(l, "info", none ? NAN : s->p50, 1.1, false);
			if (!v)
				break;
			v->status = V_INFO;
			snprintf(v->target, sizeof(v->target),
				 "timeout %g ms, queue head: p50 elapsed/2T (its budget is 2T)", ms);
			snprintf(v->measured, sizeof(v->measured),
				 "p50 %s p99 %s max %s; %llu/%u ETIMEDOUT", p50, p99, mx,
				 (unsigned long long)s->r_timedout, s->done);
			break;
		}
		}
		if (v)
			s->verdict = (int)(v - l->v);
		if (!s->stats_ok && stats_bad++ < 2) {
			size_t len = strlen(sb);

			snprintf(sb + len, sizeof(sb) - len, "%s%s: %s", len ? "; " : "", s->name,
				 s->stats_note);
		}
		if (!s->locks_ok && locks_bad++ < 2) {
			size_t len = strlen(lb);

			snprintf(lb + len, sizeof(lb) - len, "%s%s: %s", len ? "; " : "", s->name,
				 s->locks_note);
		}
		rep_n += s->rep_trials;
		rep_bad += s->rep_bad;
		rep_partial += s->rep_partial;
	}
	if (!r->nscen)
		return;
	if ((v = vl_add(l, "rqspin", (double)stats_bad, 0, false))) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target),
			 "rqspin_lock_stats_get counts each failure as aa/abba/cycle/timeout");
		snprintf(v->measured, sizeof(v->measured), "%s", stats_bad ? sb : "all scenarios agree");
	}
	if (rep_n && (v = vl_add(l, "rqspin", (double)rep_bad, 0, false))) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target),
			 "report hook: ABBA/cycle reports give the event, locks and threads");
		snprintf(v->measured, sizeof(v->measured),
			 "%zu bad in %zu trials (%zu stale: a member had backed out)", rep_bad, rep_n,
			 rep_partial);
	}
	if ((v = vl_add(l, "harness", (double)locks_bad, 0, false))) {
		v->is_count = true;
		snprintf(v->target, sizeof(v->target),
			 "after the trials every lock is free and works (lock, trylock, 2 threads)");
		snprintf(v->measured, sizeof(v->measured), "%s", locks_bad ? lb : "all locks");
	}
}
