/* SPDX-License-Identifier: MIT */
/* Output of `rqspin-bench lock`: the aligned table and verdicts on stdout,
 * JSON and CSV files, and a gnuplot chart. */
#ifndef BENCH_LOCK_REPORT_H
#define BENCH_LOCK_REPORT_H

#include <stdio.h>

#include "lock_bench.h"

void report_header(FILE *f, const struct lb_results *r);
void report_table(FILE *f, const struct lb_results *r);
void report_uncontended(FILE *f, const struct lb_results *r);
void report_libstats(FILE *f, const struct lb_results *r);
void report_verdicts(FILE *f, const struct lb_results *r);

/* Each returns 0 on success; on failure prints why on stderr and returns
 * -1. report_plot returns 1 (and says so) when gnuplot is not installed.
 * rs: the n scenarios of the run; v: all their verdicts. */
int report_json(const char *path, const struct lb_results *rs, size_t n,
		const struct verdict_list *v);
int report_csv(const char *path, const struct lb_results *rs, size_t n);
int report_plot(const char *path, const struct lb_results *rs, size_t n);

#endif
