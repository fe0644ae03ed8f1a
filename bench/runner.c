/* SPDX-License-Identifier: MIT */
/*
 * The part of every run that is not a suite's: the common options, the
 * output files checked before anything runs, the background load, the
 * progress lines with the estimate, the verdict chart of suites that draw
 * none, and `all`.
 */
#include "runner.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "load.h"
#include "output.h"
#include "plot.h"
#include "progress.h"

#define MAX_OPTS CLI_MAX_OPTS

static bool parse_load(const char *value, void *dest)
{
	if (strcmp(value, "cpus") == 0) {
		*(unsigned *)dest = load_usable_cpus();
		return true;
	}
	return cli_parse_uint("--background-load", value, 0, LOAD_MAX_HOGS, dest);
}

/* The common options into opts[]; returns how many. */
static size_t common_options(struct cli_opt *opts, struct bench_opts *o)
{
	const struct cli_opt c[] = {
		{ "quick", CLI_FLAG, &o->quick, 0, 0, NULL, NULL, NULL },
		{ "json", CLI_STRING, &o->json_path, 0, 0, NULL, NULL, NULL },
		{ "csv", CLI_STRING, &o->csv_path, 0, 0, NULL, NULL, NULL },
		{ "plot", CLI_STRING, &o->plot_path, 0, 0, NULL, NULL, NULL },
		{ "background-load", CLI_CUSTOM, &o->background_load, 0, 0, NULL, parse_load, NULL },
		{ "quiet", CLI_FLAG, &o->quiet, 0, 0, NULL, NULL, NULL },
	};

	memcpy(opts, c, sizeof(c));
	return sizeof(c) / sizeof(c[0]);
}

static void common_help(FILE *f, bool own_plot)
{
	fprintf(f,
		"\nOptions of every suite:\n"
		"  --quick                smoke-test sizes\n"
		"  --json FILE            write the results as JSON\n"
		"  --csv FILE             write the results as CSV\n"
		"  --plot FILE.png        %s (gnuplot)\n"
		"  --background-load N    N CPU-bound processes busy during the measurements\n"
		"                         ('cpus': one per usable CPU; default 0)\n"
		"  --quiet                no progress on stderr\n"
		"  -h, --help             this text\n"
		"Output files are checked writable before anything runs.\n\n"
		"Exit status: 0 done (PASS/FAIL verdicts are informational), 1 a correctness\n"
		"check failed, a run could not be set up or an output could not be written,\n"
		"2 bad arguments.\n",
		own_plot ? "chart the results" : "chart the verdicts (measured / target)");
}

static bool check_outputs(const struct bench_opts *o)
{
	return (!o->json_path || output_check_writable("--json", o->json_path)) &&
	       (!o->csv_path || output_check_writable("--csv", o->csv_path)) &&
	       (!o->plot_path || output_check_writable("--plot", o->plot_path));
}

/*
 * Parses argv (argv[0] = the suite's name) into the suite's configuration
 * and, with common set, *o; prepares the suite. Returns CLI_EXIT_OK to
 * run, or an exit status with the suite cleaned up (*help: help printed).
 */
static int parse_suite(const struct bench_suite *s, int argc, char **argv, struct bench_opts *o,
		       bool common, bool *help)
{
	struct cli_opt opts[MAX_OPTS];
	size_t n = s->options(opts, MAX_OPTS - 6);

	if (common)
		n += common_options(opts + n, o);
	if (cli_parse_options(s->name, argc, argv, opts, n, help) != CLI_EXIT_OK)
		goto bad;
	if (*help) {
		printf("usage: %s %s [options]\n\n", cli_prog, s->name);
		s->help(stdout);
		common_help(stdout, s->own_plot);
		goto done;
	}
	if (!s->prepare(o))
		goto bad;
	return CLI_EXIT_OK;
bad:
	if (s->cleanup)
		s->cleanup();
	cli_usage_hint(s->name);
	return CLI_EXIT_USAGE;
done:
	if (s->cleanup)
		s->cleanup();
	return CLI_EXIT_OK;
}

