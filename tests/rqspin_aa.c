/* SPDX-License-Identifier: MIT */
/*
 * rqspinlock AA deadlocks and the basic API (kernel: the AA case of
 * prog_tests/res_spin_lock.c, and the NMI-on-holder/-waiter cases the
 * stress module provokes; here the NMI is a real signal).
 *
 *  1. argument checks: NULL lock -> -EINVAL, default timeout 0 or > 1 h
 *     -> -EINVAL;
 *  2. re-lock on the same thread -> -EDEADLK at once; the lock stays held
 *     by us, the held table is unchanged, and it works after unlock;
 *  3. trylock semantics; the held-lock table's contents;
 *  4. rqspin_lock_sigsave / rqspin_unlock_sigrestore: signals blocked while
 *     held, mask restored after, and restored on failure (AA, timeout);
 *  5. a signal handler that interrupts the holder and takes the same lock
 *     -> -EDEADLK (pthread_kill to self, then a 200 us per-thread timer
 *     firing at random points of a lock/unlock loop: every handler attempt
 *     gets 0 or -EDEADLK, never a timeout);
 *  6. a handler that interrupts a *waiter* of the same lock -> -EDEADLK:
 *     the pending waiter, the queue head and a queued (parked) waiter; then
 *     the owner unlocks and each waiter's own acquisition succeeds.
 */
#include "rqspin_util.h"

/* ---- the signal handler used throughout --------------------------------- */

static rqspinlock_t *_Atomic h_lock; /* what the handler locks */
static _Atomic int h_result = 1;     /* last rqspin_lock result (1 = none yet) */
static _Atomic int h_try = -1;       /* last rqspin_trylock result */
static _Atomic unsigned h_runs;
static _Atomic unsigned h_ok, h_deadlk, h_other;
static _Atomic int h_other_code;
static _Atomic bool h_do_try = true;
static uint64_t h_counter; /* protected by *h_lock */

static void on_sig(int sig)
{
	int e = errno;
	rqspinlock_t *l = atomic_load(&h_lock);
	int r;

	(void)sig;
	r = rqspin_lock(l);
	if (r == 0) {
		h_counter++;
		rqspin_unlock(l);
		atomic_fetch_add(&h_ok, 1);
	} else if (r == -EDEADLK) {
		atomic_fetch_add(&h_deadlk, 1);
	} else {
		atomic_store(&h_other_code, r);
		atomic_fetch_add(&h_other, 1);
	}
	if (atomic_load(&h_do_try)) {
		bool t = rqspin_trylock(l);

		if (t)
			rqspin_unlock(l);
		atomic_store(&h_try, t);
	}
	atomic_store(&h_result, r);
	atomic_fetch_add(&h_runs, 1);
	errno = e;
}

static void h_reset(rqspinlock_t *l)
{
	atomic_store(&h_lock, l);
	atomic_store(&h_result, 1);
	atomic_store(&h_try, -1);
}

static void check_table_empty(void)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();

	CHECK_EQ_U64(h->cnt, 0);
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		CHECK(h->locks[i] == NULL);
}

/* ---- 1. arguments --------------------------------------------------------- */

static void test_args(void)
{
	sigset_t set;
	uint64_t def = rqspin_get_default_timeout();

	CHECK(sizeof(rqspinlock_t) == 4);
	{
		rqspinlock_t z = RQSPINLOCK_INIT;

		CHECK(ru_word(&z) == 0);
		CHECK(!rqspin_is_locked(&z));
	}
	RU_CHECK_RET(rqspin_lock(NULL), -EINVAL);
	RU_CHECK_RET(rqspin_lock_timeout(NULL, 1000), -EINVAL);
	CHECK(!rqspin_trylock(NULL));
	RU_CHECK_RET(rqspin_lock_sigsave(NULL, &set), -EINVAL);
	{
		rqspinlock_t l = RQSPINLOCK_INIT;

		RU_CHECK_RET(rqspin_lock_sigsave(&l, NULL), -EINVAL);
		CHECK(!rqspin_is_locked(&l));
	}
	check_table_empty();

	if (!getenv("RQSPIN_TIMEOUT_MS"))
		CHECK_EQ_U64(def, RQSPIN_DEFAULT_TIMEOUT_NS);
	RU_CHECK_RET(rqspin_set_default_timeout(0), -EINVAL);
	CHECK_EQ_U64(rqspin_get_default_timeout(), def);
	RU_CHECK_RET(rqspin_set_default_timeout(3600ull * RU_SEC + 1), -EINVAL);
	CHECK_EQ_U64(rqspin_get_default_timeout(), def);
	RU_CHECK_RET(rqspin_set_default_timeout(3600ull * RU_SEC), 0);
	CHECK_EQ_U64(rqspin_get_default_timeout(), 3600ull * RU_SEC);
	RU_CHECK_RET(rqspin_set_default_timeout(1), 0);
	CHECK_EQ_U64(rqspin_get_default_timeout(), 1);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	CHECK_EQ_U64(rqspin_get_default_timeout(), def);
	printf("args: ok\n");
}

