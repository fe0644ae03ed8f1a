/* SPDX-License-Identifier: MIT */
/*
 * The contended path shared by qspinlock and rqspinlock.
 *
 * One implementation, instantiated twice: slowpath() is always inlined with
 * `res` a constant, so the qspinlock copy has the resilient parts (held
 * table checks, timeouts, error exits) compiled out.
 *
 * The algorithm is the kernel's queued spinlock (a pending bit for the
 * first waiter, then an MCS queue whose head spins on the lock word) with
 * the final upstream rqspinlock behaviour on top (docs/design.md, "Lock
 * word"), and these userspace changes:
 *
 *  - waiting is staged (spin, then sleep or yield; see wait.h);
 *  - a running thread may take a free lock ahead of the queue ("steal")
 *    while no waiter holds the pending bit. The queue head always takes
 *    the pending bit first, then waits for the locked byte: while the head
 *    runs the queue is strictly FIFO, and the lock is stolen only in the
 *    gaps where the next head is still being woken. Without this, every
 *    hand-off on an oversubscribed machine would wait for a sleeping
 *    thread to be scheduled (the collapse of FIFO locks on busy machines);
 *  - deadlock searches run before a waiter starts to wait and then on a
 *    doubling schedule (10 us .. 1 ms), only by waiters that hold another
 *    lock, and find only cycles through the waiter (deadlock.h);
 *  - a passed deadline fails the wait only when the thread waited for is
 *    blocked, stopped, or has run a whole budget of CPU time (stall.h):
 *    preemption is not a stall;
 *  - in a forked child, what vanished threads left in a lock word (held
 *    byte, pending bit, queue) is found and repaired by the child thread
 *    that waits on that lock, never by fork itself;
 *  - barging mode (the drop-in pthread_spin_lock only, see "Barging"
 *    below): running threads may take a free lock even while a waiter
 *    holds the pending bit, until that waiter has waited HANDOFF_NS and
 *    sets the hand-off bit.
 *
 * Lock word transitions, as (tail, pending, locked):
 *   fast path         (0,0,0) -> (0,0,1)
 *   pending waiter    (0,0,*) -> (0,1,*) ... (0,1,0) -> (*,0,1)
 *   queue             (t,p,l) -> (me,p,l)                 [tail exchange]
 *   queue head        (*,0,*) -> (*,1,*) ... (*,1,0) -> (*,0,1)
 *   last in queue     (me,1,0) -> (0,0,1)
 *   steal             (*,0,0) -> (*,0,1)
 *   owner died        (*,*,1) -> (*,*,OWNER_DEAD)        [rqspinlock]
 * Only the holder of the pending bit may turn the locked byte from free to
 * held while the bit is set, which is what lets that holder use a plain
 * store for (*,1,0) -> (*,0,1). Except in barging mode, with the hand-off
 * bit h as part of the pending byte (p,h):
 *   barge             (*,p,0,0) -> (*,p,0,1)     [any running thread]
 *   ask for hand-off  (*,1,0,*) -> (*,1,1,*)     [pending holder, after
 *                                                 HANDOFF_NS of waiting]
 *   pending takes     (*,1,h,0) -> (*,0,0,1)     [a CAS: bargers race it]
 * h is set only by the pending bit's holder and cleared with the bit, so
 * h implies p; a barger that finds h set queues like everybody else.
 *
 * Like the kernel, the word is also accessed in parts: the tail half-word
 * (exchange), the locked+pending half-word (that store) and the locked
 * byte (unlock). C11 does not define mixed-size atomic accesses to one
 * object; GCC and Clang emit single sized instructions for them, which
 * x86-64 and AArch64 (whose memory model covers mixed-size accesses) keep
 * single-copy atomic and coherent with the 32-bit ones; the kernel relies
 * on the same. The algorithm itself, under sequentially consistent
 * interleavings, is model-checked by tests/model/ (SPIN).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>

#include <rqspin/qspinlock.h>
#include <rqspin/rqspinlock.h>

#include "arch.h"
#include "arch/clock.h"
#include "lock/deadlock.h"
#include "lock/barging.h"
#include "lock/held.h"
#include "lock/pshared.h"
#include "common/assert.h"
#include "lock/registry.h"
#include "lock/report.h"
#include "lock/settings.h"
#include "lock/stall.h"
#include "lock/wait.h"

#define NSEC_PER_MSEC 1000000ull
/* Deadlock searches: the first before waiting, then after 10 us, 20 us,
 * ... up to once per millisecond (the kernel's rate). */
#define CHECK_GAP_FIRST (10 * 1000ull)
#define CHECK_GAP_MAX NSEC_PER_MSEC
#define SPIN_BUDGET_HOLDING (SPIN_BUDGET / 16)
/* Spins on a pending->locked hand-over in flight (x86 kernel value). */
#define PENDING_LOOPS 512u
/* Spins a newcomer spends trying to take a free lock before queueing. */
#define STEAL_SPINS 128u
/*
 * The entry watch: a waiter that finds the lock held and nobody waiting
 * watches the word and takes the lock as it frees, as a test-and-test-
 * and-set lock would, for up to ENTRY_WATCH_NS of wall time (the clock is
 * read every ENTRY_CHECK pauses), and only then takes the pending bit.
 * Two threads in a tight loop then pass the lock back and forth at the
 * rate the watcher catches it free, not on every acquisition: the pending
 * hand-shake moves the lock's and the critical section's cache lines at
 * each one. A watch of ENTRY_SPINS pauses only (a few microseconds) gave
 * 0.56-0.68x glibc's pthread_spin_lock at 2 threads; 20, 50 and 200 us
 * gave 0.90-1.22x, with every thread keeping >= 0.9 of its fair share
 * over each 400 ms (rqspin-bench lock --threads 2 --think 0, 2 rounds).
 * The bound: a watcher waits at most ENTRY_WATCH_NS longer than the
 * pending protocol alone would make it. A waiter that holds other locks
 * (it searched for deadlocks before watching) and a barging one (the
 * shim, whose own watch came first) watch ENTRY_SPINS pauses only. The
 * waiter's entry is marked as an attempt at the first clock read.
 */
#define ENTRY_SPINS 128u
#define ENTRY_WATCH_NS (50 * 1000ull)
#define ENTRY_CHECK 64u /* pauses between clock reads */
/*
 * Barging: glibc's test-and-set spinlock lets the thread that releases a
 * lock take it straight back, which keeps the lock's cache line on one
 * core through a run of acquisitions; a strict hand-over to the waiter
 * moves the line on every acquisition (0.4x glibc's throughput in a
 * two-thread tight loop). The drop-in shim therefore lets running threads
 * take a free lock ahead of the pending waiter, for a bounded time: the
 * waiter that holds the pending bit (the next in line) asks for the lock
 * after HANDOFF_NS by setting the hand-off bit, and from the next release
 * on nobody but it may take the lock. The queue behind it is FIFO as
 * always, so a thread waits at most about (threads ahead) x HANDOFF_NS
 * beyond the critical sections themselves. rqspin_lock and qspin_lock
 * never barge.
 */
#define HANDOFF_NS (50 * 1000ull)
/*
 * Barging moves the queue only when its head runs: each step needs the
 * next waiter on a CPU, and on a busy machine a thread that sched_yield()s
 * or sleeps until woken may wait many scheduler slices for one (a yield
 * pushes the thread's EEVDF deadline back each time). In barging mode the
 * waiters that must run soon therefore never yield and never sleep
 * unbounded: the pending holder and the queue head poll with sleeps of
 * BARGE_POLL_NS, and the head wakes its successor as soon as it becomes
 * head, so that the successor polls too and is on a CPU when its turn
 * comes. Measured with rqspin-bench shim at 32 threads: without these, a
 * thread could sit in the queue for over 400 ms.
 */
#define BARGE_POLL_NS (20 * 1000ull)

typedef union rqspin__word lockword_t;

