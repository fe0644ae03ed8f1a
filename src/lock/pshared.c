/* SPDX-License-Identifier: MIT */
/*
 * Process-shared rqspinlocks: a test-and-set protocol on the marked word.
 *
 * The private protocol's pending bit and MCS tail name thread slots of one
 * process, which another process cannot follow; here no waiter is ever
 * linked to another, so the only shared state is the word itself:
 *
 *   acquire   (mark, any id, 0)    -> (mark, my id, PSHARED_LOCKED)  [CAS]
 *   release   (mark, my id, held)  -> (mark, my id, 0)  [rqspin_unlock's
 *                                                        byte store]
 *   take over (mark, dead id, held or OWNER_DEAD) -> (mark, my id, held)
 *
 * The take-over CAS expects the exact word the death check was made on,
 * so a holder that changed in between (released, re-acquired by anyone)
 * makes it fail and the waiter looks again.
 *
 * Waiting: the unlock is one plain store that wakes nobody, so waiters
 * poll. They spin (the holder is most likely running), then yield, then
 * sleep with a doubling pause capped at PAUSE_MAX_NS, so that a long hold
 * costs its waiters little CPU and a release is noticed within ~1 ms.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "arch/clock.h"
#include "lock/deadlock.h"
#include "lock/held.h"
#include "lock/pshared.h"
#include "lock/registry.h"
#include "lock/report.h"
#include "lock/stall.h"
#include "lock/wait.h"

#define NSEC_PER_MSEC 1000000ull
/* Yields after the spin budget, before waiters start to sleep. */
#define YIELD_BUDGET 64u
#define PAUSE_MIN_NS 16000ull
#define PAUSE_MAX_NS NSEC_PER_MSEC
/* A holder is looked up in /proc (zombie?) once the word has not changed
 * for this long: a lock in use changes hands long before. */
#define ZOMBIE_CHECK_NS (10ull * NSEC_PER_MSEC)
/* Timeout: 4T, the budget of waiters without a queue. */
#define TIMEOUT_FACTOR 4u

#define TID_LOW_BITS 6
#define TID_LOW_SHIFT 9
#define TID_HIGH_SHIFT 16
#define TID_LIMIT (1u << 22)

_Static_assert(RQSPIN__PSHARED_MARK == 1u << (TID_LOW_SHIFT + TID_LOW_BITS),
	       "the id's low bits sit just below the mark");
_Static_assert(RQSPIN__PSHARED_LOCKED != RQSPIN__LOCKED_VAL &&
		       RQSPIN__PSHARED_LOCKED != RQSPIN__LOCKED_OWNER_DEAD,
	       "a pshared holder is told apart from a private one");

static inline uint32_t tid_encode(pid_t tid)
{
	uint32_t t = tid > 0 && (uint32_t)tid < TID_LIMIT ? (uint32_t)tid : 0;

	return ((t & ((1u << TID_LOW_BITS) - 1)) << TID_LOW_SHIFT) |
	       ((t >> TID_LOW_BITS) << TID_HIGH_SHIFT);
}

static inline pid_t tid_decode(uint32_t val)
{
	return (pid_t)(((val >> TID_LOW_SHIFT) & ((1u << TID_LOW_BITS) - 1)) |
		       ((val >> TID_HIGH_SHIFT) << TID_LOW_BITS));
}

/* Relaxed: a look only decides whether to try; the CAS that takes the
 * lock is the acquire. */
static inline uint32_t word_load(rqspinlock_t *l)
{
	return __atomic_load_n(&l->w.val, __ATOMIC_RELAXED);
}

/* val -> the caller's held word. acquire on success: pairs with the
 * release store of rqspin_unlock (or the dead holder's last release), so
 * the critical section starts after the previous one. */
