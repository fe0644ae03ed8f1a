/* SPDX-License-Identifier: MIT */
/*
 * The torture and deadlock suites of rqspin-bench (torture.c,
 * deadlock_bench.c): their results, the verdicts computed from them
 * (verdict.c), and the pieces both share - verdict lists, timing, output
 * file names. The lock suite's types (struct verdict, histograms, sysinfo)
 * come from lock_bench.h.
 */
#ifndef BENCH_SUITE_H
#define BENCH_SUITE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <rqspin/lock_diag.h>

#include "json.h"
#include "lock_bench.h"

/* ---- verdict lists -------------------------------------------------------- */

#define SUITE_MAX_VERDICTS 32

struct verdict_list {
	struct verdict v[SUITE_MAX_VERDICTS];
	size_t n;
};

/* Append a verdict: PASS when value >= limit (ge) or value <= limit (!ge),
 * FAIL when value is NaN. NULL when the list is full. target/measured are
 * left empty for the caller. */
struct verdict *vl_add(struct verdict_list *l, const char *area, double value, double limit,
		       bool ge);
/* Print "title" and one line per verdict, then "N passed, M failed". */
void vl_print(FILE *f, const char *title, const struct verdict_list *l,
	      const struct load_share *load);
/* A JSON array named key with one object per verdict. */
void vl_json(struct json *j, const char *key, const struct verdict_list *l);
void vl_count(const struct verdict_list *l, size_t *pass, size_t *fail);

/* ---- shared helpers ------------------------------------------------------- */

static inline uint64_t suite_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy-wait (no yield) for ns: a critical section or think time that
 * takes time. Async-signal-safe. */
static inline void suite_busy_ns(uint64_t ns)
{
	uint64_t end;

	if (!ns)
		return;
	end = suite_now_ns() + ns;
	while (suite_now_ns() < end)
		;
}

/* "out.json" -> "out.<tag>.json" (any other name: "<name>.<tag>.<ext>"),
 * for the files `all` writes next to the lock suite's. malloc'ed. */
char *suite_derived_path(const char *path, const char *tag, const char *ext);

/* JSON pieces shared by the lock, torture and deadlock suites (report.c). */
void suite_json_machine(struct json *j, const struct sysinfo_rec *s, const struct load_share *l);
void suite_json_libstats(struct json *j, const struct rqspin_lock_stats *s);

/* Options `all` passes on to the torture and deadlock suites. */
struct suite_all_opts {
	bool ran;   /* the lock suite ran (not --help, not bad arguments) */
	bool quick;
	bool quiet;
	const char *json_path; /* NULL: none; else derived names are used */
	const char *csv_path;
};

/* ---- torture ---------------------------------------------------------------- */

enum tt_mode { TT_PLAIN, TT_AA, TT_ABBA, TT_ABBCCA, TT_NMODES };
enum tt_ctx { TT_NORMAL, TT_HANDLER, TT_NCTX };

extern const char *const tt_mode_name[TT_NMODES];
extern const char *const tt_ctx_name[TT_NCTX];

/* Fail kinds, the lock suite's (enum lw_fail in lock_worker.h). */
#define TT_NFAIL LW_NFAIL

struct tt_config {
	const char *suite; /* "torture" or "all" */
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
	const char *json_path;
	const char *csv_path;
	bool quick;
	bool quiet;
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

int torture_main(int argc, char **argv);
/* `all`: the short torture run, printed with its verdicts. Returns an exit
 * status (CLI_EXIT_OK or CLI_EXIT_FAIL); adds to *pass / *fail. */
int torture_all(const struct suite_all_opts *o, size_t *pass, size_t *fail);
/* verdict.c */
void torture_verdicts(struct tt_results *r);

/* ---- deadlock ----------------------------------------------------------------- */

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
	const char *suite; /* "deadlock" or "all" */
	unsigned trials;
	unsigned timeout_trials;
	unsigned timeouts_ms[DL_MAX_TIMEOUTS];
	size_t ntimeouts;
	unsigned registered[DL_MAX_REGISTERED]; /* ascending, distinct */
	size_t nregistered;
	bool run_aa, run_abba, run_cycle, run_timeout, run_head;
	const char *json_path;
	const char *csv_path;
	bool quick;
	bool quiet;
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

int deadlock_main(int argc, char **argv);
int deadlock_all(const struct suite_all_opts *o, size_t *pass, size_t *fail);
/* verdict.c */
void deadlock_verdicts(struct dl_results *r);

#endif