/* One slow-path call. */
struct waiter {
	struct rqspin_thread *self;
	lockword_t *lock;
	bool res;          /* resilient: check deadlocks and timeouts */
	bool barge;        /* barging mode (the pthread_spin shim) */
	/* Barging: may take a free lock ahead of waiters; false once the
	 * caller's turn is over (pthread_shim.c, "Turns"). */
	bool steal;
	uint8_t took;      /* barging: how the lock was taken (barging.h) */
	bool have_pending; /* we hold the pending bit */
	bool handoff_asked; /* barging: we set the hand-off bit */
	uint64_t handoff_at; /* barging: when the pending holder asks */
	bool published;    /* waiting_for/role are ours to restore */
	bool marked;       /* our held entry shows an attempt (held.h) */
	struct wait_token tok; /* what we published for other threads' searches */
	/* Pause iterations before yielding or parking. Shorter for a waiter
	 * that holds other locks: when the thread it waits for shares its
	 * CPU, that thread must run to release, or to find the cycle they
	 * are both in, and 1024 pauses are ~30 us of delay each time. */
	uint32_t spin_budget;
	uint64_t timeout;  /* T of this call */
	uint64_t start;    /* first clock read, for reports */
	uint64_t duration; /* of the current wait class: T, 2T or 4T */
	uint64_t deadline; /* 0 until the current wait's first check */
	uint64_t next_check; /* next deadlock search */
	uint64_t check_gap;
	int event;         /* why it failed */
	uint32_t spins;
	/* What this slow path overwrote in the thread record (a signal
	 * handler's slow path restores the interrupted one's). */
	uint32_t prev_role;
	/* The thread we wait for, while it runs past the deadline. */
	pid_t stall_tid;
	uint32_t stall_unknown; /* deadline checks in a row that found nobody */
	bool stall_gone;   /* a blocker already found gone once (stalled) */
	uint64_t stall_cpu0;
	/* What the deadlock check found: read only after a search filled
	 * it (an ABBA or cycle report); in the caller's frame, never
	 * initialised (136 bytes). */
	struct deadlock_chain *chain;
};

/*
 * Field by field, not with an initialiser: GCC zero-fills a struct above
 * 64 bytes with a rep stos, whose start-up cost on every slow-path call
 * made qspin 20% slower at 4-8 threads, where nearly every acquisition
 * is a steal from the slow path (rqspin-bench lock --think 0: 28 vs 35
 * M/s). Not set here, because they are written before any read:
 * handoff_at (handoff_arm), tok and prev_role (wait_publish, read only
 * once published), stall_cpu0 (with stall_tid), the chain's contents
 * (a search). A new field must be added here.
 */
static inline void waiter_init(struct waiter *w, struct rqspin_thread *self, lockword_t *lock,
			       bool res, bool barge, bool steal, uint64_t timeout,
			       struct deadlock_chain *chain)
{
	w->self = self;
	w->lock = lock;
	w->res = res;
	w->barge = barge;
	w->steal = steal;
	w->took = 0;
	w->have_pending = false;
	w->handoff_asked = false;
	w->published = false;
	w->marked = false;
	w->tok.holding = false;
	w->tok.candidate = false;
	w->spin_budget = SPIN_BUDGET;
	w->timeout = timeout;
	w->start = 0;
	w->duration = 0;
	w->deadline = 0;
	w->next_check = 0;
	w->check_gap = 0;
	w->event = 0;
	w->spins = 0;
	w->stall_tid = 0;
	w->stall_unknown = 0;
	w->stall_gone = false;
	w->chain = chain;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t sat_mul(uint64_t a, uint64_t k)
{
	return a > UINT64_MAX / k ? UINT64_MAX : a * k;
}

static inline void set_role(struct waiter *w, uint32_t role)
{
	if (w->res)
		atomic_store_explicit(&w->self->role, role, memory_order_relaxed);
}

static inline uint32_t word_load(lockword_t *l, memory_order mo)
{
	return atomic_load_explicit((_Atomic uint32_t *)&l->val, mo);
}

static inline bool word_cas(lockword_t *l, uint32_t *old, uint32_t new, memory_order mo)
{
	return atomic_compare_exchange_weak_explicit((_Atomic uint32_t *)&l->val, old, new, mo,
						     memory_order_relaxed);
}

static inline bool lock_free_or_dead(uint32_t val)
{
	uint32_t locked = val & RQSPIN__LOCKED_MASK;

	return locked == 0 || locked == RQSPIN__LOCKED_OWNER_DEAD;
}

static inline bool locked_dead(uint32_t val)
{
	return (val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_OWNER_DEAD;
}

/* (*,1,x) -> (*,0,1) by the pending bit's holder, which alone may take the
 * lock while the bit is set: a 16-bit store suffices (the kernel's
 * clear_pending_set_locked). Relaxed: the acquire load that saw the locked
 * byte free already ordered our critical section after the last one. */
static inline void clear_pending_set_locked(lockword_t *l)
{
	atomic_store_explicit((_Atomic uint16_t *)&l->h.locked_pending, RQSPIN__LOCKED_VAL,
			      memory_order_relaxed);
}

static inline void clear_pending(lockword_t *l)
{
	atomic_fetch_and_explicit((_Atomic uint32_t *)&l->val, ~RQSPIN__PENDING_MASK,
				  memory_order_relaxed);
}

static void wait_begin(struct waiter *w, uint64_t duration)
{
	w->duration = duration;
	w->deadline = 0;
	w->spins = 0;
	w->stall_tid = 0;
	w->stall_unknown = 0;
	w->stall_gone = false;
}

/* Who keeps lock from us: its holder, or when it is free the pending
 * waiter (which a queue head waits for). NULL when the tables do not tell. */
static const struct rqspin_thread *blocker_of_lock(const struct rqspin_thread *self,
						  const void *lock, bool have_pending)
{
	uint32_t val = __atomic_load_n(&((const lockword_t *)lock)->val, __ATOMIC_RELAXED);
	const struct rqspin_thread *b = NULL;

	if ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL)
		b = rqs_deadlock_holder(self, lock);
	/* Held by nobody's table: a waiter that took it through the pending
	 * bit still shows its attempt until it returns. */
	if (!b && ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL ||
		   ((val & RQSPIN__PENDING_MASK) && !have_pending)))
		b = rqs_deadlock_waiter(self, lock, SLOT_USED, ROLE_PENDING);
	return b;
}

/* The thread whose progress this wait depends on. A blocker that itself
 * waits for a lock is not the one to judge: follow its wait (a holder
 * asleep in a queue behind a preempted owner is not stalled; the owner
 * decides). Cycles are the deadlock check's business: the walk is capped. */
static const struct rqspin_thread *blocker_of(struct waiter *w)
{
	const struct rqspin_thread *b = blocker_of_lock(w->self, w->lock, w->have_pending);
	unsigned steps;

	for (steps = 0; b && steps < RQSPIN_REPORT_MAX_CYCLE; steps++) {
		const void *next = held_waiting_for(b);
		const struct rqspin_thread *nb;

		if (!next)
			break;
		nb = blocker_of_lock(b, next, false);
		if (!nb || nb == w->self)
			break;
		b = nb;
	}
	return b;
}

#ifdef RQSPIN_LOCK_TEST_HOOKS
/* Test builds (tests/rqspin.cmake compiles this file once more with
 * RQSPIN_LOCK_TEST_HOOKS): called where a race with another thread
 * matters, so that a test can run that thread's step there. */
enum { LOCK_HOOK_STALL_STATE = 1 /* a stall check read the blocker's state */ };
void (*rqs_lock_test_hook)(unsigned where);
#define LOCK_TEST_HOOK(w)                            \
	do {                                         \
		if (rqs_lock_test_hook)              \
			rqs_lock_test_hook(w);       \
	} while (0)
#else
#define LOCK_TEST_HOOK(w) ((void)0)
#endif

/* A full fence between our stores and the loads after it (store-load
 * order; see its callers for who pairs with whom). */
