/* SPDX-License-Identifier: MIT */
/*
 * Interrupt anywhere, for the resilient lock: a signal handler that takes
 * locks, delivered at every instruction of rqspin_lock's and
 * rqspin_unlock's paths (the stepper of alloc_ptrace.h; the library is
 * linked in statically, so its code is the executable's).
 *
 * Operations of the main thread (each repeated once per instruction, set
 * up the same way each time by helper threads):
 *   fast     lock A free, unlock;
 *   pending  A held by helper 1, which lets go once somebody waits: the
 *            main thread takes it as the pending waiter;
 *   queued   A held by helper 1 and helper 2 pending on it: the main
 *            thread queues, becomes the head, takes it;
 *   nonlifo  lock A, lock B, unlock A, unlock B;
 *   timeout  A held by helper 1 throughout: -ETIMEDOUT after 1 ms;
 *   aa       A held by the main thread, locked again: -EDEADLK;
 *   topmark  lock A, unlock, with a RELEASED mark on top of the table
 *            (M taken, unlocked by helper 1, drained under another entry
 *            and exposed by an inline unlock);
 *   full     lock A, unlock, with RQSPIN_NR_HELD - 1 other locks held (A
 *            takes the table's last entry, a handler's lock finds it
 *            full), and with RQSPIN_NR_HELD held (A goes past the table:
 *            the push's bump, taken back, and the full table's push; not
 *            under the SAME handler, which could not tell A's untracked
 *            holder and would wait for it);
 *   keep     lock A with RQSPIN_NR_HELD - 1 other locks held, under a
 *            handler that takes lock K and keeps it across its return (a
 *            lock the rules let drop out of the table): the push must
 *            find the table full after its bump, not write the entry past
 *            the table (over the thread's fast-path count).
 * Handlers, one per pass over the operations:
 *   SAME     rqspin_lock_timeout(A), then rqspin_trylock(A): the handler
 *            gets A (and unlocks it) only when nobody holds it, else
 *            -EDEADLK (the interrupted code holds or is acquiring it) or,
 *            in the timeout operation only, -ETIMEDOUT;
 *   OTHER    rqspin_lock(C), a lock nobody else uses: always 0;
 *   NESTED   rqspin_lock(D), which a helper holds until somebody waits:
 *            a slow path nested in the interrupted one, always 0.
 * Every handler first reads its table with rqspin_held_locks(), which
 * trims the marks on top: a trim landing inside an inline push must not
 * leave a NULL (an untracked hold) under the pushed entry.
 * Checked: every owner of A is alone (an owner word set by exchange),
 * each operation's own result is what it is without the handler, and
 * after each run both words are 0, the thread's held table is empty and
 * no slow path is in progress (nesting 0). A handler call that blocks
 * for ever is a hang (the parent's step budget and CTest's timeout).
 *
 * Built twice: rqspin_interrupt calls rqspin_lock_timeout/unlock/trylock;
 * shim_interrupt (RQSPIN_INTERRUPT_SHIM) the drop-in pthread_spin_* of
 * src/lock/pthread_shim.c, compiled into the executable, with its barging
 * slow path, under RQSPIN_PTHREAD_DEADLOCK=error and
 * RQSPIN_PTHREAD_TIMEOUT=error (AA returns EDEADLK, a timeout ETIMEDOUT,
 * which the handler rejects; the default policies keep waiting, as glibc
 * does); it has no timeout operation (pthread_spin_lock takes the default
 * timeout).
 *
 * rqspin_interrupt_pshared (RQSPIN_INTERRUPT_PSHARED): rqspin_interrupt
 * with A and B process-shared (their own protocol: no pending bit, no
 * queue, so no pending or queued operation). A handler that lands in a
 * lock call of A between its push and its CAS finds A free and takes it;
 * its stale-entry clean-up (pshared.c) must leave the interrupted call's
 * entry alone, or that call holds A without an entry.
 *
 * Registered NO_TSAN (TSan runs handlers at its own points); skipped where
 * ptrace is not permitted and under qemu.
 */
#include "alloc_ptrace.h"
#include "lock/registry.h"
#include "rqspin_util.h"

