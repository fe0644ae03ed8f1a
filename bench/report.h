/* SPDX-License-Identifier: MIT */
/* Output of `rqspin-bench lock`: the aligned table and verdicts on stdout,
 * JSON and CSV files, and a gnuplot chart. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stdio.h>

#include "lock_bench.h"

void report_header(FILE *f, const struct lb_results *r);
void report_table(FILE *f, const struct lb_results *r);
void report_uncontended(FILE *f, const struct lb_results *r);
void report_libstats(FILE *f, const struct lb_results *r);
void report_verdicts(FILE *f, const struct lb_results *r);

/* Each returns 0 on success; on failure prints why on stderr and returns
 * -1. report_plot returns 1 (and says so) when gnuplot is not installed. */
int report_json(const char *path, const struct lb_results *r);
int report_csv(const char *path, const struct lb_results *r);
int report_plot(const char *path, const struct lb_results *r);

/* The output files of all suites. report_open: fopen(path, "w"), or NULL
 * after saying "opt: cannot write path: why". report_close: fclose, 0 or -1
 * after saying "opt: error writing path" on any write error. */
FILE *report_open(const char *opt, const char *path);
int report_close(FILE *f, const char *opt, const char *path);

/* json_init and the opening of the top object: tool, suite, format_version
 * and the machine (suite_json_machine). */
struct json;
void report_json_begin(struct json *j, FILE *f, const char *suite, const struct sysinfo_rec *s,
		       const struct load_share *l);

/* A latency histogram as JSON object `key`: samples, mean, quantiles, max,
 * timer_overhead (only when timer_ns is not NULL) and the non-empty buckets.
 * Shared by the lock and torture suites. */
struct hist;
void report_json_hist(struct json *j, const char *key, const struct hist *h, const double *timer_ns);

/* "12.3M", "980k", "1.20G" into buf (at least 16 bytes). */
const char *fmt_si(char *buf, size_t n, double v);
/* "85ns", "1.2us", "3.4ms", "1.10s" into buf (at least 16 bytes). */
const char *fmt_ns(char *buf, size_t n, double ns);

#endif
