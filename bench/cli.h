/* SPDX-License-Identifier: MIT */
/* Command-line helpers shared by the subcommands. Parsers print what is
 * wrong on stderr and return false; the caller prints its usage and exits
 * with CLI_EXIT_USAGE. */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

#include <stdbool.h>
#include <stddef.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* the benchmark found a correctness problem or could not run */
#define CLI_EXIT_USAGE 2 /* bad arguments */

extern const char *cli_prog; /* "rqspin-bench" */

/* Decimal unsigned integer in [min, max], the whole string. */
bool cli_parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *out);
/* Comma-separated list of such integers; *out is malloc'ed. */
bool cli_parse_uint_list(const char *opt, const char *s, unsigned min, unsigned max,
			 unsigned **out, size_t *n);
/* Split a comma-separated list into malloc'ed strings (in one block). */
bool cli_split(const char *opt, const char *s, char ***out, size_t *n);

/* Print "prog: msg" on stderr (printf-style). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