static inline void store_load_fence(void)
{
#ifndef RQSPIN__TSAN
	atomic_thread_fence(memory_order_seq_cst);
#else
	/* TSan does not model fences (and GCC warns about them); it checks
	 * races, not this store-load order, so a compiler barrier will do. */
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/*
 * The lock is held and no table names its holder, at two looks 1 ms
 * apart (stalled): is it a lock an exited thread held past its table?
 * Such a lock has no entry anywhere, so rqs_held_abandon could not mark
 * it owner-dead; it only counted it (rqs_held_orphans). It is one of
 * those when nobody else can hold it: no live thread's table names it
 * (nor a taker that still shows its wait), no live or vanished thread
 * holds untracked locks (ourselves included: an AA past our own table
 * must end in -ETIMEDOUT, as documented), and every live thread has a
 * table we can read (no slotless thread). Then we mark it owner-dead,
 * consuming one orphan, and whoever takes it next gets -EOWNERDEAD.
 *
 * Why nobody else holds it: a live thread's untracked hold is in its
 * count (pushed before the CAS that took the lock, dropped after the
 * release store), and its table's entries and count are read here after
 * the word was seen held, twice, 1 ms apart; a count written before the
 * CAS but not yet visible to us for a whole millisecond would be needed
 * to fool both looks. A lock of another process in shared memory, or a
 * word a program wrote itself, is outside the contract (rqspinlock.h).
 *
 * Orders: the acquire fence after reading the tables pairs with the
 * release fence before an exiting thread empties its table: a table
 * read empty shows that thread's orphans counted, and what it wrote
 * under the lock. The CAS is release, so that the next taker's acquire
 * sees it all too.
 */
static bool orphan_repair(struct waiter *w)
{
	lockword_t *l = w->lock;
	uint32_t val;

	/* Only the pending waiter, the one thread that may take the lock
	 * once it is free (in barging mode, once it asked for the hand-off):
	 * between our look and our CAS the lock cannot pass to a new holder
	 * (a cross-thread unlock of the orphan frees it; then the CAS fails). */
	if (!w->res || !w->have_pending || (w->barge && !w->handoff_asked) || !rqs_held_orphans())
		return false;
	store_load_fence();
	val = word_load(l, memory_order_relaxed);
	if ((val & RQSPIN__LOCKED_MASK) != RQSPIN__LOCKED_VAL || (val & RQSPIN__PSHARED_MARK))
		return false;
	/* The taker first: one that takes the lock shows its hold before it
	 * withdraws its wait (slowpath's done:), so it cannot slip between
	 * the two looks. */
	if (rqs_deadlock_live_taker(w->self, l) || rqs_deadlock_holder(w->self, l) ||
	    rqs_held_untracked_anywhere() || rqs_registry_has_slotless())
		return false;
	atomic_thread_fence(memory_order_acquire);
	if (!rqs_held_orphan_take())
		return false;
	/* One CAS, from the word we looked at. */
	if (word_cas(l, &val, (val & ~RQSPIN__LOCKED_MASK) | RQSPIN__LOCKED_OWNER_DEAD,
		     memory_order_release))
		return true;
	rqs_held_orphan_return();
	return false;
}

/* The deadline has passed: fail, or is the thread we wait for only kept
 * off the CPU? See stall.h. Returns true to fail. */
static bool stalled(struct waiter *w, uint64_t now)
{
	const struct rqspin_thread *b;
	pid_t tid;
	char state;
	uint64_t cpu;

	stat_inc(&w->self->stats.stall_checks);
	b = blocker_of(w);
	if (!b) {
		/* Nobody found: the lock may be changing hands right now (a
		 * new holder still shows its attempt), so look twice more,
		 * 1 ms apart, before timing by the wall clock. At the second
		 * look, it may be an exited thread's untracked lock. */
		if (w->stall_unknown == 1 && orphan_repair(w)) {
			w->stall_unknown = 0;
			w->deadline = sat_add(now, w->duration);
			return false;
		}
		if (++w->stall_unknown > 2)
			return true;
		w->deadline = sat_add(now, NSEC_PER_MSEC);
		return false;
	}
	w->stall_unknown = 0;
	tid = atomic_load_explicit(&b->tid, memory_order_relaxed);
	state = rqs_stall_thread_state(tid);
	if (state == 0 || state == 'Z' || state == 'X') {
		/* Gone (or no /proc). Most often it was found in the tables
		 * a moment before it released the lock and exited: a holder
		 * that exits holding a lock has it marked owner-dead, so the
		 * lock is changing hands, and a busy machine can stretch
		 * that moment to milliseconds between our two reads. Failing
		 * here failed a queue head, and with it everybody queued
		 * behind it, right as the lock came free. Give the wait one
		 * more timeout of wall time, once per wait. */
		if (w->stall_gone)
			return true;
		w->stall_gone = true;
		w->deadline = sat_add(now, w->duration);
		return false;
	}
	LOCK_TEST_HOOK(LOCK_HOOK_STALL_STATE);
	if (state != 'R') {
		/* Blocked or stopped, unless it let go of what we wait for
		 * between the tables and /proc: it released the lock, then
		 * slept or began to exit (the state of an exiting thread is
		 * not always 'Z' yet). The lock is changing hands; failing
		 * here failed a pending waiter under load (rqspin_preempt) as
		 * the owner released. Look again in 1 ms. */
		if (blocker_of(w) != b || atomic_load_explicit(&b->tid, memory_order_relaxed) != tid) {
			w->deadline = sat_add(now, NSEC_PER_MSEC);
			return false;
		}
		return true;
	}
	cpu = rqs_stall_thread_cpu_ns(tid);
	if (cpu == UINT64_MAX)
		return true;
	if (w->stall_tid != tid) {
		w->stall_tid = tid;
		w->stall_cpu0 = cpu;
	} else if (cpu - w->stall_cpu0 >= w->duration) {
		return true; /* it runs, and has run a whole budget */
	}
	stat_inc(&w->self->stats.deadline_extended);
	/* Look again soon: it may block, or be scheduled and release. */
	w->deadline = sat_add(now, w->duration / 8 > NSEC_PER_MSEC ? w->duration / 8 : NSEC_PER_MSEC);
	return false;
}

/* Does l's pending bit look like a vanished thread's: set, no live thread
 * (other than self) waits for l as ROLE_PENDING, and a ghost does? */
static bool pending_looks_ghost(const struct rqspin_thread *self, lockword_t *l)
{
	return (word_load(l, memory_order_relaxed) & RQSPIN__PENDING_MASK) &&
	       !rqs_deadlock_waiter(self, l, SLOT_USED, ROLE_PENDING) &&
	       rqs_deadlock_waiter(NULL, l, RQS_TABLE_RETIRED, ROLE_PENDING);
}

static inline bool is_ghost(const struct rqspin_slot *s)
{
	return atomic_load_explicit(&s->state, memory_order_relaxed) == RQS_TABLE_RETIRED;
}

/* The ghosts' ROLE_PENDING for l become ROLE_NONE, in one pass over the
 * registry (signals are blocked meanwhile). relaxed: read under the repair
 * flag (its release drop publishes them) or by pre-checks that only
 * filter. */
static void ghost_roles_retire(const lockword_t *l)
{
	uint32_t n = rqs_registry_high_water(), i;

	for (i = 0; i < n; i++) {
		struct rqspin_slot *s = rqs_registry_slot(i);

		if (s && is_ghost(s) && held_waiting_for(&s->t) == (const void *)l &&
		    atomic_load_explicit(&s->t.role, memory_order_relaxed) == ROLE_PENDING)
			atomic_store_explicit(&s->t.role, ROLE_NONE, memory_order_relaxed);
	}
}

/*
 * In a forked child: clear l's pending bit when a vanished thread left it.
 * The bit names no owner, so "a ghost's" is a judgement from the tables
 * (pending_looks_ghost), and it must still hold at the clearing CAS: a
 * live thread that sets the bit in between would lose it, and the lock
 * would have two owners (found by the SPIN model, configuration
 * rqspin-fork-repair-race: a trylock's repair cleared the bit a queue
 * head had just set after its own repair). So:
 *
 *  - one repair at a time, process-wide (rqs_registry_repair_begin): a busy
 *    flag means no repair this time (the caller comes back);
 *  - the repairer takes the flag, fences, then looks; a live thread sets
 *    the bit only after set_role(ROLE_PENDING), a fence and a wait while
 *    the flag is set (pending_gate). Each stores, fences, then loads the
 *    other's store, so at least one sees the other: the repairer sees the
 *    live role and leaves the bit, or the setter waits for the repair to
 *    end. Under the flag a bit that looks like a ghost's therefore is
 *    one, and it stays set until we clear it (nobody live holds it, and
 *    a setter needs it clear), so the CAS loop cannot clear a live bit;
 *  - before the flag drops, the ghosts' ROLE_PENDING for l become
 *    ROLE_NONE: their bit is gone, and a stale role would make a later
 *    live bit look like a ghost's whenever its holder's role is out of
 *    sight (a signal handler of the holder that waits on another lock
 *    has replaced its waiting_for; tests/rqspin_fork_repair.c).
 *
 * Signals are blocked from taking the flag to dropping it: a handler of
 * this thread that went on to set a pending bit would wait for ever on
 * the flag we hold. The cost (two sigprocmask calls) is paid only when the
 * bit looks like a ghost's. self: left out of the scan (NULL: nobody).
 * True when this call cleared the bit. Async-signal-safe.
 */
static bool pending_repair(const struct rqspin_thread *self, lockword_t *l)
{
	sigset_t all, old;
	uint32_t val;
	bool cleared = false;

	if (!pending_looks_ghost(self, l))
		return false;
	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &old))
		return false;
	if (rqs_registry_repair_begin()) {
		/* Pairs with pending_gate's fence. */
		store_load_fence();
		if (pending_looks_ghost(self, l)) {
			/* relaxed: the bit's holder vanished; the ghost's
			 * writes are in this address space since the fork. */
			val = word_load(l, memory_order_relaxed);
			while ((val & RQSPIN__PENDING_MASK) &&
			       !word_cas(l, &val, val & ~RQSPIN__PENDING_MASK, memory_order_relaxed))
				;
			ghost_roles_retire(l);
			cleared = true;
		}
		rqs_registry_repair_end();
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return cleared;
}

