/* SPDX-License-Identifier: MIT */
/*
 * librqspin-pthread.so: pthread_spin_* on top of rqspinlock, for programs
 * that cannot be changed. Preload it (LD_PRELOAD) or link it before libc.
 * The user's documentation is docs/man/librqspin-pthread.7 (and README.md).
 *
 * pthread_spinlock_t is 4 bytes, like the lock word; this shim owns the
 * encoding (zero = unlocked private lock, unlike glibc's x86-64 spinlock
 * where 1 is unlocked), so every lock must be initialised with
 * pthread_spin_init, as POSIX requires, and never shared with code that
 * bypasses the shim.
 *
 * Semantics (glibc's by default; the policies are read once at load time):
 *  - pthread_spin_init: 0. PTHREAD_PROCESS_SHARED gives a process-shared
 *    rqspinlock (rqspin_lock_init_pshared), PTHREAD_PROCESS_PRIVATE a
 *    private one, unless the lock lies in shared memory (see
 *    in_shared_memory); any other value EINVAL.
 *  - pthread_spin_lock: 0 when acquired, also when the previous holder
 *    died holding it (thread exit, or for a process-shared lock a killed
 *    process): the caller takes it over, where glibc would spin forever.
 *    On a deadlock (AA relock, ABBA, a longer cycle, a signal handler
 *    nested in its thread's own wait for the lock) or a timeout it writes
 *    one report line to stderr per lock and kind, then by policy:
 *      RQSPIN_PTHREAD_DEADLOCK=wait (default): keep waiting, as glibc
 *        does (it returns only once the lock is acquired);
 *      =error: return EDEADLK (POSIX's "may fail");
 *      =abort: abort() after the report, for a core dump.
 *      RQSPIN_PTHREAD_TIMEOUT=wait (default) | error (return ETIMEDOUT,
 *        which POSIX does not list) | abort: the same for timeouts.
 *    While it keeps waiting it backs off: a failed attempt is followed by
 *    trylocks with sleeps doubling from 50 us to 10 ms for a few timeouts'
 *    length, then a full attempt again (deadlock checks, queueing).
 *  - pthread_spin_trylock: 0 or EBUSY.
 *  - pthread_spin_unlock: 0.
 *  - pthread_spin_destroy: EBUSY while locked (POSIX's recommendation),
 *    else 0.
 * NULL: undefined, as with glibc (the prototypes are nonnull).
 * All are async-signal-safe, which glibc's are not; the report hook it
 * installs (rqspin_set_report_hook) replaces none the program set later.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/lock_diag.h>
#include <rqspin/rqspinlock.h>

#include "arch.h"
#include "common/compiler.h"
#include "lock/barging.h"
#include "lock/held.h"

#define SHIM_API __attribute__((visibility("default")))
/* The three calls whose fast paths a program runs per critical section
 * each start a cache line: where the linker left pthread_spin_unlock
 * across a line boundary, a lock/unlock pair cost one cycle more
 * (5.45-5.55 ns against 5.19-5.29 aligned, rqspin-bench shim on the
 * 2-core AMD EPYC CI machines), as much as the held table costs. */
#define SHIM_HOT __attribute__((aligned(64)))

_Static_assert(sizeof(pthread_spinlock_t) == sizeof(rqspinlock_t), "same size");

enum policy { POLICY_WAIT, POLICY_ERROR, POLICY_ABORT };

static enum policy deadlock_policy;
static enum policy timeout_policy;
static uintptr_t page_size; /* for in_shared_memory */

static inline rqspinlock_t *as_rqspin(pthread_spinlock_t *lock)
{
	return (rqspinlock_t *)(void *)lock;
}

/* ---- Reports: one line per lock and kind, with write(2) only. ---- */

struct line {
	size_t len;
	char buf[512];
};

static void put_str(struct line *l, const char *s)
{
	while (*s && l->len < sizeof(l->buf) - 1)
		l->buf[l->len++] = *s++;
}

static void put_num(struct line *l, uint64_t v, unsigned base)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (base == 16)
		put_str(l, "0x");
	while (n && l->len < sizeof(l->buf) - 1)
		l->buf[l->len++] = tmp[--n];
}

static void line_write(struct line *l)
{
	size_t off = 0;
	int e = errno;

	l->buf[l->len++] = '\n';
	while (off < l->len) {
		ssize_t w = write(STDERR_FILENO, l->buf + off, l->len - off);

		if (w <= 0 && errno != EINTR)
			break;
		if (w > 0)
			off += (size_t)w;
	}
	errno = e;
}

/* Locks and kinds reported so far: an open-addressing set of
 * (lock << 3 | event), insert-only, lock-free (a handler may report). */
#define SEEN_SLOTS 1024u
static uintptr_t seen[SEEN_SLOTS];
static int seen_full_noted;

/* First report of this lock and kind? When the set is full, further
 * reports are dropped after one note. */
static bool first_report(const void *lock, enum rqspin_event ev)
{
	uintptr_t key = ((uintptr_t)lock << 3) | (uintptr_t)ev;
	uint32_t h = (uint32_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> 54);
	uint32_t i;

	for (i = 0; i < SEEN_SLOTS; i++) {
		uintptr_t *slot = &seen[(h + i) % SEEN_SLOTS];
		uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);

		/* Relaxed: the set orders nothing but itself; the CAS alone
		 * decides which racing reporter is first. */
		if (cur == 0 && __atomic_compare_exchange_n(slot, &cur, key, 0, __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED))
			return true;
		if (cur == key)
			return false;
	}
	if (!__atomic_exchange_n(&seen_full_noted, 1, __ATOMIC_RELAXED)) {
		struct line l = { 0 };

		put_str(&l, "rqspin-pthread: too many locks reported; no more reports");
		line_write(&l);
	}
	return false;
}

