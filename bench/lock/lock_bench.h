/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench lock`: throughput, fairness and acquisition latency of the
 * locks in lock_peers.c at several thread counts, in one run, with the
 * repeats interleaved, once per think time (scenario). The configuration
 * and the results live here; the measuring is in lock_bench.c, the targets
 * in lock_verdict.c and the output in lock_report.c.
 */
#ifndef BENCH_LOCK_BENCH_H
#define BENCH_LOCK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rqspin/lock_diag.h>

#include "lock_peers.h"
#include "lock_worker.h"
#include "stats.h"
#include "suite.h"
#include "sysinfo.h"
#include "verdict.h"

#define LB_MAX_THREADS 1024

struct lb_config {
	const struct bench_opts *o; /* the common options: run name, files, quick */
	const struct lock_peer **locks;
	size_t nlocks;
	unsigned *threads;
	size_t nthreads;
	unsigned duration_ms;     /* per repeat, per lock and thread count */
	unsigned repeats;
	unsigned cs;              /* shared-array updates inside the lock */
	unsigned *thinks;         /* private work steps outside the lock: one scenario each */
	size_t nthinks;
	unsigned sample_every;    /* time every Nth acquisition (power of 2; 0 = none) */
	unsigned uncontended_ms;  /* per repeat and lock; 0 = no uncontended pass */
	unsigned stall_timeout_ms;/* how long to wait for workers after the stop */
	const struct lock_peer *baseline;
};

/* One lock at one thread count, over all repeats. */
struct lb_cell {
	const struct lock_peer *lock;
	unsigned threads;
	unsigned nrep;            /* repeats that completed */
	double *ops;              /* [nrep] acquisitions/s of each completed repeat */
	double *ops_rep;          /* [repeats] the same by repeat index, NaN if not run */
	double *jain_rep;         /* [repeats] */
	double *min_share_rep;    /* [repeats] */
	uint64_t *per_thread;     /* [threads] acquisitions in the windows, summed */
	struct hist hist;         /* sampled acquisition latency, ns */
	uint64_t fail[LW_NFAIL];  /* lock() errors by kind */
	uint64_t acquired;        /* all acquisitions, including after the stop */
	struct rqspin_lock_stats lib; /* library events during the runs (qspin/rqspin) */
	bool stalled;             /* workers did not return after the stop */
	bool skipped;             /* not run: the lock stalled at fewer threads */
	bool broken;              /* mutual exclusion failed */
	bool error;               /* could not set up (memory, threads) */
	uint64_t lost_updates;    /* acquisitions minus the shared counter */
	/* derived by lb_summarize() */
	double ops_med, ops_min, ops_max;
	double ratio;             /* to the baseline: median of per-repeat ratios (NaN if none) */
	double jain;              /* over per_thread */
	double min_share;         /* over per_thread */
	double min_share_worst;   /* the worst repeat */
};

/* One lock at one thread, no critical-section work, no think time. Each
 * repeat runs LB_UNC_SLICES short slices of every lock, interleaved, and
 * keeps each lock's fastest slice (noise only ever adds time). */
#define LB_UNC_SLICES 10
struct lb_unc {
	const struct lock_peer *lock;
	unsigned n;
	double *ns;               /* [n] ns per lock+unlock, one per completed repeat */
	double *ns_rep;           /* [repeats] the same by repeat index, NaN if none */
	bool stalled;
	double med, min, max;     /* derived */
};

/* One scenario: every lock at every thread count with one think time. */
struct lb_results {
	const struct lb_config *cfg;
	unsigned think;
	struct sysinfo_rec sys;
	struct lb_cell *cells;    /* [nthreads][nlocks] */
	size_t ncells;
	struct lb_unc *unc;       /* [nlocks], NULL without the uncontended pass (which
				   * runs in the first scenario only: no think time) */
	struct verdict_list verdicts;
	bool broken;              /* some lock broke mutual exclusion */
	bool lib_stalled;         /* qspin or rqspin did not come back */
	bool any_stalled;         /* threads are still out there: _exit at the end */
	bool lib_failures;        /* rqspin returned errors */
	double wall_s;
	struct load_share load;   /* other work on the machine during the run */
};

static inline struct lb_cell *lb_cell_at(const struct lb_results *r, size_t ti, size_t li)
{
	return &r->cells[ti * r->cfg->nlocks + li];
}

/* The cell of a lock (by name) at a thread count, or NULL if not run. */
const struct lb_cell *lb_find(const struct lb_results *r, const char *lock, unsigned threads);
const struct lb_unc *lb_find_unc(const struct lb_results *r, const char *lock);

/* lock_verdict.c: fill r->verdicts from the results (targets prefixed
 * with the think time when the run has more than one scenario). */
void lb_verdicts(struct lb_results *r);

#endif
