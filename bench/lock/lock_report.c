/* SPDX-License-Identifier: MIT */
#include "lock_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "output.h"
#include "plot.h"

static uint64_t cell_failures(const struct lb_cell *c)
{
	uint64_t s = 0;

	for (int k = 0; k < LW_NFAIL; k++)
		s += c->fail[k];
	return s;
}

static const char *cell_note(const struct lb_cell *c)
{
	if (c->broken)
		return "MUTEX BROKEN";
	if (c->stalled)
		return "stalled";
	if (c->skipped)
		return "skipped (stalled at fewer threads)";
	if (c->error)
		return "error";
	if (c->threads > 1 && c->nrep && c->min_share < 0.1)
		return "starvation";
	return "";
}

static void thread_list(char *buf, size_t n, const struct lb_config *c)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 0; i < c->nthreads && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%u", i ? "," : "", c->threads[i]);
}

void report_header(FILE *f, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	char tl[128];

	thread_list(tl, sizeof(tl), c);
	fprintf(f, "rqspin-bench %s\n", c->o->run);
	sysinfo_print(f, &r->sys, "  ");
	fprintf(f,
		"  run:      %zu locks, threads %s, %u repeats x %u ms (interleaved), "
		"cs %u, think %u, latency sampled 1/%u%s; %.0f s\n",
		c->nlocks, tl, c->repeats, c->duration_ms, c->cs, r->think, c->sample_every,
		c->o->quick ? ", quick" : "", r->wall_s);
	if (c->o->background_load)
		fprintf(f, "  load:     %u CPU-bound background processes (--background-load)\n",
			c->o->background_load);
	if (r->load.ok)
		fprintf(f,
			"  load:     other processes used %.0f%% of the CPU time during the run, "
			"hypervisor steal %.0f%%\n",
			100 * r->load.other, 100 * r->load.steal);
	if (r->load.ok && r->load.other > VERDICT_BUSY_SHARE && !c->o->background_load)
		fprintf(f, "  WARNING:  the machine was busy: expect noisy figures and rerun on an idle "
			   "machine before trusting a FAIL\n");
	if (r->sys.cores_usable && c->nthreads &&
	    c->threads[c->nthreads - 1] > r->sys.cores_usable)
		fprintf(f, "  note:     thread counts above %u oversubscribe the CPUs\n",
			r->sys.cores_usable);
	fputc('\n', f);
}

void report_uncontended(FILE *f, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	const struct lb_unc *floor = lb_find_unc(r, "cas_floor");

	fprintf(f,
		"Uncontended lock+unlock: 1 thread, critical section = one counter update, no\n"
		"think time; ns per acquisition, the fastest of %d slices of %u ms per repeat,\n"
		"median (min..max) over %u repeats\n",
		LB_UNC_SLICES, c->uncontended_ms / LB_UNC_SLICES ? c->uncontended_ms / LB_UNC_SLICES : 1,
		c->repeats);
	fprintf(f, "  %-14s %8s  %-17s %s\n", "lock", "ns/op", "min..max",
		floor ? "x cas_floor" : "");
	for (size_t li = 0; li < c->nlocks; li++) {
		const struct lb_unc *u = &r->unc[li];
		char range[40];

		if (!u->n) {
			fprintf(f, "  %-14s %8s  %s\n", u->lock->name, "-",
				u->stalled ? "stalled" : "no data");
			continue;
		}
		snprintf(range, sizeof(range), "%.2f..%.2f", u->min, u->max);
		fprintf(f, "  %-14s %8.2f  %-17s", u->lock->name, u->med, range);
		if (floor)
			fprintf(f, " %.2f", stats_paired_ratio(u->ns_rep, floor->ns_rep, c->repeats,
							      NULL, NULL, NULL));
		fputc('\n', f);
	}
	fputc('\n', f);
}

