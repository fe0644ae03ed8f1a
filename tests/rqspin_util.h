/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the rqspinlock tests (tests/rqspin_*.c), on top of
 * test_util.h. Header-only.
 *
 *  - RU_CHECK_RET: compare lock return codes, printing errno names;
 *  - lock-word inspection (the public union in rqspin/static/lock_word.h) to wait for
 *    "a waiter holds the pending bit" / "somebody is queued";
 *  - actors: helper threads that run lock/unlock commands posted by the
 *    main thread, so a scenario (owner, pending waiter, queue head, ...)
 *    can be set up step by step;
 *  - thread-directed POSIX timers (timer_create + SIGEV_THREAD_ID);
 *  - a report hook that keeps the last report of each thread;
 *  - soft checks (RU_EXPECT, count and go on), skips (exit 77) and
 *    waiting for a forked child with a time limit.
 *
 * Everything marked async-signal-safe may be used in a signal handler.
 */
#ifndef RQSPIN_TEST_RQSPIN_UTIL_H
#define RQSPIN_TEST_RQSPIN_UTIL_H

#include <rqspin/rqspin.h>

#include <sys/syscall.h>
#include <sys/wait.h>

#include "test_util.h"

/* ---- return codes -------------------------------------------------------- */

/* Async-signal-safe. */
static inline const char *ru_err_name(int e)
{
	switch (e) {
	case 0: return "0";
	case -EDEADLK: return "-EDEADLK";
	case -ETIMEDOUT: return "-ETIMEDOUT";
	case -EOWNERDEAD: return "-EOWNERDEAD";
	case -EINVAL: return "-EINVAL";
	case 1: return "1";
	}
	return "(other)";
}

__attribute__((noreturn, cold)) static inline void ru_fail_ret(const char *file, int line,
							       const char *expr, int got,
							       const char *want)
{
	tu_fail_head(file, line, expr);
	tu_write_str(": got ");
	tu_write_str(ru_err_name(got));
	if (got < 0) {
		tu_write_str(" (-");
		tu_write_u64((uint64_t)-(int64_t)got);
		tu_write_str(")");
	}
	tu_write_str(", want ");
	tu_write_str(want);
	tu_write_str("\n");
	abort();
}

/* CHECK that a lock call returned want. Async-signal-safe. */
#define RU_CHECK_RET(expr, want)                                              \
	do {                                                                  \
		int ru_got_ = (expr);                                         \
		if (ru_got_ != (want))                                        \
			ru_fail_ret(__FILE__, __LINE__, #expr, ru_got_, #want); \
	} while (0)

/* CHECK that a failed acquisition returned one of the two error codes a
 * contended rqspinlock may give. Async-signal-safe. */
#define RU_CHECK_FAILCODE(e)                                                   \
	do {                                                                   \
		int ru_e_ = (e);                                               \
		if (ru_e_ != -EDEADLK && ru_e_ != -ETIMEDOUT)                  \
			ru_fail_ret(__FILE__, __LINE__, #e, ru_e_,             \
				    "-EDEADLK or -ETIMEDOUT");                 \
	} while (0)

/* ---- misc ---------------------------------------------------------------- */

#define RU_MS 1000000ull
#define RU_SEC 1000000000ull

/* The kernel's default timeout (250 ms), stretched by the ThreadSanitizer
 * slowdown: tests that assert "no timeouts" use it, so that a holder kept
 * off the CPU by TSan's 10x overhead on a loaded machine is not mistaken
 * for a missed deadlock. Normal builds use exactly 250 ms. */
#define RU_KERNEL_TIMEOUT_NS (RQSPIN_DEFAULT_TIMEOUT_NS * TU_SLOWDOWN)

/* Async-signal-safe. */
static inline pid_t ru_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Busy-wait (no yield) for ns, as a critical section that takes time.
 * Async-signal-safe. */
static inline void ru_busy_ns(uint64_t ns)
{
	uint64_t end = tu_now_ns() + ns;

	while (tu_now_ns() < end)
		;
}

/* The lock word, for tests that wait for a waiter to reach a given state. */
static inline uint32_t ru_word(rqspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_RELAXED);
}

