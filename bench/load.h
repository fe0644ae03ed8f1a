/* SPDX-License-Identifier: MIT */
/*
 * Background load (--background-load N): N CPU-bound hog processes, hog i
 * pinned to the i-th usable CPU (round robin), each a busy loop on a
 * volatile counter, started before a suite
 * measures and stopped after. Servers run on busy machines; these put the
 * suite on one. Processes rather than threads: they do not share this
 * process's allocator or signal handlers, and the load figures
 * (sysinfo.h) count them as other work, which they are.
 */
#ifndef BENCH_LOAD_H
#define BENCH_LOAD_H

#include <stdbool.h>
#include <sys/types.h>

#define LOAD_MAX_HOGS 1024

struct load_hogs {
	pid_t pid[LOAD_MAX_HOGS];
	unsigned n;
};

/* Starts n hogs; false (after saying why, with none left running) when one
 * could not be started. A hog dies with the thread that started it. */
bool load_hogs_start(struct load_hogs *h, unsigned n);
/* Kills and reaps them. */
void load_hogs_stop(struct load_hogs *h);

/* CPUs in this process's affinity mask (at least 1). */
unsigned load_usable_cpus(void);

/* The n-th usable CPU, round robin (-1 when the mask cannot be read). A
 * single-threaded measurement that compares runs in separate processes
 * pins them all to one such CPU: the CPUs of a VM need not be equally
 * fast (on the 2-core CI VMs one ran single-threaded loops 1.6x slower
 * than the other), and unpinned runs measured where each process landed. */
int load_nth_cpu(unsigned n);
/* Pins the calling thread (and what it forks or spawns from now on) to
 * cpu; false if it could not. */
bool load_pin_self(int cpu);

/* Threads of other processes that are runnable now: the median over
 * 100 ms of /proc/loadavg's count of runnable tasks, less the caller
 * (0 when it cannot be read). Call it while this process runs one thread
 * and no hogs. */
double load_probe_others(void);

#endif
