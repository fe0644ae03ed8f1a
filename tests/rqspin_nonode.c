/* SPDX-License-Identifier: MIT */
/*
 * The no-node paths, with the test flavour rqspin_tiny (4 registry slots).
 *
 *  1. 12 threads hammer one rqspinlock: 4 have slots (MCS queue), 8 have
 *     none and wait without a node (competing for the pending bit, with the
 *     test-and-set budget of 4T). Exact mutual exclusion, and no errors at
 *     all with the default 250 ms timeout.
 *  2. A handler nested inside its own thread's queued slow path (nesting
 *     level > 0: the kernel's NMI-with-idx>0 rule) gets a single try: on a
 *     busy lock it fails at once with -EDEADLK, counted as nest_fail; a free
 *     lock it gets (fast path); its own lock is AA.
 *  3. A thread without a slot (all 4 taken): its wait times out after 4T
 *     (lower bound checked), and a handler interrupting it while it waits
 *     for a lock gets AA on that lock.
 * The main thread never takes a lock, so it never takes a slot.
 */
#include "rqspin_util.h"

#define NTHREADS 12

/* ---- 1. hammer ------------------------------------------------------------ */

static rqspinlock_t H = RQSPINLOCK_INIT;
static volatile int in_cs;
static uint64_t counter; /* protected by H */
static _Atomic uint64_t errors;
static tu_barrier bar;
static unsigned iters;

static void *hammer(void *arg)
{
	(void)arg;
	/* Claim a slot (or learn there is none) before anyone starts. */
	(void)rqspin_held_locks();
	tu_barrier_wait(&bar); /* all registered */
	tu_barrier_wait(&bar); /* main checked the slot count */
	for (unsigned i = 0; i < iters; i++) {
		int r = rqspin_lock(&H);

		if (r) {
			fprintf(stderr, "hammer: rqspin_lock: %s\n", ru_err_name(r));
			atomic_fetch_add(&errors, 1);
			continue;
		}
		CHECK(in_cs == 0);
		in_cs = 1;
		counter++;
		/* ~0.5 us: long enough for holders to be preempted inside. */
		for (volatile int k = 0; k < 300; k++)
			;
		in_cs = 0;
		rqspin_unlock(&H);
	}
	return NULL;
}

static void test_hammer(void)
{
	pthread_t t[NTHREADS];
	struct rqspin_lock_stats s0 = ru_stats(), s1, mid;
	uint64_t t0 = tu_now_ns();

	CHECK_EQ_U64(s0.slot_limit, 4);
	CHECK_EQ_U64(s0.slots_in_use, 0);
	iters = TU_ITERS(60000u);
	tu_barrier_init(&bar, NTHREADS + 1);
	for (int i = 0; i < NTHREADS; i++)
		t[i] = tu_thread_start(hammer, NULL);
	tu_barrier_wait(&bar);
	mid = ru_stats();
	CHECK_EQ_U64(mid.slots_in_use, 4); /* 8 threads run without a slot */
	tu_barrier_wait(&bar);
	for (int i = 0; i < NTHREADS; i++)
		tu_thread_join(t[i]);
	s1 = ru_stats();
	printf("hammer: %d threads (4 with slots) x %u in %llu ms: errors %llu; nonode +%llu "
	       "queued +%llu pending +%llu stolen +%llu timeout +%llu\n",
	       NTHREADS, iters, (unsigned long long)((tu_now_ns() - t0) / RU_MS),
	       (unsigned long long)atomic_load(&errors),
	       (unsigned long long)(s1.nonode - s0.nonode),
	       (unsigned long long)(s1.queued - s0.queued),
	       (unsigned long long)(s1.pending - s0.pending),
	       (unsigned long long)(s1.stolen - s0.stolen),
	       (unsigned long long)(s1.timeout - s0.timeout));
	CHECK_EQ_U64(atomic_load(&errors), 0);
	CHECK_EQ_U64(counter, (uint64_t)NTHREADS * iters);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	CHECK_EQ_U64(s1.slots_in_use, 0);
	CHECK_EQ_U64(ru_word(&H), 0);
}

