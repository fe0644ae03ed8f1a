/* SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rqspin/lock_diag.h>

#include "cli.h"

bool output_check_writable(const char *opt, const char *path)
{
	struct stat sb;
	const char *slash;
	const char *why = NULL;
	char *dir;
	bool ok;

	if (!*path) {
		cli_error("%s: empty file name", opt);
		return false;
	}
	if (stat(path, &sb) == 0) {
		if (S_ISDIR(sb.st_mode)) {
			cli_error("%s: cannot write %s: Is a directory", opt, path);
			return false;
		}
		if (access(path, W_OK) != 0) {
			cli_error("%s: cannot write %s: %s", opt, path, strerror(errno));
			return false;
		}
		return true;
	}
	/* Not there: its directory must exist and take a new file. */
	slash = strrchr(path, '/');
	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir) {
		cli_error("out of memory");
		return false;
	}
	if (stat(dir, &sb) != 0)
		why = strerror(errno);
	else if (!S_ISDIR(sb.st_mode))
		why = "Not a directory";
	else if (access(dir, W_OK | X_OK) != 0)
		why = strerror(errno);
	ok = !why;
	if (!ok)
		cli_error("%s: cannot write %s: %s", opt, path, why);
	free(dir);
	return ok;
}

FILE *output_open(const char *opt, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		cli_error("%s: cannot write %s: %s", opt, path, strerror(errno));
	return f;
}

int output_close(FILE *f, const char *opt, const char *path)
{
	int rc = ferror(f) ? -1 : 0;

	if (fclose(f) != 0)
		rc = -1;
	if (rc)
		cli_error("%s: error writing %s", opt, path);
	return rc;
}

char *output_derived_path(const char *path, const char *tag, const char *ext)
{
	size_t n = strlen(path), el = strlen(ext);
	char *out = malloc(n + strlen(tag) + el + 4);

	if (!out)
		return NULL;
	if (n > el + 1 && path[n - el - 1] == '.' && strcmp(path + n - el, ext) == 0)
		sprintf(out, "%.*s.%s.%s", (int)(n - el - 1), path, tag, ext);
	else
		sprintf(out, "%s.%s.%s", path, tag, ext);
	return out;
}

static void json_machine(struct json *j, const struct sysinfo_rec *s, const struct load_share *l)
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
	if (l && l->ok) {
		json_double(j, "other_load_share", l->other);
		json_double(j, "steal_share", l->steal);
	}
	json_end_object(j);
}

void bench_json_begin(struct json *j, FILE *f, const char *suite, const struct bench_opts *o,
		      const struct sysinfo_rec *s, const struct load_share *l)
{
	json_init(j, f);
	json_begin_object(j, NULL);
	json_string(j, "tool", "rqspin-bench");
	json_string(j, "suite", suite);
	json_string(j, "run", o->run);
	json_uint(j, "format_version", 2);
	json_bool(j, "quick", o->quick);
	/* The hogs are this process's children: other_load_share counts them. */
	json_uint(j, "background_load", o->background_load);
	/* What the first estimate counted: other runnable threads at the start. */
	json_double(j, "other_runnable_at_start", o->load_others);
	json_machine(j, s, l);
}

void bench_json_end(struct json *j, const struct verdict_list *v, bool ok)
{
	vl_json(j, "verdicts", v);
	json_bool(j, "ok", ok);
	json_end_object(j);
}

void output_json_hist(struct json *j, const char *key, const struct hist *h, const double *timer_ns)
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

void output_json_libstats(struct json *j, const struct rqspin_lock_stats *s)
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
