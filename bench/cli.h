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

/* After getopt_long(..., ":h", ...) returned opt ':' (missing value) or an
 * unknown option: say so as "prog: sub: ...". */
void cli_getopt_error(const char *sub, int opt, char *const *argv);
/* After the getopt_long loop: false (and says so) if operands are left. */
bool cli_no_operands(const char *sub, int argc, char *const *argv);

/* Print "prog: msg" on stderr (printf-style). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One option of a subcommand, for cli_parse_options. dest is what the value
 * goes into:
 *   CLI_FLAG       bool *          (no value; set to true)
 *   CLI_STRING     const char **   (points into argv)
 *   CLI_UINT       unsigned *      in [min, max]
 *   CLI_UINT_LIST  unsigned **     comma-separated, each in [min, max]; the
 *                                  old list is freed, *count set
 *   CLI_CUSTOM     anything: parse(value, dest) checks and stores it (and
 *                  says what is wrong)
 * seen, when not NULL, is set to true when the option is given. */
enum cli_kind { CLI_FLAG, CLI_STRING, CLI_UINT, CLI_UINT_LIST, CLI_CUSTOM };
struct cli_opt {
	const char *name; /* without the leading "--" */
	enum cli_kind kind;
	void *dest;
	unsigned min, max;
	size_t *count;
	bool (*parse)(const char *value, void *dest);
	bool *seen;
};
#define CLI_MAX_OPTS 32

/* Parse argv[1..] of subcommand sub: the options in opts, -h/--help, and no
 * operands. Returns CLI_EXIT_OK (with *help set when help was asked for:
 * print it and exit 0) or CLI_EXIT_USAGE after saying what is wrong. */
int cli_parse_options(const char *sub, int argc, char **argv, const struct cli_opt *opts,
		      size_t nopts, bool *help);

/* A suite's table of n options into opts[0..max) (the descriptor's
 * options()): returns how many it copied. */
size_t cli_opts_copy(struct cli_opt *opts, size_t max, const struct cli_opt *table, size_t n);

/* After a bad argument: "usage: prog sub [options]" and where help is. */
void cli_usage_hint(const char *sub);

/* Progress on stderr (printf-style, flushed), unless quiet (--quiet). */
void cli_progress(bool quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