/* ---- 2. same-thread AA ----------------------------------------------------- */

static void test_same_thread(void)
{
	rqspinlock_t a = RQSPINLOCK_INIT, b = RQSPINLOCK_INIT;
	const struct rqspin_held_locks *h = rqspin_held_locks();
	struct rqspin_lock_stats s0 = ru_stats(), s1;

	RU_CHECK_RET(rqspin_lock(&a), 0);
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[0] == &a);
	CHECK_EQ_U64(ru_word(&a), 1);

	/* A long timeout: an AA that is not detected would wait for it. */
	RU_CHECK_RET(rqspin_lock(&a), -EDEADLK);
	RU_CHECK_RET(rqspin_lock_timeout(&a, 3600ull * RU_SEC), -EDEADLK);
	/* Still held by us, nothing left behind in the word or the table. */
	CHECK(rqspin_is_locked(&a));
	CHECK_EQ_U64(ru_word(&a), 1);
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[0] == &a);
	CHECK(h->locks[1] == NULL);
	CHECK(!rqspin_trylock(&a));
	CHECK_EQ_U64(h->cnt, 1);

	/* Nested: both the outer and the inner lock are AA. */
	RU_CHECK_RET(rqspin_lock(&b), 0);
	RU_CHECK_RET(rqspin_lock(&a), -EDEADLK);
	RU_CHECK_RET(rqspin_lock(&b), -EDEADLK);
	CHECK_EQ_U64(h->cnt, 2);
	CHECK(h->locks[0] == &a && h->locks[1] == &b);
	rqspin_unlock(&b);
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[1] == NULL);
	rqspin_unlock(&a);
	check_table_empty();
	CHECK_EQ_U64(ru_word(&a), 0);
	CHECK_EQ_U64(ru_word(&b), 0);

	/* Works again. */
	RU_CHECK_RET(rqspin_lock(&a), 0);
	rqspin_unlock(&a);
	RU_CHECK_RET(rqspin_lock_timeout(&a, 10 * RU_MS), 0);
	rqspin_unlock(&a);
	check_table_empty();

	s1 = ru_stats();
	CHECK_EQ_U64(s1.aa - s0.aa, 4);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	CHECK_EQ_U64(s1.abba + s1.cycle, s0.abba + s0.cycle);
	printf("same-thread AA: ok\n");
}

/* ---- 3. trylock and the held table --------------------------------------- */

static int try_fn(struct ru_actor *a)
{
	rqspinlock_t *l = a->user;
	bool t = rqspin_trylock(l);

	if (t)
		rqspin_unlock(l);
	return t;
}

static void test_trylock_table(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	rqspinlock_t many[8];
	const struct rqspin_held_locks *h = rqspin_held_locks();
	struct ru_actor other;

	ru_actor_start(&other, 1);

	CHECK(rqspin_trylock(&l));
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[0] == &l);
	CHECK(!rqspin_trylock(&l)); /* held by us: false, table unchanged */
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[1] == NULL);
	/* Held by another thread: its trylock fails, its lock times out. */
	ru_actor_post_call(&other, try_fn, &l);
	RU_CHECK_RET(ru_actor_wait(&other, 60), 0);
	other.timeout = 20 * RU_MS;
	ru_actor_post(&other, RU_LOCK_TIMEOUT, &l);
	RU_CHECK_RET(ru_actor_wait(&other, 60), -ETIMEDOUT);
	CHECK_GE_U64(ru_actor_elapsed(&other), 20 * RU_MS);
	CHECK_EQ_U64(ru_word(&l), 1); /* no pending bit or tail left over */
	rqspin_unlock(&l);
	check_table_empty();
	ru_actor_post_call(&other, try_fn, &l);
	RU_CHECK_RET(ru_actor_wait(&other, 60), 1);
	CHECK_EQ_U64(ru_word(&l), 0);

	/* Table contents, in acquisition order; failures leave it alone. */
	for (int i = 0; i < 8; i++)
		rqspin_lock_init(&many[i]);
	for (int i = 0; i < 8; i++) {
		if (i % 2)
			CHECK(rqspin_trylock(&many[i]));
		else
			RU_CHECK_RET(rqspin_lock(&many[i]), 0);
		CHECK_EQ_U64(h->cnt, (uint64_t)i + 1);
	}
	for (int i = 0; i < 8; i++)
		CHECK(h->locks[i] == &many[i]);
	CHECK(h->locks[8] == NULL);
	RU_CHECK_RET(rqspin_lock(&many[3]), -EDEADLK);
	CHECK(!rqspin_trylock(&many[5]));
	CHECK_EQ_U64(h->cnt, 8);
	for (int i = 0; i < 8; i++)
		CHECK(h->locks[i] == &many[i]);
	for (int i = 7; i >= 0; i--) {
		rqspin_unlock(&many[i]);
		CHECK_EQ_U64(h->cnt, (uint64_t)i);
		CHECK(h->locks[i] == NULL);
		CHECK_EQ_U64(ru_word(&many[i]), 0);
	}
	check_table_empty();
	ru_actor_exit(&other);
	printf("trylock and held table: ok\n");
}

