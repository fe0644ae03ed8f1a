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

/* "12.3M", "980k", "1.20G" into buf (at least 16 bytes). */
const char *fmt_si(char *buf, size_t n, double v);
/* "85ns", "1.2us", "3.4ms", "1.10s" into buf (at least 16 bytes). */
const char *fmt_ns(char *buf, size_t n, double ns);

#endif