/* We are about to set the pending bit, our ROLE_PENDING stored: in a
 * forked child with ghosts, fence (pairs with pending_repair's) and wait
 * while a repair is under way. The repairer runs a short straight-line
 * section with signals blocked, so this wait is short unless it was
 * preempted: spin, then yield, as wait_next does. It is bounded all the
 * same, by the call's timeout, with stalled()'s rule for the holder: a
 * repairer that is runnable and has not yet used a whole timeout of CPU
 * is only kept off the CPU (a busy machine), and the wait goes on; one
 * that is stopped, blocked or gone, or that has used a timeout's CPU,
 * makes no progress, and the call fails with -ETIMEDOUT, its role taken
 * back. Outside such a child nothing: a thread that saw no ghosts and is
 * then forked from its own handler stored its role before the fork, so
 * every repairer in the child sees it. */
static int pending_gate(struct waiter *w, uint32_t back_role)
{
	uint32_t spins = 0;
	uint64_t until = 0, now, cpu, cpu0 = 0;
	pid_t r, seen = 0;

	if (!w->res || !rqs_registry_has_ghosts())
		return 0;
	store_load_fence();
	while ((r = rqs_registry_repair_busy()) != 0) {
		if (++spins < SPIN_BUDGET) {
			arch_cpu_relax();
			continue;
		}
		now = rqs_arch_now_ns();
		if (!until) {
			until = sat_add(now, w->timeout);
		} else if (now >= until) {
			cpu = rqs_stall_thread_state(r) == 'R' ? rqs_stall_thread_cpu_ns(r) : UINT64_MAX;
			if (cpu != UINT64_MAX && (seen != r || cpu - cpu0 < w->timeout)) {
				if (seen != r) {
					seen = r;
					cpu0 = cpu;
				}
				until = sat_add(now, w->timeout);
			} else {
				set_role(w, back_role);
				if (!w->start)
					w->start = now;
				w->event = RQSPIN_EV_TIMEOUT;
				return -ETIMEDOUT;
			}
		}
		stat_inc(&w->self->stats.yielded);
		rqs_os_yield();
	}
	return 0;
}

/* In a forked child: what vanished threads left in the lock word. A held
 * byte whose holder is a ghost becomes owner-dead; a pending bit whose
 * holder is a ghost is cleared. Only when no live thread claims either:
 * not a holder by its table, and not a waiter that may have just taken the
 * lock and still shows its wait (rqs_deadlock_live_taker; such a waiter makes
 * the repair itself if the lock is still the ghost's). The repairer first
 * claims the ghost's entry (a RELEASED mark), so the ghost stops counting
 * as the holder: one repair per ghost hold, however many child threads
 * wait. (The SPIN model's fork configuration found the double owner that
 * either rule alone allows.) A ghost that took the lock but vanished
 * before it withdrew its wait still shows the lock as its attempt, not as
 * a hold: with no holder found, such a ghost counts as the holder (found
 * by the model, configuration rqspin-fork-patient). The pending bit is
 * pending_repair()'s. */
static void ghost_repair(struct waiter *w)
{
	lockword_t *l = w->lock;
	uint32_t val = word_load(l, memory_order_relaxed);
	struct rqspin_thread *g;

	if ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL && !rqs_deadlock_holder(w->self, l) &&
	    !rqs_deadlock_live_taker(w->self, l) &&
	    ((g = (struct rqspin_thread *)rqs_deadlock_ghost_holder(l)) ||
	     (g = (struct rqspin_thread *)rqs_deadlock_ghost_taker(l))) &&
	    rqs_held_claim_ghost_entry(g, l)) {
		/* relaxed: the ghost's writes are in this address space
		 * since the fork; no thread publishes them. */
		val = word_load(l, memory_order_relaxed);
		while ((val & RQSPIN__LOCKED_MASK) == RQSPIN__LOCKED_VAL &&
		       !word_cas(l, &val, (val & ~RQSPIN__LOCKED_MASK) | RQSPIN__LOCKED_OWNER_DEAD,
				 memory_order_relaxed))
			;
	}
	/* Not our own role: a head keeps ROLE_PENDING after a failed CAS. */
	if ((val & RQSPIN__PENDING_MASK) && !w->have_pending)
		(void)pending_repair(w->self, l);
}

static int deadlock_check(struct waiter *w)
{
	int ev = rqs_deadlock_find(w->self, w->lock, w->chain);

	if (ev) {
		w->event = ev;
		return -EDEADLK;
	}
	return 0;
}

/* Before the first wait of this call (pending or queue): a full fence
 * after our attempt is published (entry, waiting_for), then a search. Of
 * two threads that close a cycle at once, one sees the other (each stores,
 * fences, then loads): the last member to wait always finds the cycle,
 * even when every other member sleeps in a queue and checks no more. */
static int pre_wait_check(struct waiter *w)
{
	if (!w->res)
		return 0;
	if (!w->tok.holding)
		return 0;
	w->spin_budget = SPIN_BUDGET_HOLDING;
	store_load_fence();
	return deadlock_check(w);
}

/* Timeout and deadlock checks (kernel check_timeout): the first call of
 * a wait starts its clock; later calls look for cycles on the doubling
 * schedule and, past the deadline, ask whether the wait is stalled. AA was
 * checked on entry. */
static int res_check(struct waiter *w)
{
	uint64_t now = rqs_arch_now_ns();
	int ret;

	if (!w->start)
		w->start = now;
	if (!w->deadline) {
		w->deadline = sat_add(now, w->duration);
		if (!w->check_gap) {
			w->check_gap = CHECK_GAP_FIRST;
			w->next_check = sat_add(now, CHECK_GAP_FIRST);
		}
		return 0;
	}
	if (now >= w->next_check) {
		if (rqs_registry_has_ghosts())
			ghost_repair(w);
		ret = deadlock_check(w);
		if (ret)
			return ret;
		if (w->check_gap < CHECK_GAP_MAX)
			w->check_gap *= 2;
		w->next_check = sat_add(now, w->check_gap);
	}
	if (now >= w->deadline && stalled(w, now)) {
		w->event = RQSPIN_EV_TIMEOUT;
		return -ETIMEDOUT;
	}
	return 0;
}

/* Barging mode's pause between checks of a waiter that must run soon: a
 * timed sleep (see BARGE_POLL_NS). On nothing anybody wakes. */
static void barge_nap(void)
{
	static _Atomic uint32_t never;

	rqs_futex_wait_ns(&never, 0, BARGE_POLL_NS);
}

/* We now hold the pending bit: in barging mode, start the time after which
 * we ask for the hand-off. */
static inline void handoff_arm(struct waiter *w)
{
	w->have_pending = true;
	if (w->barge) {
		w->handoff_asked = false;
		w->handoff_at = rqs_arch_now_ns() + HANDOFF_NS;
	}
}

/* One iteration of a wait on the lock word: pause while within the spin
 * budget, then yield the CPU. Returns an error only when resilient. */
static inline int wait_step(struct waiter *w)
{
	uint32_t s = ++w->spins;

	/* The clock is read every 8th pause while spinning, and at every
	 * step once the waiter naps (a nap outlasts a clock read by far):
	 * looking only every 8th nap asked after ~600 us, not HANDOFF_NS. */
	if (w->barge && w->have_pending && !w->handoff_asked &&
	    (s % 8 == 0 || s >= w->spin_budget) && rqs_arch_now_ns() >= w->handoff_at) {
		/* Relaxed: the bit only tells bargers to stay out; mutual
		 * exclusion never depends on it (every taker CASes the
		 * locked byte), so nothing is published with it. */
		atomic_fetch_or_explicit((_Atomic uint32_t *)&w->lock->val, RQSPIN__HANDOFF_VAL,
					 memory_order_relaxed);
		w->handoff_asked = true;
		/* The lock is ours at the next release, which a running
		 * holder reaches within a critical section: spin for it
		 * with a fresh budget rather than nap (a nap lasts the
		 * thread's timer slack, 50 us by default, on top of
		 * BARGE_POLL_NS, and the lock would lie free meanwhile).
		 * Once per hand-off, so the wait stays bounded; deadlines
		 * are clock-based and unaffected. */
		w->spins = s = 1;
	}

	if (s < w->spin_budget) {
		arch_cpu_relax();
		/* No clock read for short waits: the pending waiter's path is
		 * what short critical sections hit. */
		if (w->res && s % CHECK_INTERVAL == 0)
			return res_check(w);
		return 0;
	}
	if (w->res) {
		int ret = res_check(w);

		if (ret)
			return ret;
	}
	stat_inc(&w->self->stats.yielded);
	if (w->barge)
		barge_nap();
	else
		rqs_os_yield();
	return 0;
}

/* Take a free lock (or one whose owner died) if no waiter holds the
 * pending bit, or in barging mode if none asked for the hand-off;
 * *took: RQSPIN__TOOK_AHEAD when a queue was waiting, else TOOK_FREE. Acquire: pairs with the unlock's
 * release store. */
