/* SPDX-License-Identifier: MIT */
/*
 * Locks whose owner and waiters vanished in fork() stay usable in the
 * child.
 *
 *  1. ghost pending waiter: in the parent, thread X holds L and thread Y
 *     spins on L as the pending waiter when the main thread forks. In the
 *     child, rqspin_lock(L) returns -EOWNERDEAD (it takes L over) within a
 *     few timeouts; after the unlock, 100 lock/unlock and 100 trylock/unlock
 *     cycles all succeed.
 *  2. ghost queue: the same with Y pending and three more threads queued
 *     behind it at the fork.
 *  3. fork from a signal handler that interrupted this thread's own queued
 *     wait (X holds, Y pending, W queued; the handler runs on W): in the
 *     child the interrupted rqspin_lock returns within a bounded time (0,
 *     -EOWNERDEAD or -ETIMEDOUT), and afterwards the lock works in the
 *     child (lock -> 0 or -EOWNERDEAD, unlock, lock -> 0, unlock).
 * The parent waits for each child with a time limit and kills it if it
 * hangs (a failure). In the parent everything carries on normally.
 *
 * The default timeout is T = 100 ms (inherited by the child). Registered
 * NO_TSAN and NO_ASAN (fork with threads, and a fork in a handler).
 */
#include "rqspin_util.h"

#define T_NS (100 * RU_MS)
#define CHILD_BOUND (10 * T_NS) /* "within a few timeouts", with slack for load */
#define CHILD_LIMIT_MS 15000    /* the child is killed after this: a hang */
#define CYCLES 100

static rqspinlock_t L = RQSPINLOCK_INIT;

/* ---- child-side checks (async-signal-safe output: write(2)) -------------- */

static void child_say(const char *what, int r, uint64_t el_ns)
{
	char buf[200];

	snprintf(buf, sizeof(buf), "child: %s: %s after %llu ms\n", what, ru_err_name(r),
		 (unsigned long long)(el_ns / RU_MS));
	tu_write_str(buf);
}

/* 100 lock/unlock and 100 trylock/unlock cycles. Returns 0 or an exit code. */
static int child_cycles(void)
{
	for (int i = 0; i < CYCLES; i++) {
		uint64_t t0 = tu_now_ns();
		int r = rqspin_lock(&L);

		if (r != 0) {
			child_say("lock/unlock cycle after the takeover", r, tu_now_ns() - t0);
			return 4;
		}
		rqspin_unlock(&L);
	}
	for (int i = 0; i < CYCLES; i++) {
		if (!rqspin_trylock(&L)) {
			tu_write_str("child: trylock cycle after the takeover: false, want true\n");
			return 5;
		}
		rqspin_unlock(&L);
	}
	return 0;
}

/* The child of cases 1 and 2. */
static int child_takeover(void)
{
	uint64_t t0 = tu_now_ns(), el;
	int r = rqspin_lock(&L);

	el = tu_now_ns() - t0;
	if (r != -EOWNERDEAD || el > CHILD_BOUND) {
		child_say("rqspin_lock(L) held by a vanished thread with vanished waiters (want "
			  "-EOWNERDEAD within 10T)",
			  r, el);
		if (r != 0 && r != -EOWNERDEAD) {
			/* Is it usable at all now? */
			bool got = rqspin_trylock(&L);

			tu_write_str(got ? "child: then trylock: true\n"
					 : "child: then trylock: false\n");
			if (got)
				rqspin_unlock(&L);
			return 2;
		}
		rqspin_unlock(&L);
		return 3;
	}
	rqspin_unlock(&L);
	return child_cycles();
}

/* ---- parent-side actors ---------------------------------------------------- */

static void check_child(const char *what, pid_t pid)
{
	char buf[80];
	int st = ru_child_wait(pid, CHILD_LIMIT_MS);

	RU_EXPECT(st == 0, "%s: child %s", what, ru_child_status(st, buf, sizeof(buf)));
	printf("%s: child %s\n", what, ru_child_status(st, buf, sizeof(buf)));
}

/* Waiters that keep waiting while the parent's X holds L. */
static void start_waiters(struct ru_actor *w, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t tail = ru_tail(&L);

		ru_actor_start(&w[i], 10 + i);
		w[i].timeout = 60 * RU_SEC;
		ru_actor_post(&w[i], RU_LOCK_TIMEOUT, &L);
		if (i == 0)
			RU_WAIT_FOR(ru_word(&L) & RU_PENDING_MASK, 30, "pending waiter");
		else
			RU_WAIT_FOR(ru_tail(&L) != tail, 30, "queued waiter");
		tu_sleep_us(2000); /* let it settle (queued: linked, parked) */
	}
}

static void finish_waiters(struct ru_actor *w, int n)
{
	for (int i = 0; i < n; i++) {
		int r = ru_actor_wait(&w[i], 60);

		RU_EXPECT(r == 0, "parent: waiter %d got %s, want 0", i, ru_err_name(r));
		if (r == 0 || r == -EOWNERDEAD)
			RU_CHECK_RET(ru_actor_do(&w[i], RU_UNLOCK, &L), 0);
		ru_actor_exit(&w[i]);
	}
}

