/* SPDX-License-Identifier: MIT */
/*
 * A cross-thread unlock drops the entry of the thread that holds the lock,
 * never that of a thread that only has an entry for it: one acquiring it
 * (entry pushed before the CAS), or one that has just released it (entry
 * not yet removed). Credited to the wrong thread, the release left the
 * real owner's entry behind: that owner then got -EDEADLK (AA) on every
 * contended call on the lock, holding nothing; waiters got -ETIMEDOUT
 * while the lock changed hands; a thread past its table's 31 entries lost
 * count of what it holds. In every part the thread that only has an entry
 * registers before the owner, so that the owner search (slot order) meets
 * it first.
 *
 *  1. B waits for X, which O holds; a signal handler on B waits for
 *     another lock (its wait is the one B's thread shows). U unlocks X
 *     for O. O, holding nothing, then locks X while another thread holds
 *     it for 20 ms: it must wait and get it, three times over.
 *  2. The same with B between pushing its entry and its CAS, i.e. not in
 *     the slow path at all (the entry is pushed by hand, and withdrawn
 *     20 ms later): the unlock waits for B to leave that window.
 *  3. Stress: B locks and unlocks X in a loop while O locks X and U
 *     unlocks it for O, in turns. No error at all, exact counts.
 *  4. Four threads take sorted subsets of 38 locks (past the table) and
 *     unlock them in random order while the others contend: every table
 *     is empty at the end, no error, exact counts.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/lock_diag.h>
#include <rqspin/rqspinlock.h>

#include "rqspin_util.h"

#define LONG_TIMEOUT (20ull * 1000 * 1000 * 1000) /* hang guard only */

static rqspinlock_t X = RQSPINLOCK_INIT, Y = RQSPINLOCK_INIT;
static tu_event step;

/* ---- O's side, shared by parts 1 and 2 -------------------------------------- */

static void *holder_20ms(void *arg)
{
	(void)arg;
	RU_CHECK_RET(rqspin_lock_timeout(&X, LONG_TIMEOUT), 0);
	tu_event_set(&step, 100);
	tu_sleep_us(20000);
	rqspin_unlock(&X);
	return NULL;
}

static void *unlocker(void *arg)
{
	(void)arg;
	rqspin_unlock(&X); /* O's lock */
	return NULL;
}

/* The calling thread, holding nothing, locks X three times while another
 * thread holds it: it must wait and get it (a stale entry of X in its
 * table made each a false AA). */
static void relock_while_held(void)
{
	for (int k = 0; k < 3; k++) {
		pthread_t h;

		tu_event_set(&step, 0);
		h = tu_thread_start(holder_20ms, NULL);
		tu_event_wait(&step, 100);
		RU_CHECK_RET(rqspin_lock_timeout(&X, LONG_TIMEOUT), 0);
		rqspin_unlock(&X);
		tu_thread_join(h);
	}
}

/* O (the calling thread) holds X; U releases it; then O relocks. */
static void owner_after_cross_unlock(void)
{
	tu_thread_join(tu_thread_start(unlocker, NULL));
	relock_while_held();
}

/* ---- 1. the acquirer's handler waits for another lock ----------------------- */

static atomic_int b_main_ret = 99, b_handler_ret = 99;

static void b_handler(int sig)
{
	int e = errno;
	int r;

	(void)sig;
	r = rqspin_lock_timeout(&Y, LONG_TIMEOUT);
	if (r == 0)
		rqspin_unlock(&Y);
	atomic_store(&b_handler_ret, r);
	errno = e;
}

static void *b_waits(void *arg)
{
	(void)arg;
	(void)rqspin_held_locks(); /* a registry slot before O's */
	tu_event_set(&step, 1);
	tu_event_wait(&step, 2);
	atomic_store(&b_main_ret, rqspin_lock_timeout(&X, LONG_TIMEOUT));
	if (atomic_load(&b_main_ret) == 0)
		rqspin_unlock(&X);
	return NULL;
}

static void *z_holds_y(void *arg)
{
	(void)arg;
	RU_CHECK_RET(rqspin_lock_timeout(&Y, LONG_TIMEOUT), 0);
	tu_event_set(&step, 3);
	tu_event_wait(&step, 4);
	rqspin_unlock(&Y);
	return NULL;
}

struct o1 {
	pthread_t b;
};