void report_table(FILE *f, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	char ratio_hdr[32];

	snprintf(ratio_hdr, sizeof(ratio_hdr), "x %s", c->baseline->name);
	fprintf(f,
		"Contended: acquisitions/s (median of repeats, min..max), ratio to %s\n"
		"(median of per-repeat ratios), Jain index and smallest per-thread share of a\n"
		"fair share (over all repeats), sampled acquisition latency, lock failures\n",
		c->baseline->name);
	fprintf(f, "  %-14s %3s %8s  %-15s %14s %6s %6s %7s %7s %7s %7s %5s  %s\n", "lock", "thr",
		"ops/s", "min..max", ratio_hdr, "jain", "minshr", "p50", "p99", "p99.9", "max", "fail",
		"note");
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		if (ti)
			fputc('\n', f);
		for (size_t li = 0; li < c->nlocks; li++) {
			const struct lb_cell *cell = lb_cell_at(r, ti, li);
			char med[16], lo[16], hi[16], range[40], ratio[16];
			char p50[16], p99[16], p999[16], mx[16];

			if (!cell->nrep) {
				fprintf(f, "  %-14s %3u %8s  %-15s %14s %6s %6s %7s %7s %7s %7s %5s  %s\n",
					cell->lock->name, cell->threads, "-", "", "", "", "", "", "", "",
					"", "", cell_note(cell));
				continue;
			}
			snprintf(range, sizeof(range), "%s..%s", fmt_si(lo, sizeof(lo), cell->ops_min),
				 fmt_si(hi, sizeof(hi), cell->ops_max));
			if (isnan(cell->ratio))
				snprintf(ratio, sizeof(ratio), "-");
			else
				snprintf(ratio, sizeof(ratio), "%.2f", cell->ratio);
			if (cell->hist.n) {
				fmt_ns(p50, sizeof(p50), (double)hist_quantile(&cell->hist, 0.50));
				fmt_ns(p99, sizeof(p99), (double)hist_quantile(&cell->hist, 0.99));
				fmt_ns(p999, sizeof(p999), (double)hist_quantile(&cell->hist, 0.999));
				fmt_ns(mx, sizeof(mx), (double)cell->hist.max);
			} else {
				strcpy(p50, "-");
				strcpy(p99, "-");
				strcpy(p999, "-");
				strcpy(mx, "-");
			}
			fprintf(f, "  %-14s %3u %8s  %-15s %14s %6.3f %6.2f %7s %7s %7s %7s %5llu  %s\n",
				cell->lock->name, cell->threads, fmt_si(med, sizeof(med), cell->ops_med),
				range, ratio, cell->jain, cell->min_share, p50, p99, p999, mx,
				(unsigned long long)cell_failures(cell), cell_note(cell));
		}
	}
	fputc('\n', f);
}

void report_libstats(FILE *f, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	bool any = false;

	for (size_t i = 0; i < r->ncells; i++)
		any |= (r->cells[i].lock->flags & LP_LIBRQSPIN) && r->cells[i].acquired;
	if (!any)
		return;
	fprintf(f, "librqspin paths (rqspin_lock_stats_get): %% of acquisitions, events per 1000\n"
		   "acquisitions, and deadlock searches (ABBA/cycle walks of the held tables) per\n"
		   "acquisition\n");
	fprintf(f, "  %-8s %3s %7s %8s %8s %8s %8s %8s %8s %8s %10s\n", "lock", "thr", "fast%",
		"pending%", "queued%", "stolen%", "parked", "yielded", "nonode", "errors",
		"checks/acq");
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		for (size_t li = 0; li < c->nlocks; li++) {
			const struct lb_cell *cell = lb_cell_at(r, ti, li);
			const struct rqspin_lock_stats *s = &cell->lib;
			double a = (double)cell->acquired;
			uint64_t errs = s->aa + s->abba + s->cycle + s->nest_fail + s->timeout +
					s->owner_dead;

			if (!(cell->lock->flags & LP_LIBRQSPIN) || !cell->acquired)
				continue;
			fprintf(f, "  %-8s %3u %7.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8llu %10.4f\n",
				cell->lock->name, cell->threads, 100.0 * (double)s->fast / a,
				100.0 * (double)s->pending / a, 100.0 * (double)s->queued / a,
				100.0 * (double)s->stolen / a, 1000.0 * (double)s->parked / a,
				1000.0 * (double)s->yielded / a, 1000.0 * (double)s->nonode / a,
				(unsigned long long)errs, (double)s->deadlock_checks / a);
		}
	}
	fputc('\n', f);
}