/* ---- 4. sigsave ------------------------------------------------------------ */

static _Atomic unsigned usr2_count;

static void on_usr2(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr2_count, 1);
}

static sigset_t cur_mask(void)
{
	sigset_t s;

	CHECK(pthread_sigmask(SIG_BLOCK, NULL, &s) == 0);
	return s;
}

static bool same_mask(const sigset_t *a, const sigset_t *b)
{
	for (int s = 1; s < NSIG; s++)
		if (sigismember(a, s) != sigismember(b, s))
			return false;
	return true;
}

static void test_sigsave(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	sigset_t orig = cur_mask(), old, held, s2;
	struct ru_actor other;

	ru_set_handler(SIGUSR2, on_usr2);
	CHECK(!sigismember(&orig, SIGUSR2));

	RU_CHECK_RET(rqspin_lock_sigsave(&l, &old), 0);
	held = cur_mask();
	CHECK(same_mask(&old, &orig));
	CHECK(sigismember(&held, SIGUSR1));
	CHECK(sigismember(&held, SIGUSR2));
	CHECK(sigismember(&held, SIGRTMIN));
	CHECK(sigismember(&held, SIGALRM));
	CHECK(sigismember(&held, SIGTERM));
	CHECK(rqspin_is_locked(&l));
	/* A signal sent while held stays pending until the restore. */
	CHECK(pthread_kill(pthread_self(), SIGUSR2) == 0);
	CHECK_EQ_U64(atomic_load(&usr2_count), 0);
	/* AA while held through sigsave: the mask stays as it is (blocked). */
	RU_CHECK_RET(rqspin_lock_sigsave(&l, &s2), -EDEADLK);
	{
		sigset_t now = cur_mask();

		CHECK(same_mask(&now, &held));
	}
	rqspin_unlock_sigrestore(&l, &old);
	{
		sigset_t now = cur_mask();

		CHECK(same_mask(&now, &orig));
	}
	CHECK_EQ_U64(atomic_load(&usr2_count), 1);
	CHECK(!rqspin_is_locked(&l));
	check_table_empty();

	/* Failure by AA: the mask is restored before returning. */
	RU_CHECK_RET(rqspin_lock(&l), 0);
	RU_CHECK_RET(rqspin_lock_sigsave(&l, &old), -EDEADLK);
	{
		sigset_t now = cur_mask();

		CHECK(same_mask(&now, &orig));
	}
	rqspin_unlock(&l);

	/* Failure by timeout: the lock is held by another thread. */
	ru_actor_start(&other, 1);
	RU_CHECK_RET(ru_actor_do(&other, RU_LOCK, &l), 0);
	{
		uint64_t t0 = tu_now_ns();
		sigset_t now;

		RU_CHECK_RET(rqspin_lock_sigsave_timeout(&l, &old, 20 * RU_MS), -ETIMEDOUT);
		CHECK_GE_U64(tu_now_ns() - t0, 20 * RU_MS);
		now = cur_mask();
		CHECK(same_mask(&now, &orig));
	}
	RU_CHECK_RET(ru_actor_do(&other, RU_UNLOCK, &l), 0);
	ru_actor_exit(&other);

	/* A signal blocked before the call stays blocked after the restore. */
	{
		sigset_t b, now;

		sigemptyset(&b);
		sigaddset(&b, SIGUSR2);
		CHECK(pthread_sigmask(SIG_BLOCK, &b, NULL) == 0);
		RU_CHECK_RET(rqspin_lock_sigsave(&l, &old), 0);
		CHECK(sigismember(&old, SIGUSR2));
		rqspin_unlock_sigrestore(&l, &old);
		now = cur_mask();
		CHECK(sigismember(&now, SIGUSR2));
		CHECK(pthread_sigmask(SIG_UNBLOCK, &b, NULL) == 0);
	}
	check_table_empty();
	CHECK_EQ_U64(ru_word(&l), 0);
	printf("sigsave: ok\n");
}