#ifdef RQSPIN_INTERRUPT_SHIM
#include <pthread.h>

#define TEST_NAME "shim_interrupt"

static pthread_spinlock_t *as_spin(rqspinlock_t *l)
{
	return (pthread_spinlock_t *)(void *)l;
}

/* The shim's errors are positive; the checks below use rqspin's. */
static int lk(rqspinlock_t *l, uint64_t timeout)
{
	(void)timeout;
	return -pthread_spin_lock(as_spin(l));
}

static void ulk(rqspinlock_t *l)
{
	CHECK(pthread_spin_unlock(as_spin(l)) == 0);
}

static bool trylk(rqspinlock_t *l)
{
	return pthread_spin_trylock(as_spin(l)) == 0;
}
#else
#ifdef RQSPIN_INTERRUPT_PSHARED
#define TEST_NAME "rqspin_interrupt_pshared"
#else
#define TEST_NAME "rqspin_interrupt"
#endif

static int lk(rqspinlock_t *l, uint64_t timeout)
{
	return rqspin_lock_timeout(l, timeout);
}

static void ulk(rqspinlock_t *l)
{
	rqspin_unlock(l);
}

static bool trylk(rqspinlock_t *l)
{
	return rqspin_trylock(l);
}
#endif

enum { MODE_SAME = 0, MODE_OTHER, MODE_NESTED, NMODES };
static const char *const mode_name[NMODES] = { "same", "other", "nested" };

static const char *volatile g_opname = "start";
static volatile int g_mode = MODE_SAME;
static volatile bool g_timeout_op; /* the handler may time out on A */

static rqspinlock_t A = RQSPINLOCK_INIT, B = RQSPINLOCK_INIT, C = RQSPINLOCK_INIT;
/* topmark: M's entry becomes the mark (N and P only make it stay). */
static rqspinlock_t M = RQSPINLOCK_INIT, N = RQSPINLOCK_INIT, P = RQSPINLOCK_INIT;
/* Held by the D helper, which lets go whenever somebody waits on it. */
static rqspinlock_t D = RQSPINLOCK_INIT;
static _Atomic bool g_d_stop, g_d_holding;

/* Who holds A: 0 nobody, 1 main, 2 handler, 3 helper 1, 4 helper 2. */
static _Atomic int g_owner;
static _Atomic unsigned long g_handler_calls, g_handler_got, g_handler_aa,
	g_handler_timeout;



static void own(int who)
{
	int prev = atomic_exchange(&g_owner, who);

	if (prev != 0) {
		char buf[120];

		snprintf(buf, sizeof(buf), "two owners of A: %d took it while %d held it (%s)\n",
			 who, prev, g_opname);
		tu_write_str(buf);
		abort();
	}
}

static void disown(int who)
{
	CHECK(atomic_exchange(&g_owner, 0) == who);
}

/* ---- the handler ------------------------------------------------------------ */

/* keep: the handler's lock, kept (once per run) across its return. */
static rqspinlock_t K = RQSPINLOCK_INIT;
static volatile bool g_keep, g_kept;

static void on_inject(int sig)
{
	int e = errno, r;

	(void)sig;
	atomic_fetch_add(&g_handler_calls, 1);
	if (g_keep) {
		if (!g_kept) {
			r = lk(&K, 30 * RU_SEC);
			if (r != 0) {
				tu_write_str("handler: lock(K) failed\n");
				abort();
			}
			g_kept = true;
		}
		errno = e;
		return;
	}
	(void)rqspin_held_locks();
	if (g_mode == MODE_NESTED) {
		/* A slow path of our own (D is held) nested in whatever the
		 * interrupted code was doing: the next MCS node, or for a
		 * resilient lock the no-node path. */
		r = lk(&D, 30 * RU_SEC);
		if (r != 0) {
			char buf[120];

			snprintf(buf, sizeof(buf), "handler: lock(D) gave %s in \"%s\"\n",
				 ru_err_name(r), g_opname);
			tu_write_str(buf);
			abort();
		}
		ulk(&D);
		errno = e;
		return;
	}
	if (g_mode == MODE_OTHER) {
		r = lk(&C, 30 * RU_SEC);
		if (r != 0) {
			tu_write_str("handler: rqspin_lock(C) failed\n");
			abort();
		}
		ulk(&C);
		errno = e;
		return;
	}
	r = lk(&A, g_timeout_op ? RU_MS : 10 * RU_SEC);
	if (r == 0) {
		own(2);
		atomic_fetch_add(&g_handler_got, 1);
		disown(2);
		ulk(&A);
	} else if (r == -EDEADLK) {
		atomic_fetch_add(&g_handler_aa, 1);
	} else if (r == -ETIMEDOUT && g_timeout_op) {
		atomic_fetch_add(&g_handler_timeout, 1);
	} else {
		char buf[120];

		snprintf(buf, sizeof(buf), "handler: rqspin_lock(A) gave %s in \"%s\"\n",
			 ru_err_name(r), g_opname);
		tu_write_str(buf);
		abort();
	}
	if (trylk(&A)) {
		own(2);
		disown(2);
		ulk(&A);
	}
	errno = e;
}