void report_verdicts(FILE *f, const struct lb_results *r)
{
	char title[256];

	snprintf(title, sizeof(title),
		 "Verdicts (targets of the locks, think %u%s; ratios measured in this run, each\n"
		 "the median over the repeats of the ratio within a repeat):",
		 r->think, r->cfg->o->background_load ? ", with background load" : "");
	vl_print(f, title, &r->verdicts, &r->load);
}

static void json_cell(struct json *j, const struct lb_results *r, const struct lb_cell *c)
{
	json_begin_object(j, NULL);
	json_string(j, "lock", c->lock->name);
	json_uint(j, "threads", c->threads);
	json_uint(j, "think", r->think);
	json_string(j, "status", c->broken    ? "broken"
				 : c->stalled ? "stalled"
				 : c->skipped ? "skipped"
				 : c->error   ? "error"
				 : c->nrep    ? "ok"
					      : "not-run");
	json_uint(j, "repeats", c->nrep);
	json_begin_object(j, "ops_per_sec");
	json_double(j, "median", c->ops_med);
	json_double(j, "min", c->ops_min);
	json_double(j, "max", c->ops_max);
	json_begin_array(j, "per_repeat");
	for (unsigned i = 0; i < c->nrep; i++)
		json_double(j, NULL, c->ops[i]);
	json_end_array(j);
	json_end_object(j);
	json_double(j, "ratio_to_baseline", c->ratio);
	json_double(j, "jain", c->jain);
	json_double(j, "min_share", c->min_share);
	json_double(j, "min_share_worst_repeat", c->min_share_worst);
	json_begin_array(j, "jain_per_repeat");
	for (unsigned i = 0; i < c->nrep; i++)
		json_double(j, NULL, c->jain_rep[i]);
	json_end_array(j);
	json_begin_array(j, "per_thread_acquisitions");
	for (unsigned i = 0; c->nrep && i < c->threads; i++)
		json_uint(j, NULL, c->per_thread[i]);
	json_end_array(j);
	json_uint(j, "acquisitions_total", c->acquired);
	output_json_hist(j, "latency_ns", &c->hist, &r->sys.timer_ns);
	json_begin_object(j, "failures");
	json_uint(j, "EDEADLK", c->fail[LW_FAIL_EDEADLK]);
	json_uint(j, "ETIMEDOUT", c->fail[LW_FAIL_ETIMEDOUT]);
	json_uint(j, "EOWNERDEAD", c->fail[LW_FAIL_EOWNERDEAD]);
	json_uint(j, "other", c->fail[LW_FAIL_OTHER]);
	json_end_object(j);
	json_bool(j, "mutual_exclusion_ok", !c->broken);
	if (c->broken)
		json_uint(j, "lost_updates", c->lost_updates);
	if (c->lock->flags & LP_LIBRQSPIN) {
		output_json_libstats(j, &c->lib);
		json_double(j, "deadlock_checks_per_acquisition",
			    c->acquired ? (double)c->lib.deadlock_checks / (double)c->acquired : NAN);
	}
	json_end_object(j);
}

int report_json(const char *path, const struct lb_results *rs, size_t n,
		const struct verdict_list *v)
{
	const struct lb_results *r = &rs[0];
	const struct lb_config *c = r->cfg;
	FILE *f = output_open("--json", path);
	bool broken = false, stalled = false, lib_stalled = false;
	double wall = 0;
	struct json j;

	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++) {
		broken |= rs[i].broken;
		stalled |= rs[i].any_stalled;
		lib_stalled |= rs[i].lib_stalled;
		wall += rs[i].wall_s;
	}
	bench_json_begin(&j, f, "lock", c->o, &r->sys, &r->load);
	json_begin_object(&j, "config");
	lock_peers_json(&j, "locks", c->locks, c->nlocks);
	json_uint_array(&j, "threads", c->threads, c->nthreads);
	json_uint(&j, "duration_ms", c->duration_ms);
	json_uint(&j, "repeats", c->repeats);
	json_uint(&j, "cs", c->cs);
	json_uint_array(&j, "think", c->thinks, c->nthinks);
	json_uint(&j, "sample_every", c->sample_every);
	json_uint(&j, "uncontended_ms", c->uncontended_ms);
	json_uint(&j, "stall_timeout_ms", c->stall_timeout_ms);
	json_string(&j, "baseline", c->baseline->name);
	json_end_object(&j);
	json_double(&j, "wall_seconds", wall);

	json_begin_array(&j, "uncontended");
	for (size_t li = 0; r->unc && li < c->nlocks; li++) {
		const struct lb_unc *u = &r->unc[li];

		json_begin_object(&j, NULL);
		json_string(&j, "lock", u->lock->name);
		json_uint(&j, "repeats", u->n);
		json_double(&j, "ns_per_op_median", u->med);
		json_double(&j, "ns_per_op_min", u->min);
		json_double(&j, "ns_per_op_max", u->max);
		json_bool(&j, "stalled", u->stalled);
		json_end_object(&j);
	}
	json_end_array(&j);

	/* One object per lock, thread count and think time. */
	json_begin_array(&j, "results");
	for (size_t k = 0; k < n; k++)
		for (size_t ti = 0; ti < c->nthreads; ti++)
			for (size_t li = 0; li < c->nlocks; li++)
				json_cell(&j, &rs[k], lb_cell_at(&rs[k], ti, li));
	json_end_array(&j);
	json_bool(&j, "mutual_exclusion_ok", !broken);
	json_bool(&j, "stalled", stalled);
	bench_json_end(&j, v, !broken && !lib_stalled);
	return output_close(f, "--json", path);
}

