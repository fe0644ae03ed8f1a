/* SPDX-License-Identifier: MIT */
/*
 * What a suite of rqspin-bench exports: one descriptor. The harness
 * (runner.c) parses the options common to every suite and the suite's own,
 * checks the output files before anything runs, starts and stops the
 * background load, prints progress, counts the verdicts, and runs the
 * suites of `all` from the table in the build (RQSPIN_BENCH_SUITES in
 * bench/CMakeLists.txt). A suite includes harness headers only; the
 * harness includes no suite.
 *
 * Adding a suite: a folder bench/NAME with a CMakeLists.txt building the
 * static library rqspin_bench_NAME (rqspin_bench_suite(NAME ...)) whose
 * sources define `const struct bench_suite bench_suite_NAME`, and NAME in
 * RQSPIN_BENCH_SUITES. Adding a scenario to `all`: a line in the suite's
 * all_runs.
 */
#ifndef BENCH_SUITE_H
#define BENCH_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli.h"
#include "verdict.h"

/* The options every suite takes, parsed by the harness. */
struct bench_opts {
	const char *run;          /* names the run in the output: the suite's name, or
				   * "all/TAG" when `all` runs it */
	bool quick;               /* smoke-test sizes */
	bool quiet;               /* no progress on stderr */
	const char *json_path;    /* NULL: not asked for (checked writable before the run) */
	const char *csv_path;
	const char *plot_path;
	unsigned background_load; /* CPU-bound hog processes during the run */
	double load_others;       /* other runnable threads when the run was set up
				   * (load_probe_others; the hogs above not included) */
};

/* How much longer than on an idle machine CPU-bound work takes now: CPUs
 * shared with o->load_others + o->background_load other runnable threads,
 * the suite's threads keeping every CPU busy, (cpus + others) / cpus; 1
 * on an idle machine. Suites scale the pieces of their run-time model
 * that do a fixed amount of work by it (pieces of a fixed length, like a
 * timed measurement, do not stretch). */
double bench_load_factor(const struct bench_opts *o);

/* One run of a suite in `all`. */
struct bench_all_run {
	const char *tag;          /* names the run; its files are out.TAG.json etc. */
	const char *args[8];      /* the suite's own options, NULL-terminated */
	const char *quick_args[8];/* the same for `all --quick` (--quick is added) */
	bool quick;               /* --quick sizes also in the full `all` (with args) */
	bool hog_per_cpu;         /* with --background-load = usable CPUs */
};

#define BENCH_ALL_MAX_RUNS 4

struct bench_suite {
	const char *name;
	const char *summary;
	/* What the suite measures and its own options, for --help (the
	 * harness adds the common options and the exit status). */
	void (*help)(FILE *f);
	/* Sets the suite's defaults and points opts[] at its configuration;
	 * returns how many it filled (at most max). */
	size_t (*options)(struct cli_opt *opts, size_t max);
	/* After parsing, before anything runs: checks combinations, applies
	 * --quick. false after saying what is wrong (exit status 2). */
	bool (*prepare)(const struct bench_opts *o);
	/* Seconds the run will take on a 2-core machine, its work-bound
	 * pieces scaled by bench_load_factor(o): the sum of the model's
	 * seconds that run then reports step by step with progress_step
	 * (progress.h), which rescales the time left by the pace so far. */
	double (*estimate_s)(const struct bench_opts *o);
	/* Measures, prints the text report, adds the verdicts to *v and
	 * writes the files o names (JSON framed by bench_json_begin / _end).
	 * Returns an exit status (CLI_EXIT_OK or CLI_EXIT_FAIL). */
	int (*run)(const struct bench_opts *o, struct verdict_list *v);
	/* Frees what options and prepare allocated; may be NULL. */
	void (*cleanup)(void);
	/* true: run draws o->plot_path itself; false: the harness charts the
	 * verdicts there. */
	bool own_plot;
	/* Its runs in `all`, in order (a zero tag ends the list). */
	struct bench_all_run all_runs[BENCH_ALL_MAX_RUNS];
	/* A suite that measures in re-executed copies of the process: in such
	 * a copy, runs the measurement and returns its exit status; anywhere
	 * else -1. May be NULL. */
	int (*child)(void);
};

#endif
