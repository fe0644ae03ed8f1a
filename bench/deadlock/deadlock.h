/* SPDX-License-Identifier: MIT */
/*
 * `rqspin-bench deadlock` (deadlock_bench.c): its configuration and
 * results, and the verdicts computed from them (deadlock_verdict.c).
 */
#ifndef BENCH_DEADLOCK_H
#define BENCH_DEADLOCK_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rqspin/lock_diag.h>

#include "clock.h"
#include "suite.h"
#include "sysinfo.h"
#include "verdict.h"

enum dl_kind {
	DL_AA,      /* AA in a signal handler: ns */
	DL_ABBA,    /* two-thread cycle: ns from the barrier to the first -EDEADLK */
	DL_CYCLE,   /* three-thread cycle: same */
	DL_TIMEOUT, /* pending waiter: elapsed / T */
	DL_HEAD,    /* queue head: elapsed / 2T */
};

#define DL_MAX_TIMEOUTS 8
#define DL_MAX_REGISTERED 8
/* aa, abba and cycle3 per registered size, the timeouts, head */
#define DL_MAX_SCEN (1 + 2 * DL_MAX_REGISTERED + DL_MAX_TIMEOUTS + 1)

struct dl_scen {
	enum dl_kind kind;
	char name[32];          /* "aa", "abba-r64", "cycle3-r64", "timeout-10ms", "head-10ms" */
	uint64_t t_ns;          /* DL_TIMEOUT / DL_HEAD: the T of the call */
	unsigned trials;        /* asked */
	unsigned done;          /* completed */
	double *v;              /* [done] the measured value of each trial (sorted at the end) */
	bool ratio;             /* v is a ratio, not ns */
	double p50, p90, p99, max, min;
	/* Return codes of the measured calls (every thread of every trial). */
	uint64_t r_ok, r_deadlk, r_timedout, r_other;
	unsigned first_not_deadlk; /* trials whose first failure was not -EDEADLK */
	unsigned no_failure;       /* trials in which no call failed */
	unsigned position_seen;    /* timeout/head: trials where the waiter's position was seen */
	/* abba/cycle: extra live threads with a registry slot, asleep during
	 * the trials (deadlock_bench.c). */
	unsigned registered;
	bool reg_skipped;          /* the threads could not be created: no trials */
	char reg_note[96];         /* why skipped */
	uint64_t reg_slots;        /* registry slots in use during the trials */
	uint64_t reg_high_water;   /* the registry's high water then */
	double reg_setup_s;        /* time to start the registered threads */
	/* abba/cycle: the library's deadlock_checks delta of each measured trial */
	uint64_t checks_sum, checks_min, checks_max;
	unsigned checks_n;         /* measured trials (with or without a failure) */
	/* abba/cycle, per trial with a failure: the first refused call's own
	 * duration (the search's cost, without the wait for the barrier), and
	 * the barrier to the last thread's call (scheduling), ns. */
	double *v_call, *v_start;
	double call_p50, call_p99, start_p50, start_p99;
	/* The library's counters over the scenario (rqspin_lock_stats_get). */
	struct rqspin_lock_stats lib;
	bool stats_ok;             /* the counters match the returns */
	char stats_note[96];
	/* Reports checked with a hook over a few extra trials (abba/cycle). */
	unsigned rep_trials, rep_ok, rep_bad;
	unsigned rep_partial;      /* stale: a member had backed out (see deadlock_bench.c) */
	char rep_note[160];
	bool locks_ok;             /* after the trials: locks free and usable */
	char locks_note[96];
	int verdict;               /* index of its verdict in dl_results.verdicts, or -1 */
};

struct dl_config {
	const struct bench_opts *o; /* the common options: run name, files, quick, quiet */
	unsigned trials;
	unsigned timeout_trials;
	unsigned timeouts_ms[DL_MAX_TIMEOUTS];
	size_t ntimeouts;
	unsigned registered[DL_MAX_REGISTERED]; /* ascending, distinct */
	size_t nregistered;
	bool run_aa, run_abba, run_cycle, run_timeout, run_head;
};

struct dl_results {
	const struct dl_config *cfg;
	struct sysinfo_rec sys;
	struct dl_scen scen[DL_MAX_SCEN];
	size_t nscen;
	struct verdict_list verdicts;
	bool broken; /* a lock did not work afterwards, or a trial hung */
	double wall_s;
	struct load_share load;
};

/* The detection targets against registered threads: p99 <= 50 us with up
 * to 64 registered threads, <= 1 ms up to 16 000 (sizes in between get the
 * larger limit); larger sizes are info. NAN: no target. */
#define DL_REG_SMALL 64u
#define DL_REG_LARGE 16000u
#define DL_LIMIT_SMALL_US 50.0
#define DL_LIMIT_LARGE_US 1000.0

static inline double dl_reg_limit_us(unsigned registered)
{
	return registered <= DL_REG_SMALL   ? DL_LIMIT_SMALL_US
	       : registered <= DL_REG_LARGE ? DL_LIMIT_LARGE_US
					    : (double)NAN;
}

/* deadlock_verdict.c */
void deadlock_verdicts(struct dl_results *r);


#endif