/* ---- helpers ---------------------------------------------------------------- */

enum { H_IDLE, H_HOLD_UNTIL_WAITER, H_HOLD_UNTIL_QUEUED, H_WAIT_THEN_LOCK, H_HOLD, H_RELEASE,
       H_UNLOCK_M, H_QUIT };

struct helper {
	pthread_t th;
	int id;
	_Atomic int cmd;
	_Atomic bool busy, holding;
};

static struct helper g_h[2];

/* A's word shows a waiter: with want_tail somebody queued, else the
 * pending bit or a queue. */
static bool a_has_waiter(bool want_tail)
{
	uint32_t v = ru_word(&A);

	return want_tail ? (v & RU_TAIL_MASK) != 0 : (v & ~RU_LOCKED_MASK) != 0;
}

/* The helpers lock with rqspin_lock_timeout and a long timeout in both
 * builds: a helper may wait on the main thread while the tracer single-
 * steps it, which can outlast the shim's default timeout on a busy
 * machine (its error policy would then fail the helper's call). */
static int helper_lock(rqspinlock_t *l)
{
	return rqspin_lock_timeout(l, 30 * RU_SEC);
}

static void *helper_main(void *arg)
{
	struct helper *h = arg;

	for (;;) {
		int cmd = atomic_load(&h->cmd);

		if (cmd == H_IDLE) {
			tu_sleep_us(20);
			continue;
		}
		if (cmd == H_QUIT)
			return NULL;
		if (cmd == H_UNLOCK_M) {
			/* The main thread's M: a cross-thread unlock. */
			rqspin_unlock(&M);
			atomic_store(&h->cmd, H_IDLE);
			atomic_store(&h->busy, false);
			continue;
		}
		if (cmd == H_RELEASE) {
			if (atomic_load(&h->holding)) {
				disown(h->id);
				atomic_store(&h->holding, false);
				rqspin_unlock(&A);
			}
			atomic_store(&h->cmd, H_IDLE);
			atomic_store(&h->busy, false);
			continue;
		}
		CHECK_EQ_U64(helper_lock(&A), 0);
		own(h->id);
		atomic_store(&h->holding, true);
		if (cmd == H_HOLD) {
			/* until H_RELEASE */
			while (atomic_load(&h->cmd) == H_HOLD)
				tu_sleep_us(20);
			continue;
		}
		/* H_HOLD_UNTIL_WAITER / _QUEUED (helper 1): let go once
		 * somebody waits / somebody queued (helper 2 being the
		 * pending waiter); H_WAIT_THEN_LOCK (helper 2): got A, let
		 * go at once. The main thread may be single-stepped: yield
		 * the CPU to it and its tracer meanwhile. */
		if (cmd == H_HOLD_UNTIL_WAITER || cmd == H_HOLD_UNTIL_QUEUED)
			while (!a_has_waiter(cmd == H_HOLD_UNTIL_QUEUED))
				sched_yield();
		disown(h->id);
		atomic_store(&h->holding, false);
		rqspin_unlock(&A);
		atomic_store(&h->cmd, H_IDLE);
		atomic_store(&h->busy, false);
	}
}