static inline bool steal_once(lockword_t *l, bool *dead, bool barge, uint8_t *took)
{
	uint32_t keep_out = barge ? RQSPIN__HANDOFF_VAL : RQSPIN__PENDING_MASK;
	uint32_t val = word_load(l, memory_order_relaxed);

	while (!(val & keep_out) && lock_free_or_dead(val)) {
		if (word_cas(l, &val, (val & ~RQSPIN__LOCKED_MASK) | RQSPIN__LOCKED_VAL,
			     memory_order_acquire)) {
			*dead = locked_dead(val);
			*took = (val & RQSPIN__TAIL_MASK) ? RQSPIN__TOOK_AHEAD : RQSPIN__TOOK_FREE;
			return true;
		}
	}
	return false;
}

/*
 * Is the thread this wait depends on (blocker_of) blocked or stopped,
 * and still the one after that look? The stall test for waiters that see
 * the lock only now and then (a queued waiter, between its naps) or act
 * for another (a head asked to dissolve its queue): a running blocker,
 * one found by nobody's table, or one gone, are the pending waiter's and
 * the head's to judge over time (stalled): sampled a millisecond apart in
 * a moving queue, one thread may be the holder at both looks after
 * thousands of hand-overs in between.
 */
static bool blocker_blocked(struct waiter *w)
{
	const struct rqspin_thread *b = blocker_of(w);
	pid_t tid;
	char state;

	if (!b)
		return false;
	tid = atomic_load_explicit(&b->tid, memory_order_relaxed);
	state = rqs_stall_thread_state(tid);
	if (state == 0 || state == 'Z' || state == 'X' || state == 'R')
		return false;
	return blocker_of(w) == b && atomic_load_explicit(&b->tid, memory_order_relaxed) == tid;
}

/*
 * A queued waiter's own budget. Only the head and the pending waiter watch
 * the lock, so a waiter behind the head cannot fail by itself: it would
 * leave a hole in the queue. Once its budget has run out (2T, as the
 * head's, counted from when it queued) while the thread it waits for is
 * blocked or stopped (blocker_blocked), it asks its predecessor to
 * dissolve the queue; a waiter asked by its successor passes the request
 * on (and clears its own flag, so that a later request goes through too),
 * until it reaches the head. The head looks at the blocker itself, then
 * leaves as on a timeout of its own (MCS_ABORT down the queue), or drops
 * a request that came too late. Every waiter whose budget is left queues
 * again (budget_left); those whose budget ran out fail with -ETIMEDOUT.
 * We ask again at each nap while our budget is out and the blocker
 * blocked: the head may have dropped an earlier request. A node that
 * hands over and queues elsewhere before a late request lands there has
 * its head look at that other queue's blocker: nothing happens unless it
 * is blocked. Relaxed: the flag is a request, not data; the futex wake
 * gets a parked predecessor to look at it.
 */
static void queued_ask_abort(struct waiter *w, struct mcs_node *node, struct mcs_node *prev)
{
	uint64_t now;

	if (!prev)
		return;
	if (!atomic_exchange_explicit(&node->abort_req, 0, memory_order_relaxed)) {
		now = rqs_arch_now_ns();
		if (!w->deadline)
			w->deadline = sat_add(w->start ? w->start : now, w->duration);
		if (now < w->deadline || !blocker_blocked(w))
			return;
	}
	atomic_store_explicit(&prev->abort_req, 1, memory_order_relaxed);
	rqs_futex_wake(&prev->locked);
}

/* Wait in the queue until the predecessor hands over (MCS_GO) or tells us
 * to leave (MCS_ABORT): spin, then sleep on our own node. A resilient
 * waiter sleeps at most one period at a time: when its predecessor is a
 * thread that vanished in fork() (a child that forked from a handler
 * interrupting this very wait), no hand-off will ever come, and it takes
 * the head's place itself (MCS_GO); and between periods it keeps its own
 * budget (queued_ask_abort). */
static uint32_t mcs_wait(struct waiter *w, struct mcs_node *node, const struct rqspin_slot *prev,
			 struct mcs_node *prev_node)
{
	uint32_t spins, v, expect;

	for (spins = 0; spins < w->spin_budget; spins++) {
		/* acquire: pairs with the release exchange in mcs_handoff. */
		v = atomic_load_explicit(&node->locked, memory_order_acquire);
		if (v != MCS_WAIT) {
			rqs_assert(v == MCS_GO || v == MCS_ABORT);
			return v;
		}
		arch_cpu_relax();
	}
	expect = MCS_WAIT;
	/* acquire on failure: the value is a hand-over, as in the loop. */
	if (!atomic_compare_exchange_strong_explicit(&node->locked, &expect, MCS_PARKED,
						     memory_order_acquire, memory_order_acquire))
	{
		rqs_assert(expect == MCS_GO || expect == MCS_ABORT);
		return expect;
	}
	stat_inc(&w->self->stats.parked);
	v = MCS_PARKED;
	for (;;) {
		if (w->res)
			queued_ask_abort(w, node, prev_node);
		if (w->barge && v == MCS_WAIT) {
			/* Woken early by the head (mcs_prewake): our turn
			 * is near, poll. */
			barge_nap();
		} else if (w->res) {
			uint64_t period = w->timeout;

			if (period > 1000 * NSEC_PER_MSEC)
				period = 1000 * NSEC_PER_MSEC;
			if (period < NSEC_PER_MSEC)
				period = NSEC_PER_MSEC;
			rqs_futex_wait_ns(&node->locked, MCS_PARKED, period);
		} else {
			rqs_futex_wait(&node->locked, MCS_PARKED);
		}
		v = atomic_load_explicit(&node->locked, memory_order_acquire);
		if (v != MCS_PARKED && !(w->barge && v == MCS_WAIT)) {
			rqs_assert(v == MCS_GO || v == MCS_ABORT);
			return v;
		}
		if (w->res && is_ghost(prev)) {
			/* Load again: the predecessor may have written its
			 * hand-over after the load above and vanished since
			 * (a fork from our own handler in between); an ABORT
			 * must still drain us. Nobody writes our node now. */
			v = atomic_load_explicit(&node->locked, memory_order_acquire);
			return v == MCS_PARKED || v == MCS_WAIT ? MCS_GO : v;
		}
	}
}

/* Barging mode: we just became head; wake our successor if it sleeps,
 * leaving it waiting (MCS_PARKED -> MCS_WAIT), so that it polls and runs
 * when we hand it the queue. A successor that has not linked itself yet,
 * or still spins, is left alone. Relaxed: the hand-over itself (the
 * release exchange in mcs_handoff) publishes everything; this only
 * changes how the successor waits. */
static void mcs_prewake(struct mcs_node *node)
{
	struct mcs_node *next = atomic_load_explicit(&node->next, memory_order_acquire);
	uint32_t parked = MCS_PARKED;

	if (next && atomic_compare_exchange_strong_explicit(&next->locked, &parked, MCS_WAIT,
							    memory_order_relaxed,
							    memory_order_relaxed))
		rqs_futex_wake(&next->locked);
}

/* Tell the next waiter to become head (GO) or to leave (ABORT). The
 * exchange tells us whether it sleeps and needs a wake-up. release: the
 * successor, once head, must see the lock word as we left it. */
static void mcs_handoff(struct mcs_node *next, uint32_t v)
{
	uint32_t old;

	rqs_assert(v == MCS_GO || v == MCS_ABORT);
	if (!next)
		return; /* the successor vanished in fork() before linking */
	old = atomic_exchange_explicit(&next->locked, v, memory_order_release);
	/* Nothing but its owner writes a queued node's word before the
	 * hand-over (registry.h): it still waits, spinning or asleep. */
	rqs_assert(old == MCS_WAIT || old == MCS_PARKED);
	if (old == MCS_PARKED)
		rqs_futex_wake(&next->locked);
}

/* Our successor has swapped the tail but may not have linked itself yet;
 * it is running straight-line code, so this wait is short unless it was
 * preempted, hence the yield after the spin budget. In a forked child the
 * successor may have vanished between the two steps: when no live thread
 * is queued on the lock, there is nobody to wait for (NULL). */
static struct mcs_node *wait_next(struct waiter *w, struct mcs_node *node)
{
	struct mcs_node *next;
	uint32_t spins = 0;

	/* acquire: pairs with the successor's release store of prev->next,
	 * so its node initialisation is visible before we write its
	 * locked word. */
	while (!(next = atomic_load_explicit(&node->next, memory_order_acquire))) {
		if (++spins < SPIN_BUDGET) {
			arch_cpu_relax();
		} else {
			if (w->res && rqs_registry_has_ghosts() &&
			    !rqs_deadlock_waiter(w->self, w->lock, SLOT_USED, ROLE_QUEUED))
				return NULL;
			stat_inc(&w->self->stats.yielded);
			rqs_os_yield();
		}
	}
	return next;
}

