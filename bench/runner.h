/* SPDX-License-Identifier: MIT */
/* Running suites: one from its command line, or the runs of `all`. */
#ifndef BENCH_RUNNER_H
#define BENCH_RUNNER_H

#include <stddef.h>

#include "suite.h"

/* `rqspin-bench NAME [options]`: argv[0] is the suite's name. Returns the
 * exit status. */
int bench_suite_main(const struct bench_suite *s, int argc, char **argv);

/* `rqspin-bench all [options]` over the suites, in order. */
int bench_all_main(const struct bench_suite *const *suites, size_t n, int argc, char **argv);

#endif
