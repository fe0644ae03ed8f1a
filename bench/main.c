/* SPDX-License-Identifier: MIT */
/*
 * rqspin-bench: the librqspin benchmark harness. Subcommand dispatch and
 * the top-level help. Each subcommand is a function taking (argc, argv)
 * with argv[0] = its name; a subcommand that has not landed yet has a NULL
 * entry point and is listed as planned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lock_bench.h"
#include "shim/shim_bench.h"
#include "suite.h"

int alloc_bench_main(int argc, char **argv);   /* bench/alloc */
int storage_bench_main(int argc, char **argv); /* bench/storage */

struct subcmd {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* NULL: planned, not implemented yet */
};

static const struct subcmd subcmds[] = {
	{ "lock", "throughput, fairness and latency of qspin/rqspin vs peer locks", lock_bench_main },
	{ "all", "the default suite, with PASS/FAIL verdicts for the targets", all_main },
	{ "torture", "locktorture: random holds, mutual exclusion checks, failures by type",
	  torture_main },
	{ "deadlock", "rqspinlock AA/ABBA/cycle detection latency and timeout accuracy",
	  deadlock_main },
	{ "alloc", "rqspin_malloc_nolock vs glibc, jemalloc, mimalloc", alloc_bench_main },
	{ "storage", "object-local storage vs a hash table keyed by owner", storage_bench_main },
	{ "shim", "pthread_spin_* through librqspin-pthread.so vs glibc, idle and busy",
	  shim_bench_main },
};
#define NSUBCMDS (sizeof(subcmds) / sizeof(subcmds[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [SUBCOMMAND] [options]\n"
		"       %s SUBCOMMAND --help\n\n"
		"Benchmarks for librqspin. Without a subcommand, runs 'all'.\n\n"
		"Subcommands:\n",
		cli_prog, cli_prog);
	for (size_t i = 0; i < NSUBCMDS; i++)
		fprintf(f, "  %-9s %s%s\n", subcmds[i].name, subcmds[i].summary,
			subcmds[i].run ? "" : " (planned)");
	fprintf(f, "\nExamples:\n"
		   "  %s all                       default suite (~100 s on 2 cores)\n"
		   "  %s lock --locks qspin,pthread_spin --threads 1,2 --json out.json\n"
		   "  %s lock --quick --json /tmp/x.json   smoke test, a few seconds\n"
		   "  %s torture --mode abba --threads 4,16\n"
		   "  %s deadlock --trials 500 --json dl.json\n",
		cli_prog, cli_prog, cli_prog, cli_prog, cli_prog);
}

int main(int argc, char **argv)
{
	const char *name;

	/* The allocator suite measures each peer allocator in a copy of this
	 * process (re-executed with the peer preloaded); route it back. */
	if (getenv("RQSPIN_ALLOC_BENCH_CHILD"))
		return alloc_bench_main(argc, argv);
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "help") == 0)) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	if (argc < 2 || argv[1][0] == '-') {
		/* No subcommand: the default suite, with any options given. */
		static char all[] = "all";

		argv[0] = all;
		return all_main(argc, argv);
	}
	name = argv[1];
	for (size_t i = 0; i < NSUBCMDS; i++) {
		if (strcmp(subcmds[i].name, name) != 0)
			continue;
		if (!subcmds[i].run) {
			cli_error("'%s' is not implemented yet", name);
			return CLI_EXIT_USAGE;
		}
		return subcmds[i].run(argc - 1, argv + 1);
	}
	cli_error("unknown subcommand '%s'", name);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