#define RU_LOCKED_MASK 0xffu
#define RU_PENDING_MASK 0xff00u
#define RU_TAIL_MASK 0xffff0000u

static inline uint32_t ru_tail(rqspinlock_t *l)
{
	return ru_word(l) & RU_TAIL_MASK;
}

/* Poll (sleeping 100 us) until cond; abort after ~limit_s seconds (scaled
 * under TSan) with the message: this only catches a hang, it never bounds
 * the work. */
#define RU_WAIT_FOR(cond, limit_s, what)                                       \
	do {                                                                   \
		uint64_t ru_end_ = tu_now_ns() + (uint64_t)(limit_s) * TU_SLOWDOWN * RU_SEC; \
		while (!(cond)) {                                              \
			if (tu_now_ns() > ru_end_) {                           \
				tu_fail(__FILE__, __LINE__, "timed out waiting for: " what); \
			}                                                      \
			tu_sleep_us(100);                                      \
		}                                                              \
	} while (0)

static inline struct rqspin_lock_stats ru_stats(void)
{
	struct rqspin_lock_stats s;

	rqspin_lock_stats_get(&s);
	return s;
}

static inline void ru_print_stats(const char *tag, const struct rqspin_lock_stats *s)
{
	printf("%s: fast %llu pending %llu queued %llu stolen %llu parked %llu yielded %llu "
	       "nonode %llu | aa %llu abba %llu cycle %llu nest_fail %llu timeout %llu "
	       "owner_dead %llu | slots %llu/%llu/%llu\n",
	       tag, (unsigned long long)s->fast, (unsigned long long)s->pending,
	       (unsigned long long)s->queued, (unsigned long long)s->stolen,
	       (unsigned long long)s->parked, (unsigned long long)s->yielded,
	       (unsigned long long)s->nonode, (unsigned long long)s->aa,
	       (unsigned long long)s->abba, (unsigned long long)s->cycle,
	       (unsigned long long)s->nest_fail, (unsigned long long)s->timeout,
	       (unsigned long long)s->owner_dead, (unsigned long long)s->slots_in_use,
	       (unsigned long long)s->slots_high_water, (unsigned long long)s->slot_limit);
	fflush(stdout);
}

/* The calling thread's table records no lock: at most entries whose locks
 * other threads released (dropped lazily, RQSPIN__HELD_RELEASED). */
static inline bool ru_table_holds_nothing(void)
{
	const struct rqspin_held_locks *t = rqspin_held_locks();

	if (t->cnt > RQSPIN_NR_HELD)
		return false;
	for (uint32_t i = 0; i < t->cnt; i++)
		if (t->locks[i] != RQSPIN__HELD_RELEASED)
			return false;
	return true;
}

/* ---- actors -------------------------------------------------------------- */

enum ru_cmd {
	RU_NONE,
	RU_LOCK,         /* rqspin_lock(arg) -> result */
	RU_LOCK_TIMEOUT, /* rqspin_lock_timeout(arg, timeout) -> result */
	RU_UNLOCK,       /* rqspin_unlock(arg) */
	RU_CALL,         /* fn(actor) -> result */
	RU_EXIT,         /* return from the thread (keeping whatever it holds) */
};

struct ru_actor;
typedef int (*ru_actor_fn)(struct ru_actor *a);

struct ru_actor {
	pthread_t th;
	int id;
	_Atomic pid_t tid;
	/* Command mailbox: the poster writes the fields, then bumps seq. */
	_Atomic unsigned seq, done;
	int cmd;
	rqspinlock_t *arg;
	uint64_t timeout;
	ru_actor_fn fn;
	void *user;
	/* Results. */
	_Atomic int result;
	_Atomic int calling; /* set just before the lock call, cleared after */
	_Atomic uint64_t t_start, t_end;
};

