/* SPDX-License-Identifier: MIT */
/*
 * Huge per-call timeouts saturate: rqspin_lock_timeout(l, UINT64_MAX),
 * (l, INT64_MAX) and (l, 1 << 62) mean "wait, with deadlock detection
 * only". A holder keeps l for 200 ms (asleep); a pending waiter, a queue
 * head, a queued waiter and a fourth waiter all call rqspin_lock_timeout
 * with the huge value and must all get l (0) after the release, none
 * -ETIMEDOUT.
 *
 * Built twice: with the library, and with the 4-slot test flavour
 * (rqspin_tiny, detected at run time from slot_limit), where the fourth
 * waiter has no registry slot and waits on the no-node path (budget 4T).
 * The main thread never takes a lock, so it never takes a slot.
 */
#include "rqspin_util.h"

#define HOLD_US 200000
#define NW 4

static rqspinlock_t L = RQSPINLOCK_INIT;
static _Atomic int inside;

static int hold_200ms(struct ru_actor *a)
{
	(void)a;
	RU_CHECK_RET(rqspin_lock(&L), 0);
	inside = 1;
	tu_sleep_us(HOLD_US);
	inside = 0;
	rqspin_unlock(&L);
	return 0;
}

static struct ru_actor holder, w[NW];

/* Take a registry slot (or learn there is none). */
static int register_self(struct ru_actor *a)
{
	(void)a;
	(void)rqspin_held_locks();
	return 0;
}

static void run(uint64_t timeout, const char *name, bool tiny)
{
	int res[NW];
	uint64_t el[NW];
	bool finished[NW] = { false };
	int left = NW, bad = 0;
	uint64_t end;

	rqspin_lock_init(&L);
	ru_actor_post_call(&holder, hold_200ms, NULL);
	RU_WAIT_FOR(inside, 30, "holder has L");
	for (int i = 0; i < NW; i++) {
		uint32_t tail = ru_tail(&L);

		w[i].timeout = timeout;
		ru_actor_post(&w[i], RU_LOCK_TIMEOUT, &L);
		if (i == 0)
			RU_WAIT_FOR((ru_word(&L) & RU_PENDING_MASK) || ru_actor_is_done(&w[i]), 30,
				    "pending waiter");
		else if (i < NW - 1 || !tiny)
			RU_WAIT_FOR(ru_tail(&L) != tail || ru_actor_is_done(&w[i]), 30,
				    "queued waiter");
		else
			tu_sleep_us(2000); /* slotless: spins without a node */
	}
	/* Collect in completion order, releasing each at once. */
	end = tu_now_ns() + 30 * RU_SEC;
	while (left > 0) {
		CHECK(tu_now_ns() < end);
		for (int i = 0; i < NW; i++) {
			if (finished[i] || !ru_actor_is_done(&w[i]))
				continue;
			finished[i] = true;
			left--;
			res[i] = ru_actor_wait(&w[i], 1);
			el[i] = ru_actor_elapsed(&w[i]);
			if (res[i] == 0 || res[i] == -EOWNERDEAD) {
				CHECK(!inside);
				RU_CHECK_RET(ru_actor_do(&w[i], RU_UNLOCK, &L), 0);
			} else {
				bad++;
			}
		}
		tu_sleep_us(100);
	}
	RU_CHECK_RET(ru_actor_wait(&holder, 30), 0);
	printf("timeout %-9s:", name);
	for (int i = 0; i < NW; i++)
		printf(" %s after %llu ms;", ru_err_name(res[i]), (unsigned long long)(el[i] / RU_MS));
	printf("\n");
	RU_EXPECT(bad == 0,
		  "rqspin_lock_timeout(l, %s) while another thread holds l for 200 ms: pending %s "
		  "(%llu ms), head %s (%llu ms), queued %s, %s %s; want 0 for all",
		  name, ru_err_name(res[0]), (unsigned long long)(el[0] / RU_MS),
		  ru_err_name(res[1]), (unsigned long long)(el[1] / RU_MS), ru_err_name(res[2]),
		  tiny ? "slotless (no-node)" : "queued", ru_err_name(res[3]));
	CHECK_EQ_U64(ru_word(&L), 0);
}

int main(void)
{
	struct rqspin_lock_stats s = ru_stats();
	bool tiny = s.slot_limit == 4;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	ru_actor_start(&holder, 0);
	for (int i = 0; i < NW; i++) {
		ru_actor_start(&w[i], i + 1);
		/* Register now: holder and the first three take the 4 slots
		 * of the test flavour, the last one has none. */
		ru_actor_post_call(&w[i], register_self, NULL);
		(void)ru_actor_wait(&w[i], 30);
		if (i == 0) {
			ru_actor_post_call(&holder, register_self, NULL);
			(void)ru_actor_wait(&holder, 30);
		}
	}
	if (tiny)
		CHECK_EQ_U64(ru_stats().slots_in_use, 4);
	printf("%s flavour\n", tiny ? "4-slot (no-node path for the last waiter)" : "library");

	run(UINT64_MAX, "UINT64_MAX", tiny);
	run((uint64_t)INT64_MAX, "INT64_MAX", tiny);
	run(1ull << 62, "2^62", tiny);

	ru_actor_exit(&holder);
	for (int i = 0; i < NW; i++)
		ru_actor_exit(&w[i]);
	return ru_finish(tiny ? "rqspin_timeout_overflow_nonode" : "rqspin_timeout_overflow");
}