/* ---- 5. handler interrupting the holder ----------------------------------- */

static void test_handler_on_holder(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	struct rqspin_lock_stats s0, s1;
	const struct rqspin_held_locks *h = rqspin_held_locks();

	h_reset(&l);
	/* Handler on a free lock: it gets it. */
	CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
	RU_WAIT_FOR(atomic_load(&h_result) != 1, 30, "handler ran");
	RU_CHECK_RET(atomic_load(&h_result), 0);
	CHECK_EQ_U64(atomic_load(&h_try), 1);

	/* Handler interrupting the holder: AA. */
	s0 = ru_stats();
	h_reset(&l);
	RU_CHECK_RET(rqspin_lock(&l), 0);
	CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
	RU_WAIT_FOR(atomic_load(&h_result) != 1, 30, "handler ran");
	RU_CHECK_RET(atomic_load(&h_result), -EDEADLK);
	CHECK_EQ_U64(atomic_load(&h_try), 0);
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[0] == &l && h->locks[1] == NULL);
	CHECK_EQ_U64(ru_word(&l), 1);
	rqspin_unlock(&l);
	s1 = ru_stats();
	CHECK_EQ_U64(s1.aa - s0.aa, 1);

	/* A per-thread timer interrupts a lock/unlock loop at random points
	 * (including inside rqspin_lock and rqspin_unlock themselves). The
	 * handler must get the lock (interrupted outside the critical section)
	 * or -EDEADLK (inside, or inside lock/unlock), never wait. */
	{
		unsigned iters = TU_ITERS(1000000u);
		uint64_t mine = 0;
		timer_t t;

		h_reset(&l);
		atomic_store(&h_ok, 0);
		atomic_store(&h_deadlk, 0);
		atomic_store(&h_other, 0);
		atomic_store(&h_do_try, false);
		h_counter = 0;
		s0 = ru_stats();
		/* The default timeout is long: a missed AA would be a
		 * visible stall, and is caught as "other" below. */
		t = ru_timer_start(ru_gettid(), SIGUSR1, 200000, 200000);
		for (unsigned i = 0; i < iters; i++) {
			RU_CHECK_RET(rqspin_lock(&l), 0);
			mine++;
			/* A few hundred ns of critical section. */
			for (volatile int k = 0; k < 50; k++)
				;
			rqspin_unlock(&l);
			for (volatile int k = 0; k < 50; k++)
				;
		}
		ru_timer_stop(t);
		atomic_store(&h_do_try, true);
		if (atomic_load(&h_other)) {
			fprintf(stderr, "handler got %s\n",
				ru_err_name(atomic_load(&h_other_code)));
			CHECK(!"handler on holder: unexpected code");
		}
		s1 = ru_stats();
		printf("handler on holder (timer): %u handler runs, %u acquired, %u -EDEADLK, "
		       "%llu loop iterations\n",
		       atomic_load(&h_runs), atomic_load(&h_ok), atomic_load(&h_deadlk),
		       (unsigned long long)mine);
		CHECK(atomic_load(&h_ok) + atomic_load(&h_deadlk) > 0);
		CHECK_EQ_U64(h_counter, atomic_load(&h_ok));
		CHECK_EQ_U64(s1.timeout, s0.timeout);
		CHECK_EQ_U64(s1.aa - s0.aa, atomic_load(&h_deadlk));
		check_table_empty();
		CHECK_EQ_U64(ru_word(&l), 0);
	}
	printf("handler on holder: ok\n");
}

/* ---- 6. handler interrupting a waiter ------------------------------------ */

/* Signal actor a; its handler takes h_lock. In the normal build the handler
 * must run at once, with the waiter still waiting. Under ThreadSanitizer a
 * signal to a thread asleep in a raw futex syscall is only delivered when
 * the thread wakes (the runtime defers it), so there deferral is allowed:
 * the handler then runs when the waiter has been woken, still inside its
 * rqspin_lock or holding the lock - AA either way. */
