/* SPDX-License-Identifier: MIT */
/*
 * rqspin-bench shim: the drop-in pthread_spin_* shim against glibc's
 * spinlock, as unmodified programs see them. Each measurement runs
 * rqspin-shim-worker (an ordinary pthread program, bench/shim/worker.c)
 * twice, once as it is and once with LD_PRELOAD=librqspin-pthread.so, the
 * two alternating in order from repeat to repeat, so that both call
 * through the PLT and share the machine's state of the moment.
 *
 * Scenarios: the uncontended lock/unlock pair (one thread), and the tight
 * loop (lock, counter++, unlock; no think time) at each thread count, and
 * one loop with think time (THINK_*: the lock is free about half the time,
 * so a waiter's delay in noticing a release costs throughput; reported,
 * no target: it guards the tight loop's figures against waiting tricks
 * that only pay off when the lock is never free). `all`
 * runs it on the machine as it is and with one CPU-bound hog per CPU (the
 * harness's --background-load). The shim's fairness is the worst share of
 * any thread over any 400 ms window, as a fraction of its fair share.
 * A ratio is the median over repeats of the two runs' ratio within one
 * repeat (paired_ratio), so that the machine's drift between repeats
 * cancels out. The two pair runs of a repeat are pinned to one CPU, the
 * repeat's (load.h, load_nth_cpu).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "load.h"
#include "output.h"
#include "progress.h"
#include "stats.h"
#include "suite.h"
#include "sysinfo.h"
#include "verdict.h"

extern char **environ;

#define WINDOW_MS 400u
/* The loop with think time: two threads, 20 writes of the shared counter
 * under the lock, 0-99 empty spins outside it. */
#define THINK_THREADS 2u
#define THINK_CS 20u
#define THINK_SPINS 50u
#define MAX_REPEATS 15u

enum impl { IMPL_GLIBC, IMPL_SHIM, NIMPL };

struct shim_cfg {
	const struct bench_opts *o;
	unsigned *threads;
	size_t nthreads;
	unsigned repeats;
	unsigned ms;
	unsigned pair_iters;
	const char *worker;
	const char *shim;
	bool set_repeats, set_ms;
};

static struct shim_cfg cfg;

/* One worker run's result. */
struct run {
	double value;    /* loop: M lock/unlock per second; pair: ns per pair */
	double minshare; /* loop only */
	bool ok;
};

/* ---- worker processes ----------------------------------------------------- */

/* environ without LD_PRELOAD, plus LD_PRELOAD=shim when shim != NULL. */
static char **child_env(const char *shim)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
			env[k++] = environ[i];
	if (shim) {
		size_t len = strlen(shim) + 12;

		env[k] = malloc(len);
		if (!env[k]) {
			free(env);
			return NULL;
		}
		snprintf(env[k++], len, "LD_PRELOAD=%s", shim);
	}
	env[k] = NULL;
	return env;
}

static void free_env(char **env, bool shim)
{
	if (shim) {
		size_t k = 0;

		while (env[k + 1])
			k++;
		free(env[k]);
	}
	free(env);
}