/* Leave the queue without the lock. If we are the last waiter, remove the
 * tail (the 2026 fix: never wait for a successor that may not come);
 * otherwise pass v on: GO keeps the queue (deadlock: innocent successors
 * keep their place), ABORT makes the next one leave too (timeout: the
 * whole queue drains, FIFO). */
static void queue_leave(struct waiter *w, struct mcs_node *node, uint32_t tail, uint32_t v)
{
	uint32_t val = word_load(w->lock, memory_order_relaxed);

	while ((val & RQSPIN__TAIL_MASK) == tail) {
		if (word_cas(w->lock, &val, val & ~RQSPIN__TAIL_MASK, memory_order_relaxed))
			return;
	}
	mcs_handoff(wait_next(w, node), v);
}

/* head_wait(): a waiter behind us asked to dissolve the queue. */
#define HEAD_ABORT_ASKED 2

/* Queue head: take the pending bit (after any pending waiter has taken
 * the lock), then wait for the locked byte to clear. lost: barging mode,
 * a barger took the lock between our look and our claim; that counts as a
 * wait step, else a barger that always wins that race would keep us from
 * ever asking for the hand-off (or timing out). Found by the SPIN model,
 * configuration barge-liveness. */
static int head_wait(struct waiter *w, bool lost, struct mcs_node *node)
{
	lockword_t *l = w->lock;
	uint32_t val;
	int ret;

	if (lost) {
		ret = wait_step(w);
		if (ret)
			return ret;
	}
	val = word_load(l, memory_order_relaxed);

	for (;;) {
		if (!w->have_pending && !(val & RQSPIN__PENDING_MASK)) {
			/* relaxed: the acquire comes with the locked==0 load.
			 * In a forked child, repairs must see our role before
			 * they may see our bit: pending_gate. */
			set_role(w, ROLE_PENDING);
			ret = pending_gate(w, ROLE_HEAD);
			if (ret)
				return ret;
			if (word_cas(l, &val, val | RQSPIN__PENDING_VAL, memory_order_relaxed))
				handoff_arm(w);
			else
				continue;
		}
		if (w->have_pending) {
			/* acquire: pairs with the unlock's release store. */
			val = word_load(l, memory_order_acquire);
			if (lock_free_or_dead(val))
				return locked_dead(val);
		}
		/* relaxed: see queued_ask_abort. */
		if (w->res && atomic_load_explicit(&node->abort_req, memory_order_relaxed) &&
		    atomic_exchange_explicit(&node->abort_req, 0, memory_order_relaxed) &&
		    blocker_blocked(w))
			return HEAD_ABORT_ASKED;
		ret = wait_step(w);
		if (ret)
			return ret;
		val = word_load(l, memory_order_relaxed);
	}
}

static __attribute__((noinline, cold)) void fail_report(struct waiter *w, int ret)
{
	struct rqspin_report rep;

	rqs_failure_report_build(&rep, w->event, ret, w->lock, w->start ? rqs_arch_now_ns() - w->start : 0,
			     w->self, w->chain);
	rqs_report_emit(&rep);
}

/* Publish what this call waits for, for the checks of other threads;
 * the previous values are the interrupted slow path's, if any. */
static inline void wait_publish(struct waiter *w)
{
	if (!w->res || w->published)
		return;
	w->prev_role = atomic_load_explicit(&w->self->role, memory_order_relaxed);
	rqs_deadlock_wait_begin(w->self, w->lock, &w->tok);
	w->published = true;
}

/* About to wait longer than the entry's spins: see rqs_held_mark_attempt. */
static inline void wait_mark(struct waiter *w)
{
	if (w->res && !w->marked) {
		rqs_held_mark_attempt(w->self, w->lock);
		w->marked = true;
	}
}

static inline void wait_unpublish(struct waiter *w)
{
	if (!w->published)
		return;
	atomic_store_explicit(&w->self->role, w->prev_role, memory_order_relaxed);
	rqs_deadlock_wait_end(w->self, &w->tok);
	w->published = false;
}

/* The attempt failed: stop being a waiter and drop its held entry before
 * anything else sees us (the queue's next head, a report hook that takes
 * its time): a search made meanwhile must not find us waiting for, or
 * holding, a lock we gave up. */
static void fail_withdraw(struct waiter *w)
{
	wait_unpublish(w);
	rqs_held_release_entry(w->self, w->lock);
}

static __attribute__((noinline, cold)) void fail_account(struct waiter *w, int ret)
{
	rqs_failure_count(w->self, w->event);
	if (rqs_report_wanted())
		fail_report(w, ret);
}

/* We hold the pending bit; val is the word as we set it. Wait for the
 * owner to leave, then take over: (*,1,0) -> (*,0,1). */
static int pending_take(struct waiter *w, uint32_t val, bool *dead)
{
	lockword_t *l = w->lock;
	int ret;

	handoff_arm(w);
	for (;;) {
		while (!lock_free_or_dead(val)) {
			ret = wait_step(w);
			if (w->res && ret) {
				clear_pending(l);
				w->have_pending = false;
				return ret;
			}
			/* acquire: pairs with the unlock's release store. */
			val = word_load(l, memory_order_acquire);
		}
		*dead = locked_dead(val);
		if (!w->barge) {
			clear_pending_set_locked(l);
			break;
		}
		/* A barger may take the lock between our look and our claim:
		 * (*,1,h,0) -> (*,0,0,1) as a CAS. acquire: if a barger took
		 * and released it in between, its critical section must come
		 * before ours (the load above only ordered the one before). */
		if (word_cas(l, &val, (val & RQSPIN__TAIL_MASK) | RQSPIN__LOCKED_VAL,
			     memory_order_acquire))
			break;
	}
	w->have_pending = false;
	return 0;
}

/* Without an MCS node (nesting too deep, or no registry slot) a waiter
 * competes for the pending bit instead of queueing, which gives it the
 * same priority as a queue head (a plain test-and-set would starve behind
 * a busy queue). rqspinlock: a handler nested in this thread's own queued
 * wait gets one try (the kernel's NMI rule: the interrupted code may be
 * the link a queue waits for, so waiting here could deadlock); otherwise
 * the wait times out after 4T, the kernel's TAS fallback budget. */
static int nonode_lock(struct waiter *w, bool *dead)
{
	lockword_t *l = w->lock;
	uint32_t val;
	int ret;

	stat_inc(&w->self->stats.nonode);
	if (w->res && w->self->slot != NO_SLOT) {
		if (steal_once(l, dead, w->barge, &w->took))
			return 0;
		w->event = RQSPIN_EV_NEST_FAIL;
		return -EDEADLK;
	}
	set_role(w, ROLE_NONODE);
	wait_begin(w, sat_mul(w->timeout, 4));
	val = word_load(l, memory_order_relaxed);
	for (;;) {
		if (!(val & RQSPIN__PENDING_MASK)) {
			/* acquire on both: either may make us the owner. */
			if (lock_free_or_dead(val)) {
				if (word_cas(l, &val, (val & ~RQSPIN__LOCKED_MASK) | RQSPIN__LOCKED_VAL,
					     memory_order_acquire)) {
					*dead = locked_dead(val);
					return 0;
				}
				continue;
			}
			set_role(w, ROLE_PENDING);
			ret = pending_gate(w, ROLE_NONODE);
			if (ret)
				return ret;
			if (word_cas(l, &val, val | RQSPIN__PENDING_VAL, memory_order_acquire))
				return pending_take(w, val, dead);
			set_role(w, ROLE_NONODE);
			continue;
		}
		ret = wait_step(w);
		if (w->res && ret)
			return ret;
		val = word_load(l, memory_order_relaxed);
	}
}

/* slowpath()'s return when a queue head's timeout dissolved the queue
 * while this call still had budget left: its entry and wait are
 * withdrawn, its node is free, and rqspin_slowpath() starts over. Never
 * returned to a caller of the library. */
#define REQUEUE 2

/*
 * A waiter queued behind the head leaves when the head does, and with a
 * stall the head passes MCS_ABORT down the queue. That is the kernel's
 * rule, where every waiter has the same budget; here each call has its
 * own, and the head's may be the shorter one. A queued call's budget is
 * the head's, 2T, counted from when it first queued (*until, the end of
 * it, set then and kept across requeues; UINT64_MAX when too large to
 * add to the clock: "no timeout"). A call whose budget has not run out
 * queues again instead of failing: a new attempt, as a fresh lock call,
 * with the budget that is left (rqspin_slowpath).
 */
