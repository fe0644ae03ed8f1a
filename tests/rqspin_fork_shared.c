/* SPDX-License-Identifier: MIT */
/*
 * fork() must not write lock words. A private rqspinlock that lives in
 * MAP_SHARED memory (legal: only the parent's threads use it) is held by
 * parent thread P1 while parent thread P2 forks a child that just exits.
 * The child shares the page, so anything its fork handling writes into
 * the lock word breaks the lock in the parent. Afterwards, while P1 is
 * still inside, parent thread P3's rqspin_lock_timeout(50 ms) must be
 * -ETIMEDOUT (never 0 or -EOWNERDEAD), and once P1 leaves, four parent
 * threads hammering the lock keep exact mutual exclusion (non-atomic
 * counter and an "inside" owner word in the shared page).
 *
 * Also with a second lock in the page that P1 holds while a waiter spins
 * on it as the pending waiter at the fork.
 *
 * Registered NO_TSAN (fork with threads).
 */
#include <sys/mman.h>

#include "rqspin_util.h"

#define ROUNDS 5
#define PROBE_TIMEOUT (50 * RU_MS)
#define NHAMMER 4
#define HAMMER_ITERS 20000u

struct shared {
	rqspinlock_t l;
	volatile int inside; /* id of the thread in the critical section */
	uint64_t counter;    /* protected by l */
	rqspinlock_t w;      /* held by P1 with a pending waiter at the fork */
};

static struct shared *sh;

/* ---- P1: holds l (and w) until told to leave ------------------------------ */

static tu_event p1_has, p1_go;

static void *p1(void *arg)
{
	(void)arg;
	RU_CHECK_RET(rqspin_lock(&sh->l), 0);
	RU_CHECK_RET(rqspin_lock(&sh->w), 0);
	sh->inside = 1;
	tu_event_set(&p1_has, 1);
	tu_event_wait(&p1_go, 1); /* blocked, not spinning */
	sh->inside = 0;
	rqspin_unlock(&sh->w);
	rqspin_unlock(&sh->l);
	return NULL;
}

/* ---- the pending waiter on w ---------------------------------------------- */

static _Atomic int w_ret = 1;

static void *w_waiter(void *arg)
{
	int r;

	(void)arg;
	r = rqspin_lock_timeout(&sh->w, 60 * RU_SEC);
	if (r == 0 || r == -EOWNERDEAD)
		rqspin_unlock(&sh->w);
	atomic_store(&w_ret, r);
	return NULL;
}

/* ---- P2: forks ------------------------------------------------------------ */

static void *p2(void *arg)
{
	pid_t pid = fork();
	char buf[64];
	int st;

	(void)arg;
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(0);
	st = ru_child_wait(pid, 10000);
	RU_EXPECT(st == 0, "child: %s", ru_child_status(st, buf, sizeof(buf)));
	return NULL;
}

/* ---- P3: probes, then hammers --------------------------------------------- */

static void *probe(void *arg)
{
	rqspinlock_t *l = arg;
	uint64_t t0 = tu_now_ns();
	int r = rqspin_lock_timeout(l, PROBE_TIMEOUT);
	uint64_t el = tu_now_ns() - t0;

	RU_EXPECT(r == -ETIMEDOUT,
		  "after a fork, a lock held by live parent thread P1 (inside=%d) gave parent "
		  "thread P3 %s after %llu ms, want -ETIMEDOUT",
		  sh->inside, ru_err_name(r), (unsigned long long)(el / RU_MS));
	if (r == 0 || r == -EOWNERDEAD) {
		RU_EXPECT(!sh->inside, "mutual exclusion lost: P3 entered while P1 is inside");
		/* Leave it held as P1 expects: P1 unlocks it. */
	}
	if (r == -ETIMEDOUT)
		CHECK_GE_U64(el, PROBE_TIMEOUT);
	return NULL;
}

static _Atomic uint64_t hammer_errors;

static void *hammer(void *arg)
{
	int id = (int)(intptr_t)arg;

	for (unsigned i = 0; i < TU_ITERS(HAMMER_ITERS); i++) {
		int r = rqspin_lock(&sh->l);

		if (r) {
			if (atomic_fetch_add(&hammer_errors, 1) < 3)
				fprintf(stderr, "hammer: rqspin_lock: %s\n", ru_err_name(r));
			if (r == -EOWNERDEAD)
				rqspin_unlock(&sh->l);
			continue;
		}
		if (sh->inside != 0) {
			atomic_fetch_add(&hammer_errors, 1);
		}
		sh->inside = id;
		sh->counter++;
		for (volatile int k = 0; k < 50; k++)
			;
		if (sh->inside != id)
			atomic_fetch_add(&hammer_errors, 1);
		sh->inside = 0;
		rqspin_unlock(&sh->l);
	}
	return NULL;
}

static void round_once(int round)
{
	pthread_t t1, tw, t2, t3, th[NHAMMER];
	unsigned before = atomic_load(&ru_failures);
	int r;

	rqspin_lock_init(&sh->l);
	rqspin_lock_init(&sh->w);
	sh->inside = 0;
	sh->counter = 0;
	atomic_store(&p1_has.v, 0);
	atomic_store(&p1_go.v, 0);
	atomic_store(&w_ret, 1);
	atomic_store(&hammer_errors, 0);

	t1 = tu_thread_start(p1, NULL);
	tu_event_wait(&p1_has, 1);
	tw = tu_thread_start(w_waiter, NULL);
	RU_WAIT_FOR(ru_word(&sh->w) & RU_PENDING_MASK, 30, "pending waiter on w");

	t2 = tu_thread_start(p2, NULL);
	tu_thread_join(t2);

	t3 = tu_thread_start(probe, &sh->l);
	tu_thread_join(t3);
	RU_EXPECT(rqspin_is_locked(&sh->l) && rqspin_is_locked(&sh->w),
		  "after the fork the parent's held locks read l=0x%x w=0x%x, want both locked",
		  ru_word(&sh->l), ru_word(&sh->w));
	RU_EXPECT(atomic_load(&w_ret) == 1, "the pending waiter on w returned %s while P1 holds it",
		  ru_err_name(atomic_load(&w_ret)));

	tu_event_set(&p1_go, 1);
	tu_thread_join(t1);
	tu_thread_join(tw);
	r = atomic_load(&w_ret);
	RU_EXPECT(r == 0, "pending waiter on w (held by P1 at the fork): %s, want 0", ru_err_name(r));

	sh->counter = 0;
	for (int i = 0; i < NHAMMER; i++)
		th[i] = tu_thread_start(hammer, (void *)(intptr_t)(i + 2));
	for (int i = 0; i < NHAMMER; i++)
		tu_thread_join(th[i]);
	RU_EXPECT(atomic_load(&hammer_errors) == 0 &&
			  sh->counter == (uint64_t)NHAMMER * TU_ITERS(HAMMER_ITERS),
		  "after the fork: %llu lock errors / exclusion violations, counter %llu of %llu",
		  (unsigned long long)atomic_load(&hammer_errors),
		  (unsigned long long)sh->counter,
		  (unsigned long long)NHAMMER * TU_ITERS(HAMMER_ITERS));
	CHECK_EQ_U64(ru_word(&sh->l), 0);
	printf("round %d: %s\n", round, atomic_load(&ru_failures) == before ? "ok" : "FAILED");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	for (int i = 0; i < ROUNDS; i++)
		round_once(i);
	CHECK(munmap(sh, 4096) == 0);
	return ru_finish("rqspin_fork_shared");
}
