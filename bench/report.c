/* SPDX-License-Identifier: MIT */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "suite.h"

const char *fmt_si(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (v >= 1e9)
		snprintf(buf, n, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, n, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, n, "%.1fk", v / 1e3);
	else
		snprintf(buf, n, "%.0f", v);
	return buf;
}

const char *fmt_ns(char *buf, size_t n, double ns)
{
	if (isnan(ns))
		snprintf(buf, n, "-");
	else if (ns >= 1e9)
		snprintf(buf, n, "%.2fs", ns / 1e9);
	else if (ns >= 1e6)
		snprintf(buf, n, "%.1fms", ns / 1e6);
	else if (ns >= 1e4)
		snprintf(buf, n, "%.0fus", ns / 1e3);
	else if (ns >= 1e3)
		snprintf(buf, n, "%.1fus", ns / 1e3);
	else
		snprintf(buf, n, "%.0fns", ns);
	return buf;
}

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
	fprintf(f, "rqspin-bench %s\n", c->suite);
	sysinfo_print(f, &r->sys, "  ");
	fprintf(f,
		"  run:      %zu locks, threads %s, %u repeats x %u ms (interleaved), "
		"cs %u, think %u, latency sampled 1/%u%s; %.0f s\n",
		c->nlocks, tl, c->repeats, c->duration_ms, c->cs, c->think, c->sample_every,
		c->quick ? ", quick" : "", r->wall_s);
	if (r->load.ok)
		fprintf(f,
			"  load:     other processes used %.0f%% of the CPU time during the run, "
			"hypervisor steal %.0f%%\n",
			100 * r->load.other, 100 * r->load.steal);
	if (r->load.ok && r->load.other > LB_BUSY_SHARE)
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
	verdicts_print(f,
		       "Verdicts (targets of the locks; ratios measured in this run, each the\n"
		       "median over the repeats of the ratio within a repeat):",
		       r->verdicts, r->nverdicts, &r->load);
}

/* ------------------------------------------------------------------------ */

FILE *report_open(const char *opt, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		cli_error("%s: cannot write %s: %s", opt, path, strerror(errno));
	return f;
}

int report_close(FILE *f, const char *opt, const char *path)
{
	int rc = ferror(f) ? -1 : 0;

	if (fclose(f) != 0)
		rc = -1;
	if (rc)
		cli_error("%s: error writing %s", opt, path);
	return rc;
}

void report_json_begin(struct json *j, FILE *f, const char *suite, const struct sysinfo_rec *s,
		       const struct load_share *l)
{
	json_init(j, f);
	json_begin_object(j, NULL);
	json_string(j, "tool", "rqspin-bench");
	json_string(j, "suite", suite);
	json_uint(j, "format_version", 1);
	suite_json_machine(j, s, l);
}

void report_json_hist(struct json *j, const char *key, const struct hist *h, const double *timer_ns)
{
	json_begin_object(j, key);
	json_uint(j, "samples", h->n);
	if (h->n) {
		json_double(j, "mean", (double)h->sum / (double)h->n);
		json_uint(j, "p50", hist_quantile(h, 0.50));
		json_uint(j, "p90", hist_quantile(h, 0.90));
		json_uint(j, "p99", hist_quantile(h, 0.99));
		json_uint(j, "p999", hist_quantile(h, 0.999));
		json_uint(j, "max", h->max);
	}
	if (timer_ns)
		json_double(j, "timer_overhead", *timer_ns);
	/* Non-empty buckets: [low, width, count]. */
	json_begin_array(j, "histogram");
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (!h->bucket[i])
			continue;
		json_begin_array(j, NULL);
		json_uint(j, NULL, hist_bucket_low(i));
		json_uint(j, NULL, hist_bucket_width(i));
		json_uint(j, NULL, h->bucket[i]);
		json_end_array(j);
	}
	json_end_array(j);
	json_end_object(j);
}

void suite_json_machine(struct json *j, const struct sysinfo_rec *s, const struct load_share *l)
{
	json_begin_object(j, "machine");
	json_string(j, "cpu", s->cpu);
	json_uint(j, "cores", s->cores);
	json_uint(j, "cores_usable", s->cores_usable);
	json_string(j, "kernel", s->kernel);
	json_string(j, "compiler", s->compiler);
	json_string(j, "build_type", s->build_type);
	json_string(j, "libc", s->libc);
	json_string(j, "ck", s->ck);
	json_string(j, "librqspin", s->librqspin);
	json_string(j, "date", s->date);
	json_double(j, "clock_gettime_ns", s->timer_ns);
	if (l->ok) {
		json_double(j, "other_load_share", l->other);
		json_double(j, "steal_share", l->steal);
	}
	json_end_object(j);
}