int report_csv(const char *path, const struct lb_results *rs, size_t n)
{
	const struct lb_config *c = rs[0].cfg;
	FILE *f = output_open("--csv", path);

	if (!f)
		return -1;
	fprintf(f, "lock,threads,status,repeats,ops_median,ops_min,ops_max,ns_per_op,"
		   "ratio_to_baseline,baseline,jain,min_share,lat_p50_ns,lat_p99_ns,lat_p999_ns,"
		   "lat_max_ns,lat_samples,fail_edeadlk,fail_etimedout,fail_eownerdead,fail_other,"
		   "duration_ms,cs,think,background_load\n");
	for (size_t k = 0; k < n; k++) {
		const struct lb_results *r = &rs[k];

		for (size_t i = 0; i < r->ncells; i++) {
			const struct lb_cell *cell = &r->cells[i];
			const struct hist *h = &cell->hist;

			fprintf(f, "%s,%u,%s,%u,", cell->lock->name, cell->threads,
				cell->broken    ? "broken"
				: cell->stalled ? "stalled"
				: cell->skipped ? "skipped"
				: cell->error   ? "error"
				: cell->nrep    ? "ok"
						: "not-run",
				cell->nrep);
			if (cell->nrep)
				fprintf(f, "%.6g,%.6g,%.6g,%.6g,", cell->ops_med, cell->ops_min,
					cell->ops_max, 1e9 / cell->ops_med);
			else
				fputs(",,,,", f);
			if (!isnan(cell->ratio))
				fprintf(f, "%.4f", cell->ratio);
			fprintf(f, ",%s,", c->baseline->name);
			if (cell->nrep)
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
			fprintf(f, "%llu,%llu,%llu,%llu,%llu,%u,%u,%u,%u\n", (unsigned long long)h->n,
				(unsigned long long)cell->fail[LW_FAIL_EDEADLK],
				(unsigned long long)cell->fail[LW_FAIL_ETIMEDOUT],
				(unsigned long long)cell->fail[LW_FAIL_EOWNERDEAD],
				(unsigned long long)cell->fail[LW_FAIL_OTHER], c->duration_ms, c->cs,
				r->think, c->o->background_load);
		}
	}
	return output_close(f, "--csv", path);
}

/* ------------------------------------------------------------------------ */

/* A fixed colour per lock (by its place in lock_peers), so charts of
 * different runs match; librqspin's locks drawn thicker. */
static void gp_style(FILE *gp, const struct lock_peer *p)
{
	static const char *const colors[] = { "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e",
					      "#9467bd", "#8c564b", "#e377c2", "#17becf",
					      "#7f7f7f", "#bcbd22" };
	size_t idx = 0;

	for (size_t i = 0; i < lock_peers_count; i++)
		if (lock_peers[i] == p)
			idx = i;
	fprintf(gp, " lc rgb '%s' lw %s", colors[idx % (sizeof(colors) / sizeof(colors[0]))],
		(p->flags & LP_LIBRQSPIN) ? "3" : "1.5");
}