/*
 * NEST_FAIL is no deadlock of the program: a signal handler's lock call
 * while its thread waits in a queue gets one try (the interrupted wait
 * may be the link others wait for; slowpath.c, nonode_lock). The lock may
 * be any lock. A handler under glibc would spin until the lock is free,
 * so under every policy the shim keeps trying, quietly (lock_failed's
 * trylock polling takes the lock when it frees; the hook notes the event
 * for it). It used to print "deadlock" and, under `error`, return EDEADLK
 * for handlers of correct programs.
 */
static __thread enum rqspin_event last_event __attribute__((tls_model("initial-exec")));

static enum policy policy_of(enum rqspin_event ev)
{
	switch (ev) {
	case RQSPIN_EV_TIMEOUT: return timeout_policy;
	case RQSPIN_EV_OWNER_DEAD: return POLICY_WAIT; /* acquired: nothing to do */
	case RQSPIN_EV_NEST_FAIL: return POLICY_WAIT;
	default: return deadlock_policy;
	}
}

static const char *what_of(enum rqspin_event ev)
{
	switch (ev) {
	case RQSPIN_EV_AA: return "deadlock (AA: the thread already holds it)";
	case RQSPIN_EV_ABBA: return "deadlock (ABBA: two threads wait for each other)";
	case RQSPIN_EV_CYCLE: return "deadlock (a cycle of threads)";
	case RQSPIN_EV_TIMEOUT: return "no progress for the timeout";
	case RQSPIN_EV_OWNER_DEAD: return "holder died holding it; lock taken over";
	case RQSPIN_EV_NEST_FAIL: break; /* not reported (policy_of) */
	}
	return "failure";
}

static void put_thread(struct line *l, const struct rqspin_report_thread *t)
{
	uint32_t n = t->nheld < RQSPIN_NR_HELD ? t->nheld : RQSPIN_NR_HELD;
	uint32_t i, shown = 0;

	put_str(l, " ");
	put_num(l, (uint64_t)t->tid, 10);
	if (!t->waits_for) {
		/* Only a holder's id is known (a process-shared lock's, in
		 * any process). */
		put_str(l, " (holder)");
		return;
	}
	put_str(l, " (waits for ");
	put_num(l, (uintptr_t)t->waits_for, 16);
	/* A waiter's table ends with its attempt, unless it gave up already
	 * (the reporter always has): show holds only. */
	if (n && t->held[n - 1] == t->waits_for)
		n--;
	for (i = 0; i < n; i++) {
		put_str(l, shown++ ? " " : ", holds ");
		put_num(l, (uintptr_t)t->held[i], 16);
	}
	put_str(l, ")");
}

static void shim_report(const struct rqspin_report *rep, void *arg)
{
	struct line l = { 0 };
	uint32_t k;

	(void)arg;
	last_event = rep->event;
	if (rep->event == RQSPIN_EV_NEST_FAIL || !first_report(rep->lock, rep->event))
		return;
	put_str(&l, "rqspin-pthread: pthread_spin_lock(");
	put_num(&l, (uintptr_t)rep->lock, 16);
	put_str(&l, "): ");
	/* A process-shared lock's waiters are not queued: one that keeps
	 * losing the race while the lock changes hands gives up after four
	 * timeouts too (rqspinlock.h), which is no "no progress". */
	if (rep->event == RQSPIN_EV_TIMEOUT && rqspin_is_pshared(rep->lock))
		put_str(&l, "not acquired within four timeouts (process-shared: waiters are not "
			    "queued)");
	else
		put_str(&l, what_of(rep->event));
	put_str(&l, "; threads");
	for (k = 0; k < rep->nthreads && k < RQSPIN_REPORT_MAX_CYCLE; k++)
		put_thread(&l, &rep->threads[k]);
	switch (rep->event == RQSPIN_EV_OWNER_DEAD ? -1 : (int)policy_of(rep->event)) {
	case POLICY_WAIT: put_str(&l, "; still waiting"); break;
	case POLICY_ERROR:
		put_str(&l, rep->event == RQSPIN_EV_TIMEOUT ? "; returning ETIMEDOUT"
							     : "; returning EDEADLK");
		break;
	case POLICY_ABORT: put_str(&l, "; aborting"); break;
	default: break;
	}
	line_write(&l);
}

/* ---- Policies. ---- */

static enum policy parse_policy(const char *name, const char *v)
{
	struct line l = { 0 };

	if (!v || !*v || !strcmp(v, "wait"))
		return POLICY_WAIT;
	if (!strcmp(v, "error"))
		return POLICY_ERROR;
	if (!strcmp(v, "abort"))
		return POLICY_ABORT;
	put_str(&l, "rqspin-pthread: ignoring ");
	put_str(&l, name);
	put_str(&l, "=");
	put_str(&l, v);
	put_str(&l, " (want wait, error or abort)");
	line_write(&l);
	return POLICY_WAIT;
}

__attribute__((constructor)) static void shim_init(void)
{
	deadlock_policy = parse_policy("RQSPIN_PTHREAD_DEADLOCK", getenv("RQSPIN_PTHREAD_DEADLOCK"));
	timeout_policy = parse_policy("RQSPIN_PTHREAD_TIMEOUT", getenv("RQSPIN_PTHREAD_TIMEOUT"));
	page_size = getauxval(AT_PAGESZ) ? getauxval(AT_PAGESZ) : 4096;
	rqspin_set_report_hook(shim_report, NULL);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	int e = errno;

	nanosleep(&ts, NULL);
	errno = e;
}

#define BACKOFF_MIN_NS 50000ull
#define BACKOFF_MAX_NS 10000000ull
/* Trylock rounds between two full attempts last this many timeouts. */
#define POLL_TIMEOUTS 4u

