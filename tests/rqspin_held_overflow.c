/* SPDX-License-Identifier: MIT */
/*
 * Held-lock table overflow (kernel: res_spin_lock_test_held_lock_max).
 *
 * Take 34 distinct locks, more than the 31-entry table holds. Locks 31..33
 * are not recorded, so re-locking one of them cannot be recognised as AA:
 * it must fail with -ETIMEDOUT after at least the timeout (the pending
 * waiter's budget T). Re-locking a tracked one is still AA (-EDEADLK at
 * once). Unlock all in LIFO order; the table is empty again and every lock
 * works afterwards. Done with the default timeout (set to 100 ms) and with
 * a per-call timeout, and repeated a few times.
 */
#include "rqspin_util.h"

#define NLOCKS 34
#define TIMEOUT_NS (100 * RU_MS)

static rqspinlock_t locks[NLOCKS];

static void take_all(void)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();

	for (int i = 0; i < NLOCKS; i++) {
		RU_CHECK_RET(rqspin_lock(&locks[i]), 0);
		CHECK_EQ_U64(h->cnt, (uint64_t)i + 1);
	}
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		CHECK(h->locks[i] == &locks[i]);
}

static void release_all(void)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();

	for (int i = NLOCKS - 1; i >= 0; i--) {
		rqspin_unlock(&locks[i]);
		CHECK_EQ_U64(h->cnt, (uint64_t)i);
		CHECK_EQ_U64(ru_word(&locks[i]), 0);
	}
	CHECK_EQ_U64(h->cnt, 0);
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		CHECK(h->locks[i] == NULL);
}

static void relock_untracked(int idx, bool per_call)
{
	const struct rqspin_held_locks *h = rqspin_held_locks();
	struct rqspin_lock_stats s0 = ru_stats(), s1;
	uint64_t t0 = tu_now_ns(), el;
	int r;

	if (per_call)
		r = rqspin_lock_timeout(&locks[idx], TIMEOUT_NS);
	else
		r = rqspin_lock(&locks[idx]);
	el = tu_now_ns() - t0;
	s1 = ru_stats();
	printf("re-lock of untracked lock %d (%s timeout): %s after %llu ms\n", idx,
	       per_call ? "per-call" : "default", ru_err_name(r),
	       (unsigned long long)(el / RU_MS));
	RU_CHECK_RET(r, -ETIMEDOUT);
	CHECK_GE_U64(el, TIMEOUT_NS);
	CHECK_EQ_U64(s1.timeout - s0.timeout, 1);
	CHECK_EQ_U64(s1.aa, s0.aa);
	/* Nothing changed: still 34 held, the word is just "locked". */
	CHECK_EQ_U64(h->cnt, NLOCKS);
	CHECK_EQ_U64(ru_word(&locks[idx]), 1);
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		CHECK(h->locks[i] == &locks[i]);
}

int main(void)
{
	uint64_t def = rqspin_get_default_timeout();
	unsigned rounds = 3;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(60);
	CHECK(RQSPIN_NR_HELD == 31);
	CHECK(sizeof(struct rqspin_held_locks) == 256);
	for (int i = 0; i < NLOCKS; i++)
		rqspin_lock_init(&locks[i]);
	RU_CHECK_RET(rqspin_set_default_timeout(TIMEOUT_NS), 0);

	for (unsigned round = 0; round < rounds; round++) {
		take_all();
		/* The kernel test re-locks locks[32]. */
		relock_untracked(32, false);
		relock_untracked(33, true);
		relock_untracked(31, round % 2 == 0);
		/* Tracked ones are still AA, even past the overflow. */
		RU_CHECK_RET(rqspin_lock(&locks[0]), -EDEADLK);
		RU_CHECK_RET(rqspin_lock(&locks[30]), -EDEADLK);
		RU_CHECK_RET(rqspin_lock_timeout(&locks[17], 3600ull * RU_SEC), -EDEADLK);
		CHECK(!rqspin_trylock(&locks[33]));
		CHECK_EQ_U64(rqspin_held_locks()->cnt, NLOCKS);
		release_all();
	}

	/* All usable afterwards, one at a time and nested. */
	for (int i = 0; i < NLOCKS; i++) {
		RU_CHECK_RET(rqspin_lock(&locks[i]), 0);
		rqspin_unlock(&locks[i]);
	}
	take_all();
	release_all();
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
	printf("rqspin_held_overflow: PASS\n");
	return 0;
}