static bool budget_left(const struct waiter *w, uint64_t *until)
{
	uint64_t now = rqs_arch_now_ns();

	if (!*until)
		*until = sat_add(w->start ? w->start : now, sat_mul(w->timeout, 2));
	return now < *until;
}

/* The queue dissolves (our timeout as its head, the head's, or one that a
 * waiter asked for): leave it, passing MCS_ABORT on. REQUEUE while our
 * budget lasts, else -ETIMEDOUT. */
static int queue_abort_leave(struct waiter *w, struct mcs_node *node, uint32_t tail,
			     uint64_t *until)
{
	int ret;

	w->event = RQSPIN_EV_TIMEOUT;
	ret = w->res && budget_left(w, until) ? REQUEUE : -ETIMEDOUT;
	fail_withdraw(w);
	queue_leave(w, node, tail, MCS_ABORT);
	return ret;
}

static __attribute__((always_inline)) inline int slowpath(lockword_t *lock, uint32_t val,
							 const bool res, const bool barge,
							 bool steal, uint8_t *took, uint64_t timeout,
							 uint64_t *until)
{
	struct rqspin_thread *self = registry_self();
	struct deadlock_chain chain;
	struct waiter w;
	struct mcs_node *node, *next;
	struct rqspin_slot *prev_slot;
	bool dead = false, checked = false, lost;
	uint32_t idx, tail, old, i;
	int ret;

	waiter_init(&w, self, lock, res, barge, steal, timeout, &chain);
	/*
	 * A free lock with only a queue on it (no pending waiter): take it as
	 * the fast path would have, had there been no queue, before any of
	 * the bookkeeping below. At 4-8 threads on 2 CPUs nearly every
	 * acquisition is such a steal, with the lock's previous holder now
	 * waiting for it: work done here first lengthens every hand-over.
	 * Nothing is lost: the lock is free, so we cannot hold it (AA; the
	 * table may still show a hold that a signal handler interrupted
	 * between its release store and its pop, as for the fast path), and
	 * we wait for nothing (no cycle, no timeout). A marked entry (the
	 * shim's watch) needs its confirmation: not here.
	 */
	if (res && !barge && !(val & (RQSPIN__LOCKED_MASK | RQSPIN__PENDING_MASK)) &&
	    !rqs_held_top_marked(self, lock) && steal_once(lock, &dead, false, &w.took)) {
		stat_inc(&self->stats.stolen);
		goto done;
	}
	if (res) {
		/* Releases other threads made of our locks: drop them before
		 * the table is read (a stale entry would be a false AA). */
		rqs_held_drain(self);
		/* Marked already: the confirmation is ours to make. */
		w.marked = rqs_held_top_marked(self, lock);
		if (held_aa(self, lock)) {
			/* AA on entry: the caller (or the code its signal
			 * handler interrupted) holds or is acquiring it. */
			w.event = RQSPIN_EV_AA;
			ret = -EDEADLK;
			goto err_entry;
		}
		wait_publish(&w);
		if (w.tok.holding) {
			/* May be in a cycle: search before any waiting. */
			ret = pre_wait_check(&w);
			checked = true;
			if (ret)
				goto err_entry;
		}
	}

	/* Only the holder, nobody waiting: watch the word read-only for a
	 * short while and take the lock as it frees, as a test-and-test-and-
	 * set lock would. With two contenders this saves the pending hand-shake
	 * (an extra atomic and a strict A-B-A-B alternation that moves the
	 * cache line on every acquisition); as soon as anybody else waits
	 * (pending or queued) we stop and follow the kernel's order. */
	if (!barge && val == RQSPIN__LOCKED_VAL) {
		bool timed = !(res && w.tok.holding);
		uint64_t watch_end = 0, now;

		for (i = 1; val == RQSPIN__LOCKED_VAL; i++) {
			arch_cpu_relax();
			val = word_load(lock, memory_order_relaxed);
			/* acquire: pairs with the unlock's release store. */
			if (val == 0 && word_cas(lock, &val, RQSPIN__LOCKED_VAL, memory_order_acquire)) {
				stat_inc(&self->stats.stolen);
				goto done;
			}
			if (i % ENTRY_CHECK)
				continue;
			if (!timed && i >= ENTRY_SPINS)
				break;
			if (!timed)
				continue;
			now = rqs_arch_now_ns();
			if (!watch_end) {
				watch_end = now + ENTRY_WATCH_NS;
				/* Longer than a hand-over: a wait (held.h). */
				wait_mark(&w);
			} else if (now >= watch_end) {
				break;
			}
		}
	}
	/* Barging: the same watch, whoever else waits, until a waiter asks
	 * for the hand-off. */
	for (i = 0; barge && steal && i < ENTRY_SPINS; i++) {
		if (steal_once(lock, &dead, true, &w.took)) {
			stat_inc(&self->stats.stolen);
			goto done;
		}
		if (word_load(lock, memory_order_relaxed) & RQSPIN__HANDOFF_VAL)
			break;
		arch_cpu_relax();
	}
	if (barge)
		val = word_load(lock, memory_order_relaxed);

	/* A pending waiter is taking the lock right now: (0,1,0) -> (0,0,1). */
	if (!barge && val == RQSPIN__PENDING_VAL) {
		for (i = 0; i < PENDING_LOOPS && val == RQSPIN__PENDING_VAL; i++) {
			arch_cpu_relax();
			val = word_load(lock, memory_order_relaxed);
		}
	}
	/* Any waiter already (pending or queued): join the queue. */
	if (val & ~RQSPIN__LOCKED_MASK)
		goto queue;

	if (res) {
		if (!checked) {
			ret = pre_wait_check(&w);
			checked = true;
			if (ret)
				goto err_entry;
		}
		wait_mark(&w);
		set_role(&w, ROLE_PENDING);
		ret = pending_gate(&w, w.prev_role);
		if (ret)
			goto err_entry;
	}
	/* Become the pending waiter. acquire: if the lock is free already we
	 * own it from this read on, after the last unlock's release. */
	val = atomic_fetch_or_explicit((_Atomic uint32_t *)&lock->val, RQSPIN__PENDING_VAL,
				       memory_order_acquire);
	if (val & ~RQSPIN__LOCKED_MASK) {
		if (!(val & RQSPIN__PENDING_MASK))
			clear_pending(lock); /* we set it: undo */
		goto queue;
	}
	wait_begin(&w, timeout);
	ret = pending_take(&w, val, &dead);
	if (res && ret)
		goto err_entry;
	stat_inc(&self->stats.pending);
	goto done;

queue:
	/* AA was ruled out on entry, which is also the kernel's check before
	 * queueing (Nov 2025): from there to here only our own signal
	 * handlers write our table, and they leave it as they found it, or
	 * drop entries that other threads released for us. */
	if (res && !checked) {
		ret = pre_wait_check(&w);
		checked = true;
		if (ret)
			goto err_entry;
	}
	/* The holder is most likely running: take the lock as it frees,
	 * unless a waiter holds the pending bit (then the queue is moving
	 * and FIFO order applies). */
	for (i = 0; steal && i < STEAL_SPINS; i++) {
		if (steal_once(lock, &dead, barge, &w.took)) {
			stat_inc(&self->stats.stolen);
			goto done;
		}
		if (word_load(lock, memory_order_relaxed) &
		    (barge ? RQSPIN__HANDOFF_VAL : RQSPIN__PENDING_MASK))
			break;
		arch_cpu_relax();
	}

	/* Mark only now, as at the entry's spins (rqs_held_mark_attempt):
	 * at 4-8 threads on 2 CPUs nearly every acquisition is a steal in
	 * the loop above, and the mark and its confirmation would sit in
	 * the hand-over. Until here a search takes our entry for the
	 * attempt through waiting_for, as during the entry's spins. */
	wait_mark(&w);
	/* Queueing is slow anyway: note when we started, for reports. */
	if (res && !w.start)
		w.start = rqs_arch_now_ns();
	idx = self->nesting;
	if (self->slot == NO_SLOT || idx >= MCS_MAX_NODES || (res && idx > 0)) {
		ret = nonode_lock(&w, &dead);
		if (res && ret)
			goto err_entry;
		goto done;
	}
	/* Claim node idx before using it: a signal handler arriving from
	 * here on sees nesting idx+1 and takes the next node. The fence is
	 * the compiler barrier that orders the two for our own handlers. */
	self->nesting = idx + 1;
	atomic_signal_fence(memory_order_seq_cst);
	node = &slot_of(self)->nodes[idx];
	atomic_store_explicit(&node->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&node->locked, MCS_WAIT, memory_order_relaxed);
	atomic_store_explicit(&node->abort_req, 0, memory_order_relaxed);
	tail = tail_encode(self->slot, idx);

	if (steal && steal_once(lock, &dead, barge, &w.took)) {
		stat_inc(&self->stats.stolen);
		goto release_node;
	}

	set_role(&w, ROLE_QUEUED);
	/* Publish our node as the tail. release: the node's initialisation
	 * above is visible to whoever reads this tail and links behind us.
	 * acquire: our store into the predecessor's node below is ordered
	 * after its initialisation (it published that with this same
	 * release). The tail is the upper half-word: one exchange. */
	old = (uint32_t)atomic_exchange_explicit((_Atomic uint16_t *)&lock->h.tail,
						 (uint16_t)(tail >> 16), memory_order_acq_rel)
	      << 16;
	if (old) {
		struct mcs_node *prev = tail_decode(old);

		prev_slot = tail_slot(old);
		/* release: pairs with the acquire in the predecessor's
		 * wait_next, making our node's initialisation visible. */
		atomic_store_explicit(&prev->next, node, memory_order_release);
		/* Behind a thread that vanished in fork(): no hand-off will
		 * come, and everything ahead of us is dead; we are the head
		 * (ghost_repair clears what they left in the word). */
		if (res) /* our own budget behind the head: the head's */
			wait_begin(&w, sat_mul(timeout, 2));
		if (!(res && is_ghost(prev_slot)) && mcs_wait(&w, node, prev_slot, prev) == MCS_ABORT) {
			/* The head timed out and dissolves the queue; pass the
			 * word on (kernel: -ETIMEDOUT since Nov 2025), then
			 * fail, or queue again while our own budget lasts
			 * (budget_left). */
			ret = queue_abort_leave(&w, node, tail, until);
			if (ret == REQUEUE)
				goto requeue;
			goto err_release_node;
		}
	}

	/* We are the queue head. */
	set_role(&w, ROLE_HEAD);
	if (barge)
		mcs_prewake(node);
	wait_begin(&w, sat_mul(timeout, 2));
	lost = false;
head_again:
	ret = head_wait(&w, lost, node);
	if (res && ret == HEAD_ABORT_ASKED) {
		/* As on a timeout of ours (below), but only the waiter that
		 * asked has run out of budget: we queue again, unless ours
		 * has run out too. */
		if (w.have_pending)
			clear_pending(lock);
		w.have_pending = false;
		ret = queue_abort_leave(&w, node, tail, until);
		if (ret == REQUEUE)
			goto requeue;
		goto err_release_node;
	}
	if (res && ret < 0) {
		if (w.have_pending)
			clear_pending(lock);
		w.have_pending = false;
		/* A deadlock fails only us (the others keep their place); a
		 * stall fails the queue behind us too, in FIFO order. */
		fail_withdraw(&w);
		queue_leave(&w, node, tail, ret == -ETIMEDOUT ? MCS_ABORT : MCS_GO);
		goto err_release_node;
	}
	dead = ret == 1;

	/* Claim. Last in the queue: (me,1,0) -> (0,0,1) in one CAS; relaxed,
	 * the acquire was the load in head_wait. Otherwise set locked and
	 * hand the queue to the next waiter. Barging: a barger may take the
	 * lock before our claim; then we wait again (still holding the
	 * pending bit, so the hand-off clock keeps running), and the claims
	 * are CASes with acquire, as in pending_take. */
	val = word_load(lock, memory_order_relaxed);
	while ((val & RQSPIN__TAIL_MASK) == tail) {
		if (barge && !lock_free_or_dead(val))
			goto lost_claim;
		if (word_cas(lock, &val, RQSPIN__LOCKED_VAL,
			     barge ? memory_order_acquire : memory_order_relaxed)) {
			dead = locked_dead(val);
			goto release_node_queued;
		}
	}
	if (!barge) {
		clear_pending_set_locked(lock);
	} else {
		/* The tail is not ours and never will be again. */
		do {
			if (!lock_free_or_dead(val))
				goto lost_claim;
			dead = locked_dead(val);
		} while (!word_cas(lock, &val, (val & RQSPIN__TAIL_MASK) | RQSPIN__LOCKED_VAL,
				   memory_order_acquire));
	}
	w.have_pending = false;
	goto claimed;
lost_claim:
	lost = true;
	goto head_again;
claimed:
	next = wait_next(&w, node);
	mcs_handoff(next, MCS_GO);

release_node_queued:
	stat_inc(&self->stats.queued);
release_node:
	atomic_signal_fence(memory_order_seq_cst);
	self->nesting = idx;
done:
	/* A hold from here on, before the wait is withdrawn: whoever looks
	 * for the lock's taker finds us as one or the other throughout. */
	if (w.marked)
		rqs_held_confirm(self, lock);
	wait_unpublish(&w);
	if (barge)
		*took = w.took;
	if (res && dead) {
		stat_inc(&self->stats.owner_dead);
		w.event = RQSPIN_EV_OWNER_DEAD;
		if (rqs_report_wanted())
			fail_report(&w, -EOWNERDEAD);
		return -EOWNERDEAD;
	}
	return 0;

requeue:
	atomic_signal_fence(memory_order_seq_cst);
	self->nesting = idx;
	return REQUEUE;
err_release_node:
	atomic_signal_fence(memory_order_seq_cst);
	self->nesting = idx;
	fail_account(&w, ret);
	return ret;
err_entry:
	fail_withdraw(&w);
	fail_account(&w, ret);
	return ret;
}