static bool shim_trylock(rqspinlock_t *lock);
static int shim_lock_raw(rqspinlock_t *lock);

/*
 * The lock the thread's outermost shim_lock_contended waits for, from the
 * start of its watch until the slow path after it returns (NULL: none). The
 * watch leaves its table entry plain for its first WATCH_MARK_NS (marking
 * it at once cost the two-thread tight loop a third of its throughput), so
 * a handler that locks the same lock in that time found a plain entry,
 * took it for a hold, and reported a false AA deadlock (under =error,
 * returned EDEADLK). Written by the thread, read by its own handlers
 * (signal fences order them). A handler that lands after the watch took
 * the lock but before the clear treats a real AA as its thread's wait:
 * it waits, and the AA report comes from lock_failed's raw retry (after
 * POLL_TIMEOUTS timeouts) instead of at once.
 */
static __thread const void *watching __attribute__((tls_model("initial-exec")));

/*
 * A signal handler whose thread was waiting for this very lock, in code
 * it interrupted (directly, or under other handlers that wait for other
 * locks), finds that wait's attempt entry in its table (marked, see
 * held.c) and perhaps the pending bit and the hand-off request it set.
 * They keep bargers out for a waiter that cannot run until the handlers
 * return: the handler's trylock polling would never get in, the holder
 * could not take the lock back either, and the whole lock would hang.
 * glibc's handler spins until the holder releases and takes the lock. So
 * the handler may take a free lock past the keep-out bits: the locked
 * byte is what grants the lock (the bits only promise fairness, which
 * this breaks once when they were another waiter's), and the interrupted
 * waiter, once the handler has released the lock and returned, takes it
 * the usual way.
 */
static bool own_pending_wait(const rqspinlock_t *lock)
{
	const struct rqspin__thread_hot *hot = rqspin__tls_self;
	uint32_t n, i;

	if (!hot || (__atomic_load_n(&lock->w.val, __ATOMIC_RELAXED) & RQSPIN__PSHARED_MARK))
		return false;
	/* A wait that has not marked its entry yet (shim_lock_contended). */
	if (watching == lock)
		return true;
	n = __atomic_load_n(&hot->held.cnt, __ATOMIC_RELAXED);
	if (n > RQSPIN_NR_HELD)
		n = RQSPIN_NR_HELD;
	for (i = 0; i < n; i++)
		if (__atomic_load_n(&hot->held.locks[i], __ATOMIC_RELAXED) == attempt_entry(lock))
			return true;
	return false;
}

/*
 * The take of a free locked byte: an exchange, not a compare-and-swap.
 * Two threads in a tight loop ran 1.1-1.2x faster with it (medians of
 * interleaved runs against glibc on the 2-core AMD EPYC machines); glibc's
 * own lock is an unconditional read-modify-write too. A barging word's
 * locked byte holds 0 (free), RQSPIN__LOCKED_VAL (held) or
 * RQSPIN__LOCKED_OWNER_DEAD (its holder exited holding it; process-shared
 * words, whose byte differs, never get here: their mark keeps every caller
 * out first). Over a held byte the exchange stores the value already
 * there: every other writer of that byte is an atomic read-modify-write
 * or the holder's release, so none can tell it from no store. Over a dead
 * holder's byte it takes the lock over, exactly as the slow path's CAS
 * would (dead -> held): the caller holds the lock and reports it
 * (rqspin__owner_dead_taken). acquire: pairs with the unlock's release.
 */
enum take { TAKE_FREE, TAKE_BUSY, TAKE_DEAD };

static inline __attribute__((always_inline)) enum take take_byte(rqspinlock_t *lock)
{
	uint8_t old = __atomic_exchange_n(&lock->w.b.locked, (uint8_t)RQSPIN__LOCKED_VAL,
					  __ATOMIC_ACQUIRE);

	if (RQS_LIKELY(old == 0))
		return TAKE_FREE;
	return old == RQSPIN__LOCKED_OWNER_DEAD ? TAKE_DEAD : TAKE_BUSY;
}

/* A dead holder's lock, taken over by take_byte. */
static __attribute__((noinline, cold)) void took_dead(rqspinlock_t *lock)
{
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
	(void)rqspin__owner_dead_taken(lock);
}

static bool take_past_own_pending(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *hot = rqspin__tls_self;
	enum take t;

	if (!own_pending_wait(lock))
		return false;
	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	rqspin__held_push(hot, lock);
	t = take_byte(lock);
	if (t == TAKE_FREE) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return true;
	}
	if (t == TAKE_DEAD) {
		took_dead(lock);
		return true;
	}
	if (!rqspin__held_pop_top(hot, lock))
		rqspin__held_pop_slow(hot, lock);
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
	return false;
}

/* A failed shim_lock: apply the policy; under "wait", keep waiting
 * without burning a CPU. The report was written by the hook. */
static __attribute__((noinline, cold)) int lock_failed(rqspinlock_t *l, int ret)
{
	for (;;) {
		enum policy p;
		uint64_t until, pause = BACKOFF_MIN_NS;

		switch (ret) {
		case 0:
		case -EOWNERDEAD:
			return 0;
		case -EDEADLK:
			p = last_event == RQSPIN_EV_NEST_FAIL ? POLICY_WAIT : deadlock_policy;
			break;
		case -ETIMEDOUT:
			p = timeout_policy;
			break;
		default:
			return -ret;
		}
		if (p == POLICY_ERROR)
			return -ret;
		if (p == POLICY_ABORT)
			abort();
		/* An AA relock fails at once and would otherwise spin
		 * through rqspin_lock: poll with trylock, sleeping. */
		until = now_ns() + POLL_TIMEOUTS * rqspin_get_default_timeout();
		do {
			if (shim_trylock(l) || take_past_own_pending(l))
				return 0;
			sleep_ns(pause);
			pause = pause * 2 < BACKOFF_MAX_NS ? pause * 2 : BACKOFF_MAX_NS;
		} while (now_ns() < until);
		/* Never rqspin_lock on a word bargers use: its pending
		 * waiter's plain store assumes nobody barges. */
		ret = shim_lock_raw(l);
	}
}

