/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench torture` (torture.c): its configuration and results, and
 * the verdicts computed from them (torture_verdict.c).
 */
#ifndef BENCH_TORTURE_H
#define BENCH_TORTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rqspin/lock_diag.h>

#include "lock_peers.h"
#include "lock_worker.h"
#include "stats.h"
#include "clock.h"
#include "suite.h"
#include "sysinfo.h"
#include "verdict.h"

enum tt_mode { TT_PLAIN, TT_AA, TT_ABBA, TT_ABBCCA, TT_NMODES };
enum tt_ctx { TT_NORMAL, TT_HANDLER, TT_NCTX };

extern const char *const tt_mode_name[TT_NMODES];
extern const char *const tt_ctx_name[TT_NCTX];

/* Fail kinds, the lock suite's (enum lw_fail in lock_worker.h). */
#define TT_NFAIL LW_NFAIL

struct tt_config {
	const struct bench_opts *o; /* the common options: run name, files, quick, quiet */
	enum tt_mode mode;
	const struct lock_peer **locks;
	size_t nlocks;
	unsigned *threads;
	size_t nthreads;
	unsigned duration_ms;     /* per lock and thread count */
	unsigned hold_us;         /* plain: hold uniform in [0, hold]; modes: [hold/2, hold] */
	unsigned long_hold_us;    /* the occasional long hold */
	unsigned long_hold_every; /* 1 in N holds is long; 0 = never */
	unsigned think_us;        /* between acquisitions, uniform in [0, think] */
	unsigned handler_hold_us; /* modes: the handler's hold */
	unsigned timer_us;        /* modes: per-thread timer period */
	unsigned stall_timeout_ms;
};

/* One lock at one thread count. */
struct tt_cell {
	const struct lock_peer *lock;
	unsigned threads;
	bool ran, stalled, error;
	bool broken;               /* owner check or counter check failed */
	double elapsed_s;
	uint64_t *per_thread;      /* [threads] successful acquisitions, normal context */
	uint64_t ok[TT_NCTX];      /* successful acquisitions (incl. -EOWNERDEAD) */
	uint64_t fail[TT_NCTX][TT_NFAIL];
	uint64_t handler_runs;
	uint64_t long_holds;
	uint64_t owner_violations; /* owner field not as expected on entry or exit */
	uint64_t lost_updates;     /* |sum of successes - shared counters| */
	unsigned idle_workers;     /* workers with no successful acquisition */
	struct hist lat_ok[TT_NCTX];   /* time of lock() calls that acquired, ns */
	struct hist lat_fail[TT_NCTX]; /* time of lock() calls that failed, ns */
	struct rqspin_lock_stats lib;  /* library events during the run (librqspin locks) */
	double jain, min_share;        /* over per_thread */
};

struct tt_results {
	const struct tt_config *cfg;
	struct sysinfo_rec sys;
	struct tt_cell *cells; /* [nthreads][nlocks] */
	size_t ncells;
	struct verdict_list verdicts;
	bool broken, lib_stalled, any_stalled;
	double wall_s;
	struct load_share load;
};

/* torture_verdict.c */
void torture_verdicts(struct tt_results *r);


#endif
