/* SPDX-License-Identifier: MIT */
/*
 * The harness's first estimate counts the machine's other work: the probe
 * (load.c) must see CPU-bound processes as runnable threads, and the load
 * factor must follow from them. Three busy child processes are runnable
 * at every moment (running or queued), so the probe's median cannot be
 * below 3 whatever else the machine runs; it is only a lower bound (tests
 * running in parallel add to it). The hogs are pinned round robin, hog i
 * to the i-th usable CPU (each pins itself right after the fork: waited
 * for, up to 10 s). Deterministic.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "load.h"
#include "suite.h"

#define HOGS 3

/* The CPU hog i should be on: the i-th of ours, round robin. */
static int want_cpu(unsigned i)
{
	cpu_set_t set;
	int seen = 0, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	n = CPU_COUNT(&set);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set) && seen++ == (int)(i % (unsigned)n))
			return c;
	return -1;
}

/* true when each hog has pinned itself to its CPU. */
static bool hogs_pinned(const struct load_hogs *h)
{
	for (unsigned i = 0; i < h->n; i++) {
		cpu_set_t set;
		int want = want_cpu(i);
		bool ok = false;

		for (int tries = 0; tries < 1000 && !ok; tries++) {
			ok = sched_getaffinity(h->pid[i], sizeof(set), &set) == 0 &&
			     CPU_COUNT(&set) == 1 && want >= 0 && CPU_ISSET(want, &set);
			if (!ok)
				usleep(10000);
		}
		if (!ok) {
			fprintf(stderr, "load_probe_test: hog %u is not pinned to CPU %d alone\n", i,
				want);
			return false;
		}
	}
	return true;
}

int main(void)
{
	struct load_hogs h;
	struct bench_opts o = { .run = "probe" };
	double others, f, cpus = load_usable_cpus();

	if (access("/proc/loadavg", R_OK) != 0) {
		printf("SKIP: no /proc/loadavg\n");
		return 77;
	}
	if (!load_hogs_start(&h, HOGS))
		return 1;
	if (!hogs_pinned(&h)) {
		load_hogs_stop(&h);
		return 1;
	}
	others = load_probe_others();
	load_hogs_stop(&h);
	if (others < HOGS) {
		fprintf(stderr, "load_probe_test: %d busy processes, the probe saw %.0f runnable\n",
			HOGS, others);
		return 1;
	}
	o.load_others = others;
	o.background_load = 2;
	f = bench_load_factor(&o);
	if (f < (cpus + others + 2) / cpus - 1e-9 || f > (cpus + others + 2) / cpus + 1e-9) {
		fprintf(stderr, "load_probe_test: factor %.3f, want (cpus + others + hogs) / cpus\n", f);
		return 1;
	}
	o.load_others = 0;
	o.background_load = 0;
	if (bench_load_factor(&o) != 1) {
		fprintf(stderr, "load_probe_test: an idle machine's factor is %.3f, want 1\n",
			bench_load_factor(&o));
		return 1;
	}
	printf("load_probe_test: %d hogs, the probe saw %.0f other runnable threads\n", HOGS,
	       others);
	return 0;
}