/* ---- Private locks in shared memory. ---- */

/*
 * With glibc a PTHREAD_PROCESS_PRIVATE spinlock works across processes
 * (it is one atomic word), and programs rely on it: they init locks in
 * MAP_SHARED memory as private and fork. A private rqspinlock's waiters
 * queue through per-process records and could wait forever there, so
 * such a lock is made process-shared (correct for one process too, just
 * not queued). The kernel's page flags tell: /proc/self/pagemap bit 61 is
 * "file page or shared anonymous" (the word was written first, so a
 * private page is an anonymous copy by now). Pages found private are
 * remembered (a direct-mapped cache), so inits of many locks in one page
 * cost one look. A page remembered as private and since remapped shared
 * is missed: that lock stays private. No /proc: locks stay private.
 * open/pread/close: async-signal-safe.
 */
#define PAGEMAP_SHARED (1ull << 61)
#define PRIVATE_PAGES 256u

static uintptr_t private_pages[PRIVATE_PAGES]; /* page number + 1 */

static bool in_shared_memory(const void *p)
{
	uintptr_t page = (uintptr_t)p / page_size;
	uintptr_t *slot = &private_pages[page % PRIVATE_PAGES];
	uint64_t entry = 0;
	int e = errno, fd;
	bool shared;

	/* Relaxed: each cache slot is one word, read and written whole;
	 * nothing else is published with it. */
	if (__atomic_load_n(slot, __ATOMIC_RELAXED) == page + 1)
		return false;
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		errno = e;
		return false;
	}
	shared = pread(fd, &entry, sizeof(entry), (off_t)(page * sizeof(entry))) ==
			 (ssize_t)sizeof(entry) &&
		 (entry & PAGEMAP_SHARED);
	close(fd);
	errno = e;
	if (!shared)
		__atomic_store_n(slot, page + 1, __ATOMIC_RELAXED);
	return shared;
}

SHIM_API int pthread_spin_init(pthread_spinlock_t *lock, int pshared)
{
	if (pshared == PTHREAD_PROCESS_SHARED) {
		rqspin_lock_init_pshared(as_rqspin(lock));
	} else if (pshared == PTHREAD_PROCESS_PRIVATE) {
		rqspin_lock_init(as_rqspin(lock));
		if (in_shared_memory(as_rqspin(lock)))
			rqspin_lock_init_pshared(as_rqspin(lock));
	} else {
		return EINVAL;
	}
	return 0;
}

SHIM_API int pthread_spin_destroy(pthread_spinlock_t *lock)
{
	return rqspin_is_locked(as_rqspin(lock)) ? EBUSY : 0;
}

/*
 * pthread_spin_lock is rqspin_lock with barging (slowpath.c, "Barging"): a
 * free lock is taken even while a waiter holds the pending bit, unless that
 * waiter has asked for the hand-off, as glibc's test-and-set lock lets the
 * releasing thread take the lock straight back; the pending waiter's
 * bounded wait keeps every thread progressing. Otherwise it is rqspin_lock
 * itself: the held entry before the take, the TSan annotations, the same
 * slow path. Everything that is not the uncontended case is a tail call:
 * the fast path then needs no stack frame, and every store before the
 * locked instruction (which waits for all of them) costs.
 *
 * The fast path's exchange (take_byte) is on the locked byte alone, the
 * size of the unlock's store. A 32-bit CAS that reads a byte the previous unlock has
 * just stored cannot take the value from the store buffer: it waits for
 * the store to reach the cache, about 3.5 ns per lock/unlock pair on the
 * AMD EPYC CI machines (2.45 ns with both accesses one size, 6.0 ns with
 * a byte store then a 32-bit CAS), more than the held table costs. glibc's
 * lock and unlock are both 32 bits wide. A byte exchange cannot see the
 * hand-off bit or the process-shared mark, so a load of the pending byte
 * comes first (byte-sized too: it does not overlap the unlock's store).
 */
#define PENDING_BYTE_KEEP_OUT ((RQSPIN__HANDOFF_VAL | RQSPIN__PSHARED_MARK) >> 8)
_Static_assert((RQSPIN__BARGE_KEEP_OUT & ~RQSPIN__LOCKED_MASK) >> 8 == PENDING_BYTE_KEEP_OUT,
	       "the keep-out bits other than the locked byte are all in the pending byte");

/*
 * Turns. Bargers are bounded by the pending waiter's hand-off request, but
 * only while that waiter runs: on a busy machine the queue's next head is
 * often still waiting for a CPU, nobody holds the pending bit, and the
 * running threads took the lock ahead of the queue for a whole scheduler
 * slice (96% of acquisitions at 32 threads with two CPU hogs found a queue
 * and no pending waiter). A thread's run of takes ahead of waiters is
 * therefore a turn of at most TURN_NS: once it is over, the thread's next
 * pthread_spin_lock that finds waiters queues behind them, and its turn
 * starts again after it has waited in line. The clock is read at the
 * first take of a turn and every TURN_CHECK takes, so the bound is
 * TURN_NS plus TURN_CHECK critical sections. Measured with rqspin-bench
 * shim at 32 threads: with two CPU hogs the worst thread's share of its
 * fair share over 400 ms rose from 1-14% to 28-35% (throughput 115-125 ->
 * 76-83 M/s, glibc 6-8); idle from 14% to 57-60%. A pending waiter alone
 * (two threads) is not a queue: its hand-off request bounds it, and a turn
 * would hand the lock to a waiter that may not be running.
 */