bool rqspin__trylock_pending(rqspinlock_t *lock, uint32_t val)
{
	lockword_t *l = &lock->w;
	uint32_t free = 0;

	(void)val; /* pending_repair looks at the word itself */
	/* Outside a forked child a pending bit is a live waiter's: fail, as
	 * a trylock does on a contended lock. */
	if (!rqs_registry_has_ghosts())
		return false;
	/* The child's repair of a vanished pending waiter, so that a
	 * program that only ever trylocks is not locked out for good.
	 * Nobody is left out of the scan: our role and waiting_for are those
	 * of the slow path a signal handler (this call) interrupted, if any,
	 * and its bit is not a ghost's. */
	if (!pending_repair(NULL, l))
		return false;
	/* acquire: pairs with the unlock's release store, as the fast path's
	 * CAS. */
	return atomic_compare_exchange_strong_explicit((_Atomic uint32_t *)&l->val, &free,
						       RQSPIN__LOCKED_VAL, memory_order_acquire,
						       memory_order_relaxed);
}

void rqspin__qspin_lock_slowpath(qspinlock_t *lock, uint32_t val)
{
	(void)slowpath(&lock->w, val, false, false, true, NULL, 0, NULL);
}

/* rqspinlock's slow path in either mode. A process-shared word has its own
 * protocol (pshared.h); only such a word has the mark, and nothing clears
 * it. */
static __attribute__((always_inline)) inline int rqspin_slowpath(rqspinlock_t *lock,
								 uint32_t val,
								 uint64_t timeout_ns,
								 const bool barge, bool steal,
								 uint8_t *took)
{
	uint64_t t = timeout_ns ? timeout_ns : rqs_lock_default_timeout(), until = 0, now;
	struct rqspin_thread *self;
	int ret;

	if (!(val & RQSPIN__PSHARED_MARK)) {
		while ((ret = slowpath(&lock->w, val, true, barge, steal, took, t, &until)) ==
		       REQUEUE) {
			/* As a new lock call: the entry back on top (withdrawn
			 * with the wait), the budget that is left (2T of it
			 * as a queued waiter, see budget_left). */
			rqspin__held_push(&registry_self()->hot, lock);
			if (until != UINT64_MAX) {
				now = rqs_arch_now_ns();
				t = until > now + 1 ? (until - now) / 2 : 1;
			}
			val = word_load(&lock->w, memory_order_relaxed);
		}
		return ret;
	}
	self = registry_self();
	rqs_held_mark_attempt(self, lock);
	ret = rqs_pshared_lock_slowpath(lock, val, t);
	if (ret == 0 || ret == -EOWNERDEAD)
		rqs_held_confirm(self, lock);
	return ret;
}

int rqspin__lock_slowpath(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns)
{
	return rqspin_slowpath(lock, val, timeout_ns, false, true, NULL);
}

int rqspin__lock_slowpath_barging(rqspinlock_t *lock, uint32_t val, uint64_t timeout_ns,
				  bool in_line, uint8_t *took)
{
	return rqspin_slowpath(lock, val, timeout_ns, true, !in_line, took);
}

int rqspin__owner_dead_taken(rqspinlock_t *lock)
{
	struct waiter w = {
		.self = registry_self(),
		.lock = &lock->w,
		.res = true,
		.event = RQSPIN_EV_OWNER_DEAD,
	};

	/* As the slow path's take-over (the end of rqspin_slowpath). */
	stat_inc(&w.self->stats.owner_dead);
	if (rqs_report_wanted())
		fail_report(&w, -EOWNERDEAD);
	return -EOWNERDEAD;
}
