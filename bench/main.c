/* SPDX-License-Identifier: MIT */
/*
 * rqspin-bench: the librqspin benchmark harness. Dispatches to a suite of
 * the table (bench_suites.h, generated from RQSPIN_BENCH_SUITES in
 * bench/CMakeLists.txt) or to `all`; a bare call prints the usage.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "runner.h"
#include "suite.h"

#include "bench_suites.h" /* BENCH_SUITES(X): X(lock) X(torture) ... */

#define DECLARE(name) extern const struct bench_suite bench_suite_##name;
BENCH_SUITES(DECLARE)
#define ENTRY(name) &bench_suite_##name,
static const struct bench_suite *const suites[] = { BENCH_SUITES(ENTRY) };
#define NSUITES (sizeof(suites) / sizeof(suites[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s SUITE [options]\n"
		"       %s SUITE --help\n\n"
		"Benchmarks for librqspin.\n\n"
		"Suites:\n",
		cli_prog, cli_prog);
	for (size_t i = 0; i < NSUITES; i++)
		fprintf(f, "  %-9s %s\n", suites[i]->name, suites[i]->summary);
	fprintf(f, "  %-9s %s\n", "all",
		"the default suite: the runs of every suite, with PASS/FAIL verdicts");
	fprintf(f, "\nExamples:\n"
		   "  %s all --json out.json        default suite (~3 min on an idle 2-core\n"
		   "                                          machine; more on a busy one)\n"
		   "  %s all --quick                smoke test (~20 s)\n"
		   "  %s lock --locks qspin,pthread_spin --threads 1,2 --json out.json\n"
		   "  %s lock --think 0 --background-load cpus\n"
		   "  %s torture --mode abba --threads 4,16\n"
		   "  %s deadlock --trials 500 --json dl.json\n",
		cli_prog, cli_prog, cli_prog, cli_prog, cli_prog, cli_prog);
}

int main(int argc, char **argv)
{
	/* A suite measuring in a re-executed copy of this process. */
	for (size_t i = 0; i < NSUITES; i++) {
		int rc = suites[i]->child ? suites[i]->child() : -1;

		if (rc >= 0)
			return rc;
	}
	if (argc < 2) {
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (strcmp(argv[1], "all") == 0)
		return bench_all_main(suites, NSUITES, argc - 1, argv + 1);
	for (size_t i = 0; i < NSUITES; i++)
		if (strcmp(suites[i]->name, argv[1]) == 0)
			return bench_suite_main(suites[i], argc - 1, argv + 1);
	cli_error("unknown suite '%s'", argv[1]);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