#define TURN_NS 1000000ull
#define TURN_CHECK 64u

struct turn {
	uint32_t takes; /* ahead of waiters, in this turn */
	bool over;
	uint64_t since;
};
/* initial-exec: a dynamic TLS access costs a call (and may allocate on
 * first touch, which a signal handler must not do). A handler's takes
 * count in the interrupted thread's turn; a torn update only moves the
 * turn's end. */
static __thread struct turn turn __attribute__((tls_model("initial-exec")));

static __attribute__((noinline)) void turn_check(struct turn *t)
{
	uint64_t now = now_ns();

	if (t->takes == 1)
		t->since = now;
	else if (now - t->since >= TURN_NS)
		t->over = true;
}

/* One more take ahead of waiters. */
static inline void turn_take(void)
{
	struct turn *t = &turn;

	if (RQS_UNLIKELY(++t->takes % TURN_CHECK == 1))
		turn_check(t);
}

/* The barging take of the fast paths: BARGE_TOOK when the word lets
 * bargers in and the locked byte was free (BARGE_TOOK_DEAD: its holder had
 * died, take_byte); else *val is the word for the
 * slow path, BARGE_IN_LINE when the caller's turn is over and a queue
 * waits (it must take the lock ahead of nobody).
 * The pending byte is read before the take, so that bargers never hold up,
 * even for a moment, a waiter that asked for the hand-off (checked after
 * the take, with the lock given back when the bit was set, a stream of such
 * takes at 32 threads on a busy machine cut the worst thread's share from
 * 10% to 2-7%). Relaxed: the bits only tell bargers to stay out (mutual
 * exclusion never depends on them: every taker of a barging word takes
 * the locked byte atomically); a hand-off asked between the load and the take applies
 * from the next release on, so each barger passes a new request at most
 * once. The process-shared mark never changes after init.
 * acquire on success: pairs with the release in rqspin_unlock. */
enum barge { BARGE_TOOK, BARGE_TOOK_DEAD, BARGE_SLOW, BARGE_IN_LINE };

/* A word with a waiter: take the lock (as barge_fast) unless the hand-off
 * was asked or, when a queue waits, our turn is over; count a take ahead
 * of a queue in our turn. The word is read again (relaxed, as in
 * barge_fast): passing barge_fast's loads cost it the bytes that keep its
 * uncontended path on one cache line. */
static __attribute__((noinline)) enum barge barge_waiters(rqspinlock_t *lock, uint32_t *val,
							  bool turns)
{
	uint8_t pending = __atomic_load_n(&lock->w.b.pending, __ATOMIC_RELAXED);
	enum take t;

	turns = turns && __atomic_load_n(&lock->w.h.tail, __ATOMIC_RELAXED);
	if (!(pending & PENDING_BYTE_KEEP_OUT)) {
		if (turns && turn.over) {
			*val = __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED);
			return BARGE_IN_LINE;
		}
		t = take_byte(lock);
		if (t != TAKE_BUSY) {
			if (turns)
				turn_take();
			return t == TAKE_FREE ? BARGE_TOOK : BARGE_TOOK_DEAD;
		}
	}
	*val = __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED);
	return BARGE_SLOW;
}

/* turns: pthread_spin_lock; a trylock takes any free lock, as glibc's.
 * The tail is a half-word load, clear of the unlock's byte store too;
 * relaxed, it only says whether a queue waits (a stale one miscounts one
 * take). Both loads and one test: anything longer pushed the uncontended
 * path's ret onto a second cache line, a cycle per pair. */
static inline __attribute__((always_inline)) enum barge barge_fast(rqspinlock_t *lock,
								  uint32_t *val, bool turns)
{
	uint8_t pending = __atomic_load_n(&lock->w.b.pending, __ATOMIC_RELAXED);
	uint16_t tail = __atomic_load_n(&lock->w.h.tail, __ATOMIC_RELAXED);
	enum take t;

	if (RQS_UNLIKELY(pending | tail))
		return barge_waiters(lock, val, turns);
	t = take_byte(lock);
	if (RQS_LIKELY(t == TAKE_FREE))
		return BARGE_TOOK;
	if (t == TAKE_DEAD)
		return BARGE_TOOK_DEAD;
	*val = __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED);
	return BARGE_SLOW;
}

/*
 * The watch. A waiter that finds only the holder (no pending bit, no
 * queue) and holds no other lock first waits as glibc's lock does: it
 * watches the word and takes the lock as it frees, for up to SHIM_WATCH_NS
 * (20 ms) of its own running time and at most WATCH_WALL_NS of wall time,
 * and only then enters the slow path (pending bit, queue, hand-off). Two
 * threads in a tight loop otherwise fell into the hand-off protocol after
 * a few microseconds of spinning (the slow path watches only ENTRY_SPINS
 * pauses), and with one CPU hog per CPU ran at 0.4-0.6x glibc's
 * throughput, against 0.82-0.95x with the watch (medians of eight runs of
 * 20-40 interleaved rounds of rqspin-shim-worker loop 2 1200 400, two
 * `yes` hogs). Running time, not wall time: a watcher that was preempted, or whose holder was, would otherwise
 * give up as soon as it ran again, and the hand-off that follows waits for
 * whichever thread is off the CPU next. Gaps between clock reads longer
 * than WATCH_GAP_NS are time off the CPU and do not count.
 *
 * The bound: a waiter that holds nothing else waits at most SHIM_WATCH_NS
 * of its running time (WATCH_WALL_NS of wall time) longer than the slow
 * path alone would make it, whose bounds then apply (HANDOFF_NS, turns).
 * A waiter that holds another lock (which includes a relock of a lock it
 * holds: AA) skips the watch, so that its deadlock checks run at once; so
 * does a lock call whose turn is over (it must queue), and any word with
 * waiters or with the process-shared mark (its own protocol).
 */