/* Runs a parsed suite with its load, progress and verdict chart; cleans
 * it up. explicit_plot: a missing gnuplot is an error. */
static int execute(const struct bench_suite *s, const struct bench_opts *o,
		   struct verdict_list *v, bool explicit_plot)
{
	double est = s->estimate_s(o);
	struct load_hogs hogs;
	int rc;

	if (o->load_others >= 1)
		cli_progress(o->quiet, "%s %s: about %.0f s (%.0f other runnable threads%s)\n",
			     cli_prog, o->run, est, o->load_others,
			     o->background_load ? ", and the background load" : "");
	else
		cli_progress(o->quiet, "%s %s: about %.0f s%s\n", cli_prog, o->run, est,
			     o->background_load ? ", with background load" : "");
	if (!load_hogs_start(&hogs, o->background_load)) {
		if (s->cleanup)
			s->cleanup();
		return CLI_EXIT_FAIL;
	}
	if (o->background_load) {
		printf("Background load: %u CPU-bound processes during the run\n",
		       o->background_load);
		fflush(stdout);
	}
	progress_begin(est);
	rc = s->run(o, v);
	load_hogs_stop(&hogs);
	if (o->plot_path && !s->own_plot) {
		char title[160];
		int prc;

		snprintf(title, sizeof(title), "rqspin-bench %s: verdicts", o->run);
		prc = plot_verdicts(o->plot_path, title, v);
		if (prc == 0)
			printf("Plot written to %s\n", o->plot_path);
		else if (prc < 0 || explicit_plot)
			rc = CLI_EXIT_FAIL;
	}
	if (s->cleanup)
		s->cleanup();
	cli_progress(o->quiet, "%s %s: took %.0f s (estimated %.0f s)\n", cli_prog, o->run,
		     progress_elapsed_s(), est);
	fflush(stdout);
	return rc;
}