/* The two charts of one scenario: throughput and p99.9 latency. */
static void plot_scenario(FILE *gp, const struct lb_results *r, size_t k)
{
	const struct lb_config *c = r->cfg;
	unsigned lo = c->threads[0], hi = c->threads[0];
	int nplotted = 0;

	for (size_t li = 0; li < c->nlocks; li++) {
		fprintf(gp, "$d%zu_%zu << EOD\n", k, li);
		for (size_t ti = 0; ti < c->nthreads; ti++) {
			const struct lb_cell *cell = lb_cell_at(r, ti, li);

			if (!cell->nrep || !(cell->ops_med > 0))
				continue;
			fprintf(gp, "%u %.6g %.6g %.6g %llu\n", cell->threads, cell->ops_med,
				cell->ops_min, cell->ops_max,
				(unsigned long long)hist_quantile(&cell->hist, 0.999));
		}
		fprintf(gp, "EOD\n");
	}
	fputs("set xtics (", gp);
	for (size_t ti = 0; ti < c->nthreads; ti++)
		fprintf(gp, "%s%u", ti ? ", " : "", c->threads[ti]);
	fputs(")\n", gp);
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		lo = c->threads[ti] < lo ? c->threads[ti] : lo;
		hi = c->threads[ti] > hi ? c->threads[ti] : hi;
	}
	fprintf(gp, "set xrange [%g:%g]\n", lo * 0.8, hi * 1.25);
	fprintf(gp, "set xlabel 'threads'\nset ylabel 'acquisitions/s (median, bars: min..max)'\n"
		    "set title 'throughput, think %u'\nplot ", r->think);
	for (size_t li = 0; li < c->nlocks; li++) {
		bool any = false;

		for (size_t ti = 0; ti < c->nthreads; ti++)
			any |= lb_cell_at(r, ti, li)->nrep && lb_cell_at(r, ti, li)->ops_med > 0;
		if (!any)
			continue;
		fprintf(gp, "%s$d%zu_%zu using 1:2:3:4 with yerrorlines", nplotted ? ", " : "", k, li);
		gp_style(gp, c->locks[li]);
		fputs(" title ", gp);
		plot_quote(gp, c->locks[li]->name);
		nplotted++;
	}
	if (!nplotted)
		fputs("1/0 notitle", gp);
	fprintf(gp, "\nset ylabel 'ns (sampled acquisition latency, p99.9)'\n"
		    "set title 'p99.9 acquisition latency, think %u'\nplot ", r->think);
	nplotted = 0;
	for (size_t li = 0; li < c->nlocks; li++) {
		bool any = false;

		for (size_t ti = 0; ti < c->nthreads; ti++)
			any |= lb_cell_at(r, ti, li)->hist.n > 0;
		if (!any)
			continue;
		fprintf(gp, "%s$d%zu_%zu using 1:($5 > 0 ? $5 : 1/0) with linespoints",
			nplotted ? ", " : "", k, li);
		gp_style(gp, c->locks[li]);
		fputs(" title ", gp);
		plot_quote(gp, c->locks[li]->name);
		nplotted++;
	}
	if (!nplotted)
		fputs("1/0 notitle", gp);
	fputc('\n', gp);
}

int report_plot(const char *path, const struct lb_results *rs, size_t n)
{
	const struct lb_config *c = rs[0].cfg;
	char title[512];
	int missing;
	FILE *gp = plot_open(path, 1500, 100 + 520 * (unsigned)n, &missing);

	if (!gp)
		return missing ? 1 : -1;
	snprintf(title, sizeof(title), "rqspin-bench %s: %s, %u cores, %s build, cs %u%s",
		 c->o->run, rs[0].sys.cpu, rs[0].sys.cores, rs[0].sys.build_type, c->cs,
		 c->o->background_load ? ", with background load" : "");
	fprintf(gp, "set multiplot layout %zu,2 title ", n);
	plot_quote(gp, title);
	fputs("\nset logscale x 2\nset logscale y 10\nset grid\nset key outside right top\n", gp);
	for (size_t k = 0; k < n; k++)
		plot_scenario(gp, &rs[k], k);
	fputs("unset multiplot\n", gp);
	return plot_close(gp, path);
}