#ifndef SHIM_WATCH_NS
#define SHIM_WATCH_NS 20000000ull /* tests/rqspin.cmake builds one test without */
#endif
#define WATCH_GAP_NS 50000ull
/* Whatever the running time, the watch ends after this much wall time: a
 * thread that is traced, or under an emulator, may never see a short gap. */
#define WATCH_WALL_NS (10 * SHIM_WATCH_NS)
#define WATCH_CHECK 64u
/* A watch this long is a wait: see shim_watch. */
#ifndef WATCH_MARK_NS
#define WATCH_MARK_NS 20000ull /* tests/shim.cmake builds one shim with more */
#endif

#if SHIM_WATCH_NS
/* The watch's deference: a watcher that sees the lock free leaves it to
 * its last holder for WATCH_DEFER_NS, without reading the word in
 * between, and takes it only if it is free then (true; false: taken). A
 * lock that changes hands costs a cache-line transfer, and so does every
 * read of the word by a watcher while a holder re-takes it. glibc's
 * holder keeps most of a two-thread tight loop on one core because it
 * re-takes the lock a few instructions after the release; ours takes
 * longer to come back (the held table's push), and a watcher that took a
 * free lock at once, or that kept reading the word while it deferred,
 * won nearly every race: 0.61-0.81x glibc's throughput at two threads
 * idle and 0.73x with a CPU hog per core, against 1.8-2.3x and 0.95-1.22x
 * with 1 us of deference (rqspin-bench shim; 500 ns: 1.8-2.1x and
 * 0.85-1.24x, 250 ns: 1.8x and 0.84x). An adaptive deference
 * (halved when the lock was still free at its end) measured 0.9x: in a
 * tight loop the lock is free half of the time, whoever holds it.
 *
 * The bound is the watch's: a watcher defers only while it watches, and
 * the watch ends after SHIM_WATCH_NS of its running time (then the slow
 * path's hand-off bounds apply), so a holder that keeps re-taking the
 * lock delays it by that much at most. The price: a watcher whose holder
 * releases the lock and does not come back takes it WATCH_DEFER_NS late. */
#ifndef WATCH_DEFER_NS
#define WATCH_DEFER_NS 1000u
#endif

static bool watch_defer(rqspinlock_t *lock)
{
	uint64_t start = now_ns();

	do
		arch_cpu_relax();
	while (now_ns() - start < WATCH_DEFER_NS);
	return __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED) == 0;
}

/* true: the lock was taken (*dead: from a holder that died). Relaxed
 * loads: they only say when to try take_byte, which acquires. It is on
 * the locked byte, the size of the unlock's store (barge_fast); a waiter
 * that appears between the load and the exchange is passed once, as in
 * barge_fast. */
static bool shim_watch(rqspinlock_t *lock, bool *marked, bool *dead)
{
	uint64_t first = 0, last = 0, ran = 0;
	uint32_t i;

	for (i = 1;; i++) {
		uint32_t v = __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED);
		enum take t;

		/* Waiters, or a holder that died: the slow path's business
		 * (it takes a dead holder's lock over at once). */
		if ((v & ~RQSPIN__LOCKED_MASK) || v == RQSPIN__LOCKED_OWNER_DEAD)
			return false;
		bool deferred = false;

		if (v == 0) {
			deferred = true;
			if (watch_defer(lock) && (t = take_byte(lock)) != TAKE_BUSY) {
				*dead = t == TAKE_DEAD;
				return true;
			}
		}
		/* After a deference too: 64 of them between two clock reads
		 * would pass for time off the CPU (WATCH_GAP_NS). */
		if (deferred || i % WATCH_CHECK == 0) {
			uint64_t now = now_ns();

			if (!first)
				first = now;
			/* Past a quick hand-over: a waiter, as in the slow
			 * path (held.h, rqs_held_mark_attempt). Marked from
			 * the first check on, the mark and its confirmation
			 * cost the two-thread tight loop a third of its
			 * throughput. */
			if (!*marked && now - first >= WATCH_MARK_NS) {
				rqspin__held_mark_attempt(rqspin__tls_self, lock);
				*marked = true;
			}
			if (last && now - last < WATCH_GAP_NS)
				ran += now - last;
			if (ran >= SHIM_WATCH_NS || now - first >= WATCH_WALL_NS)
				return false;
			last = now;
		}
		arch_cpu_relax();
	}
}

#endif

static __attribute__((noinline)) int shim_lock_contended(rqspinlock_t *lock, uint32_t val,
							 enum barge how)
{
	uint8_t took = RQSPIN__TOOK_IN_LINE;
	bool in_line = how == BARGE_IN_LINE;
	int ret;

	if (how == BARGE_TOOK_DEAD) {
		took_dead(lock);
		return 0;
	}
	/* A signal handler over its own thread's wait for this lock: under
	 * the wait policy, wait as glibc does (take_past_own_pending),
	 * without the slow path's AA report: the lock will be released. */
	if (deadlock_policy == POLICY_WAIT && own_pending_wait(lock)) {
		if (!rqspin__held_pop_top(rqspin__tls_self, lock))
			rqspin__held_pop_slow(rqspin__tls_self, lock);
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
		return lock_failed(lock, -EDEADLK);
	}
	/* held.cnt: our table holds this lock's entry (pushed before the
	 * fast path's take) and nothing else. */
#if SHIM_WATCH_NS
	if (!in_line && !(val & ~RQSPIN__LOCKED_MASK) &&
	    __atomic_load_n(&rqspin__tls_self->held.cnt, __ATOMIC_RELAXED) == 1) {
		bool marked = false, dead = false;
		const void *outer = watching; /* a handler's watch over code that had none */

		watching = lock;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (shim_watch(lock, &marked, &dead)) {
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
			watching = outer;
			if (marked)
				rqspin__held_confirm(rqspin__tls_self, lock);
			if (dead)
				took_dead(lock);
			else
				RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
			return 0;
		}
		val = __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED);
		/* Still watching until the slow path, which marks the entry
		 * before it waits, has returned. */
		ret = rqspin__lock_slowpath_barging(lock, val, RQSPIN_TIMEOUT_DEFAULT, in_line,
						    &took);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		watching = outer;
		goto done;
	}