static void test_ghost_waiters(int nwaiters, const char *name)
{
	struct ru_actor x, w[4];
	pid_t pid;

	CHECK(nwaiters >= 1 && nwaiters <= 4);
	rqspin_lock_init(&L);
	ru_actor_start(&x, 1);
	RU_CHECK_RET(ru_actor_do(&x, RU_LOCK, &L), 0);
	start_waiters(w, nwaiters);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_takeover());
	check_child(name, pid);

	RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &L), 0);
	finish_waiters(w, nwaiters);
	ru_actor_exit(&x);
	CHECK_EQ_U64(ru_word(&L), 0);
}

/* ---- 2b. the forking thread holds L, a vanished thread had its pending bit --- */

/* In the child: release L (ours since before the fork); the word keeps the
 * vanished waiter's pending bit. A program that only trylocks must not be
 * locked out for good. */
static int child_trylock_only(void)
{
	int ok = 0;

	rqspin_unlock(&L);
	for (int i = 0; i < 100; i++) {
		if (rqspin_trylock(&L)) {
			ok++;
			rqspin_unlock(&L);
		}
	}
	printf("  child: %d of 100 trylocks succeeded (word now %#x)\n", ok, ru_word(&L));
	return ok == 100 && ru_word(&L) == 0 ? 0 : 1;
}

static void test_trylock_after_ghost_pending(void)
{
	struct ru_actor w[1];
	pid_t pid;

	rqspin_lock_init(&L);
	RU_CHECK_RET(rqspin_lock(&L), 0);
	start_waiters(w, 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child_trylock_only());
	check_child("forker holds, ghost pending waiter, child only trylocks", pid);
	rqspin_unlock(&L);
	finish_waiters(w, 1);
	CHECK_EQ_U64(ru_word(&L), 0);
}

/* ---- 3. fork in a handler that interrupted a queued wait ------------------- */

static volatile pid_t forked_pid = -1; /* in the parent: the child; in the child: 0 */

static void on_fork_signal(int sig)
{
	int e = errno;

	(void)sig;
	forked_pid = fork();
	errno = e;
}

static _Atomic int w_result = 1;

/* W: its rqspin_lock is interrupted by the forking handler. In the child
 * it is the only thread and finishes the checks itself. */
static void *w_main(void *arg)
{
	uint64_t t0 = tu_now_ns(), el;
	int r = rqspin_lock_timeout(&L, 60 * RU_SEC);

	(void)arg;
	el = tu_now_ns() - t0;
	if (forked_pid == 0) {
		/* The child: the lock call returned at all; then usable. */
		int code = 0;

		child_say("interrupted rqspin_lock", r, el);
		if (r != 0 && r != -EOWNERDEAD && r != -ETIMEDOUT)
			_exit(2);
		if (r == 0 || r == -EOWNERDEAD)
			rqspin_unlock(&L);
		t0 = tu_now_ns();
		r = rqspin_lock(&L);
		if (r != 0 && r != -EOWNERDEAD) {
			child_say("lock after the interrupted wait (want 0 or -EOWNERDEAD)", r,
				  tu_now_ns() - t0);
			_exit(3);
		}
		rqspin_unlock(&L);
		r = rqspin_lock(&L);
		if (r != 0) {
			child_say("second lock after the interrupted wait (want 0)", r, 0);
			_exit(4);
		}
		rqspin_unlock(&L);
		code = child_cycles();
		_exit(code);
	}
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(&L);
	atomic_store(&w_result, r);
	return NULL;
}

static void test_fork_in_handler(void)
{
	struct ru_actor x, y;
	pthread_t wt;
	uint32_t tail_before;
	int r;

	rqspin_lock_init(&L);
	forked_pid = -1;
	ru_set_handler(SIGUSR1, on_fork_signal);
	ru_actor_start(&x, 1);
	RU_CHECK_RET(ru_actor_do(&x, RU_LOCK, &L), 0);
	start_waiters(&y, 1); /* Y: pending */
	tail_before = ru_tail(&L);
	CHECK(tail_before == 0);
	wt = tu_thread_start(w_main, NULL);
	RU_WAIT_FOR(ru_tail(&L) != 0, 30, "W queued");
	tu_sleep_us(20000); /* W linked and parked */

	CHECK_OK(pthread_kill(wt, SIGUSR1));
	RU_WAIT_FOR(forked_pid != -1, 30, "the handler forked");
	CHECK(forked_pid > 0);
	check_child("fork in a handler that interrupted a queued wait", forked_pid);

	RU_CHECK_RET(ru_actor_do(&x, RU_UNLOCK, &L), 0);
	finish_waiters(&y, 1);
	tu_thread_join(wt);
	r = atomic_load(&w_result);
	RU_EXPECT(r == 0, "parent: W (interrupted by the forking handler) got %s, want 0",
		  ru_err_name(r));
	ru_actor_exit(&x);
	tu_reset_handler(SIGUSR1);
	CHECK_EQ_U64(ru_word(&L), 0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	RU_CHECK_RET(rqspin_set_default_timeout(T_NS), 0);
	test_ghost_waiters(1, "ghost owner + ghost pending waiter");
	test_ghost_waiters(4, "ghost owner + pending waiter + 3 queued");
	test_trylock_after_ghost_pending();
	test_fork_in_handler();
	return ru_finish("rqspin_fork_ghost");
}
