/* SPDX-License-Identifier: MIT */
/*
 * A process-shared lock released by a thread of another process: the
 * locker's table keeps its entry (no other process can post to it), and
 * the word, which names the holder, must win over it everywhere -- not
 * only in the locker's own next wait for the lock.
 *
 * T takes the shared lock L; the child process releases it for T and
 * takes it for 300 ms. Meanwhile V (this process) holds M and waits for
 * L, and T, which holds nothing now, waits for M. No cycle: V gets L when
 * the child lets go, then T gets M. With T's stale entry read as a hold,
 * the deadlock search saw T -> M -> V -> L -> T and failed T or V with
 * -EDEADLK (9 of 9 runs).
 *
 * Then T2 takes L and another child releases it, and T2 stays (its stale
 * entry with it); V2 takes L and U, in this process, releases it for V2.
 * The release must be posted to V2 (white-box: its record's posted
 * cells), not to T2: with T2's entry read as a hold, the unlock saw two
 * owners, looked again for the whole default timeout and credited T2.
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include <rqspin/rqspinlock.h>

#include "lock/registry.h"
#include "test_util.h"

#define LONG_TIMEOUT (20ull * 1000 * 1000 * 1000)

struct shared {
	rqspinlock_t L;
	atomic_int step;
};

static struct shared *sh;
static rqspinlock_t M = RQSPINLOCK_INIT;
static tu_event ev;
static atomic_int t_ret = 99, v_ret = 99;

static void *t_main(void *arg)
{
	(void)arg;
	CHECK(rqspin_lock(&sh->L) == 0);
	atomic_store(&sh->step, 1); /* the child releases L and takes it */
	while (atomic_load(&sh->step) < 2)
		tu_sleep_us(1000);
	tu_event_set(&ev, 1);
	tu_event_wait(&ev, 2); /* V holds M */
	atomic_store(&t_ret, rqspin_lock_timeout(&M, LONG_TIMEOUT));
	if (atomic_load(&t_ret) == 0)
		rqspin_unlock(&M);
	return NULL;
}

static void *v_main(void *arg)
{
	(void)arg;
	tu_event_wait(&ev, 1);
	CHECK(rqspin_lock(&M) == 0);
	tu_event_set(&ev, 2);
	tu_sleep_us(50000); /* T waits for M by now */
	atomic_store(&v_ret, rqspin_lock_timeout(&sh->L, LONG_TIMEOUT));
	if (atomic_load(&v_ret) == 0)
		rqspin_unlock(&sh->L);
	rqspin_unlock(&M);
	return NULL;
}

static tu_event ev2;
static atomic_uint t2_posted = 99, v2_posted = 99;

/* Releases other threads posted to the calling thread, not yet drained. */
static unsigned my_posted(void)
{
	const struct rqspin_thread *t = (const struct rqspin_thread *)rqspin__self();

	return atomic_load_explicit(&t->nposted, memory_order_acquire);
}

static void *t2_main(void *arg)
{
	(void)arg;
	CHECK(rqspin_lock(&sh->L) == 0);
	atomic_store(&sh->step, 11); /* the second child releases it */
	while (atomic_load(&sh->step) < 12)
		tu_sleep_us(1000);
	tu_event_set(&ev2, 1);
	tu_event_wait(&ev2, 9); /* alive, with the stale entry, until the end */
	atomic_store(&t2_posted, my_posted());
	return NULL;
}

static void *v2_main(void *arg)
{
	(void)arg;
	tu_event_wait(&ev2, 1);
	CHECK(rqspin_lock(&sh->L) == 0);
	tu_event_set(&ev2, 2);
	tu_event_wait(&ev2, 3); /* released for us by U */
	atomic_store(&v2_posted, my_posted());
	return NULL;
}

static void *u_main(void *arg)
{
	uint64_t t0;

	tu_event_wait(&ev2, 2);
	t0 = tu_now_ns();
	rqspin_unlock(&sh->L);
	*(uint64_t *)arg = tu_now_ns() - t0;
	tu_event_set(&ev2, 3);
	return NULL;
}

int main(void)
{
	pthread_t t, v, u;
	uint64_t unlock_ns = 0;
	int st;
	pid_t child;

	tu_watchdog(120);
	sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	rqspin_lock_init_pshared(&sh->L);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		while (atomic_load(&sh->step) < 1)
			tu_sleep_us(1000);
		rqspin_unlock(&sh->L); /* T's hold */
		if (rqspin_lock(&sh->L) != 0)
			_exit(1);
		atomic_store(&sh->step, 2);
		tu_sleep_us(300000);
		rqspin_unlock(&sh->L);
		_exit(0);
	}
	t = tu_thread_start(t_main, NULL);
	v = tu_thread_start(v_main, NULL);
	tu_thread_join(v);
	tu_thread_join(t);
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("V lock L: %d, T lock M: %d (want 0, 0)\n", atomic_load(&v_ret), atomic_load(&t_ret));
	CHECK(atomic_load(&v_ret) == 0);
	CHECK(atomic_load(&t_ret) == 0);

	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		while (atomic_load(&sh->step) < 11)
			tu_sleep_us(1000);
		rqspin_unlock(&sh->L); /* T2's hold */
		atomic_store(&sh->step, 12);
		_exit(0);
	}
	t = tu_thread_start(t2_main, NULL);
	v = tu_thread_start(v2_main, NULL);
	u = tu_thread_start(u_main, &unlock_ns);
	tu_thread_join(u);
	tu_thread_join(v);
	tu_event_set(&ev2, 9);
	tu_thread_join(t);
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("cross-thread unlock of L for V2 took %llu us (T2's stale entry alive); "
	       "posted to V2 %u, to T2 %u\n",
	       (unsigned long long)(unlock_ns / 1000), atomic_load(&v2_posted),
	       atomic_load(&t2_posted));
	CHECK(atomic_load(&v2_posted) == 1);
	CHECK(atomic_load(&t2_posted) == 0);
	CHECK(!rqspin_is_locked(&sh->L));
	printf("rqspin_pshared_cross_unlock: PASS\n");
	return 0;
}