#endif
	ret = rqspin__lock_slowpath_barging(lock, val, RQSPIN_TIMEOUT_DEFAULT, in_line, &took);
#if SHIM_WATCH_NS
done:
#endif

	if (took == RQSPIN__TOOK_AHEAD)
		turn_take();
	else if (took == RQSPIN__TOOK_IN_LINE)
		turn = (struct turn){ 0 }; /* waited in line: a new turn */
	RQSPIN__TSAN_POST_LOCK(lock, (ret == 0 || ret == -EOWNERDEAD) ? RQSPIN__TSAN_TRY
								      : RQSPIN__TSAN_TRY_FAILED);
	if (RQS_LIKELY(ret == 0))
		return 0;
	return lock_failed(lock, ret);
}

/* A whole lock call with rqspin_lock's returns (no policy): for the
 * first call of a thread, a full table, and lock_failed's retries. */
static int shim_lock_raw(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self = rqspin__self();
	uint32_t val = 0;
	int ret = 0;

	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	rqspin__held_push(self, lock);
	/* acquire on success: as in shim_lock. */
	if (!__atomic_compare_exchange_n(&lock->w.val, &val, RQSPIN__LOCKED_VAL, 0,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) &&
	    ((val & RQSPIN__BARGE_KEEP_OUT) ||
	     !__atomic_compare_exchange_n(&lock->w.val, &val, val | RQSPIN__LOCKED_VAL, 0,
					  __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
		ret = rqspin__lock_slowpath_barging(lock, val, RQSPIN_TIMEOUT_DEFAULT, false,
						    &(uint8_t){ 0 });
	RQSPIN__TSAN_POST_LOCK(lock, (ret == 0 || ret == -EOWNERDEAD) ? RQSPIN__TSAN_TRY
								      : RQSPIN__TSAN_TRY_FAILED);
	return ret;
}

static __attribute__((noinline)) int shim_lock_cold(rqspinlock_t *lock);

/* shim_lock found waiters (pending bit or queue): barge_waiters. */
static __attribute__((noinline)) int shim_lock_waiters(rqspinlock_t *lock)
{
	uint32_t val;
	enum barge how = barge_waiters(lock, &val, true);

	if (how == BARGE_TOOK) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return 0;
	}
	return shim_lock_contended(lock, val, how);
}

/* shim_lock's take found the byte held, or a dead holder's. */
static __attribute__((noinline)) int shim_lock_busy(rqspinlock_t *lock, enum take t)
{
	if (t == TAKE_DEAD) {
		took_dead(lock);
		return 0;
	}
	return shim_lock_contended(lock, __atomic_load_n(&lock->w.val, __ATOMIC_RELAXED),
				   BARGE_SLOW);
}

/* shim_lock's bump found the table full: take it back, then the whole
 * lock call as rqspin_lock makes it (rqspin__held_push_full may reuse a
 * RELEASED mark). The bump was one instruction, and so is this: between
 * them our signal handlers only leave the count as they found it, or
 * lower (a drain that drops one of our untracked holds). */
static __attribute__((noinline)) int shim_lock_full(struct rqspin__thread_hot *self,
						    rqspinlock_t *lock)
{
	rqspin__counter_drop32(&self->held.cnt);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
	return shim_lock_cold(lock);
}

/* 0 or an error for pthread_spin_lock (after the policy). barge_fast,
 * unfolded so that every case but the free lock is a tail call: the fast
 * path then needs no stack frame (with barge_fast's *val it had one). */
static inline __attribute__((always_inline)) int shim_lock(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self = rqspin__tls_self;
	uint32_t cnt;
	uint8_t pending;
	uint16_t tail;
	enum take t;

	if (RQS_UNLIKELY(!self))
		return shim_lock_cold(lock);
	/* rqspin__held_push, inline (see there for the bump and the orders),
	 * with its test for a full table after the bump, not before it: a
	 * plain load of the count ahead of the bump, which read-modify-writes
	 * it, cost an uncontended pair 0.3-0.4 ns, about 8% of glibc's
	 * (an in-process A/B of the two builds on one CPU of the Zen 5 this
	 * was measured on, each alternating with glibc's). A full table then
	 * takes the bump back (one instruction) and goes to shim_lock_cold;
	 * a signal handler landing in between sees one more lock past the
	 * table, an untracked hold, for those few instructions. An empty
	 * table, the usual case, gets its entry at a fixed address: behind a
	 * predicted branch the store need not wait for the bump's result,
	 * which the next locked exchange would otherwise wait for. */
	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	cnt = rqspin__counter_bump32(&self->held.cnt);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (RQS_LIKELY(cnt == 0))
		__atomic_store_n(&self->held.locks[0], lock, __ATOMIC_RELAXED);
	else if (RQS_LIKELY(cnt < RQSPIN_NR_HELD))
		__atomic_store_n(&self->held.locks[(uintptr_t)cnt], lock, __ATOMIC_RELAXED);
	else
		return shim_lock_full(self, lock);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Relaxed, as in barge_fast. */
	pending = __atomic_load_n(&lock->w.b.pending, __ATOMIC_RELAXED);
	tail = __atomic_load_n(&lock->w.h.tail, __ATOMIC_RELAXED);
	if (RQS_UNLIKELY(pending | tail))
		return shim_lock_waiters(lock);
	t = take_byte(lock);
	if (RQS_LIKELY(t == TAKE_FREE)) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return 0;
	}
	return shim_lock_busy(lock, t);
}

/* A thread's first call registers the thread and then takes the usual
 * path: a first call that went straight to the slow path skipped the
 * watch, and two threads in a tight loop that started contended stayed
 * in the hand-off protocol. A full table goes to shim_lock_raw. */
static __attribute__((noinline)) int shim_lock_cold(rqspinlock_t *lock)
{
	int ret;

	if (!rqspin__tls_self &&
	    __atomic_load_n(&rqspin__self_slow()->held.cnt, __ATOMIC_RELAXED) < RQSPIN_NR_HELD)
		return shim_lock(lock);
	ret = shim_lock_raw(lock);
	return ret == 0 ? 0 : lock_failed(lock, ret);
}

SHIM_API SHIM_HOT int pthread_spin_lock(pthread_spinlock_t *lock)
{
	return shim_lock(as_rqspin(lock));
}

/* A barge whenever the locked byte is free and no waiter has asked for
 * the hand-off (glibc's trylock succeeds whenever the lock is free);
 * rqspin_trylock for process-shared words and under Valgrind. */
static bool shim_trylock(rqspinlock_t *lock)
{
	struct rqspin__thread_hot *self;
	enum barge how;
	uint32_t val;

	if (RQSPIN__ON_VALGRIND() ||
	    (__atomic_load_n(&lock->w.val, __ATOMIC_RELAXED) & RQSPIN__PSHARED_MARK))
		return rqspin_trylock(lock);
	/* Test first, as rqspin_trylock does: a busy lock costs no write. */
	if (__atomic_load_n(&lock->w.b.locked, __ATOMIC_RELAXED) != 0)
		return false;
	self = rqspin__self();
	RQSPIN__TSAN_PRE_LOCK(lock, RQSPIN__TSAN_TRY);
	rqspin__held_push(self, lock);
	how = barge_fast(lock, &val, false);
	if (how == BARGE_TOOK) {
		RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY);
		return true;
	}
	if (how == BARGE_TOOK_DEAD) {
		took_dead(lock);
		return true;
	}
	if (!rqspin__held_pop_top(self, lock))
		rqspin__held_pop_slow(self, lock);
	RQSPIN__TSAN_POST_LOCK(lock, RQSPIN__TSAN_TRY_FAILED);
	/* Kept out by a pending bit that asked for the hand-off: in a forked
	 * child it may be a vanished thread's, which rqspin_trylock repairs. */
	return (val & RQSPIN__PENDING_VAL) && rqspin_trylock(lock);
}

