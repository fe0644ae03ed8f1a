/* SPDX-License-Identifier: MIT */
/* The output files of every suite: opening and checking them, the common
 * frame of the JSON files, and number formats of the text reports. */
#ifndef BENCH_OUTPUT_H
#define BENCH_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "json.h"
#include "stats.h"
#include "suite.h"
#include "sysinfo.h"

/* Before a run: false (after saying "opt: cannot write path: why") when
 * path could not be created or overwritten. Creates nothing. */
bool output_check_writable(const char *opt, const char *path);

/* fopen(path, "w"), or NULL after saying "opt: cannot write path: why". */
FILE *output_open(const char *opt, const char *path);
/* fclose; 0, or -1 after saying "opt: error writing path" on any write
 * error. */
int output_close(FILE *f, const char *opt, const char *path);

/* "out.json" -> "out.TAG.json" (any other name: "NAME.TAG.EXT"), for the
 * files of `all`'s runs. malloc'ed; NULL without memory. */
char *output_derived_path(const char *path, const char *tag, const char *ext);

/* json_init and the opening of the top object: tool, suite, run,
 * format_version, background_load and the machine. Suites then add their
 * members, and close with bench_json_end. */
void bench_json_begin(struct json *j, FILE *f, const char *suite, const struct bench_opts *o,
		      const struct sysinfo_rec *s, const struct load_share *l);
/* The verdicts, "ok", and the end of the top object. */
void bench_json_end(struct json *j, const struct verdict_list *v, bool ok);

/* A latency histogram as JSON object key: samples, mean, quantiles, max,
 * timer_overhead (only when timer_ns is not NULL) and the non-empty
 * buckets. */
void output_json_hist(struct json *j, const char *key, const struct hist *h,
		      const double *timer_ns);
/* librqspin's lock event counters as JSON object "librqspin_stats". */
struct rqspin_lock_stats;
void output_json_libstats(struct json *j, const struct rqspin_lock_stats *s);

/* "12.3M", "980k", "1.20G" into buf (at least 16 bytes). */
const char *fmt_si(char *buf, size_t n, double v);
/* "85ns", "1.2us", "3.4ms", "1.10s" into buf (at least 16 bytes). */
const char *fmt_ns(char *buf, size_t n, double ns);

#endif
