/* SPDX-License-Identifier: MIT */
/* Charts through gnuplot (optional: Debian gnuplot-nox). A suite draws its
 * own chart with plot_open / plot_close; for the others the harness charts
 * the verdicts (plot_verdicts). */
#ifndef BENCH_PLOT_H
#define BENCH_PLOT_H

#include <stdio.h>

#include "verdict.h"

/* A gnuplot process writing a PNG of width x height to path, with the
 * terminal and output set; NULL after saying why (*missing set when
 * gnuplot is not installed). */
FILE *plot_open(const char *path, unsigned width, unsigned height, int *missing);
/* Ends the chart: 0, or -1 after saying gnuplot failed. */
int plot_close(FILE *gp, const char *path);
/* A gnuplot single-quoted string ('' stands for one quote). */
void plot_quote(FILE *gp, const char *s);

/* Bars of each verdict's value over its limit (1 = on the target), PASS
 * green, FAIL red, info grey. 0 written, 1 gnuplot missing, -1 failed. */
int plot_verdicts(const char *path, const char *title, const struct verdict_list *v);

#endif
