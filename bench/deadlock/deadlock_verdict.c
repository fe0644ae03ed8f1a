/* SPDX-License-Identifier: MIT */
#include "deadlock.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "output.h"

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
