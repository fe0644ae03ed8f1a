/* SPDX-License-Identifier: MIT */
/*
 * Each call keeps its own budget in the queue. A queue head whose (short)
 * budget runs out while the owner is stalled dissolves the queue behind
 * it (MCS_ABORT, in FIFO order); a waiter queued behind it whose own
 * budget has not run out queues again instead of failing:
 *
 *  1. "no timeout": owner O blocked holding L, a pending waiter P and a
 *     waiter Q both with UINT64_MAX, a head H with a few milliseconds. H
 *     gets -ETIMEDOUT; Q is still waiting well after that, and both P and
 *     Q take L once O lets go (before the fix Q got -ETIMEDOUT with H);
 *  2. a longer finite budget: the same with Q's budget Q_NS. Q still gets
 *     -ETIMEDOUT (O never lets go), but only after its own budget, not
 *     at H's;
 *  3. a shorter one behind a head without: P and H with UINT64_MAX, Q
 *     with S_NS. Q must get -ETIMEDOUT while O still holds L (it asks H,
 *     through the queue, to dissolve it: before the fix it waited as
 *     long as H did, for ever here), and H must go on waiting and take
 *     L after P once O lets go.
 * Afterwards the word is clean and the lock shared with exact mutual
 * exclusion.
 */
#include "rqspin_util.h"

#define H_NS (5 * RU_MS)
#define Q_NS (150 * RU_MS)
#define S_NS (10 * RU_MS)

struct cast {
	rqspinlock_t l;
	struct ru_actor o, p, h, q;
};

/* O takes L; P becomes the pending waiter, H the queue head, Q queued
 * behind H (each step waits until the word shows it). */
static void line_up(struct cast *c, uint64_t h_timeout, uint64_t q_timeout)
{
	uint32_t tail_h;

	rqspin_lock_init(&c->l);
	RU_CHECK_RET(ru_actor_do(&c->o, RU_LOCK, &c->l), 0);
	c->p.timeout = UINT64_MAX;
	ru_actor_post(&c->p, RU_LOCK_TIMEOUT, &c->l);
	RU_WAIT_FOR(ru_word(&c->l) & RU_PENDING_MASK, 30, "pending waiter");
	c->h.timeout = h_timeout;
	ru_actor_post(&c->h, RU_LOCK_TIMEOUT, &c->l);
	RU_WAIT_FOR(ru_tail(&c->l) != 0, 30, "queue head");
	tail_h = ru_tail(&c->l);
	c->q.timeout = q_timeout;
	ru_actor_post(&c->q, RU_LOCK_TIMEOUT, &c->l);
	RU_WAIT_FOR(ru_tail(&c->l) != tail_h, 30, "waiter behind the head");
}

/* The owner O still holds L and sleeps: 50 ms on, P and `still` (queued
 * again after the queue dissolved) are both still waiting. Then O lets go,
 * and P, then `still`, take L in turn. */
static void let_go(struct cast *c, struct ru_actor *still)
{
	tu_sleep_us(50 * 1000);
	CHECK(!ru_actor_is_done(still));
	CHECK(!ru_actor_is_done(&c->p));
	ru_actor_do(&c->o, RU_UNLOCK, &c->l);
	RU_CHECK_RET(ru_actor_wait(&c->p, 60), 0);
	ru_actor_do(&c->p, RU_UNLOCK, &c->l);
	RU_CHECK_RET(ru_actor_wait(still, 60), 0);
	ru_actor_do(still, RU_UNLOCK, &c->l);
	CHECK_EQ_U64(ru_word(&c->l), 0);
}

static void no_timeout_round(struct cast *c)
{
	line_up(c, H_NS, UINT64_MAX);
	/* H's budget (2 x H_NS as the head) runs out: the owner sleeps. */
	RU_CHECK_RET(ru_actor_wait(&c->h, 60), -ETIMEDOUT);
	/* Q was aborted with the queue and must have queued again. */
	let_go(c, &c->q);
}

static void longer_budget_round(struct cast *c)
{
	uint64_t q_ns;

	line_up(c, H_NS, Q_NS);
	RU_CHECK_RET(ru_actor_wait(&c->h, 60), -ETIMEDOUT);
	RU_CHECK_RET(ru_actor_wait(&c->q, 60), -ETIMEDOUT);
	q_ns = ru_actor_elapsed(&c->q);
	printf("head failed after %.1f ms, the waiter behind it after %.1f ms (budget %.0f ms)\n",
	       (double)ru_actor_elapsed(&c->h) / 1e6, (double)q_ns / 1e6, (double)Q_NS / 1e6);
	/* Its own budget ran out, counted from before it queued (the call
	 * started a little earlier still). */
	CHECK(q_ns >= Q_NS);
	ru_actor_do(&c->o, RU_UNLOCK, &c->l);
	RU_CHECK_RET(ru_actor_wait(&c->p, 60), 0);
	ru_actor_do(&c->p, RU_UNLOCK, &c->l);
	CHECK_EQ_U64(ru_word(&c->l), 0);
}

static void shorter_budget_round(struct cast *c)
{
	line_up(c, UINT64_MAX, S_NS);
	/* O sleeps holding L throughout: only Q's own budget can end its
	 * wait (30 s: a hang, not a bound). */
	RU_CHECK_RET(ru_actor_wait(&c->q, 30), -ETIMEDOUT);
	printf("the waiter with %.0f ms behind a head without a budget failed after %.1f ms\n",
	       (double)S_NS / 1e6, (double)ru_actor_elapsed(&c->q) / 1e6);
	CHECK(ru_actor_elapsed(&c->q) >= S_NS);
	/* H queued again too: it has no budget to run out. */
	let_go(c, &c->h);
}

/* Two threads with exact mutual exclusion on the lock afterwards. */
static rqspinlock_t *excl_lock;
static uint64_t excl_counter;

static void *excl_thread(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++) {
		RU_CHECK_RET(rqspin_lock(excl_lock), 0);
		excl_counter++;
		rqspin_unlock(excl_lock);
	}
	return NULL;
}

int main(void)
{
	static struct cast c;
	pthread_t t[2];

	ru_actor_start(&c.o, 0);
	ru_actor_start(&c.p, 1);
	ru_actor_start(&c.h, 2);
	ru_actor_start(&c.q, 3);
	for (int r = 0; r < 3; r++)
		no_timeout_round(&c);
	longer_budget_round(&c);
	for (int r = 0; r < 3; r++)
		shorter_budget_round(&c);

	excl_lock = &c.l;
	for (int i = 0; i < 2; i++)
		t[i] = tu_thread_start(excl_thread, NULL);
	for (int i = 0; i < 2; i++)
		tu_thread_join(t[i]);
	CHECK_EQ_U64(excl_counter, 200000);
	CHECK_EQ_U64(ru_word(&c.l), 0);
	ru_actor_exit(&c.o);
	ru_actor_exit(&c.p);
	ru_actor_exit(&c.h);
	ru_actor_exit(&c.q);
	printf("rqspin_queue_budget: ok\n");
	return 0;
}