void suite_json_libstats(struct json *j, const struct rqspin_lock_stats *s)
{
	json_begin_object(j, "librqspin_stats");
	json_uint(j, "fast", s->fast);
	json_uint(j, "pending", s->pending);
	json_uint(j, "queued", s->queued);
	json_uint(j, "stolen", s->stolen);
	json_uint(j, "parked", s->parked);
	json_uint(j, "yielded", s->yielded);
	json_uint(j, "nonode", s->nonode);
	json_uint(j, "aa", s->aa);
	json_uint(j, "abba", s->abba);
	json_uint(j, "cycle", s->cycle);
	json_uint(j, "nest_fail", s->nest_fail);
	json_uint(j, "timeout", s->timeout);
	json_uint(j, "owner_dead", s->owner_dead);
	json_uint(j, "deadlock_checks", s->deadlock_checks);
	json_uint(j, "stall_checks", s->stall_checks);
	json_uint(j, "deadline_extended", s->deadline_extended);
	json_end_object(j);
}

static void json_cell(struct json *j, const struct lb_results *r, const struct lb_cell *c)
{
	json_begin_object(j, NULL);
	json_string(j, "lock", c->lock->name);
	json_uint(j, "threads", c->threads);
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
	report_json_hist(j, "latency_ns", &c->hist, &r->sys.timer_ns);
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
		suite_json_libstats(j, &c->lib);
		json_double(j, "deadlock_checks_per_acquisition",
			    c->acquired ? (double)c->lib.deadlock_checks / (double)c->acquired : NAN);
	}
	json_end_object(j);
}

int report_json(const char *path, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	FILE *f = report_open("--json", path);
	struct json j;

	if (!f)
		return -1;
	report_json_begin(&j, f, c->suite, &r->sys, &r->load);
	json_begin_object(&j, "config");
	json_begin_array(&j, "locks");
	for (size_t i = 0; i < c->nlocks; i++)
		json_string(&j, NULL, c->locks[i]->name);
	json_end_array(&j);
	json_begin_array(&j, "threads");
	for (size_t i = 0; i < c->nthreads; i++)
		json_uint(&j, NULL, c->threads[i]);
	json_end_array(&j);
	json_uint(&j, "duration_ms", c->duration_ms);
	json_uint(&j, "repeats", c->repeats);
	json_uint(&j, "cs", c->cs);
	json_uint(&j, "think", c->think);
	json_uint(&j, "sample_every", c->sample_every);
	json_uint(&j, "uncontended_ms", c->uncontended_ms);
	json_uint(&j, "stall_timeout_ms", c->stall_timeout_ms);
	json_string(&j, "baseline", c->baseline->name);
	json_bool(&j, "quick", c->quick);
	json_end_object(&j);
	json_double(&j, "wall_seconds", r->wall_s);

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

	json_begin_array(&j, "results");
	for (size_t ti = 0; ti < c->nthreads; ti++)
		for (size_t li = 0; li < c->nlocks; li++)
			json_cell(&j, r, lb_cell_at(r, ti, li));
	json_end_array(&j);

	json_begin_array(&j, "verdicts");
	for (size_t i = 0; i < r->nverdicts; i++) {
		const struct verdict *v = &r->verdicts[i];

		json_begin_object(&j, NULL);
		json_string(&j, "area", v->area);
		json_string(&j, "target", v->target);
		json_string(&j, "status", v->status == V_PASS ? "pass" : v->status == V_FAIL ? "fail"
											 : "info");
		json_double(&j, "value", v->value);
		json_double(&j, "limit", v->limit);
		json_string(&j, "measured", v->measured);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_bool(&j, "mutual_exclusion_ok", !r->broken);
	json_bool(&j, "stalled", r->any_stalled);
	json_bool(&j, "ok", !r->broken && !r->lib_stalled);
	json_end_object(&j);

	return report_close(f, "--json", path);
}

int report_csv(const char *path, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	FILE *f = report_open("--csv", path);

	if (!f)
		return -1;
	fprintf(f, "lock,threads,status,repeats,ops_median,ops_min,ops_max,ns_per_op,"
		   "ratio_to_baseline,baseline,jain,min_share,lat_p50_ns,lat_p99_ns,lat_p999_ns,"
		   "lat_max_ns,lat_samples,fail_edeadlk,fail_etimedout,fail_eownerdead,fail_other,"
		   "duration_ms,cs,think\n");
	for (size_t ti = 0; ti < c->nthreads; ti++) {
		for (size_t li = 0; li < c->nlocks; li++) {
			const struct lb_cell *cell = lb_cell_at(r, ti, li);
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
			fprintf(f, "%llu,%llu,%llu,%llu,%llu,%u,%u,%u\n", (unsigned long long)h->n,
				(unsigned long long)cell->fail[LW_FAIL_EDEADLK],
				(unsigned long long)cell->fail[LW_FAIL_ETIMEDOUT],
				(unsigned long long)cell->fail[LW_FAIL_EOWNERDEAD],
				(unsigned long long)cell->fail[LW_FAIL_OTHER], c->duration_ms, c->cs,
				c->think);
		}
	}
	return report_close(f, "--csv", path);
}

/* ------------------------------------------------------------------------ */

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);

		if (len && len + strlen(prog) + 2 < sizeof(buf)) {
			memcpy(buf, path, len);
			buf[len] = '/';
			strcpy(buf + len + 1, prog);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return false;
}