/* Keeps D held, except while somebody (a handler) waits on it. It polls
 * with short sleeps, not sched_yield: it lives through the whole test,
 * and a thread that never sleeps takes a CPU from the tracer and the
 * traced thread (each single step is two context switches), which made
 * two stepper tests side by side on a 2-core machine run for 10 minutes
 * instead of 15 s. */
static void *d_helper_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&g_d_stop)) {
		CHECK_EQ_U64(helper_lock(&D), 0);
		atomic_store(&g_d_holding, true);
		while (!(ru_word(&D) & ~RU_LOCKED_MASK) && !atomic_load(&g_d_stop))
			tu_sleep_us(20);
		atomic_store(&g_d_holding, false);
		rqspin_unlock(&D);
		/* let the waiter have it before we take it again */
		while (ru_word(&D) != 0 && !atomic_load(&g_d_stop))
			tu_sleep_us(20);
	}
	return NULL;
}

static void helper_do(struct helper *h, int cmd)
{
	CHECK(!atomic_load(&h->busy));
	atomic_store(&h->busy, true);
	atomic_store(&h->cmd, cmd);
}

static void helper_idle(struct helper *h)
{
	RU_WAIT_FOR(!atomic_load(&h->busy), 60, "helper idle");
}

/* ---- operations ------------------------------------------------------------- */

static void check_clean(void)
{
	struct rqspin_thread *me = (struct rqspin_thread *)rqspin__tls_self;

	helper_idle(&g_h[0]);
	helper_idle(&g_h[1]);
#ifdef RQSPIN_INTERRUPT_PSHARED
	/* The mark and the last holder's id stay in the word. */
	CHECK_EQ_U64(ru_word(&A) & RQSPIN__LOCKED_MASK, 0);
	CHECK_EQ_U64(ru_word(&B) & RQSPIN__LOCKED_MASK, 0);
#else
	CHECK_EQ_U64(ru_word(&A), 0);
	CHECK_EQ_U64(ru_word(&B), 0);
#endif
	CHECK_EQ_U64(ru_word(&C), 0);
	CHECK_EQ_U64(atomic_load(&g_owner), 0);
	CHECK(me != NULL);
	/* Read afresh: marks on top go (topmark leaves one), a NULL (an
	 * untracked hold nobody releases) stays. */
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 0);
	CHECK_EQ_U64(me->nesting, 0);
}

/* One marked stretch per run (the stepper repeats it while step_again()). */
static int main_lock_a(const char *name, uint64_t timeout)
{
	int r;

	g_opname = name;
	step_mark(STEP_SIG_BEGIN);
	r = lk(&A, timeout);
	if (r == 0)
		own(1);
	step_mark(STEP_SIG_END);
	return r;
}

static void main_unlock_a(const char *name)
{
	g_opname = name;
	step_mark(STEP_SIG_BEGIN);
	disown(1);
	ulk(&A);
	step_mark(STEP_SIG_END);
}

static void lock_a(void)
{
	CHECK_EQ_U64(lk(&A, 30 * RU_SEC), 0);
	own(1);
}

static void unlock_a(void)
{
	disown(1);
	ulk(&A);
}

static void op_fast(void)
{
	do {
		CHECK_EQ_U64(main_lock_a("lock, free", 30 * RU_SEC), 0);
		unlock_a();
		check_clean();
	} while (step_again());
	do {
		lock_a();
		main_unlock_a("unlock, no waiter");
		check_clean();
	} while (step_again());
}

#ifndef RQSPIN_INTERRUPT_PSHARED
static void op_pending(void)
{
	do {
		helper_do(&g_h[0], H_HOLD_UNTIL_WAITER);
		RU_WAIT_FOR(atomic_load(&g_h[0].holding) || !atomic_load(&g_h[0].busy), 60,
			    "helper 1 holds A");
		CHECK_EQ_U64(main_lock_a("lock, pending waiter", 30 * RU_SEC), 0);
		unlock_a();
		check_clean();
	} while (step_again());
	do {
		lock_a();
		helper_do(&g_h[1], H_WAIT_THEN_LOCK);
		RU_WAIT_FOR(ru_word(&A) & RU_PENDING_MASK, 60, "helper 2 pending on A");
		main_unlock_a("unlock, pending waiter");
		check_clean();
	} while (step_again());
}

