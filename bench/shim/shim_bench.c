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
 * loop (lock, counter++, unlock; no think time) at each thread count, on
 * the machine as it is and with one CPU-bound hog process per CPU started
 * and stopped by the harness. The shim's fairness is the worst share of
 * any thread over any 400 ms window, as a fraction of its fair share.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
#include "shim/shim_bench.h"

extern char **environ;

#define WINDOW_MS 400u
#define MAX_REPEATS 15u

enum impl { IMPL_GLIBC, IMPL_SHIM, NIMPL };

struct shim_cfg {
	unsigned *threads;
	size_t nthreads;
	unsigned repeats;
	unsigned ms;
	unsigned pair_iters;
	unsigned hogs; /* the busy run's hog count (default: one per CPU) */
	const char *worker;
	const char *shim;
	const char *json_path;
	bool quick, quiet;
};

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

static struct run run_loop(const struct shim_cfg *c, enum impl impl, unsigned threads)
{
	char t[16], ms[16], win[16], line[256];
	char *args[] = { (char *)c->worker, "loop", t, ms, win, NULL };
	unsigned long long ops;
	double secs;
	int ok;
	struct run r = { NAN, NAN, false };

	snprintf(t, sizeof(t), "%u", threads);
	snprintf(ms, sizeof(ms), "%u", c->ms);
	snprintf(win, sizeof(win), "%u", WINDOW_MS);
	if (run_worker(c, impl, args, line, sizeof(line)) &&
	    sscanf(line, "loop ops=%llu secs=%lf minshare=%lf ok=%d", &ops, &secs, &r.minshare,
		   &ok) == 4 &&
	    ok == 1 && secs > 0) {
		r.value = (double)ops / secs / 1e6;
		r.ok = true;
	}
	return r;
}

/* ---- CPU hogs ------------------------------------------------------------- */

static void hogs_start(pid_t *pids, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			volatile unsigned long spin = 0;

			for (;;)
				spin++;
		}
	}
}

static void hogs_stop(pid_t *pids, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	}
}

/* ---- statistics and verdicts ---------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const struct run *r, unsigned n)
{
	double v[MAX_REPEATS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (r[i].ok)
			v[k++] = r[i].value;
	if (!k)
		return NAN;
	qsort(v, k, sizeof(v[0]), cmp_double);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static double worst_share(const struct run *r, unsigned n)
{
	double w = INFINITY;

	for (unsigned i = 0; i < n; i++)
		w = r[i].ok && r[i].minshare < w ? r[i].minshare : w;
	return isinf(w) ? NAN : w;
}

struct shim_verdict {
	char target[96];
	char measured[96];
	double value, limit;
	bool ge, pass;
};

struct shim_results {
	struct shim_verdict v[64];
	size_t nv;
};

static void verdict(struct shim_results *res, double value, double limit, bool ge,
		    const char *measured, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void verdict(struct shim_results *res, double value, double limit, bool ge,
		    const char *measured, const char *fmt, ...)
{
	struct shim_verdict *v;
	va_list ap;

	if (res->nv == sizeof(res->v) / sizeof(res->v[0]))
		return;
	v = &res->v[res->nv++];
	va_start(ap, fmt);
	vsnprintf(v->target, sizeof(v->target), fmt, ap);
	va_end(ap);
	snprintf(v->measured, sizeof(v->measured), "%s", measured);
	v->value = value;
	v->limit = limit;
	v->ge = ge;
	v->pass = !isnan(value) && (ge ? value >= limit : value <= limit);
}

/* ---- the suite ------------------------------------------------------------ */

