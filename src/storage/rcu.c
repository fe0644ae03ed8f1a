/* SPDX-License-Identifier: MIT */
/*
 * liburcu ("bulletproof" flavour, urcu-bp) glue: read-side sections,
 * deferred frees, grace-period waits.
 *
 * Registration. urcu-bp registers a thread on its first read-side section
 * (urcu_bp_register: every signal blocked, the registry mutex, maybe an
 * mmap to grow the registry) and unregisters it from its own pthread key
 * destructor when the thread exits. liburcu-bp blocks every signal
 * wherever it holds that mutex (registration, unregistration,
 * synchronize_rcu), so a handler that is the first user on its thread can
 * register too. Its explicit registration is idempotent: a program that
 * calls urcu_bp_register_thread itself, before or after our first call, is
 * fine. And a program that uses another flavour (memb, mb, qsbr, signal)
 * has its own registry and grace periods, which we never touch: the
 * order of its registrations and ours does not matter.
 *
 * Frees. call_rcu is async-signal-safe once a call_rcu worker exists (then
 * it is a nested read lock, a wait-free enqueue and maybe a futex wake);
 * its first use creates the worker under a mutex, so map creation, which
 * always comes first and runs in normal context, creates it.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "storage/internal.h"

#ifdef RQS_TSAN
char rqs_st_tsan_gp;
#endif

static pthread_mutex_t setup_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool setup_done;

int rqs_st_setup(void)
{
	/* acquire: pairs with the release below; the worker exists. */
	if (atomic_load_explicit(&setup_done, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&setup_mutex);
	if (!atomic_load_explicit(&setup_done, memory_order_relaxed)) {
		sigset_t all, old;
		bool ok;

		/* Creates liburcu's default call_rcu worker (mutex, malloc,
		 * pthread_create): from now on call_rcu never allocates. The
		 * worker inherits our signal mask, and liburcu 0.13 does not
		 * block signals in it: block them all while it is created, so
		 * the application's handlers never run on a library thread. */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		ok = urcu_bp_get_default_call_rcu_data() != NULL;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!ok) {
			pthread_mutex_unlock(&setup_mutex);
			return -ENOMEM;
		}
		/* release: pairs with the acquire above. */
		atomic_store_explicit(&setup_done, true, memory_order_release);
	}
	pthread_mutex_unlock(&setup_mutex);
	return 0;
}

void rqs_st_assert_not_reading(const char *what)
{
	if (URCU_TLS(urcu_bp_reader) && urcu_bp_read_ongoing())
		rqspin__misuse(what, NULL);
}

/* ---- deferred frees -------------------------------------------------------- */

static void elem_free_cb(struct rcu_head *h)
{
	struct st_elem *e = caa_container_of(h, struct st_elem, rcu);

	ST_TSAN_ACQUIRE_GP();
	rqs_st_free_elem_now(e);
}

static void local_free(struct st_local *l)
{
	rqs_st_tab_free_all(l);
	/* The first element goes with its storage (see ST_EMB_LIVE). */
	if (l->first)
		rqspin_free_nolock(l->first);
	rqspin_free_nolock(l);
}

/* A storage with a first element: the callback gets that element's head. */
static void local_free_first_cb(struct rcu_head *h)
{
	struct st_elem *e = caa_container_of(h, struct st_elem, rcu);

	ST_TSAN_ACQUIRE_GP();
	local_free(e->local);
}

/* A storage without one: its head follows the inline slots. */
static void local_free_bare_cb(struct rcu_head *h)
{
	ST_TSAN_ACQUIRE_GP();
	local_free((struct st_local *)(void *)((char *)h - ST_LOCAL_SIZE));
}

void rqs_st_free_elem_now(struct st_elem *e)
{
	if (atomic_load_explicit(&e->state, memory_order_relaxed) & ST_FROM_MALLOC)
		free(e);
	else
		rqspin_free_nolock(e);
}

void rqs_st_release_embedded(struct st_local *l)
{
	/* acq_rel: orders the element's unlinking before the storage's free,
	 * whichever side does it (see ST_EMB_LIVE). */
	uint32_t old = atomic_fetch_and_explicit(&l->flags, ~ST_EMB_LIVE, memory_order_acq_rel);

	if (old & ST_CLEANED)
		rqs_st_free_local_rcu(l);
}

void rqs_st_free_elem_rcu(struct st_elem *e)
{
	if (atomic_load_explicit(&e->state, memory_order_relaxed) & ST_EMBEDDED) {
		rqs_st_release_embedded(e->local);
		return;
	}
	ST_TSAN_RELEASE_GP();
	urcu_bp_call_rcu(&e->rcu, elem_free_cb);
}

void rqs_st_free_local_rcu(struct st_local *l)
{
	ST_TSAN_RELEASE_GP();
	if (l->first)
		urcu_bp_call_rcu(&l->first->rcu, local_free_first_cb);
	else
		urcu_bp_call_rcu(st_local_bare_rcu(l), local_free_bare_cb);
}

/* ---- public ------------------------------------------------------------- */

RQSPIN_API void rqspin_storage_read_lock(void)
{
	st_read_lock();
}

RQSPIN_API void rqspin_storage_read_unlock(void)
{
	st_read_unlock();
}

RQSPIN_API void rqspin_storage_thread_init(void)
{
	urcu_bp_register_thread(); /* idempotent */
}

RQSPIN_API void rqspin_storage_synchronize(void)
{
	rqspin_storage_thread_init();
	rqs_st_assert_not_reading("rqspin_storage_synchronize inside a read-side section");
	urcu_bp_synchronize_rcu();
	ST_TSAN_ACQUIRE_GP();
}

RQSPIN_API void rqspin_storage_barrier(void)
{
	rqspin_storage_thread_init();
	rqs_st_assert_not_reading("rqspin_storage_barrier inside a read-side section");
	urcu_bp_barrier();
	ST_TSAN_ACQUIRE_GP();
}