static inline bool word_take(rqspinlock_t *l, uint32_t *val, uint32_t mine)
{
	return __atomic_compare_exchange_n(&l->w.val, val, mine, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static inline uint32_t locked_byte(uint32_t val)
{
	return val & RQSPIN__LOCKED_MASK;
}

static uint32_t my_word(struct rqspin_thread *self)
{
	return RQSPIN__PSHARED_MARK | RQSPIN__PSHARED_LOCKED |
	       tid_encode(atomic_load_explicit(&self->tid, memory_order_relaxed));
}

bool rqs_pshared_may_hold(const void *lock, const struct rqspin_thread *t)
{
	uint32_t val = __atomic_load_n(&((const rqspinlock_t *)lock)->w.val, __ATOMIC_RELAXED);
	uint32_t id = tid_encode(atomic_load_explicit(&t->tid, memory_order_relaxed));

	if (!(val & RQSPIN__PSHARED_MARK) || !id)
		return true;
	return val == (RQSPIN__PSHARED_MARK | RQSPIN__PSHARED_LOCKED | id);
}

bool rqspin__pshared_trylock(rqspinlock_t *lock, uint32_t val)
{
	struct rqspin_thread *self = registry_self();
	uint32_t mine = my_word(self);

	while ((val & RQSPIN__PSHARED_MARK) && locked_byte(val) == 0) {
		if (word_take(lock, &val, mine)) {
			/* It was free, so older entries of ours for it are
			 * holds another process released (see pshared_wait).
			 * The newest is this call's, the one below it perhaps
			 * an interrupted call's (rqs_held_drop_stale). */
			rqs_held_drop_stale(self, lock, 2);
			rqs_held_note_pshared(self, lock);
			return true;
		}
	}
	return false;
}

/* Is the thread tid gone? ESRCH: no such task (in our PID namespace);
 * EPERM means it exists. The zombie check reads /proc, so the caller
 * asks for it only once the word has stood still for a while. */
static bool holder_dead(pid_t tid, bool check_zombie)
{
	int e = errno;
	bool dead;

	if (tid <= 0)
		return false;
	dead = kill(tid, 0) != 0 && errno == ESRCH;
	/* A killed process stays a zombie ('Z', then 'X') until it is
	 * reaped, and kill() still finds it. */
	if (!dead && check_zombie) {
		char st = rqs_stall_thread_state(tid);

		dead = st == 'Z' || st == 'X';
	}
	errno = e;
	return dead;
}

static void pause_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ns };
	int e = errno;

	nanosleep(&ts, NULL); /* EINTR: the caller re-checks anyway */
	errno = e;
}

struct pwait {
	struct rqspin_thread *self;
	rqspinlock_t *lock;
	uint64_t start, deadline, last_check;
	uint64_t pause;
	uint64_t same_since; /* when the word was last seen to change */
	uint32_t same_val;
	uint32_t iter;
	int event;
	pid_t holder; /* for the timeout report */
	struct deadlock_chain chain;
};

static __attribute__((noinline, cold)) void fail(struct pwait *w, int ret)
{
	/* The failed attempt leaves the table before the report (a hook
	 * that takes its time must not make us look like a holder). */
	rqs_held_release_entry(w->self, w->lock);
	rqs_failure_count(w->self, w->event);
	if (rqs_report_wanted()) {
		struct rqspin_report rep;

		rqs_failure_report_build(&rep, w->event, ret, w->lock,
				     w->start ? rqs_arch_now_ns() - w->start : 0, w->self, &w->chain);
		if (w->event == RQSPIN_EV_TIMEOUT && w->holder > 0) {
			/* The holder may live in another process: only its
			 * id is known. */
			rep.nthreads = 2;
			rep.threads[1].tid = w->holder;
		}
		rqs_report_emit(&rep);
	}
}

static __attribute__((noinline, cold)) void report_owner_dead(struct pwait *w)
{
	struct rqspin_report rep = {
		.event = RQSPIN_EV_OWNER_DEAD,
		.error = -EOWNERDEAD,
		.lock = w->lock,
		.waited_ns = w->start ? rqs_arch_now_ns() - w->start : 0,
		.nthreads = 2,
	};

	rqs_report_fill_thread(&rep.threads[0], w->self, w->lock);
	rep.threads[1].tid = w->holder;
	rqs_report_emit(&rep);
}

/* The checks of one wait, at most once per millisecond after the first:
 * timeout, then a cycle among this process's threads. Returns 0 or the
 * error. (The dead-holder check is the caller's: it acquires.) */
static int check(struct pwait *w, uint64_t now)
{
	int ev;

	if (now >= w->deadline) {
		w->event = RQSPIN_EV_TIMEOUT;
		return -ETIMEDOUT;
	}
	ev = rqs_deadlock_find(w->self, w->lock, &w->chain);
	if (ev) {
		w->event = ev;
		return -EDEADLK;
	}
	return 0;
}

/* Between two looks at the word: pause, yield or sleep by how long we
 * have waited. */