static inline void *ru_actor_main_(void *p)
{
	struct ru_actor *a = p;
	unsigned seen = 0;

	atomic_store(&a->tid, ru_gettid());
	for (;;) {
		unsigned s;
		int r = 0;

		while ((s = atomic_load_explicit(&a->seq, memory_order_acquire)) == seen)
			tu_sleep_us(50);
		seen = s;
		atomic_store(&a->t_start, tu_now_ns());
		atomic_store(&a->calling, 1);
		switch (a->cmd) {
		case RU_LOCK:
			r = rqspin_lock(a->arg);
			break;
		case RU_LOCK_TIMEOUT:
			r = rqspin_lock_timeout(a->arg, a->timeout);
			break;
		case RU_UNLOCK:
			rqspin_unlock(a->arg);
			break;
		case RU_CALL:
			r = a->fn(a);
			break;
		case RU_EXIT:
			atomic_store(&a->calling, 0);
			atomic_store(&a->t_end, tu_now_ns());
			atomic_store_explicit(&a->done, s, memory_order_release);
			return NULL;
		}
		atomic_store(&a->calling, 0);
		atomic_store(&a->t_end, tu_now_ns());
		atomic_store(&a->result, r);
		atomic_store_explicit(&a->done, s, memory_order_release);
	}
}

static inline void ru_actor_start(struct ru_actor *a, int id)
{
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->th = tu_thread_start(ru_actor_main_, a);
	RU_WAIT_FOR(atomic_load(&a->tid) != 0, 30, "actor start");
}

/* Post a command; it runs asynchronously. The previous one must be done. */
static inline void ru_actor_post(struct ru_actor *a, int cmd, rqspinlock_t *arg)
{
	unsigned s = atomic_load(&a->seq);

	CHECK(atomic_load(&a->done) == s);
	a->cmd = cmd;
	a->arg = arg;
	atomic_store_explicit(&a->seq, s + 1, memory_order_release);
}

static inline void ru_actor_post_call(struct ru_actor *a, ru_actor_fn fn, void *user)
{
	a->fn = fn;
	a->user = user;
	ru_actor_post(a, RU_CALL, NULL);
}

static inline bool ru_actor_is_done(struct ru_actor *a)
{
	return atomic_load_explicit(&a->done, memory_order_acquire) == atomic_load(&a->seq);
}

/* Wait for the last command (abort after limit_s, scaled) and return its
 * result. */
static inline int ru_actor_wait(struct ru_actor *a, unsigned limit_s)
{
	RU_WAIT_FOR(ru_actor_is_done(a), limit_s, "actor command to finish (hang?)");
	return atomic_load(&a->result);
}

/* Post and wait. */
static inline int ru_actor_do(struct ru_actor *a, int cmd, rqspinlock_t *arg)
{
	ru_actor_post(a, cmd, arg);
	return ru_actor_wait(a, 60);
}

static inline uint64_t ru_actor_elapsed(struct ru_actor *a)
{
	return atomic_load(&a->t_end) - atomic_load(&a->t_start);
}

static inline void ru_actor_exit(struct ru_actor *a)
{
	ru_actor_post(a, RU_EXIT, NULL);
	tu_thread_join(a->th);
}

/* ---- thread-directed timers ---------------------------------------------- */

/* A POSIX timer that will send signo to thread tid; created disarmed, so
 * the caller can publish its id (e.g. for a handler that re-arms it)
 * before the first expiry. */
static inline timer_t ru_timer_create(pid_t tid, int signo)
{
	struct sigevent sev;
	timer_t t;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = signo;
	sev._sigev_un._tid = tid;
	CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
	return t;
}

/* First expiry after first_ns, then every interval_ns (0: one-shot).
 * Async-signal-safe (timer_settime is). */
static inline void ru_timer_arm(timer_t t, uint64_t first_ns, uint64_t interval_ns)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(first_ns / RU_SEC);
	its.it_value.tv_nsec = (long)(first_ns % RU_SEC);
	its.it_interval.tv_sec = (time_t)(interval_ns / RU_SEC);
	its.it_interval.tv_nsec = (long)(interval_ns % RU_SEC);
	CHECK(timer_settime(t, 0, &its, NULL) == 0);
}

static inline timer_t ru_timer_start(pid_t tid, int signo, uint64_t first_ns, uint64_t interval_ns)
{
	timer_t t = ru_timer_create(tid, signo);

	ru_timer_arm(t, first_ns, interval_ns);
	return t;
}

