/* SPDX-License-Identifier: MIT */
#include "load.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "suite.h"

/* In the forked child of a multithreaded process: async-signal-safe calls
 * only, no return. */
static __attribute__((noreturn)) void hog(pid_t parent, int cpu)
{
	volatile unsigned long counter = 0;

	/* Dies with the thread that forked it, also when the suite ends with
	 * _exit (stalled workers) or crashes; the getppid check closes the
	 * window in which the parent died before the prctl. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(0);
	if (cpu >= 0) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		/* Best effort: an unpinned hog still loads the machine. */
		(void)sched_setaffinity(0, sizeof(one), &one);
	}
	for (;;)
		counter++;
}

/* The usable CPUs, in order; their count (0 when unknown). */
static unsigned usable_cpu_list(int *cpus, unsigned max)
{
	cpu_set_t set;
	unsigned n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

int load_nth_cpu(unsigned n)
{
	static int cpus[CPU_SETSIZE];
	unsigned ncpus = usable_cpu_list(cpus, CPU_SETSIZE);

	return ncpus ? cpus[n % ncpus] : -1;
}

bool load_pin_self(int cpu)
{
	cpu_set_t one;

	if (cpu < 0)
		return false;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one) == 0;
}

bool load_hogs_start(struct load_hogs *h, unsigned n)
{
	pid_t self = getpid();
	static int cpus[CPU_SETSIZE];
	unsigned ncpus = usable_cpu_list(cpus, CPU_SETSIZE);

	h->n = 0;
	if (n > LOAD_MAX_HOGS) {
		cli_error("--background-load: at most %u hogs", LOAD_MAX_HOGS);
		return false;
	}
	fflush(NULL); /* the children never flush, but do not copy pending output into them */
	for (unsigned i = 0; i < n; i++) {
		pid_t pid = fork();

		/* Hog i on the i-th usable CPU, round robin: "one hog per
		 * CPU" then means one on each. Left to the scheduler, two
		 * hogs could share a CPU for a whole run, and which CPU the
		 * measured threads shared with what changed the figures by
		 * tens of percent from run to run (bench/README.md). */
		if (pid == 0)
			hog(self, ncpus ? cpus[i % ncpus] : -1);
		if (pid < 0) {
			cli_error("--background-load: cannot start hog %u of %u: %s", i + 1, n,
				  strerror(errno));
			load_hogs_stop(h);
			return false;
		}
		h->pid[h->n++] = pid;
	}
	return true;
}

void load_hogs_stop(struct load_hogs *h)
{
	for (unsigned i = 0; i < h->n; i++)
		kill(h->pid[i], SIGKILL);
	for (unsigned i = 0; i < h->n; i++)
		while (waitpid(h->pid[i], NULL, 0) < 0 && errno == EINTR)
			;
	h->n = 0;
}

unsigned load_usable_cpus(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* /proc/loadavg's fourth field is "runnable/total" (nr_running counts
 * this thread too); -1 when unreadable. */
static int runnable_now(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double a, b, c;
	int run = -1, total;

	if (!f)
		return -1;
	if (fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &run, &total) != 5)
		run = -1;
	fclose(f);
	return run;
}

static int cmp_int(const void *x, const void *y)
{
	return *(const int *)x - *(const int *)y;
}

double load_probe_others(void)
{
	enum { SAMPLES = 11 };
	struct timespec gap = { 0, 10 * 1000 * 1000 };
	int v[SAMPLES], n = 0;

	/* A median of samples 10 ms apart: one read sees a moment, and a
	 * process that runs for a few milliseconds now and then is not
	 * load. */
	for (int i = 0; i < SAMPLES; i++) {
		int r = runnable_now();

		if (r >= 1)
			v[n++] = r - 1;
		if (i + 1 < SAMPLES)
			nanosleep(&gap, NULL);
	}
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(v[0]), cmp_int);
	return v[n / 2];
}

double bench_load_factor(const struct bench_opts *o)
{
	double cpus = load_usable_cpus();

	return (cpus + o->load_others + o->background_load) / cpus;
}