int bench_suite_main(const struct bench_suite *s, int argc, char **argv)
{
	struct bench_opts o = { .run = s->name };
	struct verdict_list *v = calloc(1, sizeof(*v));
	bool help;
	int rc;

	if (!v) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	rc = parse_suite(s, argc, argv, &o, true, &help);
	if (rc == CLI_EXIT_OK && !help) {
		if (check_outputs(&o)) {
			o.load_others = load_probe_others();
			rc = execute(s, &o, v, true);
		} else {
			if (s->cleanup)
				s->cleanup();
			rc = CLI_EXIT_USAGE;
		}
	}
	free(v);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* all                                                                       */

struct all_run {
	const struct bench_suite *s;
	const struct bench_all_run *r;
	bool quick_args;         /* all --quick: the run's quick_args */
	struct bench_opts o;
	char run[64];
	char *json, *csv, *plot; /* derived names (malloc'ed) */
	double est;
	size_t pass, fail;
	int rc;
};

static void all_usage(FILE *f, const struct bench_suite *const *suites, size_t n)
{
	fprintf(f,
		"usage: %s all [options]\n\n"
		"The default suite: every suite's runs below, each with its PASS/FAIL verdicts,\n"
		"and the count of all verdicts at the end. --json/--csv/--plot FILE name the\n"
		"first run's files; the others are named after them (out.json ->\n"
		"out.TAG.json); only suites that draw their own chart get a --plot file.\n"
		"About 3 minutes on an idle 2-core machine (--quick: about 20 s), longer on\n"
		"a busy one: the progress on stderr gives the estimate, then the time left\n"
		"at the pace so far.\n\n"
		"Runs:\n",
		cli_prog);
	for (size_t i = 0; i < n; i++) {
		for (const struct bench_all_run *r = suites[i]->all_runs; r->tag; r++) {
			fprintf(f, "  %-14s %s", r->tag, suites[i]->name);
			for (size_t k = 0; r->args[k]; k++)
				fprintf(f, " %s", r->args[k]);
			fprintf(f, "%s%s\n", r->quick ? " --quick" : "",
				r->hog_per_cpu ? " --background-load cpus" : "");
			fprintf(f, "  %-14s   all --quick:", "");
			for (size_t k = 0; r->quick_args[k]; k++)
				fprintf(f, " %s", r->quick_args[k]);
			fprintf(f, " --quick\n");
		}
	}
	fprintf(f,
		"\nOptions: --quick, --json FILE, --csv FILE, --plot FILE.png, --quiet, -h/--help\n"
		"(as in every suite; see `%s lock --help`), and\n"
		"  --only TAGS            only these runs (comma-separated tags, as above)\n\n"
		"Exit status: 0 done (PASS/FAIL verdicts are informational), 1 a correctness\n"
		"check failed, a run could not be set up or an output could not be written,\n"
		"2 bad arguments.\n",
		cli_prog);
}

static const char *const *run_args(const struct all_run *a)
{
	return a->quick_args ? a->r->quick_args : a->r->args;
}

/* The run's argument vector: the suite's name and the run's options. */
static int run_argv(const struct all_run *a, char **argv)
{
	const char *const *args = run_args(a);
	int argc = 0;

	argv[argc++] = (char *)a->s->name;
	for (size_t k = 0; args[k]; k++)
		argv[argc++] = (char *)args[k];
	argv[argc] = NULL;
	return argc;
}

/* The options of run number idx: all's, with derived file names after the
 * first run. false without memory. */
static bool all_run_opts(struct all_run *a, const struct bench_opts *base, size_t idx)
{
	a->o = *base;
	snprintf(a->run, sizeof(a->run), "all/%s", a->r->tag);
	a->o.run = a->run;
	a->o.background_load = a->r->hog_per_cpu ? load_usable_cpus() : 0;
	a->quick_args = base->quick;
	a->o.quick |= a->r->quick;
	if (!a->s->own_plot)
		a->o.plot_path = NULL;
	if (idx == 0)
		return true;
	if (base->json_path &&
	    !(a->o.json_path = a->json = output_derived_path(base->json_path, a->r->tag, "json")))
		return false;
	if (base->csv_path &&
	    !(a->o.csv_path = a->csv = output_derived_path(base->csv_path, a->r->tag, "csv")))
		return false;
	if (a->o.plot_path &&
	    !(a->o.plot_path = a->plot = output_derived_path(base->plot_path, a->r->tag, "png")))
		return false;
	return true;
}

int bench_all_main(const struct bench_suite *const *suites, size_t n, int argc, char **argv)
{
	struct bench_opts base = { .run = "all" };
	struct cli_opt opts[8];
	const char *only = NULL;
	char **only_tags = NULL;
	size_t nonly = 0;
	struct all_run runs[64];
	struct verdict_list *v = calloc(1, sizeof(*v));
	size_t nruns = 0, pass = 0, fail = 0;
	double est = 0, est_done = 0, t0;
	bool help;
	int rc = CLI_EXIT_OK;

	if (!v) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	size_t nopts = common_options(opts, &base);

	opts[nopts++] = (struct cli_opt){ "only", CLI_STRING, &only, 0, 0, NULL, NULL, NULL };
	/* --background-load is per run in all (see the runs). */
	if (cli_parse_options("all", argc, argv, opts, nopts, &help) != CLI_EXIT_OK ||
	    (only && !cli_split("--only", only, &only_tags, &nonly))) {
		cli_usage_hint("all");
		free(v);
		return CLI_EXIT_USAGE;
	}
	if (help) {
		all_usage(stdout, suites, n);
		free(v);
		return CLI_EXIT_OK;
	}
	if (base.background_load) {
		cli_error("all: --background-load: the runs of all set their own load");
		cli_usage_hint("all");
		free(only_tags);
		free(v);
		return CLI_EXIT_USAGE;
	}
	for (size_t k = 0; k < nonly; k++) {
		bool known = false;

		for (size_t i = 0; i < n; i++)
			for (const struct bench_all_run *r = suites[i]->all_runs; r->tag; r++)
				known |= strcmp(r->tag, only_tags[k]) == 0;
		if (!known) {
			cli_error("--only: '%s' is not a run of all (see all --help)", only_tags[k]);
			cli_usage_hint("all");
			free(only_tags);
			free(v);
			return CLI_EXIT_USAGE;
		}
	}
	memset(runs, 0, sizeof(runs));
	/* Before any run starts its hogs: every run's estimate counts what
	 * else this machine runs. */
	base.load_others = load_probe_others();
	/* Every run parsed, prepared and its files checked before the first
	 * one starts. */
	for (size_t i = 0; i < n; i++) {
		for (const struct bench_all_run *r = suites[i]->all_runs; r->tag; r++) {
			struct all_run *a = &runs[nruns];
			char *av[16];
			bool h;

			bool wanted = !only;

			for (size_t k = 0; k < nonly; k++)
				wanted |= strcmp(r->tag, only_tags[k]) == 0;
			if (!wanted || nruns == sizeof(runs) / sizeof(runs[0]))
				continue;
			a->s = suites[i];
			a->r = r;
			if (!all_run_opts(a, &base, nruns)) {
				cli_error("out of memory");
				rc = CLI_EXIT_FAIL;
				goto out;
			}
			nruns++;
			if (!check_outputs(&a->o)) {
				rc = CLI_EXIT_USAGE;
				goto out;
			}
			if (parse_suite(a->s, run_argv(a, av), av, &a->o, false, &h) != CLI_EXIT_OK) {
				cli_error("all: run '%s' has bad arguments", r->tag);
				rc = CLI_EXIT_FAIL;
				goto out;
			}
			a->est = a->s->estimate_s(&a->o);
			est += a->est;
			if (a->s->cleanup)
				a->s->cleanup();
		}
	}
	cli_progress(base.quiet, "%s all: %zu runs, about %.0f s\n", cli_prog, nruns, est);
	t0 = progress_now_s();
	for (size_t i = 0; i < nruns; i++) {
		struct all_run *a = &runs[i];
		char *av[16];
		bool h;

		if (i > 0)
			cli_progress(base.quiet, "%s all: run %zu of %zu, %.0f s so far, ~%.0f s left\n",
				     cli_prog, i + 1, nruns, progress_now_s() - t0,
				     progress_scaled_left(est, est_done, progress_now_s() - t0));
		est_done += a->est;

		printf("\n== %s: %s", a->r->tag, a->s->name);
		for (size_t k = 0; run_args(a)[k]; k++)
			printf(" %s", run_args(a)[k]);
		printf("%s", a->o.quick ? " --quick" : "");
		printf("%s ==\n", a->o.background_load ? " (with one CPU-bound process per CPU)" : "");
		fflush(stdout);
		memset(v, 0, sizeof(*v));
		a->rc = parse_suite(a->s, run_argv(a, av), av, &a->o, false, &h);
		if (a->rc == CLI_EXIT_OK)
			a->rc = execute(a->s, &a->o, v, false);
		vl_count(v, &a->pass, &a->fail);
		pass += a->pass;
		fail += a->fail;
		if (a->rc > rc)
			rc = a->rc;
	}
	cli_progress(base.quiet, "%s all: took %.0f s (estimated %.0f s)\n", cli_prog,
		     progress_now_s() - t0, est);
	printf("\nSuite 'all': %zu verdicts passed, %zu failed\n", pass, fail);
	for (size_t i = 0; i < nruns; i++) {
		printf("  %-14s %3zu passed, %3zu failed", runs[i].r->tag, runs[i].pass,
		       runs[i].fail);
		if (runs[i].rc)
			printf("  (exit status %d)", runs[i].rc);
		putchar('\n');
	}
	if (rc)
		printf("FAILED (see the errors above)\n");
out:
	for (size_t i = 0; i < nruns; i++) {
		free(runs[i].json);
		free(runs[i].csv);
		free(runs[i].plot);
	}
	free(only_tags);
	free(v);
	return rc;
}