static bool signal_waiter(struct ru_actor *a, const char *what, bool may_defer)
{
	uint64_t end;

	h_reset(atomic_load(&h_lock));
	CHECK(pthread_kill(a->th, SIGUSR1) == 0);
	end = tu_now_ns() + (may_defer ? 2 : 60) * RU_SEC;
	while (atomic_load(&h_result) == 1 && tu_now_ns() < end)
		tu_sleep_us(100);
	if (atomic_load(&h_result) == 1) {
		CHECK(may_defer);
		printf("  %s: handler deferred (TSan: thread parked in futex)\n", what);
		return false;
	}
	RU_CHECK_RET(atomic_load(&h_result), -EDEADLK);
	CHECK_EQ_U64(atomic_load(&h_try), 0);
	CHECK(!ru_actor_is_done(a)); /* still waiting */
	printf("  %s: handler got -EDEADLK\n", what);
	return true;
}

static void test_handler_on_waiter(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	struct ru_actor owner, pend, head, q;
	struct rqspin_lock_stats s0, s1;
	uint64_t def = rqspin_get_default_timeout();
	uint32_t head_tail;
	bool q_now;
#ifdef TU_TSAN
	const bool tsan = true;
#else
	const bool tsan = false;
#endif

	/* Long timeout: no waiter may time out during the scenario. */
	RU_CHECK_RET(rqspin_set_default_timeout(30 * RU_SEC), 0);
	s0 = ru_stats();
	atomic_store(&h_lock, &l);
	ru_actor_start(&owner, 1);
	ru_actor_start(&pend, 2);
	ru_actor_start(&head, 3);
	ru_actor_start(&q, 4);

	RU_CHECK_RET(ru_actor_do(&owner, RU_LOCK, &l), 0);

	/* The pending waiter. */
	ru_actor_post(&pend, RU_LOCK, &l);
	RU_WAIT_FOR(ru_word(&l) & RU_PENDING_MASK, 30, "pending waiter");
	signal_waiter(&pend, "pending waiter", false);

	/* The queue head (first in the MCS queue, spinning/yielding). */
	ru_actor_post(&head, RU_LOCK, &l);
	RU_WAIT_FOR(ru_tail(&l) != 0, 30, "queue head");
	head_tail = ru_tail(&l);
	signal_waiter(&head, "queue head", false);

	/* A queued waiter behind the head: give it time to park. */
	ru_actor_post(&q, RU_LOCK, &l);
	RU_WAIT_FOR(ru_tail(&l) != head_tail, 30, "queued waiter");
	tu_sleep_us(20000);
	q_now = signal_waiter(&q, "queued waiter", tsan);

	CHECK(!ru_actor_is_done(&pend) && !ru_actor_is_done(&head) && !ru_actor_is_done(&q));
	/* Release: every waiter's own acquisition succeeds, in order. */
	RU_CHECK_RET(ru_actor_do(&owner, RU_UNLOCK, &l), 0);
	RU_CHECK_RET(ru_actor_wait(&pend, 60), 0);
	RU_CHECK_RET(ru_actor_do(&pend, RU_UNLOCK, &l), 0);
	RU_CHECK_RET(ru_actor_wait(&head, 60), 0);
	RU_CHECK_RET(ru_actor_do(&head, RU_UNLOCK, &l), 0);
	RU_CHECK_RET(ru_actor_wait(&q, 60), 0);
	if (!q_now) {
		/* The deferred handler ran while q was still in its slow path
		 * or holding the lock (q unlocks only when told). */
		RU_WAIT_FOR(atomic_load(&h_result) != 1, 30, "deferred handler");
		RU_CHECK_RET(atomic_load(&h_result), -EDEADLK);
		CHECK_EQ_U64(atomic_load(&h_try), 0);
	}
	RU_CHECK_RET(ru_actor_do(&q, RU_UNLOCK, &l), 0);
	CHECK_EQ_U64(ru_word(&l), 0);

	s1 = ru_stats();
	CHECK_EQ_U64(s1.aa - s0.aa, 3);
	CHECK_EQ_U64(s1.timeout, s0.timeout);

	/* Still a working lock for everybody. */
	RU_CHECK_RET(ru_actor_do(&q, RU_LOCK, &l), 0);
	RU_CHECK_RET(ru_actor_do(&q, RU_UNLOCK, &l), 0);
	RU_CHECK_RET(rqspin_lock(&l), 0);
	rqspin_unlock(&l);

	ru_actor_exit(&owner);
	ru_actor_exit(&pend);
	ru_actor_exit(&head);
	ru_actor_exit(&q);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	printf("handler on waiter: ok\n");
}

int main(void)
{
	struct rqspin_lock_stats s;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	ru_set_handler(SIGUSR1, on_sig);
	test_args();
	test_same_thread();
	test_trylock_table();
	test_sigsave();
	test_handler_on_holder();
	test_handler_on_waiter();
	s = ru_stats();
	ru_print_stats("stats", &s);
	printf("rqspin_aa: PASS\n");
	return 0;
}