static void step(struct pwait *w)
{
	uint32_t i = ++w->iter;

	if (i < SPIN_BUDGET) {
		arch_cpu_relax();
	} else if (i < SPIN_BUDGET + YIELD_BUDGET) {
		stat_inc(&w->self->stats.yielded);
		rqs_os_yield();
	} else {
		stat_inc(&w->self->stats.yielded);
		pause_ns(w->pause);
		w->pause = w->pause * 2 < PAUSE_MAX_NS ? w->pause * 2 : PAUSE_MAX_NS;
	}
}

static int pshared_wait(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns);

/* The wait, published for the deadlock searches of this process's other
 * threads (waiting_for, candidate bit; see deadlock.h), with the fence
 * that makes the first search see a partner that starts at the same time. */
int rqs_pshared_lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns)
{
	struct rqspin_thread *self = registry_self();
	struct wait_token tok;
	int ret;

	rqs_deadlock_wait_begin(self, lock, &tok);
#ifndef RQSPIN__TSAN
	if (tok.holding)
		atomic_thread_fence(memory_order_seq_cst);
#endif
	ret = pshared_wait(lock, val, timeout_ns);
	rqs_deadlock_wait_end(self, &tok);
	if (ret == 0 || ret == -EOWNERDEAD)
		rqs_held_note_pshared(self, lock);
	return ret;
}

static int pshared_wait(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns)
{
	struct pwait w = { .self = registry_self(), .lock = lock, .pause = PAUSE_MIN_NS };
	uint32_t mine = my_word(w.self);
	int ret;

	/* Our table says we hold it, but the word names another holder (or
	 * none): a thread of another process unlocked it for us, and it
	 * cannot post the release to our table. The word is the truth.
	 * Checked before the free lock is taken too (every acquisition of a
	 * pshared lock comes here, after the inline CAS failed on the mark):
	 * a lock that another process keeps unlocking for us would otherwise
	 * leave one entry per acquisition, until the table overflowed and
	 * AA detection was lost for every lock of the thread. The newest
	 * hold entry stays (perhaps a lock call we interrupted, in a
	 * handler): at most one stale entry per lock remains. Our own
	 * entry is marked as an attempt, not a hold. */
	if (val != mine) {
		rqs_held_drop_stale(w.self, lock, 1);
		val = word_load(lock);
	}
	if (locked_byte(val) == 0 && word_take(lock, &val, mine)) {
		stat_inc(&w.self->stats.stolen);
		return 0;
	}
	if (held_aa(w.self, lock)) {
		w.event = RQSPIN_EV_AA;
		fail(&w, -EDEADLK);
		return -EDEADLK;
	}
	for (;;) {
		uint32_t locked = locked_byte(val);

		if (locked == 0 && word_take(lock, &val, mine)) {
			stat_inc(&w.self->stats.stolen);
			return 0;
		}
		if (locked == RQSPIN__LOCKED_OWNER_DEAD && word_take(lock, &val, mine))
			goto took_over;
		if (locked != 0 && locked != RQSPIN__LOCKED_OWNER_DEAD &&
		    (w.iter % CHECK_INTERVAL == CHECK_INTERVAL - 1 || w.iter >= SPIN_BUDGET)) {
			uint64_t now = rqs_arch_now_ns();

			if (!w.start) {
				w.start = w.last_check = w.same_since = now;
				w.same_val = val;
				/* Saturating: a huge timeout waits for good. */
				w.deadline = timeout_ns > (UINT64_MAX - now) / TIMEOUT_FACTOR
						     ? UINT64_MAX
						     : now + TIMEOUT_FACTOR * timeout_ns;
			} else if (now - w.last_check >= NSEC_PER_MSEC) {
				w.last_check = now;
				if (val != w.same_val) {
					w.same_val = val;
					w.same_since = now;
				}
				w.holder = tid_decode(val);
				if (holder_dead(w.holder, now - w.same_since >= ZOMBIE_CHECK_NS) &&
				    word_take(lock, &val, mine))
					goto took_over;
				ret = check(&w, now);
				if (ret) {
					fail(&w, ret);
					return ret;
				}
			}
		}
		step(&w);
		val = word_load(lock);
	}

took_over:
	w.holder = tid_decode(val);
	stat_inc(&w.self->stats.owner_dead);
	if (rqs_report_wanted())
		report_owner_dead(&w);
	return -EOWNERDEAD;
}
