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
 *    nested in its thread's own wait) or a timeout it writes one report
 *    line to stderr per lock and kind, then by policy:
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
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/lock_diag.h>
#include <rqspin/rqspinlock.h>

#define SHIM_API __attribute__((visibility("default")))

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

static enum policy policy_of(enum rqspin_event ev)
{
	switch (ev) {
	case RQSPIN_EV_TIMEOUT: return timeout_policy;
	case RQSPIN_EV_OWNER_DEAD: return POLICY_WAIT; /* acquired: nothing to do */
	default: return deadlock_policy;
	}
}

static const char *what_of(enum rqspin_event ev)
{
	switch (ev) {
	case RQSPIN_EV_AA: return "deadlock (AA: the thread already holds it)";
	case RQSPIN_EV_ABBA: return "deadlock (ABBA: two threads wait for each other)";
	case RQSPIN_EV_CYCLE: return "deadlock (a cycle of threads)";
	case RQSPIN_EV_NEST_FAIL:
		return "deadlock (a signal handler interrupted its thread's wait)";
	case RQSPIN_EV_TIMEOUT: return "no progress for the timeout";
	case RQSPIN_EV_OWNER_DEAD: return "holder died holding it; lock taken over";
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
	if (!first_report(rep->lock, rep->event))
		return;
	put_str(&l, "rqspin-pthread: pthread_spin_lock(");
	put_num(&l, (uintptr_t)rep->lock, 16);
	put_str(&l, "): ");
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

/* A failed rqspin_lock: apply the policy; under "wait", keep waiting
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
			p = deadlock_policy;
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
			if (rqspin_trylock(l))
				return 0;
			sleep_ns(pause);
			pause = pause * 2 < BACKOFF_MAX_NS ? pause * 2 : BACKOFF_MAX_NS;
		} while (now_ns() < until);
		ret = rqspin_lock(l);
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

SHIM_API int pthread_spin_lock(pthread_spinlock_t *lock)
{
	int ret = rqspin_lock(as_rqspin(lock));

	if (RQSPIN__LIKELY(ret == 0))
		return 0;
	return lock_failed(as_rqspin(lock), ret);
}

SHIM_API int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	return rqspin_trylock(as_rqspin(lock)) ? 0 : EBUSY;
}

SHIM_API int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	rqspin_unlock(as_rqspin(lock));
	return 0;
}