static int run_suite(const struct shim_cfg *c, struct shim_results *res, struct json *j)
{
	struct run pair[NIMPL][MAX_REPEATS];
	unsigned ncpu = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned loads[2] = { 0, c->hogs };
	pid_t hogs[256];
	char m[96];
	double g, s, share;
	bool broken = false;

	if (j) {
		json_uint(j, "cpus", ncpu);
		json_uint(j, "repeats", c->repeats);
		json_uint(j, "loop_ms", c->ms);
		json_uint(j, "window_ms", WINDOW_MS);
		json_begin_array(j, "results");
	}
	cli_progress(c->quiet, "shim: uncontended pair, %u x %u iterations\n", c->repeats,
		     c->pair_iters);
	for (unsigned r = 0; r < c->repeats; r++)
		for (unsigned k = 0; k < NIMPL; k++) {
			enum impl i = (enum impl)((k + r) % NIMPL);

			pair[i][r] = run_pair(c, i);
		}
	g = median(pair[IMPL_GLIBC], c->repeats);
	s = median(pair[IMPL_SHIM], c->repeats);
	printf("uncontended pair: glibc %.2f ns, shim %.2f ns, ratio %.3f\n", g, s, s / g);
	snprintf(m, sizeof(m), "%.2f vs %.2f ns", s, g);
	verdict(res, s / g, 1.05, false, m, "uncontended pair: shim <= 1.05x glibc's time");
	if (j) {
		json_begin_object(j, NULL);
		json_string(j, "scenario", "pair");
		json_double(j, "glibc_ns", g);
		json_double(j, "shim_ns", s);
		json_end_object(j);
	}

	for (unsigned l = 0; l < 2; l++) {
		if (l == 1 && loads[1] == 0)
			break;
		printf("\ntight loop (no think time), %u hog%s:\n%8s %12s %12s %8s %10s\n", loads[l],
		       loads[l] == 1 ? "" : "s", "threads", "glibc M/s", "shim M/s", "ratio",
		       "shim share");
		for (size_t t = 0; t < c->nthreads; t++) {
			struct run loop[NIMPL][MAX_REPEATS];
			unsigned th = c->threads[t];
			double gs;

			cli_progress(c->quiet, "shim: %u threads, %u hogs\n", th, loads[l]);
			hogs_start(hogs, loads[l]);
			for (unsigned r = 0; r < c->repeats; r++)
				for (unsigned k = 0; k < NIMPL; k++) {
					enum impl i = (enum impl)((k + r) % NIMPL);

					loop[i][r] = run_loop(c, i, th);
					broken |= !loop[i][r].ok;
				}
			hogs_stop(hogs, loads[l]);
			g = median(loop[IMPL_GLIBC], c->repeats);
			s = median(loop[IMPL_SHIM], c->repeats);
			share = worst_share(loop[IMPL_SHIM], c->repeats);
			gs = worst_share(loop[IMPL_GLIBC], c->repeats);
			printf("%8u %12.1f %12.1f %8.2f %10.2f\n", th, g, s, s / g, share);
			snprintf(m, sizeof(m), "%.1f vs %.1f M/s", s, g);
			verdict(res, s / g, th <= 2 ? 0.9 : 1.0, true, m,
				"%u threads, %u hogs: shim >= %.1fx glibc", th, loads[l],
				th <= 2 ? 0.9 : 1.0);
			if (c->ms >= WINDOW_MS) {
				snprintf(m, sizeof(m), "worst thread %.0f%% (glibc %.0f%%)",
					 share * 100, gs * 100);
				verdict(res, share, 0.10, true, m,
					"%u threads, %u hogs: every thread >= 10%% of fair share",
					th, loads[l]);
			}
			if (j) {
				json_begin_object(j, NULL);
				json_string(j, "scenario", "loop");
				json_uint(j, "threads", th);
				json_uint(j, "hogs", loads[l]);
				json_double(j, "glibc_mops", g);
				json_double(j, "shim_mops", s);
				json_double(j, "glibc_min_share", gs);
				json_double(j, "shim_min_share", share);
				json_end_object(j);
			}
		}
	}
	if (j)
		json_end_array(j);
	return broken ? -1 : 0;
}

static bool usable(const char *what, const char *path, int mode)
{
	if (access(path, mode) == 0)
		return true;
	cli_error("shim: %s %s: %s", what, path, strerror(errno));
	return false;
}