SHIM_API SHIM_HOT int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	return shim_trylock(as_rqspin(lock)) ? 0 : EBUSY;
}

static __attribute__((noinline)) int shim_unlock_slow(rqspinlock_t *lock)
{
	rqspin_unlock(lock);
	return 0;
}

/* The unlock of the only lock in the table (the usual case). The entry
 * and the count go in one store, not two: each store still in flight
 * when the next lock's exchange executes is waited for (it drains the
 * store buffer), and that wait was most of the cost of the held table on
 * an uncontended pair. One instruction also means our signal handlers
 * never see the cleared entry still counted (an untracked hold, as the
 * two-store pop shows them for a moment); other threads see the count
 * and the entry change in either order, each of which the two-store pop
 * shows them too. Under TSan (which does not see asm stores) and on other
 * architectures, the two stores of rqspin__held_pop_top. */
static inline __attribute__((always_inline)) int shim_unlock_only(struct rqspin__thread_hot *self,
								 rqspinlock_t *l)
{
	RQSPIN__TSAN_PRE_UNLOCK(l);
	__atomic_store_n(&l->w.b.locked, 0, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(RQSPIN__TSAN)
	_Static_assert(offsetof(struct rqspin_held_locks, cnt) == 0 &&
			       offsetof(struct rqspin_held_locks, locks) == 8,
		       "count, padding and the first entry fill the first 16 bytes");
	/* The padding word is never written but here, and only with 0. */
	arch_clear16(&self->held);
#else
	__atomic_store_n(&self->held.locks[0], (const void *)0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.cnt, 0, __ATOMIC_RELAXED);
#endif
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	RQSPIN__TSAN_POST_UNLOCK(l);
	return 0;
}

/* rqspin_unlock; anything but a lock on top of the table is a tail call,
 * as in pthread_spin_lock. */
SHIM_API SHIM_HOT int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	struct rqspin__thread_hot *self = rqspin__tls_self;
	rqspinlock_t *l = as_rqspin(lock);
	uint32_t cnt;

	if (RQS_UNLIKELY(!self))
		return shim_unlock_slow(l);
	cnt = __atomic_load_n(&self->held.cnt, __ATOMIC_RELAXED);
	if (RQS_LIKELY(cnt == 1 &&
		       __atomic_load_n(&self->held.locks[0], __ATOMIC_RELAXED) == l))
		return shim_unlock_only(self, l);
	if (RQS_UNLIKELY(cnt - 1 >= RQSPIN_NR_HELD ||
			     __atomic_load_n(&self->held.locks[cnt - 1], __ATOMIC_RELAXED) != l))
		return shim_unlock_slow(l);
	RQSPIN__TSAN_PRE_UNLOCK(l);
	/* rqspin_unlock's fast path (see there for the orders). */
	__atomic_store_n(&l->w.b.locked, 0, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.locks[cnt - 1], (const void *)0, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&self->held.cnt, cnt - 1, __ATOMIC_RELAXED);
	RQSPIN__TSAN_POST_UNLOCK(l);
	return 0;
}
