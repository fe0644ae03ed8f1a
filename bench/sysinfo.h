/* SPDX-License-Identifier: MIT */
/* What the results were measured on: printed in every run header and
 * stored in the JSON output, so numbers can be compared across machines. */
#ifndef BENCH_SYSINFO_H
#define BENCH_SYSINFO_H

#include <stdbool.h>
#include <stdio.h>

struct sysinfo_rec {
	char cpu[128];        /* /proc/cpuinfo model name (or a fallback) */
	unsigned cores;       /* online CPUs */
	unsigned cores_usable;/* CPUs in this process's affinity mask */
	char kernel[200];     /* uname -srm */
	char compiler[96];    /* compiler and version the bench was built with */
	char build_type[32];  /* CMAKE_BUILD_TYPE */
	char libc[32];        /* glibc version */
	char ck[16];          /* Concurrency Kit version, or "none" */
	char librqspin[16];   /* library version from the headers */
	char date[32];        /* UTC, ISO 8601 */
	double timer_ns;      /* cost of one clock_gettime(CLOCK_MONOTONIC) */
};

/*
 * How busy the machine was with other work during a run: /proc/stat's CPU
 * time minus this process's own (getrusage), as a share of all CPU time
 * that passed. A shared machine makes every figure noisy; this says how
 * much.
 */
struct load_snap {
	bool ok;
	double busy_s;  /* CPU time spent not idle, all processes */
	double steal_s; /* taken by the hypervisor */
	double total_s; /* all CPU time, idle included (wall x CPUs) */
	double self_s;  /* this process and its waited-for children, user + system */
};

struct load_share {
	bool ok;
	double other; /* share of the CPU time used by other processes, 0..1 */
	double steal; /* share stolen by the hypervisor, 0..1 */
};

void load_snapshot(struct load_snap *s);
struct load_share load_between(const struct load_snap *a, const struct load_snap *b);

void sysinfo_collect(struct sysinfo_rec *s);
/* A few "key: value" lines, each starting with prefix. */
void sysinfo_print(FILE *f, const struct sysinfo_rec *s, const char *prefix);

#endif