/* ---- 2./3. nested handler, slotless thread ------------------------------- */

static rqspinlock_t A = RQSPINLOCK_INIT, B = RQSPINLOCK_INIT, C = RQSPINLOCK_INIT;
static _Atomic int h_r_a = 1, h_r_b = 1, h_r_c = 1;
static _Atomic int h_mode; /* 0: A, B, C; 1: A only */

static void on_sig(int sig)
{
	int e = errno;

	(void)sig;
	{
		int r = rqspin_lock(&A); /* the lock our thread waits for: AA */

		if (r == 0)
			rqspin_unlock(&A);
		atomic_store(&h_r_a, r);
	}
	if (atomic_load(&h_mode) == 0) {
		int r = rqspin_lock(&B); /* busy, with a waiter: one try */

		if (r == 0)
			rqspin_unlock(&B);
		atomic_store(&h_r_b, r);
		r = rqspin_lock(&C); /* free: fast path */
		if (r == 0)
			rqspin_unlock(&C);
		atomic_store(&h_r_c, r);
	}
	errno = e;
}

static void test_nested_and_slotless(void)
{
	struct ru_actor o, p, p2, s, x;
	struct rqspin_lock_stats s0, s1;
	uint64_t def = rqspin_get_default_timeout();
	const uint64_t T = 20 * RU_MS;
	int r;

	RU_CHECK_RET(rqspin_set_default_timeout(10 * RU_SEC), 0);
	ru_set_handler(SIGUSR1, on_sig);
	ru_actor_start(&o, 0);
	ru_actor_start(&p, 1);
	ru_actor_start(&p2, 2);
	ru_actor_start(&s, 3);

	/* O holds A and B; P waits on A and P2 on B (pending bits); S
	 * queues on A: its slow path holds MCS node 0 (nesting level 1). */
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &A), 0);
	RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &B), 0);
	ru_actor_post(&p, RU_LOCK, &A);
	RU_WAIT_FOR(ru_word(&A) & RU_PENDING_MASK, 30, "P pending on A");
	ru_actor_post(&p2, RU_LOCK, &B);
	RU_WAIT_FOR(ru_word(&B) & RU_PENDING_MASK, 30, "P2 pending on B");
	ru_actor_post(&s, RU_LOCK, &A);
	RU_WAIT_FOR(ru_tail(&A) != 0, 30, "S queued on A");
	CHECK_EQ_U64(ru_stats().slots_in_use, 4);

	/* 2. A handler nested in S's queued wait. */
	s0 = ru_stats();
	atomic_store(&h_mode, 0);
	CHECK(pthread_kill(s.th, SIGUSR1) == 0);
	RU_WAIT_FOR(atomic_load(&h_r_c) != 1, 30, "handler on S");
	s1 = ru_stats();
	printf("nested handler: A %s, B %s, C %s; aa +%llu nest_fail +%llu nonode +%llu\n",
	       ru_err_name(atomic_load(&h_r_a)), ru_err_name(atomic_load(&h_r_b)),
	       ru_err_name(atomic_load(&h_r_c)), (unsigned long long)(s1.aa - s0.aa),
	       (unsigned long long)(s1.nest_fail - s0.nest_fail),
	       (unsigned long long)(s1.nonode - s0.nonode));
	RU_CHECK_RET(atomic_load(&h_r_a), -EDEADLK);
	RU_CHECK_RET(atomic_load(&h_r_b), -EDEADLK);
	RU_CHECK_RET(atomic_load(&h_r_c), 0);
	CHECK_EQ_U64(s1.aa - s0.aa, 1);
	CHECK_EQ_U64(s1.nest_fail - s0.nest_fail, 1);
	CHECK_EQ_U64(s1.timeout, s0.timeout);
	CHECK(!ru_actor_is_done(&s));
	CHECK_EQ_U64(ru_word(&B) & ~RU_TAIL_MASK, 0x101); /* held, P2 pending */

	/* 3. A fifth thread gets no slot. Its wait is bounded by 4T. */
	RU_CHECK_RET(rqspin_set_default_timeout(T), 0);
	s0 = ru_stats();
	ru_actor_start(&x, 4);
	ru_actor_post(&x, RU_LOCK, &B);
	r = ru_actor_wait(&x, 60);
	printf("slotless waiter on a held lock: %s after %llu ms (T = %llu ms)\n", ru_err_name(r),
	       (unsigned long long)(ru_actor_elapsed(&x) / RU_MS), (unsigned long long)(T / RU_MS));
	RU_CHECK_RET(r, -ETIMEDOUT);
	CHECK_GE_U64(ru_actor_elapsed(&x), 4 * T);
	CHECK_EQ_U64(ru_stats().slots_in_use, 4);
	/* A handler interrupting it while it waits for A: AA. */
	RU_CHECK_RET(rqspin_set_default_timeout(10 * RU_SEC), 0);
	atomic_store(&h_r_a, 1);
	atomic_store(&h_mode, 1);
	ru_actor_post(&x, RU_LOCK, &A);
	tu_sleep_us(5000);
	CHECK(!ru_actor_is_done(&x));
	CHECK(pthread_kill(x.th, SIGUSR1) == 0);
	RU_WAIT_FOR(atomic_load(&h_r_a) != 1, 30, "handler on the slotless thread");
	RU_CHECK_RET(atomic_load(&h_r_a), -EDEADLK);

	/* Unwind: B to P2; A to P, S and X (S before X or not: both get it). */
	RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &B), 0);
	RU_CHECK_RET(ru_actor_wait(&p2, 60), 0);
	RU_CHECK_RET(ru_actor_do(&p2, RU_UNLOCK, &B), 0);
	RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &A), 0);
	RU_CHECK_RET(ru_actor_wait(&p, 60), 0);
	RU_CHECK_RET(ru_actor_do(&p, RU_UNLOCK, &A), 0);
	/* S and X each get A once the other lets it go. */
	RU_WAIT_FOR(ru_actor_is_done(&s) || ru_actor_is_done(&x), 60, "S or X to get A");
	if (ru_actor_is_done(&s)) {
		RU_CHECK_RET(ru_actor_wait(&s, 1), 0);
		RU_CHECK_RET(ru_actor_do(&s, RU_UNLOCK, &A), 0);
		RU_CHECK_RET(ru_actor_wait(&x, 60), 0);
		RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &A), 0);
	} else {
		RU_CHECK_RET(ru_actor_wait(&x, 1), 0);
		RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &A), 0);
		RU_CHECK_RET(ru_actor_wait(&s, 60), 0);
		RU_CHECK_RET(ru_actor_do(&s, RU_UNLOCK, &A), 0);
	}
	CHECK_EQ_U64(ru_word(&A), 0);
	CHECK_EQ_U64(ru_word(&B), 0);
	CHECK_EQ_U64(ru_word(&C), 0);
	ru_actor_exit(&x);
	/* A slotless thread's counters join the totals when it exits: it
	 * waited twice without a node (B, then A), and timed out once. */
	s1 = ru_stats();
	CHECK_GE_U64(s1.nonode - s0.nonode, 2);
	CHECK_EQ_U64(s1.timeout - s0.timeout, 1);
	ru_actor_exit(&o);
	ru_actor_exit(&p);
	ru_actor_exit(&p2);
	ru_actor_exit(&s);
	RU_CHECK_RET(rqspin_set_default_timeout(def), 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	test_hammer();
	test_nested_and_slotless();
	printf("rqspin_nonode: PASS\n");
	return 0;
}
