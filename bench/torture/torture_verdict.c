/* SPDX-License-Identifier: MIT */
#include "torture.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

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

