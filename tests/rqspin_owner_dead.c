/* SPDX-License-Identifier: MIT */
/*
 * A lock whose owner thread exits without unlocking (beyond the kernel):
 * the next acquirer gets -EOWNERDEAD quickly - not after the timeout - and
 * then holds the lock (like a robust mutex); after its unlock the lock
 * works normally.
 *
 *  1. owner exits, then somebody locks: -EOWNERDEAD, the lock is held by
 *     the caller (word, held table), unlock, then 0;
 *  2. a waiter is already spinning when the owner exits: -EOWNERDEAD with a
 *     10 s default timeout, returning in well under 5 s;
 *  3. several waiters queued (pending, head, queued) when the owner exits:
 *     exactly one gets -EOWNERDEAD, the others 0, mutual exclusion intact;
 *  4. an owner exiting with several locks (taken by lock and by trylock):
 *     each is recovered; -EOWNERDEAD through rqspin_lock_sigsave keeps the
 *     signals blocked until rqspin_unlock_sigrestore.
 */
#include "rqspin_util.h"

#define LONG_TIMEOUT (10 * RU_SEC)
#define QUICK_BOUND (5 * RU_SEC)

/* ---- 1. owner gone before the next lock ---------------------------------- */

static void test_exited_before(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	struct ru_actor o;
	const struct rqspin_held_locks *h = rqspin_held_locks();
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	uint64_t t0;

	ru_actor_start(&o, 1);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &l), 0);
	ru_actor_exit(&o); /* joined: the thread is gone, holding l */
	CHECK(rqspin_is_locked(&l));

	t0 = tu_now_ns();
	RU_CHECK_RET(rqspin_lock(&l), -EOWNERDEAD);
	CHECK(tu_now_ns() - t0 < QUICK_BOUND);
	/* We hold it now. */
	CHECK_EQ_U64(ru_word(&l), 1);
	CHECK_EQ_U64(h->cnt, 1);
	CHECK(h->locks[0] == &l);
	RU_CHECK_RET(rqspin_lock(&l), -EDEADLK); /* really ours: AA */
	rqspin_unlock(&l);
	CHECK_EQ_U64(ru_word(&l), 0);
	CHECK_EQ_U64(h->cnt, 0);
	RU_CHECK_RET(rqspin_lock(&l), 0);
	rqspin_unlock(&l);
	s1 = ru_stats();
	CHECK_EQ_U64(s1.owner_dead - s0.owner_dead, 1);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	printf("owner exited before the lock: ok\n");
}

/* ---- 2. a waiter spinning when the owner exits ---------------------------- */

static void test_exit_while_waiting(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	struct ru_actor o, w;
	int r;

	ru_actor_start(&o, 1);
	ru_actor_start(&w, 2);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &l), 0);
	ru_actor_post(&w, RU_LOCK, &l);
	RU_WAIT_FOR(ru_word(&l) & RU_PENDING_MASK, 30, "pending waiter");
	tu_sleep_us(5000);
	ru_actor_exit(&o);
	r = ru_actor_wait(&w, 30);
	printf("waiter while the owner exits: %s after %llu ms (timeout %llu ms)\n",
	       ru_err_name(r), (unsigned long long)(ru_actor_elapsed(&w) / RU_MS),
	       (unsigned long long)(LONG_TIMEOUT / RU_MS));
	RU_CHECK_RET(r, -EOWNERDEAD);
	CHECK(ru_actor_elapsed(&w) < QUICK_BOUND);
	CHECK_EQ_U64(ru_word(&l), 1);
	RU_CHECK_RET(ru_actor_do(&w, RU_UNLOCK, &l), 0);
	CHECK_EQ_U64(ru_word(&l), 0);
	RU_CHECK_RET(ru_actor_do(&w, RU_LOCK, &l), 0);
	RU_CHECK_RET(ru_actor_do(&w, RU_UNLOCK, &l), 0);
	ru_actor_exit(&w);
}

/* ---- 3. a queue of waiters ------------------------------------------------- */

#define NW 5

static rqspinlock_t ql = RQSPINLOCK_INIT;
static volatile int in_cs;
static uint64_t q_counter; /* protected by ql */

static int q_lock_fn(struct ru_actor *a)
{
	int r = rqspin_lock(&ql);

	(void)a;
	if (r == 0 || r == -EOWNERDEAD) {
		CHECK(in_cs == 0);
		in_cs = 1;
		q_counter++;
		ru_busy_ns(200000);
		CHECK(in_cs == 1);
		in_cs = 0;
		rqspin_unlock(&ql);
	}
	return r;
}

