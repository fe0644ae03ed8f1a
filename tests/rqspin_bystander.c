/* SPDX-License-Identifier: MIT */
/*
 * Only the members of a deadlock cycle fail; threads that hold no lock
 * and merely wait behind them never get -EDEADLK.
 *
 * T1 holds A, T2 holds B. Eight bystanders that hold nothing line up
 * (pending waiter, then queued) on A and on B, four each. Then T1 locks B
 * (queued behind B's bystanders) and T2 locks A, closing the ABBA cycle.
 * Only T1 and T2 may get -EDEADLK (at least one must); every bystander
 * must get its lock (0) and does a short critical section checked with a
 * non-atomic owner word. Runs without a report hook and with a hook that
 * sleeps 20 ms (a slow logger), three rounds each.
 *
 * T = 1 s (stretched under TSan): no wait here comes near it unless a
 * bystander is failed by mistake.
 */
#include "rqspin_util.h"

#define NBY 4 /* bystanders per lock */
#define ROUNDS 3

struct guarded {
	rqspinlock_t l;
	volatile int owner;
} __attribute__((aligned(64)));

static struct guarded A, B;

/* ---- members --------------------------------------------------------------- */

struct member {
	struct guarded *first, *second;
	tu_event holds, go;
};

static struct member m1 = { .first = &A, .second = &B }, m2 = { .first = &B, .second = &A };

static int cs(struct guarded *g, int id)
{
	int bad = 0;

	if (g->owner != 0)
		bad = 1;
	g->owner = id;
	ru_busy_ns(20000);
	if (g->owner != id)
		bad = 1;
	g->owner = 0;
	return bad;
}

static _Atomic int exclusion_errors;

/* Lock first, report, wait for go, lock second; release all. Returns the
 * second lock's result. */
static int member_run(struct ru_actor *a)
{
	struct member *m = a->user;
	int r;

	RU_CHECK_RET(rqspin_lock(&m->first->l), 0);
	m->first->owner = a->id;
	tu_event_set(&m->holds, 1);
	tu_event_wait(&m->go, 1);
	r = rqspin_lock(&m->second->l);
	if (r == 0) {
		atomic_fetch_add(&exclusion_errors, cs(m->second, a->id));
		rqspin_unlock(&m->second->l);
	}
	m->first->owner = 0;
	rqspin_unlock(&m->first->l);
	return r;
}

/* ---- bystanders ------------------------------------------------------------ */

static int bystander_run(struct ru_actor *a)
{
	struct guarded *g = a->user;
	int r = rqspin_lock(&g->l);

	if (r == 0) {
		atomic_fetch_add(&exclusion_errors, cs(g, a->id));
		rqspin_unlock(&g->l);
	} else if (r == -EOWNERDEAD) {
		rqspin_unlock(&g->l);
	}
	return r;
}

/* ---- the hook -------------------------------------------------------------- */

static _Atomic unsigned hook_calls;

static void slow_hook(const struct rqspin_report *rep, void *arg)
{
	(void)rep;
	(void)arg;
	atomic_fetch_add(&hook_calls, 1);
	tu_sleep_us(20000);
}

/* ---- one round ------------------------------------------------------------- */

static struct ru_actor t1, t2, by[2 * NBY];

static void line_up(struct ru_actor *a, struct guarded *g)
{
	uint32_t tail = ru_tail(&g->l);
	bool had_pending = ru_word(&g->l) & RU_PENDING_MASK;

	ru_actor_post_call(a, bystander_run, g);
	if (!had_pending)
		RU_WAIT_FOR(ru_word(&g->l) & RU_PENDING_MASK, 30, "bystander pending");
	else
		RU_WAIT_FOR(ru_tail(&g->l) != tail, 30, "bystander queued");
	tu_sleep_us(1000);
}

static void round_once(bool hook, int round)
{
	int r1, r2, rb[2 * NBY], by_bad = 0, first_bad = 0;
	uint64_t t0 = tu_now_ns();
	uint32_t tail;

	rqspin_lock_init(&A.l);
	rqspin_lock_init(&B.l);
	A.owner = B.owner = 0;
	for (int k = 0; k < 2; k++) {
		struct member *m = k ? &m2 : &m1;

		atomic_store(&m->holds.v, 0);
		atomic_store(&m->go.v, 0);
	}
	atomic_store(&hook_calls, 0);
	rqspin_set_report_hook(hook ? slow_hook : NULL, NULL);

	ru_actor_post_call(&t1, member_run, &m1);
	tu_event_wait(&m1.holds, 1);
	ru_actor_post_call(&t2, member_run, &m2);
	tu_event_wait(&m2.holds, 1);
	for (int i = 0; i < NBY; i++) {
		line_up(&by[i], &A);
		line_up(&by[NBY + i], &B);
	}
	/* T1 queues on B behind B's bystanders, then T2 closes the cycle. */
	tail = ru_tail(&B.l);
	tu_event_set(&m1.go, 1);
	RU_WAIT_FOR(ru_tail(&B.l) != tail || ru_actor_is_done(&t1), 30, "T1 waits for B");
	tu_event_set(&m2.go, 1);

	r1 = ru_actor_wait(&t1, 60);
	r2 = ru_actor_wait(&t2, 60);
	for (int i = 0; i < 2 * NBY; i++) {
		rb[i] = ru_actor_wait(&by[i], 60);
		if (rb[i] != 0 && by_bad++ == 0)
			first_bad = rb[i];
	}
	printf("%s hook, round %d: T1 %s, T2 %s; bystanders:", hook ? "slow" : "no", round,
	       ru_err_name(r1), ru_err_name(r2));
	for (int i = 0; i < 2 * NBY; i++)
		printf(" %s", ru_err_name(rb[i]));
	printf(" (%d failed); hook calls %u; %llu ms\n", by_bad, atomic_load(&hook_calls),
	       (unsigned long long)((tu_now_ns() - t0) / RU_MS));

	RU_EXPECT(by_bad == 0,
		  "%s hook, round %d: %d of %d bystanders (holding no lock) failed (first: %s)",
		  hook ? "slow" : "no", round, by_bad, 2 * NBY, ru_err_name(first_bad));
	RU_EXPECT((r1 == 0 || r1 == -EDEADLK) && (r2 == 0 || r2 == -EDEADLK) &&
			  (r1 == -EDEADLK || r2 == -EDEADLK),
		  "%s hook, round %d: cycle members got T1 %s, T2 %s; want -EDEADLK for at "
		  "least one, 0 otherwise",
		  hook ? "slow" : "no", round, ru_err_name(r1), ru_err_name(r2));
	CHECK_EQ_U64(atomic_load(&exclusion_errors), 0);
	CHECK_EQ_U64(ru_word(&A.l), 0);
	CHECK_EQ_U64(ru_word(&B.l), 0);
	rqspin_set_report_hook(NULL, NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(180);
	RU_CHECK_RET(rqspin_set_default_timeout(1 * RU_SEC * TU_SLOWDOWN), 0);
	ru_actor_start(&t1, 1);
	ru_actor_start(&t2, 2);
	for (int i = 0; i < 2 * NBY; i++)
		ru_actor_start(&by[i], 10 + i);
	for (int round = 0; round < ROUNDS; round++) {
		round_once(false, round);
		round_once(true, round);
	}
	ru_actor_exit(&t1);
	ru_actor_exit(&t2);
	for (int i = 0; i < 2 * NBY; i++)
		ru_actor_exit(&by[i]);
	return ru_finish("rqspin_bystander");
}