static void *o_part1(void *arg)
{
	struct o1 *o = arg;
	pthread_t z;

	(void)rqspin_held_locks();
	RU_CHECK_RET(rqspin_lock_timeout(&X, LONG_TIMEOUT), 0);
	z = tu_thread_start(z_holds_y, NULL);
	tu_event_wait(&step, 3);
	tu_event_set(&step, 2);
	/* B now waits for X (its wait never ends before our unlocker runs:
	 * X is ours). */
	TU_WAIT_UNTIL(__atomic_load_n(&X.w.val, __ATOMIC_RELAXED) != RQSPIN__LOCKED_VAL);
	CHECK_OK(pthread_kill(o->b, SIGUSR1));
	/* Its handler waits for Y (Z holds it): Y's word shows a waiter. */
	TU_WAIT_UNTIL(__atomic_load_n(&Y.w.val, __ATOMIC_RELAXED) != RQSPIN__LOCKED_VAL);
	tu_sleep_us(10000);
	tu_thread_join(tu_thread_start(unlocker, NULL));
	tu_event_set(&step, 4); /* Z lets Y go: the handler returns, B gets X */
	tu_thread_join(z);
	tu_thread_join(o->b);
	RU_CHECK_RET(atomic_load(&b_handler_ret), 0);
	RU_CHECK_RET(atomic_load(&b_main_ret), 0);
	/* X has been released for us: we hold nothing. */
	relock_while_held();
	CHECK(ru_table_holds_nothing());
	return NULL;
}

static void part1(void)
{
	struct o1 o;

	tu_event_set(&step, 0);
	tu_set_handler(SIGUSR1, b_handler, 0, NULL);
	o.b = tu_thread_start(b_waits, NULL);
	tu_event_wait(&step, 1);
	tu_thread_join(tu_thread_start(o_part1, &o));
	printf("part 1: the owner's entry went, not the handler-interrupted acquirer's\n");
}

/* ---- 2. the acquirer is between its push and its CAS ----------------------- */

static tu_event b2;

static void *b_pushed(void *arg)
{
	struct rqspin__thread_hot *self;
	const struct rqspin_held_locks *t = rqspin_held_locks(); /* slot first */
	const void *e;

	(void)arg;
	tu_event_set(&b2, 1);
	tu_event_wait(&b2, 2);
	/* What rqspin_lock does before its CAS, and then we stop there. */
	self = rqspin__self();
	(void)rqspin__held_push(self, &X);
	tu_event_set(&b2, 3);
	tu_sleep_us(20000); /* O's unlocker runs meanwhile */
	/* Withdraw, as a failed trylock does. */
	e = t->locks[t->cnt - 1];
	if (!rqspin__held_pop_top(self, e))
		rqspin__held_pop_slow(self, e);
	CHECK_EQ_U64(t->cnt, 0);
	return NULL;
}

static void *o_part2(void *arg)
{
	(void)arg;
	(void)rqspin_held_locks();
	RU_CHECK_RET(rqspin_lock_timeout(&X, LONG_TIMEOUT), 0);
	tu_event_set(&b2, 2);
	tu_event_wait(&b2, 3);
	owner_after_cross_unlock();
	CHECK(ru_table_holds_nothing());
	return NULL;
}

static void part2(void)
{
	pthread_t b;

	tu_event_set(&b2, 0);
	b = tu_thread_start(b_pushed, NULL);
	tu_event_wait(&b2, 1);
	tu_thread_join(tu_thread_start(o_part2, NULL));
	tu_thread_join(b);
	printf("part 2: the owner's entry went, not the entry of an acquirer before its CAS\n");
}

/* ---- 3. stress: a looping third thread -------------------------------------- */

static atomic_int turn; /* 0: O locks, 1: U unlocks */
static atomic_int stop3, b3_ready;
static atomic_uint_fast64_t errs3;
static uint64_t counter3, o3_ok, b3_ok; /* under X */

static void *b_loop(void *arg)
{
	(void)arg;
	(void)rqspin_held_locks(); /* slot before O's */
	atomic_store(&b3_ready, 1);
	while (!atomic_load_explicit(&stop3, memory_order_relaxed)) {
		int r = rqspin_lock_timeout(&X, LONG_TIMEOUT);

		if (r) {
			fprintf(stderr, "part 3: B got %s\n", ru_err_name(r));
			atomic_fetch_add(&errs3, 1);
			continue;
		}
		counter3++;
		b3_ok++;
		rqspin_unlock(&X);
	}
	return NULL;
}

static void *o_loop(void *arg)
{
	unsigned n = *(unsigned *)arg;

	for (unsigned i = 0; i < n; i++) {
		int r;

		TU_WAIT_UNTIL(atomic_load(&turn) == 0);
		r = rqspin_lock_timeout(&X, LONG_TIMEOUT);
		if (r) {
			fprintf(stderr, "part 3: O got %s at iteration %u (table %u)\n", ru_err_name(r), i,
				rqspin_held_locks()->cnt);
			atomic_fetch_add(&errs3, 1);
			break;
		}
		counter3++;
		o3_ok++;
		atomic_store(&turn, 1);
	}
	/* U releases our last lock before it stops: a thread that exits
	 * holding a lock leaves it owner-dead. */
	TU_WAIT_UNTIL(atomic_load(&turn) == 0 || atomic_load(&errs3));
	atomic_store(&stop3, 1);
	return NULL;
}