int shim_bench_main(int argc, char **argv)
{
	static unsigned default_threads[] = { 2, 4, 8, 16, 32 };
	struct shim_cfg c = { .repeats = 3, .ms = 1200, .pair_iters = 2000000,
			      .worker = RQSPIN_SHIM_WORKER, .shim = RQSPIN_SHIM_LIB };
	unsigned *threads = NULL;
	size_t nthreads = 0, pass = 0;
	bool help = false, hogs_seen = false;
	struct cli_opt opts[] = {
		{ .name = "quick", .kind = CLI_FLAG, .dest = &c.quick },
		{ .name = "quiet", .kind = CLI_FLAG, .dest = &c.quiet },
		{ .name = "threads", .kind = CLI_UINT_LIST, .dest = &threads, .min = 1, .max = 256,
		  .count = &nthreads },
		{ .name = "repeats", .kind = CLI_UINT, .dest = &c.repeats, .min = 1,
		  .max = MAX_REPEATS },
		{ .name = "ms", .kind = CLI_UINT, .dest = &c.ms, .min = 50, .max = 600000 },
		{ .name = "hogs", .kind = CLI_UINT, .dest = &c.hogs, .min = 0, .max = 256,
		  .seen = &hogs_seen },
		{ .name = "worker", .kind = CLI_STRING, .dest = &c.worker },
		{ .name = "shim", .kind = CLI_STRING, .dest = &c.shim },
		{ .name = "json", .kind = CLI_STRING, .dest = &c.json_path },
	};
	struct shim_results res = { 0 };
	struct json j;
	FILE *jf = NULL;
	int rc;

	rc = cli_parse_options("shim", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), &help);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (help) {
		printf("usage: %s shim [options]\n\n"
		       "pthread_spin_* through librqspin-pthread.so (LD_PRELOAD) against glibc's,\n"
		       "in one run, interleaved: the uncontended pair, and a tight loop (no think\n"
		       "time) idle and with one CPU hog per CPU; verdicts for the targets.\n\n"
		       "  --threads LIST  tight-loop thread counts (default 2,4,8,16,32)\n"
		       "  --repeats N     runs of each implementation per cell (default 3)\n"
		       "  --ms N          length of one tight-loop run (default 1200; fairness\n"
		       "                  is judged over whole 400 ms windows)\n"
		       "  --hogs N        hogs of the busy runs (default: one per CPU; 0: none)\n"
		       "  --quick         2,4 threads, 1 repeat, 400 ms (~10 s)\n"
		       "  --json FILE     results and verdicts as JSON\n"
		       "  --worker PATH, --shim PATH   the programs used (default: the build's)\n"
		       "  --quiet         no progress on stderr\n",
		       cli_prog);
		return CLI_EXIT_OK;
	}
	if (!hogs_seen)
		c.hogs = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (c.quick) {
		static unsigned quick_threads[] = { 2, 4 };

		if (!nthreads) {
			c.threads = quick_threads;
			c.nthreads = 2;
		}
		c.repeats = 1;
		c.ms = WINDOW_MS;
		c.pair_iters = 1000000;
	}
	if (nthreads) {
		c.threads = threads;
		c.nthreads = nthreads;
	} else if (!c.threads) {
		c.threads = default_threads;
		c.nthreads = sizeof(default_threads) / sizeof(default_threads[0]);
	}
	if (!usable("worker", c.worker, X_OK) || !usable("shim library", c.shim, R_OK))
		return CLI_EXIT_USAGE;
	if (c.json_path && !(jf = fopen(c.json_path, "w"))) {
		cli_error("shim: cannot write %s: %s", c.json_path, strerror(errno));
		return CLI_EXIT_USAGE;
	}
	if (jf) {
		json_init(&j, jf);
		json_begin_object(&j, NULL);
		json_string(&j, "suite", "shim");
	}
	rc = run_suite(&c, &res, jf ? &j : NULL);
	printf("\nverdicts:\n");
	for (size_t i = 0; i < res.nv; i++) {
		printf("  %s  %-56s %s\n", res.v[i].pass ? "PASS" : "FAIL", res.v[i].target,
		       res.v[i].measured);
		pass += res.v[i].pass;
	}
	printf("%zu passed, %zu failed\n", pass, res.nv - pass);
	if (jf) {
		json_begin_array(&j, "verdicts");
		for (size_t i = 0; i < res.nv; i++) {
			json_begin_object(&j, NULL);
			json_string(&j, "target", res.v[i].target);
			json_string(&j, "measured", res.v[i].measured);
			json_double(&j, "value", res.v[i].value);
			json_double(&j, "limit", res.v[i].limit);
			json_bool(&j, "pass", res.v[i].pass);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
		fclose(jf);
	}
	free(threads);
	if (rc < 0) {
		cli_error("shim: a worker run failed (a broken count or a crash)");
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}
