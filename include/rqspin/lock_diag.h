/* SPDX-License-Identifier: MIT */
/*
 * Lock diagnostics: per-event statistics and failure reports.
 */
#ifndef RQSPIN_LOCK_DIAG_H
#define RQSPIN_LOCK_DIAG_H

#include <stdint.h>
#include <sys/types.h>
#include <rqspin/defs.h>
/* RQSPIN_NR_HELD: a report shows a held table. */
#include <rqspin/static/held.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Process-wide event counts since start (a forked child starts from the
 * parent's counts at the time of the fork). Counters are per thread and summed on read, so they cost the
 * lock paths no shared cache line; a read racing with lock traffic is a
 * consistent-enough snapshot (each counter is monotonic), not an atomic one.
 * Threads beyond the registry's slot limit are counted when they exit.
 */
struct rqspin_lock_stats {
	uint64_t fast;        /* acquisitions by the inline fast path (one CAS) */
	uint64_t pending;     /* acquisitions through the pending bit */
	uint64_t queued;      /* acquisitions after waiting in the MCS queue */
	uint64_t stolen;      /* slow-path acquisitions by taking a free lock directly (not via pending or queue) */
	uint64_t parked;      /* times a queued waiter slept on its futex */
	uint64_t yielded;     /* times a spinning waiter yielded the CPU */
	uint64_t nonode;      /* slow paths without an MCS node (nesting, or no slot) */
	/* rqspinlock failures, by cause */
	uint64_t aa;          /* -EDEADLK: the caller held the lock */
	uint64_t abba;        /* -EDEADLK: two-thread cycle */
	uint64_t cycle;       /* -EDEADLK: cycle of three or more threads */
	uint64_t nest_fail;   /* -EDEADLK: a handler nested in its thread's queued wait, one try failed */
	uint64_t timeout;     /* -ETIMEDOUT (including queued waiters released by the head) */
	uint64_t owner_dead;  /* -EOWNERDEAD */
	/* thread registry */
	uint64_t slots_in_use;    /* threads holding a registry slot now */
	uint64_t slots_high_water;/* slots ever mapped (bounded by peak concurrency) */
	uint64_t slot_limit;      /* capacity; threads past it use the no-node path */
	/* cost of the resilient checks */
	uint64_t deadlock_checks; /* ABBA/cycle searches through the held tables (only
				   * by waiters that hold another lock) */
	uint64_t stall_checks;    /* deadlines passed: the owner's scheduling state was read */
	uint64_t deadline_extended; /* of those, owner runnable but not running: wait goes on */
};

/* Fill *out. Async-signal-safe (reads only). */
RQSPIN_API void rqspin_lock_stats_get(struct rqspin_lock_stats *out);

enum rqspin_event {
	RQSPIN_EV_AA = 1,
	RQSPIN_EV_ABBA,
	RQSPIN_EV_CYCLE,
	RQSPIN_EV_NEST_FAIL,
	RQSPIN_EV_TIMEOUT,
	RQSPIN_EV_OWNER_DEAD,
};

#define RQSPIN_REPORT_MAX_CYCLE 8

/* One thread of a deadlock cycle: what it waits for and what it holds. */
struct rqspin_report_thread {
	pid_t tid;
	const void *waits_for;
	uint32_t nheld;
	const void *held[RQSPIN_NR_HELD];
};

struct rqspin_report {
	enum rqspin_event event;
	int error;              /* what rqspin_lock returned, e.g. -EDEADLK */
	const void *lock;       /* the lock that was being acquired */
	uint64_t waited_ns;     /* time spent in the slow path */
	/* The reporting thread first, then the other members of the cycle
	 * (AA: only the reporter; ABBA: 2; cycle: 3..RQSPIN_REPORT_MAX_CYCLE). */
	uint32_t nthreads;
	struct rqspin_report_thread threads[RQSPIN_REPORT_MAX_CYCLE];
};

/*
 * Called on every rqspinlock failure, on the failing thread, after the lock
 * word is consistent again and before rqspin_lock returns. It may run in a
 * signal handler, so it must itself be async-signal-safe; the report is
 * valid only during the call. NULL removes the hook.
 */
typedef void (*rqspin_report_fn)(const struct rqspin_report *report, void *arg);

/* Install the hook (replaces the previous one). Async-signal-safe. */
RQSPIN_API void rqspin_set_report_hook(rqspin_report_fn fn, void *arg);

/*
 * Write a one-line-per-thread text form of a report to fd with write(2)
 * (no stdio). Also used when the environment variable RQSPIN_REPORT=1 (or
 * RQSPIN_REPORT=stderr) is set at load time and no hook is installed.
 * Async-signal-safe.
 */
RQSPIN_API void rqspin_report_write(int fd, const struct rqspin_report *report);

/* Name of an event ("AA", "ABBA", ...). Async-signal-safe. */
RQSPIN_API const char *rqspin_event_name(enum rqspin_event ev);

#ifdef __cplusplus
}
#endif
#endif /* RQSPIN_LOCK_DIAG_H */