static void *u_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop3)) {
		if (atomic_load(&turn) == 1) {
			rqspin_unlock(&X);
			atomic_store(&turn, 0);
		} else {
			sched_yield();
		}
	}
	return NULL;
}

static void part3(void)
{
	unsigned n = TU_ITERS(40000u);
	pthread_t b, o, u;

	b = tu_thread_start(b_loop, NULL);
	TU_WAIT_UNTIL(atomic_load(&b3_ready));
	o = tu_thread_start(o_loop, &n);
	u = tu_thread_start(u_loop, NULL);
	tu_thread_join(o);
	tu_thread_join(u);
	tu_thread_join(b);
	printf("part 3: O %llu locks (each unlocked by U), B %llu, errors %llu\n",
	       (unsigned long long)o3_ok, (unsigned long long)b3_ok,
	       (unsigned long long)atomic_load(&errs3));
	CHECK_EQ_U64(atomic_load(&errs3), 0);
	CHECK_EQ_U64(o3_ok, n);
	CHECK_EQ_U64(counter3, o3_ok + b3_ok);
	CHECK(!rqspin_is_locked(&X));
}

/* ---- 4. past the table ------------------------------------------------------ */

#define NT4 4
#define NL4 38

static rqspinlock_t L4[NL4];
static uint64_t guarded4[NL4]; /* each under its lock */
static uint64_t taken4[NT4][NL4];
static atomic_uint_fast64_t errs4;

static void *worker4(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, n = TU_ITERS(3000u);
	tu_rng rng;

	tu_rng_seed(&rng, 1000 + id);
	for (unsigned it = 0; it < n; it++) {
		unsigned pick[NL4], np = 0, k = 4 + tu_rng_below(&rng, NL4 - 3);

		/* A sorted subset (no cycles possible): k of the 38, every
		 * one when k = 38. */
		for (unsigned i = 0; i < NL4 && np < k; i++)
			if (tu_rng_below(&rng, NL4 - i) < k - np)
				pick[np++] = i;
		for (unsigned i = 0; i < np; i++) {
			int r = rqspin_lock_timeout(&L4[pick[i]], LONG_TIMEOUT);

			if (r) {
				fprintf(stderr, "part 4: thread %u got %s\n", id, ru_err_name(r));
				atomic_fetch_add(&errs4, 1);
				np = i;
				break;
			}
			guarded4[pick[i]]++;
			taken4[id][pick[i]]++;
		}
		/* Unlock in random order. */
		while (np) {
			unsigned j = tu_rng_below(&rng, np);

			rqspin_unlock(&L4[pick[j]]);
			pick[j] = pick[--np];
		}
		if (!ru_table_holds_nothing()) {
			const struct rqspin_held_locks *t = rqspin_held_locks();

			fprintf(stderr, "part 4: thread %u holds nothing, its table counts %u:", id,
				t->cnt);
			for (uint32_t i = 0; i < t->cnt && i < RQSPIN_NR_HELD; i++)
				fprintf(stderr, " %p", t->locks[i]);
			fprintf(stderr, "\n");
			atomic_fetch_add(&errs4, 1);
			break;
		}
	}
	return NULL;
}

static void part4(void)
{
	pthread_t t[NT4];

	for (unsigned i = 0; i < NT4; i++)
		t[i] = tu_thread_start(worker4, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < NT4; i++)
		tu_thread_join(t[i]);
	CHECK_EQ_U64(atomic_load(&errs4), 0);
	for (unsigned l = 0; l < NL4; l++) {
		uint64_t want = 0;

		for (unsigned i = 0; i < NT4; i++)
			want += taken4[i][l];
		CHECK_EQ_U64(guarded4[l], want);
		CHECK(!rqspin_is_locked(&L4[l]));
	}
	printf("part 4: %d threads, sorted subsets of %d locks, random-order unlocks: "
	       "tables hold nothing after, counts exact\n", NT4, NL4);
}

int main(int argc, char **argv)
{
	int only = argc > 1 ? atoi(argv[1]) : 0; /* one part alone, for debugging */

	tu_watchdog(300);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!only || only == 1)
		part1();
	if (!only || only == 2)
		part2();
	if (!only || only == 3)
		part3();
	if (!only || only == 4)
		part4();
	printf("rqspin_cross_unlock_owner: PASS\n");
	return 0;
}