/* Run the worker with args; its one output line into line. */
static bool run_worker(const struct shim_cfg *c, enum impl impl, char *const args[], char *line,
		       size_t len)
{
	char **env = child_env(impl == IMPL_SHIM ? c->shim : NULL);
	posix_spawn_file_actions_t fa;
	int fds[2], status;
	ssize_t got = 0, r;
	pid_t pid;
	bool ok = false;

	if (!env || pipe2(fds, O_CLOEXEC) != 0) {
		free(env);
		return false;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	if (posix_spawn(&pid, c->worker, &fa, NULL, args, env) == 0) {
		close(fds[1]);
		fds[1] = -1;
		while ((size_t)got < len - 1 &&
		       ((r = read(fds[0], line + got, len - 1 - (size_t)got)) > 0 ||
			(r < 0 && errno == EINTR)))
			got += r > 0 ? r : 0;
		line[got] = 0;
		ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		     WEXITSTATUS(status) == 0;
	} else {
		cli_error("shim: cannot run %s", c->worker);
	}
	posix_spawn_file_actions_destroy(&fa);
	if (fds[1] >= 0)
		close(fds[1]);
	close(fds[0]);
	free_env(env, impl == IMPL_SHIM);
	return ok;
}

static struct run run_pair(const struct shim_cfg *c, enum impl impl)
{
	char iters[24], line[256];
	char *args[] = { (char *)c->worker, "pair", iters, NULL };
	struct run r = { NAN, NAN, false };

	snprintf(iters, sizeof(iters), "%u", c->pair_iters);
	if (run_worker(c, impl, args, line, sizeof(line)) &&
	    sscanf(line, "pair ns=%lf", &r.value) == 1)
		r.ok = true;
	return r;
}

/* think: with THINK_CS and THINK_SPINS (worker.c). */
static struct run run_loop(const struct shim_cfg *c, enum impl impl, unsigned threads, bool think)
{
	char t[16], ms[16], win[16], cs[16], spins[16], line[256];
	char *args[] = { (char *)c->worker, "loop", t, ms, win, think ? cs : NULL, spins, NULL };
	unsigned long long ops;
	double secs;
	int ok;
	struct run r = { NAN, NAN, false };

	snprintf(t, sizeof(t), "%u", threads);
	snprintf(ms, sizeof(ms), "%u", c->ms);
	snprintf(win, sizeof(win), "%u", WINDOW_MS);
	snprintf(cs, sizeof(cs), "%u", THINK_CS);
	snprintf(spins, sizeof(spins), "%u", THINK_SPINS);
	if (run_worker(c, impl, args, line, sizeof(line)) &&
	    sscanf(line, "loop ops=%llu secs=%lf minshare=%lf ok=%d", &ops, &secs, &r.minshare,
		   &ok) == 4 &&
	    ok == 1 && secs > 0) {
		r.value = (double)ops / secs / 1e6;
		r.ok = true;
	}
	return r;
}

/* ---- statistics and verdicts ---------------------------------------------- */

/* The median of the runs that completed (stats_median), NaN if none. */
static double median(const struct run *r, unsigned n)
{
	double v[MAX_REPEATS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (r[i].ok)
			v[k++] = r[i].value;
	return stats_median(v, k);
}

/* The median over repeats of shim/glibc within one repeat
 * (stats_paired_ratio). The two runs of a repeat are back to back and
 * share the machine's state of the moment; from one repeat to the next
 * that state drifts (glibc alone went from 100 to 190 M/s between runs
 * with CPU hogs), and a ratio of the two medians took that drift in: the
 * same build's verdict at 2 threads with hogs ranged from 0.61 to 1.36. */
static double paired_ratio(const struct run *shim, const struct run *glibc, unsigned n)
{
	double a[MAX_REPEATS], b[MAX_REPEATS];

	for (unsigned i = 0; i < n; i++) {
		a[i] = shim[i].ok ? shim[i].value : NAN;
		b[i] = glibc[i].ok ? glibc[i].value : NAN;
	}
	return stats_paired_ratio(a, b, n, NULL, NULL, NULL);
}

static double worst_share(const struct run *r, unsigned n)
{
	double w = INFINITY;

	for (unsigned i = 0; i < n; i++)
		w = r[i].ok && r[i].minshare < w ? r[i].minshare : w;
	return isinf(w) ? NAN : w;
}

static void add(struct verdict_list *v, double value, double limit, bool ge, const char *measured,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void add(struct verdict_list *v, double value, double limit, bool ge, const char *measured,
		const char *fmt, ...)
{
	struct verdict *d = vl_add(v, "shim", value, limit, ge);
	va_list ap;

	if (!d)
		return;
	va_start(ap, fmt);
	vsnprintf(d->target, sizeof(d->target), fmt, ap);
	va_end(ap);
	snprintf(d->measured, sizeof(d->measured), "%s", measured);
}

struct loop_row {
	unsigned threads;
	double glibc, shim, ratio, glibc_share, shim_share;
};

/* The model of the run time (progress.h): a pair run is 5 blocks of
 * pair_iters at ~10 ns plus the process start (~10 ms); a loop run its
 * --ms plus ~20 ms. Every run once per implementation and repeat. */
static double pair_cost_s(const struct shim_cfg *c)
{
	return c->repeats * NIMPL * (c->pair_iters * 5 * 10e-9 + 0.01);
}

static double loop_cost_s(const struct shim_cfg *c)
{
	return c->repeats * NIMPL * (c->ms / 1000.0 + 0.02);
}

static int run(const struct bench_opts *o, struct verdict_list *v)
{
	const struct shim_cfg *c = &cfg;
	struct run pair[NIMPL][MAX_REPEATS];
	struct loop_row rows[64], think_row;
	struct sysinfo_rec sys;
	struct load_snap l0, l1;
	struct load_share load;
	unsigned hogs = o->background_load;
	double g, s, pg, ps, pr;
	char m[112];
	bool broken = false;
	size_t nrows = 0;

	sysinfo_collect(&sys);
	load_snapshot(&l0);
	cli_progress(o->quiet, "[shim] uncontended pair, %u x 2 runs", c->repeats);
	for (unsigned r = 0; r < c->repeats; r++) {
		cpu_set_t saved;
		bool pinned = sched_getaffinity(0, sizeof(saved), &saved) == 0 &&
			      load_pin_self(load_nth_cpu(r));

		for (unsigned k = 0; k < NIMPL; k++) {
			enum impl i = (enum impl)((k + r) % NIMPL);

			pair[i][r] = run_pair(c, i);
			broken |= !pair[i][r].ok;
		}
		if (pinned)
			(void)sched_setaffinity(0, sizeof(saved), &saved);
	}
	progress_step(o->quiet, pair_cost_s(c));
	pg = median(pair[IMPL_GLIBC], c->repeats);
	ps = median(pair[IMPL_SHIM], c->repeats);
	pr = paired_ratio(pair[IMPL_SHIM], pair[IMPL_GLIBC], c->repeats);
	printf("pthread_spin_* through the PLT, %u background hog%s\n\n", hogs,
	       hogs == 1 ? "" : "s");
	printf("uncontended lock/unlock pair: glibc %.2f ns, shim %.2f ns, ratio %.3f\n\n", pg, ps,
	       pr);
	snprintf(m, sizeof(m), "%.2f vs %.2f ns", ps, pg);
	add(v, pr, 1.05, false, m, "%u hogs: uncontended pair, shim <= 1.05x glibc", hogs);

	printf("tight loop (no think time), %u ms per run:\n%8s %12s %12s %8s %12s %12s\n", c->ms,
	       "threads", "glibc M/s", "shim M/s", "ratio", "glibc share", "shim share");
	for (size_t t = 0; t < c->nthreads && nrows < 64; t++) {
		struct run loop[NIMPL][MAX_REPEATS];
		struct loop_row *row = &rows[nrows++];
		unsigned th = c->threads[t];
		double lim = th <= 2 ? 0.9 : 1.0;

		cli_progress(o->quiet, "[shim] tight loop, %u threads", th);
		for (unsigned r = 0; r < c->repeats; r++)
			for (unsigned k = 0; k < NIMPL; k++) {
				enum impl i = (enum impl)((k + r) % NIMPL);

				loop[i][r] = run_loop(c, i, th, false);
				broken |= !loop[i][r].ok;
			}
		progress_step(o->quiet, loop_cost_s(c));
		g = median(loop[IMPL_GLIBC], c->repeats);
		s = median(loop[IMPL_SHIM], c->repeats);
		*row = (struct loop_row){ th,
					  g,
					  s,
					  paired_ratio(loop[IMPL_SHIM], loop[IMPL_GLIBC], c->repeats),
					  worst_share(loop[IMPL_GLIBC], c->repeats),
					  worst_share(loop[IMPL_SHIM], c->repeats) };
		printf("%8u %12.1f %12.1f %8.2f %11.0f%% %11.0f%%\n", th, g, s, row->ratio,
		       row->glibc_share * 100, row->shim_share * 100);
		snprintf(m, sizeof(m), "%.1f vs %.1f M/s", s, g);
		add(v, row->ratio, lim, true, m, "%u hogs, %u threads: shim >= %.1fx glibc", hogs,
		    th, lim);
		if (c->ms >= WINDOW_MS) {
			snprintf(m, sizeof(m), "worst thread %.0f%% (glibc %.0f%%)",
				 row->shim_share * 100, row->glibc_share * 100);
			add(v, row->shim_share, 0.10, true, m,
			    "%u hogs, %u threads: every thread >= 10%% of fair share", hogs, th);
		}
	}
	{
		struct run loop[NIMPL][MAX_REPEATS];

		cli_progress(o->quiet, "[shim] loop with think time, %u threads", THINK_THREADS);
		for (unsigned r = 0; r < c->repeats; r++)
			for (unsigned k = 0; k < NIMPL; k++) {
				enum impl i = (enum impl)((k + r) % NIMPL);

				loop[i][r] = run_loop(c, i, THINK_THREADS, true);
				broken |= !loop[i][r].ok;
			}
		progress_step(o->quiet, loop_cost_s(c));
		think_row = (struct loop_row){ THINK_THREADS,
					       median(loop[IMPL_GLIBC], c->repeats),
					       median(loop[IMPL_SHIM], c->repeats),
					       paired_ratio(loop[IMPL_SHIM], loop[IMPL_GLIBC],
							    c->repeats),
					       worst_share(loop[IMPL_GLIBC], c->repeats),
					       worst_share(loop[IMPL_SHIM], c->repeats) };
		printf("\nwith think time (%u writes under the lock, 0-%u spins outside; "
		       "reported, no target):\n%8u %12.1f %12.1f %8.2f %11.0f%% %11.0f%%\n",
		       THINK_CS, 2 * THINK_SPINS - 1, think_row.threads, think_row.glibc,
		       think_row.shim, think_row.ratio, think_row.glibc_share * 100,
		       think_row.shim_share * 100);
	}
	load_snapshot(&l1);
	load = load_between(&l0, &l1);
	printf("\n");
	vl_print(stdout, "Verdicts (pthread shim targets):", v, &load);
	if (o->json_path) {
		FILE *f = output_open("--json", o->json_path);
		struct json j;

		if (!f)
			return CLI_EXIT_FAIL;
		bench_json_begin(&j, f, "shim", o, &sys, &load);
		json_begin_object(&j, "config");
		json_uint(&j, "repeats", c->repeats);
		json_uint(&j, "loop_ms", c->ms);
		json_uint(&j, "window_ms", WINDOW_MS);
		json_uint(&j, "pair_iterations", c->pair_iters);
		json_end_object(&j);
		json_double(&j, "pair_glibc_ns", pg);
		json_double(&j, "pair_shim_ns", ps);
		json_double(&j, "pair_ratio", pr);
		json_begin_array(&j, "loop");
		for (size_t i = 0; i < nrows; i++) {
			json_begin_object(&j, NULL);
			json_uint(&j, "threads", rows[i].threads);
			json_double(&j, "glibc_mops", rows[i].glibc);
			json_double(&j, "shim_mops", rows[i].shim);
			json_double(&j, "ratio", rows[i].ratio);
			json_double(&j, "glibc_min_share", rows[i].glibc_share);
			json_double(&j, "shim_min_share", rows[i].shim_share);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_begin_object(&j, "think");
		json_uint(&j, "threads", think_row.threads);
		json_uint(&j, "cs_writes", THINK_CS);
		json_uint(&j, "think_spins_mean", THINK_SPINS);
		json_double(&j, "glibc_mops", think_row.glibc);
		json_double(&j, "shim_mops", think_row.shim);
		json_double(&j, "ratio", think_row.ratio);
		json_double(&j, "glibc_min_share", think_row.glibc_share);
		json_double(&j, "shim_min_share", think_row.shim_share);
		json_end_object(&j);
		bench_json_end(&j, v, !broken);
		if (output_close(f, "--json", o->json_path))
			return CLI_EXIT_FAIL;
	}
	if (broken) {
		cli_error("shim: a worker run failed (a broken count or a crash)");
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}

static void help(FILE *f)
{
	fprintf(f,
		"pthread_spin_* through librqspin-pthread.so (LD_PRELOAD) against glibc's, as an\n"
		"unmodified program calls them (through the PLT), in one run, interleaved:\n"
		"  pair    one thread, lock/unlock pairs (both runs of a repeat on one CPU)\n"
		"          target: shim <= 1.05x glibc's time\n"
		"  loop    N threads, lock, counter++, unlock, no think time\n"
		"          target: shim >= 0.9x glibc at 2 threads, >= 1.0x at more; every thread\n"
		"          >= 10%% of its fair share in every 400 ms window\n"
		"  think   2 threads, 20 counter writes under the lock, 0-99 spins outside it\n"
		"          (the lock is often free: reported, no target)\n"
		"Ratios are the median over repeats of shim/glibc within one repeat (the two\n"
		"runs of a repeat are back to back). `all` runs it idle and with one CPU hog\n"
		"per CPU (--background-load).\n\n"
		"  --threads LIST  tight-loop thread counts (default 2,4,8,16,32)\n"
		"  --repeats N     runs of each implementation per figure (default 5)\n"
		"  --ms N          length of one tight-loop run (default 1200; fairness is\n"
		"                  judged over whole 400 ms windows)\n"
		"  --worker PATH   the pthread program (default: the build's rqspin-shim-worker)\n"
		"  --shim PATH     the preloaded library (default: the build's librqspin-pthread.so)\n"
		"--quick: 2 and 4 threads, one repeat, 400 ms runs.\n");
}

static size_t options(struct cli_opt *opts, size_t max)
{
	static bool set_threads;
	const struct cli_opt o[] = {
		{ .name = "threads", .kind = CLI_UINT_LIST, .dest = &cfg.threads, .min = 1,
		  .max = 256, .count = &cfg.nthreads, .seen = &set_threads },
		{ .name = "repeats", .kind = CLI_UINT, .dest = &cfg.repeats, .min = 1,
		  .max = MAX_REPEATS, .seen = &cfg.set_repeats },
		{ .name = "ms", .kind = CLI_UINT, .dest = &cfg.ms, .min = 50, .max = 600000,
		  .seen = &cfg.set_ms },
		{ .name = "worker", .kind = CLI_STRING, .dest = &cfg.worker },
		{ .name = "shim", .kind = CLI_STRING, .dest = &cfg.shim },
	};
	size_t n = sizeof(o) / sizeof(o[0]);

	memset(&cfg, 0, sizeof(cfg));
	cfg.repeats = 5;
	cfg.ms = 1200;
	cfg.pair_iters = 2000000;
	cfg.worker = RQSPIN_SHIM_WORKER;
	cfg.shim = RQSPIN_SHIM_LIB;
	return cli_opts_copy(opts, max, o, n);
}

static bool usable(const char *what, const char *path, int mode)
{
	if (access(path, mode) == 0)
		return true;
	cli_error("shim: %s %s: %s", what, path, strerror(errno));
	return false;
}

static bool prepare(const struct bench_opts *o)
{
	static unsigned default_threads[] = { 2, 4, 8, 16, 32 };
	static unsigned quick_threads[] = { 2, 4 };

	cfg.o = o;
	if (!cfg.nthreads) {
		free(cfg.threads);
		cfg.threads = malloc(sizeof(default_threads));
		if (!cfg.threads)
			return false;
		cfg.nthreads = o->quick ? 2 : 5;
		memcpy(cfg.threads, o->quick ? quick_threads : default_threads,
		       cfg.nthreads * sizeof(unsigned));
	}
	if (o->quick) {
		if (!cfg.set_repeats)
			cfg.repeats = 1;
		if (!cfg.set_ms)
			cfg.ms = WINDOW_MS;
		cfg.pair_iters = 1000000;
	}
	return usable("worker", cfg.worker, X_OK) && usable("shim library", cfg.shim, R_OK);
}

static double estimate_s(const struct bench_opts *o)
{
	(void)o;
	return pair_cost_s(&cfg) + (cfg.nthreads + 1) * loop_cost_s(&cfg);
}

static void cleanup(void)
{
	free(cfg.threads);
	cfg.threads = NULL;
	cfg.nthreads = 0;
}

const struct bench_suite bench_suite_shim = {
	.name = "shim",
	.summary = "pthread_spin_* through librqspin-pthread.so vs glibc, as programs call them",
	.help = help,
	.options = options,
	.prepare = prepare,
	.estimate_s = estimate_s,
	.run = run,
	.cleanup = cleanup,
	.all_runs = {
		{ .tag = "shim", .args = { "--threads", "2,4,16,32", "--repeats", "5", NULL },
		  .quick_args = { NULL } },
		{ .tag = "shim-loaded", .args = { "--threads", "2,4,16,32", "--repeats", "5", NULL },
		  .quick_args = { NULL }, .hog_per_cpu = true },
	},
};