static inline void ru_timer_stop(timer_t t)
{
	CHECK(timer_delete(t) == 0);
}

/* Install a handler for sig (SA_RESTART, SA_SIGINFO not needed). */
static inline void ru_set_handler(int sig, void (*fn)(int))
{
	tu_set_handler(sig, fn, SA_RESTART, NULL);
}

/* ---- report capture ------------------------------------------------------- */

/* The last report seen on this thread and the number of reports. Written by
 * the hook (possibly in a signal handler of this thread). */
static __thread struct rqspin_report ru_last_report;
static __thread unsigned ru_nreports;
static _Atomic unsigned ru_reports_total;

static inline void ru_capture_hook(const struct rqspin_report *rep, void *arg)
{
	(void)arg;
	memcpy(&ru_last_report, rep, sizeof(*rep));
	ru_nreports++;
	atomic_fetch_add(&ru_reports_total, 1);
}

/* ---- soft checks, skips, children ----------------------------------------- */

/* Failed RU_EXPECTs so far. A test that checks several independent
 * behaviours counts failures instead of aborting at the first one, so one
 * run reports every broken behaviour; it ends with ru_finish(). */
static _Atomic unsigned ru_failures;

/* Print "FAIL: <message>" and count it when cond is false. Not
 * async-signal-safe (stdio). */
#define RU_EXPECT(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                 \
			atomic_fetch_add(&ru_failures, 1);                     \
			fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);  \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
		}                                                              \
	} while (0)

/* Exit status of the test: 0 when no RU_EXPECT failed. */
static inline int ru_finish(const char *name)
{
	unsigned n = atomic_load(&ru_failures);

	if (n) {
		printf("%s: FAIL (%u failed checks)\n", name, n);
		return 1;
	}
	printf("%s: PASS\n", name);
	return 0;
}

/* Exit code that CTest reports as "skipped" (SKIP_RETURN_CODE in
 * tests/CMakeLists.txt). */
#define RU_SKIP_RC 77

__attribute__((noreturn)) static inline void ru_skip(const char *why)
{
	printf("SKIP: %s\n", why);
	fflush(stdout);
	exit(RU_SKIP_RC);
}

/* Wait up to limit_ms (scaled under TSan) for child pid. Returns its wait
 * status, or -1 after killing it (SIGKILL) when it did not finish: a
 * child that hangs becomes a failure of the parent, not a CTest timeout. */
static inline int ru_child_wait(pid_t pid, unsigned limit_ms)
{
	uint64_t end = tu_now_ns() + (uint64_t)limit_ms * TU_SLOWDOWN * RU_MS;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		CHECK(r == 0 || (r < 0 && errno == EINTR));
		if (tu_now_ns() > end) {
			kill(pid, SIGKILL);
			CHECK(waitpid(pid, &st, 0) == pid);
			return -1;
		}
		tu_sleep_us(1000);
	}
}

/* Describe a status from ru_child_wait ("hung, killed" for -1). */
static inline const char *ru_child_status(int st, char *buf, size_t len)
{
	if (st == -1)
		snprintf(buf, len, "hung (killed after the time limit)");
	else if (WIFEXITED(st))
		snprintf(buf, len, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status 0x%x", st);
	return buf;
}

/* Fork; the child returns fn()'s value as its exit status. The parent
 * waits up to limit_ms (ru_child_wait), expects exit 0, prints the status
 * under tag and returns it. */
static inline int ru_fork_run(const char *tag, int (*fn)(void), unsigned limit_ms)
{
	char buf[80];
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(fn());
	st = ru_child_wait(pid, limit_ms);
	RU_EXPECT(st == 0, "%s: child %s", tag, ru_child_status(st, buf, sizeof(buf)));
	printf("%s: child %s\n", tag, ru_child_status(st, buf, sizeof(buf)));
	return st;
}

/* In a fork child (async-signal-safe output): "child: what: <errno name>". */
static inline void ru_child_say(const char *what, int r)
{
	char buf[200];

	snprintf(buf, sizeof(buf), "child: %s: %s\n", what, ru_err_name(r));
	tu_write_str(buf);
}

#endif /* RQSPIN_TEST_RQSPIN_UTIL_H */
