/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench alloc`: rqspin_malloc_nolock against glibc malloc, jemalloc
 * and mimalloc. The parent side: options, the schedule, the report and the
 * verdicts; the measurements are in alloc_child.c.
 *
 * Schedule: for each repeat, every test, and in it every peer once, the
 * peer order rotated by the repeat (as in the lock suite), so a slow phase
 * of a shared machine falls on all peers alike; each figure is the median
 * over the repeats, and each ratio the median of the per-repeat ratios.
 *
 * Every measurement runs in its own process: the program re-executes
 * itself (/proc/self/exe with its original command line) with
 * ALLOC_CHILD_ENV naming the peer and the test, and with
 * LD_PRELOAD=libjemalloc.so.2 / libmimalloc.so.2 for those peers (both
 * export malloc, so they cannot share a process); glibc runs without a
 * preload; rqspin calls rqspin_malloc_nolock/rqspin_free_nolock directly.
 *
 * Targets (verdict area "alloc"): pairs <= 1.0x glibc and <= 1.5x the
 * faster of jemalloc and mimalloc; every multi-threaded test (xthread,
 * xmalloc, larson, churn) <= 1.5x the fastest peer; churn peak RSS <= 1.5x
 * jemalloc's.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cli.h"
#include "load.h"
#include "output.h"
#include "plot.h"
#include "progress.h"
#include "stats.h"
#include "suite.h"

#define DEF_REPEATS 5
#define QUICK_REPEATS 2
#define MAX_REPEATS 100

static const char *const peer_lib[ALLOC_NPEERS] = { NULL, "libjemalloc.so.2",
						    "libmimalloc.so.2", NULL };

enum judge {
	J_NONE,  /* info only */
	J_PAIRS, /* <= 1.0x glibc, <= 1.5x the faster of jemalloc and mimalloc */
	J_BEST,  /* <= 1.5x the fastest peer */
};

/* One row of the report: a child test, or a second figure of one. */
struct alloc_test {
	const char *group;  /* --tests name */
	const char *child;  /* the child's test name */
	const char *label;
	const char *unit;
	unsigned value;     /* which figure of the child's RESULT line */
	enum judge judge;
	bool rqspin_only;
	double cost_s[2];   /* one child's run time, full and quick (the model of the run
			     * time, progress.h: its wall time on an idle 2-core
			     * reference machine, process start included, threads
			     * sharing the 2 cores) */
};

static const struct alloc_test tests[] = {
	{ "pairs", "pairs16", "pairs 16 B", "ns/pair", 0, J_PAIRS, false, { 0.15, 0.04 } },
	{ "pairs", "pairs64", "pairs 64 B", "ns/pair", 0, J_PAIRS, false, { 0.15, 0.04 } },
	{ "pairs", "pairs256", "pairs 256 B", "ns/pair", 0, J_PAIRS, false, { 0.15, 0.04 } },
	{ "pairs", "pairs1024", "pairs 1024 B", "ns/pair", 0, J_PAIRS, false, { 0.15, 0.04 } },
	{ "pairs", "pairs4096", "pairs 4096 B", "ns/pair", 0, J_PAIRS, false, { 0.17, 0.045 } },
	{ "xthread", "xthread", "xthread", "cpu-ns/obj", 0, J_BEST, false, { 0.23, 0.06 } },
	{ "xthread", "xthread", "xthread, waiting included", "cpu-ns/obj", 1, J_NONE, false,
	  { 0, 0 } },
	{ "xmalloc", "xmalloc", "xmalloc (4-thread ring)", "cpu-ns/obj", 0, J_BEST, false,
	  { 0.63, 0.17 } },
	{ "larson", "larson", "larson (4 threads)", "cpu-ns/op", 0, J_BEST, false, { 0.14, 0.05 } },
	{ "churn", "churn", "churn (4 threads)", "cpu-ns/op", 0, J_BEST, false, { 0.075, 0.025 } },
	{ "churn", "churn", "churn peak RSS", "MiB", 1, J_NONE, false, { 0, 0 } },
	{ "signal", "signal", "in a signal handler", "ns/pair", 0, J_NONE, true, { 0.9, 0.24 } },
	{ "signal", "signal", "timer run: handlers", "count", 2, J_NONE, true, { 0, 0 } },
	{ "signal", "signal", "timer run: nested allocs", "count", 1, J_NONE, true, { 0, 0 } },
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))
static const char *const groups[] = { "pairs", "xthread", "xmalloc", "larson", "churn",
				       "signal" };
#define NGROUPS (sizeof(groups) / sizeof(groups[0]))

/* ---- configuration ---------------------------------------------------------- */

static struct {
	const struct bench_opts *o;
	unsigned repeats;
	bool set_repeats;
	bool want[NGROUPS];
	char **cmdline;     /* our argv, for re-executing */
	bool have[ALLOC_NPEERS];
	char libpath[ALLOC_NPEERS][512];
} cfg;

/* [test][peer][repeat]: the figure, NaN when not measured. */
static double (*res)[ALLOC_NPEERS][MAX_REPEATS];

static void help(FILE *f)
{
	fprintf(f,
		"rqspin_malloc_nolock vs glibc malloc, jemalloc and mimalloc; each measurement\n"
		"runs in its own process (LD_PRELOAD for jemalloc/mimalloc; override the\n"
		"library paths with RQSPIN_BENCH_JEMALLOC / RQSPIN_BENCH_MIMALLOC); a peer whose\n"
		"library is missing is left out. The peers are interleaved in every repeat;\n"
		"figures are medians over the repeats, ratios medians of per-repeat ratios.\n\n"
		"Tests:\n"
		"  pairs    1 thread, malloc+free of 16..4096 B: ns of thread CPU time per pair\n"
		"           targets: <= 1.0x glibc and <= 1.5x the faster of jemalloc/mimalloc\n"
		"  xthread  producer/consumer, batches of 256 objects (all frees remote): CPU\n"
		"           ns per object inside the malloc and free loops (the waiting for\n"
		"           the other thread is not counted; with it, as process CPU time:\n"
		"           info); target <= 1.5x the fastest peer\n"
		"  xmalloc  4 threads in a ring, each allocating batches (8..512 B) for the\n"
		"           next and freeing the previous one's: CPU ns per object in the\n"
		"           loops; target <= 1.5x the fastest peer\n"
		"  larson   4 threads replace objects (8..1024 B) in random slots of one\n"
		"           shared array, so which thread frees is random: process CPU ns\n"
		"           per op, nobody waits; target <= 1.5x the fastest peer\n"
		"  churn    4 threads replace random objects (16..1024 B), arrays rotating\n"
		"           between rounds: ns of process CPU time per op (target <= 1.5x the\n"
		"           fastest peer) and peak RSS (<= 1.5x jemalloc's)\n"
		"  signal   rqspin only: alloc+free pairs inside a signal handler, and a timer\n"
		"           run counting handlers that interrupted the allocator (info)\n\n"
		"Options:\n"
		"  --tests LIST          any of pairs,xthread,xmalloc,larson,churn,signal\n"
		"                        (default: all)\n"
		"  --repeats N           interleaved repeats, 1..%d (default %d; --quick %d)\n"
		"  --quick               smaller measurements and %d repeats\n"
		"  --csv FILE            one row per test and peer\n"
		"  --plot FILE.png       every test and peer: median, min..max\n",
		MAX_REPEATS, DEF_REPEATS, QUICK_REPEATS, QUICK_REPEATS);
}

static bool parse_tests(const char *value, void *dest)
{
	char **names;
	size_t n;

	(void)dest;
	if (!cli_split("--tests", value, &names, &n))
		return false;
	memset(cfg.want, 0, sizeof(cfg.want));
	for (size_t i = 0; i < n; i++) {
		size_t g = 0;

		while (g < NGROUPS && strcmp(names[i], groups[g]) != 0)
			g++;
		if (g == NGROUPS) {
			cli_error("--tests: unknown test '%s' (pairs, xthread, xmalloc, larson, churn, "
				  "signal)",
				  names[i]);
			free(names);
			return false;
		}
		cfg.want[g] = true;
	}
	free(names);
	return true;
}

static size_t options(struct cli_opt *opts, size_t max)
{
	const struct cli_opt o[] = {
		{ "tests", CLI_CUSTOM, NULL, 0, 0, NULL, parse_tests, NULL },
		{ "repeats", CLI_UINT, &cfg.repeats, 1, MAX_REPEATS, NULL, NULL, &cfg.set_repeats },
	};
	size_t n = sizeof(o) / sizeof(o[0]);

	free(cfg.cmdline);
	memset(&cfg, 0, sizeof(cfg));
	cfg.repeats = DEF_REPEATS;
	for (size_t g = 0; g < NGROUPS; g++)
		cfg.want[g] = true;
	return cli_opts_copy(opts, max, o, n);
}

static bool test_wanted(const struct alloc_test *t)
{
	for (size_t g = 0; g < NGROUPS; g++)
		if (strcmp(t->group, groups[g]) == 0)
			return cfg.want[g];
	return false;
}

static bool read_cmdline(void)
{
	static char buf[65536];
	int fd = open("/proc/self/cmdline", O_RDONLY);
	ssize_t n, len = 0;
	int argc = 0;

	if (fd < 0)
		return false;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	for (ssize_t i = 0; i < len; i++)
		if (buf[i] == '\0')
			argc++;
	cfg.cmdline = calloc((size_t)argc + 1, sizeof(char *));
	if (!cfg.cmdline)
		return false;
	argc = 0;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1)
		cfg.cmdline[argc++] = buf + i;
	return true;
}

static bool find_lib(enum alloc_peer p)
{
	static const char *const dirs[] = {
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
		"/usr/lib", "/usr/local/lib",
	};
	const char *env = getenv(p == P_JEMALLOC ? "RQSPIN_BENCH_JEMALLOC" : "RQSPIN_BENCH_MIMALLOC");
	char *path = cfg.libpath[p];

	if (!peer_lib[p])
		return true;
	if (env && access(env, R_OK) == 0) {
		snprintf(path, sizeof(cfg.libpath[p]), "%s", env);
		return true;
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(cfg.libpath[p]), "%s/%s", dirs[i], peer_lib[p]);
		if (access(path, R_OK) == 0)
			return true;
	}
	return false;
}

static bool prepare(const struct bench_opts *bo)
{
	cfg.o = bo;
	if (bo->quick && !cfg.set_repeats)
		cfg.repeats = QUICK_REPEATS;
	return true;
}

/* Whether peer p can run here (run says why not). */
static bool peer_usable(enum alloc_peer p)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	/* The sanitizer's runtime owns malloc: another one preloaded under it
	 * hangs or crashes the child. */
	if (peer_lib[p])
		return false;
#endif
	return find_lib(p);
}

/* The model of the run time (progress.h): test t's child for every peer
 * that runs it (have: the usable peers). */
static double test_cost_s(const struct alloc_test *t, const bool have[ALLOC_NPEERS])
{
	unsigned n = 0;

	for (int p = 0; p < ALLOC_NPEERS; p++)
		n += have[p] && (!t->rqspin_only || p == P_RQSPIN);
	/* Every child does a fixed amount of work: all of it stretches on a
	 * busy machine (the waits between threads sleep on futexes, so they
	 * stretch no more than the work). */
	return t->cost_s[cfg.o->quick] * n * bench_load_factor(cfg.o);
}

static double estimate_s(const struct bench_opts *bo)
{
	bool have[ALLOC_NPEERS];
	double s = 0;

	(void)bo;
	for (int p = 0; p < ALLOC_NPEERS; p++)
		have[p] = peer_usable((enum alloc_peer)p);
	for (size_t t = 0; t < NTESTS; t++)
		if (test_wanted(&tests[t]))
			s += test_cost_s(&tests[t], have);
	return s * cfg.repeats;
}

static void cleanup(void)
{
	free(cfg.cmdline);
	cfg.cmdline = NULL;
	free(res);
	res = NULL;
}

/* ---- measuring -------------------------------------------------------------- */

/* One measurement in a child; up to 3 figures into out. Returns how many it
 * parsed (0: the child failed). */
static int run_child(enum alloc_peer p, const char *test, unsigned rep, double out[3])
{
	int fds[2];
	pid_t pid;
	char buf[256], spec[96];
	ssize_t n, len = 0;
	int st, got;

	if (pipe(fds) != 0)
		return 0;
	snprintf(spec, sizeof(spec), "%s %s %d", alloc_peer_name[p], test, cfg.o->quick ? 1 : 0);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return 0;
	}
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDOUT_FILENO);
		close(fds[1]);
		/* One thread: every peer of this repeat on the repeat's CPU
		 * (load_nth_cpu says why). */
		if (strncmp(test, "pairs", 5) == 0)
			(void)load_pin_self(load_nth_cpu(rep));
		setenv(ALLOC_CHILD_ENV, spec, 1);
		if (peer_lib[p])
			setenv("LD_PRELOAD", cfg.libpath[p], 1);
		else
			unsetenv("LD_PRELOAD");
		execv("/proc/self/exe", cfg.cmdline);
		_exit(127);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(fds[0], buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fds[0]);
	buf[len > 0 ? len : 0] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 0;
	got = sscanf(buf, "RESULT %lf %lf %lf", &out[0], &out[1], &out[2]);
	return got > 0 ? got : 0;
}

/* Every wanted test of repeat rep, the peers rotated. A child test that
 * gives several rows runs once. */
static void run_repeat(unsigned rep)
{
	for (size_t t = 0; t < NTESTS; t++) {
		const struct alloc_test *x = &tests[t];

		if (!test_wanted(x) || (t > 0 && strcmp(tests[t - 1].child, x->child) == 0))
			continue;
		cli_progress(cfg.o->quiet, "[alloc %u/%u] %s:", rep + 1, cfg.repeats, x->child);
		for (unsigned k = 0; k < ALLOC_NPEERS; k++) {
			enum alloc_peer p = (enum alloc_peer)((k + rep) % ALLOC_NPEERS);
			double out[3];
			int got;

			if (!cfg.have[p] || (x->rqspin_only && p != P_RQSPIN))
				continue;
			got = run_child(p, x->child, rep, out);
			for (size_t u = t; u < NTESTS && strcmp(tests[u].child, x->child) == 0; u++)
				res[u][p][rep] = (int)tests[u].value < got ? out[tests[u].value] : NAN;
			if (got)
				cli_progress(cfg.o->quiet, " %s %.2f", alloc_peer_name[p], out[0]);
			else
				cli_progress(cfg.o->quiet, " %s failed", alloc_peer_name[p]);
		}
		progress_step(cfg.o->quiet, test_cost_s(x, cfg.have));
	}
}

/* ---- results ---------------------------------------------------------------- */

static double med(size_t t, enum alloc_peer p)
{
	double v[MAX_REPEATS];
	size_t n = 0;

	for (unsigned r = 0; r < cfg.repeats; r++)
		if (isfinite(res[t][p][r]))
			v[n++] = res[t][p][r];
	return stats_median(v, n);
}

/* The peer (not rqspin) with the smallest median among those in mask. */
static int best_peer(size_t t, unsigned mask)
{
	int best = -1;

	for (int p = 0; p < P_RQSPIN; p++) {
		double m = med(t, (enum alloc_peer)p);

		if ((mask >> p) & 1 && isfinite(m) && (best < 0 || m < med(t, (enum alloc_peer)best)))
			best = p;
	}
	return best;
}

static void add_ratio_verdict(struct verdict_list *v, size_t t, int peer, double limit,
			      const char *what)
{
	const struct alloc_test *x = &tests[t];
	struct verdict *d;
	double ratio;

	if (peer < 0)
		return;
	ratio = stats_paired_ratio(res[t][P_RQSPIN], res[t][peer], cfg.repeats, NULL, NULL, NULL);
	if (!(d = vl_add(v, "alloc", ratio, limit, false)))
		return;
	snprintf(d->target, sizeof(d->target), "%s: rqspin <= %.1fx %s (%s)", x->label, limit,
		 what, alloc_peer_name[peer]);
	snprintf(d->measured, sizeof(d->measured), "%.2f vs %.2f %s", med(t, P_RQSPIN),
		 med(t, (enum alloc_peer)peer), x->unit);
}

static void verdicts(struct verdict_list *v)
{
	for (size_t t = 0; t < NTESTS; t++) {
		const struct alloc_test *x = &tests[t];

		if (!test_wanted(x))
			continue;
		if (x->judge == J_PAIRS) {
			add_ratio_verdict(v, t, cfg.have[P_GLIBC] ? P_GLIBC : -1, 1.0, "glibc");
			add_ratio_verdict(v, t, best_peer(t, 1u << P_JEMALLOC | 1u << P_MIMALLOC), 1.5,
					  "the faster of jemalloc/mimalloc");
		} else if (x->judge == J_BEST) {
			add_ratio_verdict(v, t, best_peer(t, ~0u), 1.5, "the fastest peer");
		}
		if (strcmp(x->label, "churn peak RSS") == 0 && cfg.have[P_JEMALLOC]) {
			double r = med(t, P_RQSPIN) / med(t, P_JEMALLOC);
			struct verdict *d = vl_add(v, "alloc", r, 1.5, false);

			if (d) {
				snprintf(d->target, sizeof(d->target),
					 "churn: peak RSS <= 1.5x jemalloc's");
				snprintf(d->measured, sizeof(d->measured), "%.1f vs %.1f MiB",
					 med(t, P_RQSPIN) / 1024, med(t, P_JEMALLOC) / 1024);
			}
		}
		if (strcmp(x->child, "signal") == 0 && x->value == 0) {
			struct verdict *d = vl_add(v, "alloc", isfinite(med(t, P_RQSPIN)) ? 0 : 1, 0,
						   false);

			if (d) {
				d->is_count = true;
				snprintf(d->target, sizeof(d->target),
					 "allocation in signal handlers: failed runs == 0");
				snprintf(d->measured, sizeof(d->measured), "%.0f ns/pair",
					 med(t, P_RQSPIN));
			}
		}
	}
}

static void print_table(FILE *f)
{
	fprintf(f, "rqspin-bench %s: rqspin_malloc_nolock vs peers (%u repeats, interleaved, "
		   "each measurement in its own process%s)\n",
		cfg.o->run, cfg.repeats, cfg.o->quick ? "; quick" : "");
	fprintf(f, "  %-26s %-11s %10s %10s %10s %10s\n", "test", "unit", "glibc", "jemalloc",
		"mimalloc", "rqspin");
	for (size_t t = 0; t < NTESTS; t++) {
		const struct alloc_test *x = &tests[t];
		bool mib = strcmp(x->unit, "MiB") == 0;

		if (!test_wanted(x))
			continue;
		fprintf(f, "  %-26s %-11s", x->label, x->unit);
		for (int p = 0; p < ALLOC_NPEERS; p++) {
			double m = med(t, (enum alloc_peer)p);

			if (isfinite(m))
				fprintf(f, " %10.*f", mib ? 1 : 2, mib ? m / 1024 : m);
			else
				fprintf(f, " %10s", x->rqspin_only && p != P_RQSPIN ? "n/a" : "-");
		}
		fputc('\n', f);
	}
	if (cfg.want[NGROUPS - 1])
		fprintf(f, "  (glibc, jemalloc and mimalloc are not async-signal-safe: not measured "
			   "in handlers)\n");
	fputc('\n', f);
}

static int write_json(const char *path, const struct sysinfo_rec *sys,
		      const struct load_share *load, const struct verdict_list *v, bool ok)
{
	FILE *f = output_open("--json", path);
	struct json j;

	if (!f)
		return -1;
	bench_json_begin(&j, f, "alloc", cfg.o, sys, load);
	json_begin_object(&j, "config");
	json_uint(&j, "repeats", cfg.repeats);
	json_begin_array(&j, "peers");
	for (int p = 0; p < ALLOC_NPEERS; p++)
		if (cfg.have[p])
			json_string(&j, NULL, alloc_peer_name[p]);
	json_end_array(&j);
	json_end_object(&j);
	json_begin_array(&j, "results");
	for (size_t t = 0; t < NTESTS; t++) {
		if (!test_wanted(&tests[t]))
			continue;
		for (int p = 0; p < ALLOC_NPEERS; p++) {
			if (!cfg.have[p] || (tests[t].rqspin_only && p != P_RQSPIN))
				continue;
			json_begin_object(&j, NULL);
			json_string(&j, "test", tests[t].label);
			json_string(&j, "peer", alloc_peer_name[p]);
			json_string(&j, "unit", strcmp(tests[t].unit, "MiB") == 0 ? "KiB" : tests[t].unit);
			json_double(&j, "median", med(t, (enum alloc_peer)p));
			json_begin_array(&j, "per_repeat");
			for (unsigned r = 0; r < cfg.repeats; r++)
				json_double(&j, NULL, res[t][p][r]);
			json_end_array(&j);
			json_end_object(&j);
		}
	}
	json_end_array(&j);
	bench_json_end(&j, v, ok);
	return output_close(f, "--json", path);
}

static int write_csv(const char *path)
{
	FILE *f = output_open("--csv", path);

	if (!f)
		return -1;
	fprintf(f, "test,peer,unit,median,repeats\n");
	for (size_t t = 0; t < NTESTS; t++) {
		if (!test_wanted(&tests[t]))
			continue;
		for (int p = 0; p < ALLOC_NPEERS; p++) {
			double m = med(t, (enum alloc_peer)p);

			if (!cfg.have[p] || (tests[t].rqspin_only && p != P_RQSPIN))
				continue;
			fprintf(f, "%s,%s,%s,", tests[t].label, alloc_peer_name[p],
				strcmp(tests[t].unit, "MiB") == 0 ? "KiB" : tests[t].unit);
			if (isfinite(m))
				fprintf(f, "%.6g", m);
			fprintf(f, ",%u\n", cfg.repeats);
		}
	}
	return output_close(f, "--csv", path);
}

/* One chart: every test (x) and peer (a line), median with min..max bars,
 * log scale; counts and MiB rows left out. */
static int write_plot(const char *path, const struct sysinfo_rec *sys)
{
	static const char *const colors[ALLOC_NPEERS] = { "#1f77b4", "#2ca02c", "#ff7f0e",
							  "#d62728" };
	char title[256];
	size_t rows[NTESTS], nrows = 0;
	int missing;
	FILE *gp;

	for (size_t t = 0; t < NTESTS; t++)
		if (test_wanted(&tests[t]) && strstr(tests[t].unit, "ns"))
			rows[nrows++] = t;
	gp = plot_open(path, 1500, 650, &missing);
	if (!gp)
		return missing ? 1 : -1;
	for (int p = 0; p < ALLOC_NPEERS; p++) {
		fprintf(gp, "$p%d << EOD\n", p);
		for (size_t i = 0; i < nrows; i++) {
			size_t t = rows[i];
			double m = med(t, (enum alloc_peer)p);

			if (isfinite(m))
				fprintf(gp, "%zu %.6g %.6g %.6g\n", i, m,
					stats_min(res[t][p], cfg.repeats),
					stats_max(res[t][p], cfg.repeats));
		}
		fputs("EOD\n", gp);
	}
	snprintf(title, sizeof(title), "rqspin-bench %s: %s, %u cores, %s build, %u repeats%s",
		 cfg.o->run, sys->cpu, sys->cores, sys->build_type, cfg.repeats,
		 cfg.o->background_load ? ", with background load" : "");
	fputs("set title ", gp);
	plot_quote(gp, title);
	fputs("\nset logscale y 10\nset grid\nset key outside right top\n"
	      "set ylabel 'ns (CPU time per pair / object / op; median, bars: min..max)'\n"
	      "set xtics rotate by -30\nset xtics (",
	      gp);
	for (size_t i = 0; i < nrows; i++) {
		fprintf(gp, "%s", i ? ", " : "");
		plot_quote(gp, tests[rows[i]].label);
		fprintf(gp, " %zu", i);
	}
	fprintf(gp, ")\nset xrange [-0.5:%g]\nplot ", nrows ? (double)nrows - 0.5 : 0.5);
	for (int p = 0; p < ALLOC_NPEERS; p++) {
		fprintf(gp, "%s$p%d using ($1 + %.2f):2:3:4 with yerrorbars pt 7 lc rgb '%s' lw %s "
			    "title '%s'",
			p ? ", " : "", p, 0.1 * p - 0.15, colors[p], p == P_RQSPIN ? "2" : "1",
			alloc_peer_name[p]);
	}
	fputc('\n', gp);
	return plot_close(gp, path);
}

static int run(const struct bench_opts *bo, struct verdict_list *v)
{
	struct sysinfo_rec sys;
	struct load_snap l0, l1;
	struct load_share load;
	bool failed = false;
	int rc = CLI_EXIT_OK;

	if (!read_cmdline()) {
		cli_error("alloc: cannot read /proc/self/cmdline");
		return CLI_EXIT_FAIL;
	}
	res = malloc(NTESTS * sizeof(*res));
	if (!res) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	for (size_t t = 0; t < NTESTS; t++)
		for (int p = 0; p < ALLOC_NPEERS; p++)
			for (unsigned r = 0; r < MAX_REPEATS; r++)
				res[t][p][r] = NAN;
	for (int p = 0; p < ALLOC_NPEERS; p++) {
		cfg.have[p] = peer_usable((enum alloc_peer)p);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
		if (!cfg.have[p]) {
			cli_error("alloc: %s left out in a sanitizer build", alloc_peer_name[p]);
			continue;
		}
#endif
		if (!cfg.have[p])
			cli_error("alloc: %s not found: %s left out",
				  peer_lib[p] ? peer_lib[p] : "?", alloc_peer_name[p]);
	}
	sysinfo_collect(&sys);
	load_snapshot(&l0);
	for (unsigned rep = 0; rep < cfg.repeats; rep++)
		run_repeat(rep);
	load_snapshot(&l1);
	load = load_between(&l0, &l1);
	print_table(stdout);
	verdicts(v);
	vl_print(stdout, "Verdicts (allocator targets; ratios are medians of per-repeat ratios):", v,
		 &load);
	/* A child that failed on rqspin is a broken run, not a slow one. */
	for (size_t t = 0; t < NTESTS; t++)
		if (test_wanted(&tests[t]) && !isfinite(med(t, P_RQSPIN)))
			failed = true;
	if (failed) {
		cli_error("FAILED: alloc: a measurement of rqspin failed (see above)");
		rc = CLI_EXIT_FAIL;
	}
	if (bo->json_path) {
		if (write_json(bo->json_path, &sys, &load, v, !failed) == 0)
			printf("JSON written to %s\n", bo->json_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (bo->csv_path) {
		if (write_csv(bo->csv_path) == 0)
			printf("CSV written to %s\n", bo->csv_path);
		else
			rc = CLI_EXIT_FAIL;
	}
	if (bo->plot_path) {
		int prc = write_plot(bo->plot_path, &sys);

		if (prc == 0)
			printf("Plot written to %s\n", bo->plot_path);
		else if (prc < 0 || strcmp(bo->run, "alloc") == 0)
			rc = CLI_EXIT_FAIL; /* asked for explicitly, or gnuplot failed */
	}
	fflush(stdout);
	return rc;
}

static int child(void)
{
	const char *spec = getenv(ALLOC_CHILD_ENV);

	return spec ? alloc_child_main(spec) : -1;
}

const struct bench_suite bench_suite_alloc = {
	.name = "alloc",
	.summary = "rqspin_malloc_nolock vs glibc, jemalloc, mimalloc",
	.help = help,
	.options = options,
	.prepare = prepare,
	.estimate_s = estimate_s,
	.run = run,
	.cleanup = cleanup,
	.own_plot = true,
	.all_runs = {
		{ .tag = "alloc", .args = { "--repeats", "2", NULL },
		  .quick_args = { "--repeats", "1", NULL }, .quick = true },
	},
	.child = child,
};