static void test_exit_with_queue(void)
{
	struct ru_actor o, w[NW];
	int dead = 0, ok = 0;
	uint32_t prev_tail = 0;

	q_counter = 0;
	ru_actor_start(&o, 1);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &ql), 0);
	for (int i = 0; i < NW; i++) {
		ru_actor_start(&w[i], 2 + i);
		ru_actor_post_call(&w[i], q_lock_fn, NULL);
		if (i == 0) {
			RU_WAIT_FOR(ru_word(&ql) & RU_PENDING_MASK, 30, "pending waiter");
		} else {
			RU_WAIT_FOR(ru_tail(&ql) != prev_tail, 30, "queued waiter");
			prev_tail = ru_tail(&ql);
		}
	}
	tu_sleep_us(10000); /* let the queued ones park */
	ru_actor_exit(&o);
	for (int i = 0; i < NW; i++) {
		int r = ru_actor_wait(&w[i], 30);

		CHECK(ru_actor_elapsed(&w[i]) < QUICK_BOUND + 20 * RU_MS);
		if (r == -EOWNERDEAD)
			dead++;
		else
			RU_CHECK_RET(r, 0);
		ok += r == 0;
	}
	printf("owner exits with %d waiters: %d got -EOWNERDEAD, %d got 0\n", NW, dead, ok);
	CHECK_EQ_U64(dead, 1);
	CHECK_EQ_U64(ok, NW - 1);
	CHECK_EQ_U64(q_counter, NW);
	CHECK_EQ_U64(ru_word(&ql), 0);
	/* Mutual exclusion afterwards, everyone again. */
	for (int i = 0; i < NW; i++)
		ru_actor_post_call(&w[i], q_lock_fn, NULL);
	for (int i = 0; i < NW; i++)
		RU_CHECK_RET(ru_actor_wait(&w[i], 30), 0);
	CHECK_EQ_U64(q_counter, 2 * NW);
	for (int i = 0; i < NW; i++)
		ru_actor_exit(&w[i]);
}

/* ---- 4. several locks, trylock, sigsave ---------------------------------- */

static int try_fn(struct ru_actor *a)
{
	return rqspin_trylock(a->user) ? 0 : -1;
}

static void test_several(void)
{
	rqspinlock_t a = RQSPINLOCK_INIT, b = RQSPINLOCK_INIT, c = RQSPINLOCK_INIT;
	struct ru_actor o;
	sigset_t orig, old, now;

	ru_actor_start(&o, 1);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &a), 0);
	ru_actor_post_call(&o, try_fn, &b);
	RU_CHECK_RET(ru_actor_wait(&o, 30), 0);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &c), 0);
	ru_actor_exit(&o);

	RU_CHECK_RET(rqspin_lock(&c), -EOWNERDEAD);
	RU_CHECK_RET(rqspin_lock(&b), -EOWNERDEAD);
	CHECK(pthread_sigmask(SIG_BLOCK, NULL, &orig) == 0);
	CHECK(!sigismember(&orig, SIGUSR1));
	RU_CHECK_RET(rqspin_lock_sigsave(&a, &old), -EOWNERDEAD);
	CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0);
	CHECK(sigismember(&now, SIGUSR1)); /* acquired: signals stay blocked */
	CHECK(!sigismember(&old, SIGUSR1));
	rqspin_unlock_sigrestore(&a, &old);
	CHECK(pthread_sigmask(SIG_BLOCK, NULL, &now) == 0);
	CHECK(!sigismember(&now, SIGUSR1));
	rqspin_unlock(&b);
	rqspin_unlock(&c);
	CHECK_EQ_U64(rqspin_held_locks()->cnt, 0);
	CHECK_EQ_U64(ru_word(&a) | ru_word(&b) | ru_word(&c), 0);
	RU_CHECK_RET(rqspin_lock(&a), 0);
	RU_CHECK_RET(rqspin_lock(&b), 0);
	RU_CHECK_RET(rqspin_lock(&c), 0);
	rqspin_unlock(&c);
	rqspin_unlock(&b);
	rqspin_unlock(&a);
	printf("several locks, trylock, sigsave: ok\n");
}

int main(void)
{
	struct rqspin_lock_stats s0, s1;
	unsigned rounds = TU_SLOWDOWN > 1 ? 2 : 5;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	RU_CHECK_RET(rqspin_set_default_timeout(LONG_TIMEOUT), 0);
	s0 = ru_stats();
	test_exited_before();
	for (unsigned r = 0; r < rounds; r++)
		test_exit_while_waiting();
	for (unsigned r = 0; r < rounds; r++)
		test_exit_with_queue();
	test_several();
	s1 = ru_stats();
	ru_print_stats("stats", &s1);
	CHECK_EQ_U64(s1.owner_dead - s0.owner_dead, 1 + 2 * rounds + 3);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	printf("rqspin_owner_dead: PASS\n");
	return 0;
}
