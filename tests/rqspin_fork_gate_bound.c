/* SPDX-License-Identifier: MIT */
/*
 * In a forked child with ghosts, a thread about to set a lock's pending
 * bit first waits while another thread repairs a ghost's bit (the repair
 * must see its role, or it must see the repair's result). That wait is
 * bounded by the call's timeout: a repairer that makes no progress is
 * treated like a holder that makes none.
 *
 * Parent: thread X is alive at the fork (a ghost in the child). Child:
 *  1. the main thread C takes L, then takes the repair flag by hand and
 *     keeps it (white-box: the state of a repairer that was stopped);
 *  2. thread B calls rqspin_lock_timeout(L, 200 ms): it must return
 *     -ETIMEDOUT, within 20 s, and leave L's word as C's hold alone;
 *  3. C drops the flag and unlocks L: thread B2 takes L (0), and the
 *     word ends 0.
 * Before the fix, step 2 spun and yielded until the flag dropped, which
 * here is never: the child hung and was killed.
 *
 * Links the static library and calls src/lock's repair flag. Registered
 * NO_TSAN and NO_ASAN (fork with threads), like rqspin_fork_repair.
 */
#include "rqspin_util.h"

#include "lock/registry.h"

#define B_TIMEOUT_NS (200 * RU_MS)
#define B_BOUND_NS (20 * RU_SEC) /* a hang, not a slow machine */
#define CHILD_LIMIT_MS 60000

static rqspinlock_t L = RQSPINLOCK_INIT;
static rqspinlock_t Z = RQSPINLOCK_INIT;

static _Atomic int b_ret = 1;
static _Atomic uint64_t b_ns;

static void *b_main(void *arg)
{
	uint64_t t0 = tu_now_ns();
	int r = rqspin_lock_timeout(&L, B_TIMEOUT_NS);

	(void)arg;
	atomic_store(&b_ns, tu_now_ns() - t0);
	if (r == 0)
		rqspin_unlock(&L);
	atomic_store(&b_ret, r);
	return NULL;
}

static void *b2_main(void *arg)
{
	int r = rqspin_lock_timeout(&L, 30 * RU_SEC);

	(void)arg;
	if (r == 0)
		rqspin_unlock(&L);
	atomic_store(&b_ret, r);
	return NULL;
}

static int child_main(void)
{
	int r, code = 0;
	char buf[120];

	r = rqspin_lock(&L);
	if (r != 0) {
		ru_child_say("lock L (want 0)", r);
		return 2;
	}
	if (!rqs_registry_repair_begin()) {
		tu_write_str("child: the repair flag was busy\n");
		return 2;
	}
	tu_thread_join(tu_thread_start(b_main, NULL));
	r = atomic_load(&b_ret);
	snprintf(buf, sizeof(buf), "child: B got %s after %llu ms\n", ru_err_name(r),
		 (unsigned long long)(atomic_load(&b_ns) / RU_MS));
	tu_write_str(buf);
	if (r != -ETIMEDOUT || atomic_load(&b_ns) > B_BOUND_NS)
		code = 3;
	if (ru_word(&L) != 1u) {
		tu_write_str("child: L's word is not C's hold alone after B's failure\n");
		code = code ? code : 4;
	}
	rqs_registry_repair_end();
	rqspin_unlock(&L);

	atomic_store(&b_ret, 1);
	tu_thread_join(tu_thread_start(b2_main, NULL));
	if (atomic_load(&b_ret) != 0) {
		ru_child_say("B2 on L (want 0)", atomic_load(&b_ret));
		code = code ? code : 5;
	}
	if (ru_word(&L) != 0) {
		tu_write_str("child: L's word is not 0 at the end\n");
		code = code ? code : 6;
	}
	return code;
}

int main(void)
{
	struct ru_actor x;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(180);
	ru_actor_start(&x, 1);
	RU_CHECK_RET(ru_actor_do(&x, RU_LOCK, &Z), 0); /* registers X */
	RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &Z), 0);

	ru_fork_run("rqspin_fork_gate_bound", child_main, CHILD_LIMIT_MS);
	ru_actor_exit(&x);
	RU_CHECK_RET(rqspin_lock(&L), 0);
	rqspin_unlock(&L);
	return ru_finish("rqspin_fork_gate_bound");
}
