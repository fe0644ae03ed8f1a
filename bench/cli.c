/* SPDX-License-Identifier: MIT */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *cli_prog = "rqspin-bench";

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cli_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool cli_parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') {
		cli_error("%s: expected a number, got '%s'", opt, s ? s : "");
		return false;
	}
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end) {
		cli_error("%s: expected a number, got '%s'", opt, s);
		return false;
	}
	if (v < min || v > max) {
		cli_error("%s: %lu is out of range [%u, %u]", opt, v, min, max);
		return false;
	}
	*out = (unsigned)v;
	return true;
}

bool cli_split(const char *opt, const char *s, char ***out, size_t *n)
{
	size_t count = 1, len = strlen(s);
	char **v, *buf;

	for (const char *p = s; *p; p++)
		count += *p == ',';
	v = malloc(count * sizeof(*v) + len + 1);
	if (!v) {
		cli_error("out of memory");
		return false;
	}
	buf = (char *)(v + count);
	memcpy(buf, s, len + 1);
	for (size_t i = 0; i < count; i++) {
		char *comma = strchr(buf, ',');

		if (comma)
			*comma = 0;
		if (!*buf) {
			cli_error("%s: empty item in list '%s'", opt, s);
			free(v);
			return false;
		}
		v[i] = buf;
		buf = comma ? comma + 1 : buf + strlen(buf);
	}
	*out = v;
	*n = count;
	return true;
}

bool cli_parse_uint_list(const char *opt, const char *s, unsigned min, unsigned max,
			 unsigned **out, size_t *n)
{
	char **items;
	size_t count;
	unsigned *v;

	if (!cli_split(opt, s, &items, &count))
		return false;
	v = malloc(count * sizeof(*v));
	if (!v) {
		free(items);
		cli_error("out of memory");
		return false;
	}
	for (size_t i = 0; i < count; i++) {
		if (!cli_parse_uint(opt, items[i], min, max, &v[i])) {
			free(items);
			free(v);
			return false;
		}
	}
	free(items);
	*out = v;
	*n = count;
	return true;
}

void cli_getopt_error(const char *sub, int opt, char *const *argv)
{
	if (opt == ':')
		cli_error("%s: option '%s' needs a value", sub, argv[optind - 1]);
	else if (optopt)
		cli_error("%s: unknown option '-%c'", sub, optopt);
	else
		cli_error("%s: unknown option '%s'", sub, argv[optind - 1]);
}

bool cli_no_operands(const char *sub, int argc, char *const *argv)
{
	if (optind < argc) {
		cli_error("%s: unexpected argument '%s'", sub, argv[optind]);
		return false;
	}
	return true;
}

void cli_progress(bool quiet, const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

static bool cli_apply(const struct cli_opt *o, const char *value)
{
	char name[64];

	snprintf(name, sizeof(name), "--%s", o->name);
	switch (o->kind) {
	case CLI_FLAG:
		*(bool *)o->dest = true;
		return true;
	case CLI_STRING:
		*(const char **)o->dest = value;
		return true;
	case CLI_UINT:
		return cli_parse_uint(name, value, o->min, o->max, o->dest);
	case CLI_UINT_LIST:
		free(*(unsigned **)o->dest);
		*(unsigned **)o->dest = NULL;
		return cli_parse_uint_list(name, value, o->min, o->max, o->dest, o->count);
	case CLI_CUSTOM:
		return o->parse(value, o->dest);
	}
	return false;
}

int cli_parse_options(const char *sub, int argc, char **argv, const struct cli_opt *opts,
		      size_t nopts, bool *help)
{
	struct option lo[CLI_MAX_OPTS + 2];
	int opt;

	*help = false;
	if (nopts > CLI_MAX_OPTS) {
		cli_error("%s: too many options for the parser", sub);
		return CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < nopts; i++)
		lo[i] = (struct option){ opts[i].name,
					 opts[i].kind == CLI_FLAG ? no_argument : required_argument,
					 NULL, 256 + (int)i };
	lo[nopts] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[nopts + 1] = (struct option){ NULL, 0, NULL, 0 };
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (opt == 'h') {
			*help = true;
			return CLI_EXIT_OK;
		}
		if (opt < 256 || opt >= 256 + (int)nopts) { /* ':' or an unknown option */
			cli_getopt_error(sub, opt, argv);
			return CLI_EXIT_USAGE;
		}
		if (!cli_apply(&opts[opt - 256], optarg))
			return CLI_EXIT_USAGE;
		if (opts[opt - 256].seen)
			*opts[opt - 256].seen = true;
	}
	return cli_no_operands(sub, argc, argv) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

void cli_usage_hint(const char *sub)
{
	fprintf(stderr, "usage: %s %s [options]\nTry '%s %s --help'.\n", cli_prog, sub, cli_prog,
		sub);
}

size_t cli_opts_copy(struct cli_opt *opts, size_t max, const struct cli_opt *table, size_t n)
{
	if (n > max)
		n = max;
	memcpy(opts, table, n * sizeof(*table));
	return n;
}