static void op_queued(void)
{
	do {
		helper_do(&g_h[0], H_HOLD_UNTIL_QUEUED);
		RU_WAIT_FOR(atomic_load(&g_h[0].holding), 60, "helper 1 holds A");
		helper_do(&g_h[1], H_WAIT_THEN_LOCK);
		RU_WAIT_FOR(ru_word(&A) & RU_PENDING_MASK, 60, "helper 2 pending on A");
		CHECK_EQ_U64(main_lock_a("lock, queued", 30 * RU_SEC), 0);
		unlock_a();
		check_clean();
	} while (step_again());
}
#endif

static void op_nonlifo(void)
{
	do {
		lock_a();
		g_opname = "lock B, unlock A, unlock B";
		step_mark(STEP_SIG_BEGIN);
		CHECK_EQ_U64(lk(&B, 30 * RU_SEC), 0);
		disown(1);
		ulk(&A);
		ulk(&B);
		step_mark(STEP_SIG_END);
		check_clean();
	} while (step_again());
}

#ifndef RQSPIN_INTERRUPT_SHIM
static void op_timeout(void)
{
	g_timeout_op = true;
	do {
		helper_do(&g_h[0], H_HOLD);
		RU_WAIT_FOR(atomic_load(&g_h[0].holding), 60, "helper 1 holds A");
		CHECK_EQ_U64(main_lock_a("lock, timeout", RU_MS), (uint64_t)-ETIMEDOUT);
		atomic_store(&g_h[0].cmd, H_RELEASE);
		check_clean();
	} while (step_again());
	g_timeout_op = false;
}
#endif

static void op_aa(void)
{
	do {
		lock_a();
		CHECK_EQ_U64(main_lock_a("lock again (AA)", 30 * RU_SEC), (uint64_t)-EDEADLK);
		unlock_a();
		check_clean();
	} while (step_again());
}

/* A RELEASED mark on top of the main thread's table, then lock A over it. */
static void op_topmark(void)
{
	const struct rqspin_held_locks *t = rqspin_held_locks();

	do {
		CHECK_EQ_U64(lk(&M, 30 * RU_SEC), 0);
		CHECK_EQ_U64(lk(&N, 30 * RU_SEC), 0);
		helper_do(&g_h[0], H_UNLOCK_M);
		helper_idle(&g_h[0]);
		CHECK_EQ_U64(lk(&P, 30 * RU_SEC), 0);
		ulk(&N); /* not on top: the slow unlock drains M's release */
		ulk(&P); /* inline: exposes M's mark */
		CHECK(t->cnt == 1 && t->locks[0] == RQSPIN__HELD_RELEASED);
		CHECK_EQ_U64(main_lock_a("lock over a top mark", 30 * RU_SEC), 0);
		unlock_a();
		check_clean();
	} while (step_again());
}

/* RQSPIN_NR_HELD - 1 or RQSPIN_NR_HELD locks held under A's lock and
 * unlock, which the table's count must come back from. */
static rqspinlock_t g_fill[RQSPIN_NR_HELD];

static void fill(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ_U64(lk(&g_fill[i], 30 * RU_SEC), 0);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, n);
}

static void unfill(unsigned n)
{
	CHECK_EQ_U64(rqspin_held_locks()->cnt, n);
	for (unsigned i = n; i-- > 0;)
		ulk(&g_fill[i]);
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ_U64(ru_word(&g_fill[i]), 0);
}

static void op_full(void)
{
	for (unsigned n = RQSPIN_NR_HELD - 1; n <= RQSPIN_NR_HELD; n++) {
		if (n == RQSPIN_NR_HELD && g_mode == MODE_SAME)
			break;
		do {
			fill(n);
			CHECK_EQ_U64(main_lock_a(n < RQSPIN_NR_HELD ? "lock, last entry"
								     : "lock, table full",
						 30 * RU_SEC),
				     0);
			unlock_a();
			unfill(n);
			check_clean();
		} while (step_again());
		do {
			fill(n);
			lock_a();
			main_unlock_a(n < RQSPIN_NR_HELD ? "unlock, last entry"
							 : "unlock, past the table");
			unfill(n);
			check_clean();
		} while (step_again());
	}
}