/* A gnuplot single-quoted string: '' stands for one quote. */
static void gp_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		if (*s != '\n')
			fputc(*s, f);
	}
	fputc('\'', f);
}

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

int report_plot(const char *path, const struct lb_results *r)
{
	const struct lb_config *c = r->cfg;
	char title[512];
	FILE *gp;
	int status, nplotted = 0;
	struct stat sb;

	if (!in_path("gnuplot")) {
		cli_error("--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox); "
			  "no plot written to %s",
			  path);
		return 1;
	}
	gp = popen("gnuplot", "w");
	if (!gp) {
		cli_error("--plot: cannot run gnuplot: %s", strerror(errno));
		return -1;
	}
	/* One data block per lock: threads, median, min, max, p99.9 latency. */
	for (size_t li = 0; li < c->nlocks; li++) {
		fprintf(gp, "$d%zu << EOD\n", li);
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
	snprintf(title, sizeof(title), "rqspin-bench %s: %s, %u cores, %s build, cs %u think %u",
		 c->suite, r->sys.cpu, r->sys.cores, r->sys.build_type, c->cs, c->think);
	fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		    "  set terminal pngcairo size 1500,620 noenhanced font 'sans,10'\n"
		    "} else {\n"
		    "  set terminal png size 1500,620 noenhanced\n"
		    "}\n");
	fputs("set output ", gp);
	gp_quote(gp, path);
	fputs("\nset multiplot layout 1,2 title ", gp);
	gp_quote(gp, title);
	fputs("\nset logscale x 2\nset logscale y 10\nset grid\nset key outside right top\n", gp);
	fputs("set xtics (", gp);
	for (size_t ti = 0; ti < c->nthreads; ti++)
		fprintf(gp, "%s%u", ti ? ", " : "", c->threads[ti]);
	fputs(")\n", gp);
	{
		unsigned lo = c->threads[0], hi = c->threads[0];

		for (size_t ti = 0; ti < c->nthreads; ti++) {
			lo = c->threads[ti] < lo ? c->threads[ti] : lo;
			hi = c->threads[ti] > hi ? c->threads[ti] : hi;
		}
		fprintf(gp, "set xrange [%g:%g]\n", lo * 0.8, hi * 1.25);
	}
	fputs("set xlabel 'threads'\nset ylabel 'acquisitions/s (median, bars: min..max)'\n"
	      "set title 'throughput'\nplot ",
	      gp);
	for (size_t li = 0; li < c->nlocks; li++) {
		bool any = false;

		for (size_t ti = 0; ti < c->nthreads; ti++)
			any |= lb_cell_at(r, ti, li)->nrep && lb_cell_at(r, ti, li)->ops_med > 0;
		if (!any)
			continue;
		fprintf(gp, "%s$d%zu using 1:2:3:4 with yerrorlines", nplotted ? ", " : "", li);
		gp_style(gp, c->locks[li]);
		fputs(" title ", gp);
		gp_quote(gp, c->locks[li]->name);
		nplotted++;
	}
	if (!nplotted)
		fputs("1/0 notitle", gp);
	fputs("\nset ylabel 'ns (sampled acquisition latency, p99.9)'\n"
	      "set title 'p99.9 acquisition latency'\n"
	      "plot ",
	      gp);
	nplotted = 0;
	for (size_t li = 0; li < c->nlocks; li++) {
		bool any = false;

		for (size_t ti = 0; ti < c->nthreads; ti++)
			any |= lb_cell_at(r, ti, li)->hist.n > 0;
		if (!any)
			continue;
		fprintf(gp, "%s$d%zu using 1:($5 > 0 ? $5 : 1/0) with linespoints", nplotted ? ", " : "",
			li);
		gp_style(gp, c->locks[li]);
		fputs(" title ", gp);
		gp_quote(gp, c->locks[li]->name);
		nplotted++;
	}
	if (!nplotted)
		fputs("1/0 notitle", gp);
	fputs("\nunset multiplot\nset output\n", gp);
	status = pclose(gp);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(path, &sb) != 0 ||
	    sb.st_size == 0) {
		cli_error("--plot: gnuplot failed; no plot in %s", path);
		return -1;
	}
	return 0;
}
