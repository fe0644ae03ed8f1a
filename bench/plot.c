/* SPDX-License-Identifier: MIT */
#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);

		if (len && len + strlen(prog) + 2 < sizeof(buf)) {
			memcpy(buf, path, len);
			buf[len] = '/';
			strcpy(buf + len + 1, prog);
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return false;
}

void plot_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		if (*s != '\n')
			fputc(*s, f);
	}
	fputc('\'', f);
}

FILE *plot_open(const char *path, unsigned width, unsigned height, int *missing)
{
	FILE *gp;

	*missing = 0;
	if (!in_path("gnuplot")) {
		cli_error("--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox); "
			  "no plot written to %s",
			  path);
		*missing = 1;
		return NULL;
	}
	fflush(NULL);
	gp = popen("gnuplot", "w");
	if (!gp) {
		cli_error("--plot: cannot run gnuplot: %s", strerror(errno));
		return NULL;
	}
	fprintf(gp,
		"if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
		"  set terminal pngcairo size %u,%u noenhanced font 'sans,10'\n"
		"} else {\n"
		"  set terminal png size %u,%u noenhanced\n"
		"}\n",
		width, height, width, height);
	fputs("set output ", gp);
	plot_quote(gp, path);
	fputc('\n', gp);
	return gp;
}

int plot_close(FILE *gp, const char *path)
{
	struct stat sb;
	int status;

	fputs("set output\n", gp);
	status = pclose(gp);
	if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(path, &sb) != 0 ||
	    sb.st_size == 0) {
		cli_error("--plot: gnuplot failed; no plot in %s", path);
		return -1;
	}
	return 0;
}

int plot_verdicts(const char *path, const char *title, const struct verdict_list *v)
{
	int missing;
	FILE *gp = plot_open(path, 1200, 200 + 24 * (unsigned)v->n, &missing);

	if (!gp)
		return missing ? 1 : -1;
	/* One row per verdict: index, value/limit (counts: value + 1 over
	 * limit + 1, so 0 of 0 failures sits on the line), colour, label. */
	fputs("$v << EOD\n", gp);
	for (size_t i = 0; i < v->n; i++) {
		const struct verdict *x = &v->v[i];
		double r = x->is_count || x->limit == 0 ? (x->value + 1) / (x->limit + 1)
							: x->value / x->limit;

		fprintf(gp, "%zu %.6g %s \"", i, isfinite(r) ? r : 0.0,
			x->status == V_PASS ? "0x2ca02c" : x->status == V_FAIL ? "0xd62728"
									     : "0x7f7f7f");
		for (const char *c = x->target; *c; c++) /* a data column in double quotes */
			fputc(*c == '"' ? '\'' : *c, gp);
		fputs("\"\n", gp);
	}
	fputs("EOD\nset title ", gp);
	plot_quote(gp, title);
	fputs("\nset style fill solid 0.8\nset grid x\nset key off\n"
	      "set xlabel 'measured / target (1 = on the target; which side passes "
	      "depends on the target: see its text)'\n"
	      "set ytics scale 0\n",
	      gp);
	fprintf(gp, "set yrange [%zu:-1]\n", v->n ? v->n : 1);
	fputs("set arrow from 1, graph 0 to 1, graph 1 nohead lw 2\n"
	      "plot $v using ($2/2):1:($2/2):(0.35):3:ytic(4) with boxxyerror lc rgb variable\n",
	      gp);
	return plot_close(gp, path);
}
