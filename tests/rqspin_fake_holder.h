/* SPDX-License-Identifier: MIT */
/*
 * For the white-box tests of the stall rule (rqspin_stall_*.c): a holder H
 * of lock fh_lock whose thread record names another thread, so that what a
 * waiter reads from /proc about "the holder" is that thread's state, and a
 * waiter W that takes the lock with a timeout. H unlocks when the test says
 * so (fh_release_now). Include once per test program; needs src/ on the
 * include path (lock/registry.h).
 */
#ifndef RQSPIN_TEST_FAKE_HOLDER_H
#define RQSPIN_TEST_FAKE_HOLDER_H

#include "rqspin_util.h"

#include "lock/registry.h"

static rqspinlock_t fh_lock = RQSPINLOCK_INIT;
static _Atomic(struct rqspin_thread *) fh_rec;
static _Atomic int fh_release, fh_released, fh_exit;
static uint64_t fh_timeout_ns;

static void *fh_holder_main(void *arg)
{
	(void)arg;
	RU_CHECK_RET(rqspin_lock(&fh_lock), 0);
	atomic_store(&fh_rec, (struct rqspin_thread *)rqspin__self());
	RU_WAIT_FOR(atomic_load(&fh_release), 60, "the release");
	rqspin_unlock(&fh_lock);
	atomic_store(&fh_released, 1);
	RU_WAIT_FOR(atomic_load(&fh_exit), 60, "the end");
	return NULL;
}

/* Have H unlock, and wait until it has. */
static inline void fh_release_now(void)
{
	atomic_store(&fh_release, 1);
	RU_WAIT_FOR(atomic_load(&fh_released), 60, "H's unlock");
}

struct fh_result {
	int ret;      /* W's rqspin_lock_timeout */
	uint64_t ns;  /* how long it took */
};

static void *fh_waiter_main(void *arg)
{
	struct fh_result *r = arg;
	uint64_t t0 = tu_now_ns();

	r->ret = rqspin_lock_timeout(&fh_lock, fh_timeout_ns);
	r->ns = tu_now_ns() - t0;
	if (r->ret == 0)
		rqspin_unlock(&fh_lock);
	return NULL;
}

/* H takes the lock and its record is given fake_tid; W waits with timeout
 * t; during (if not NULL) runs on the calling thread once W started. H's
 * own tid is restored before it ends; the lock word must be 0 after. */
static struct fh_result fh_run(pid_t fake_tid, uint64_t t, void (*during)(void))
{
	struct fh_result r = { 1, 0 };
	pthread_t h, w;
	pid_t real;

	atomic_store(&fh_release, 0);
	atomic_store(&fh_released, 0);
	atomic_store(&fh_exit, 0);
	atomic_store(&fh_rec, NULL);
	fh_timeout_ns = t;
	h = tu_thread_start(fh_holder_main, NULL);
	RU_WAIT_FOR(atomic_load(&fh_rec) != NULL, 30, "H holds the lock");
	real = atomic_exchange(&atomic_load(&fh_rec)->tid, fake_tid);
	w = tu_thread_start(fh_waiter_main, &r);
	if (during)
		during();
	tu_thread_join(w);
	atomic_store(&atomic_load(&fh_rec)->tid, real);
	atomic_store(&fh_release, 1);
	atomic_store(&fh_exit, 1);
	tu_thread_join(h);
	CHECK_EQ_U64(ru_word(&fh_lock), 0);
	return r;
}

#endif