static void op_keep(void)
{
	struct rqspin_thread *me = (struct rqspin_thread *)rqspin__tls_self;
	uint64_t fast;

	g_keep = true;
	do {
		fill(RQSPIN_NR_HELD - 1);
		g_kept = false;
		fast = me->hot.fast_acquired;
		CHECK_EQ_U64(main_lock_a("lock, a handler keeps a lock", 30 * RU_SEC), 0);
		/* An entry stored at locks[RQSPIN_NR_HELD] lands here. */
		CHECK(me->hot.fast_acquired - fast <= 2);
		unlock_a();
		if (g_kept)
			ulk(&K);
		CHECK_EQ_U64(ru_word(&K), 0);
		unfill(RQSPIN_NR_HELD - 1);
		check_clean();
	} while (step_again());
	g_keep = false;
}

static void child_main(void)
{
	pthread_t d_helper;

	step_child_signals(on_inject);
	for (int i = 0; i < 2; i++) {
		g_h[i].id = 3 + i;
		g_h[i].th = tu_thread_start(helper_main, &g_h[i]);
	}
	/* register the threads before any operation is learnt */
	CHECK_EQ_U64(lk(&C, 30 * RU_SEC), 0);
	ulk(&C);
#ifdef RQSPIN_INTERRUPT_SHIM
	{
		const char *p = getenv("RQSPIN_PTHREAD_DEADLOCK");

		if (!p || strcmp(p, "error") != 0) {
			fprintf(stderr, "shim_interrupt: run with RQSPIN_PTHREAD_DEADLOCK=error\n");
			exit(2);
		}
	}
#endif
#ifdef RQSPIN_INTERRUPT_PSHARED
	rqspin_lock_init_pshared(&A);
	rqspin_lock_init_pshared(&B);
#endif
	d_helper = tu_thread_start(d_helper_main, NULL);
	RU_WAIT_FOR(atomic_load(&g_d_holding), 60, "D helper holds D");
	for (int mode = 0; mode < NMODES; mode++) {
		g_mode = mode;
		op_fast();
#ifndef RQSPIN_INTERRUPT_PSHARED
		op_pending();
		op_queued();
#endif
		op_nonlifo();
#ifndef RQSPIN_INTERRUPT_SHIM
		op_timeout();
#endif
		op_aa();
		op_topmark();
		op_full();
		if (mode == MODE_OTHER)
			op_keep();
	}
	atomic_store(&g_d_stop, true);
	tu_thread_join(d_helper);
	CHECK_EQ_U64(ru_word(&D), 0);
	for (int i = 0; i < 2; i++) {
		atomic_store(&g_h[i].cmd, H_QUIT);
		tu_thread_join(g_h[i].th);
	}
	fprintf(stderr,
		"child: %lu handler calls: A taken %lu, AA %lu, timed out %lu (the rest: C or D)\n",
		atomic_load(&g_handler_calls), atomic_load(&g_handler_got),
		atomic_load(&g_handler_aa), atomic_load(&g_handler_timeout));
	exit(0);
}

/* ---- the parent ------------------------------------------------------------- */

static struct stepper g_stepper;

int main(void)
{
#if defined(TU_TSAN) || !STEP_SUPPORTED
	printf(TEST_NAME ": skipped (%s)\n",
	       STEP_SUPPORTED ? "ThreadSanitizer delays signal handlers"
			      : "no single-stepping support for this architecture");
	return 77;
#endif
	g_stepper.visits = 1;
	g_stepper.max_steps = 100000000ull;
	g_stepper.max_seconds = 480; /* under CTest's 600 s */
	g_stepper.verbose = getenv("RQSPIN_INTERRUPT_VERBOSE") != NULL;
	step_labels.opname = &g_opname;
	step_labels.mode = &g_mode;
	step_labels.mode_names = mode_name;
	step_labels.nmodes = NMODES;
	return stepper_main(&g_stepper, TEST_NAME, child_main);
}
