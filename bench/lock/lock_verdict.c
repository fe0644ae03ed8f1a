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
 * Every scenario (think time) and every run (idle, background load) is
 * checked against the same targets; with more than one scenario the
 * targets name their think time.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lock_bench.h"
#include "output.h"

static struct verdict *add(struct lb_results *r, const char *area, double value, double limit,
			   bool ge)
{
	return vl_add(&r->verdicts, area, value, limit, ge);
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

void lb_verdicts(struct lb_results *r)
{
	char target[sizeof(r->verdicts.v[0].target)];

	r->verdicts.n = 0;
	check_floor(r);
	check_ratio(r, "lock", "qspin", "pthread_spin", 2, 0.9);
	check_8(r);
	check_rqspin(r);
	check_correctness(r);
	if (r->cfg->nthinks < 2)
		return;
	for (size_t i = 0; i < r->verdicts.n; i++) {
		struct verdict *v = &r->verdicts.v[i];

		snprintf(target, sizeof(target), "think %u: %s", r->think, v->target);
		memcpy(v->target, target, sizeof(target));
	}
}

