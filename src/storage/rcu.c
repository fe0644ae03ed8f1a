/* SPDX-License-Identifier: MIT */
/*
 * liburcu (memb flavour) glue: lazy thread registration, read-side
 * sections, deferred frees, grace-period waits.
 *
 * Registration. memb readers must be registered (urcu_memb_register_thread
 * takes liburcu's registry mutex) and unregistered before the thread exits
 * (the registry links the thread's TLS). We register on a thread's first
 * call, with every signal blocked so that none of our handlers can run
 * while this thread holds the registry mutex, and unregister from a
 * pthread key destructor. A handler that is the first user on its thread
 * registers the same way; the mutex cannot be held by the code it
 * interrupted, because this library registers a thread before any other
 * liburcu call that takes it (see rqspin_storage_thread_init for programs
 * that call liburcu themselves).
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

/* Who registered this thread with liburcu memb: 0 nobody yet, 1 we did
 * (and unregister at exit), 2 the program did. initial-exec: no
 * allocation on first touch (handlers). */
static __thread uint8_t st_registered __attribute__((tls_model("initial-exec")));

#ifdef ST_TSAN
char st_tsan_gp;
#endif

static pthread_key_t exit_key;
static bool exit_key_ok;
static pthread_mutex_t setup_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool setup_done;

static void thread_exit(void *arg)
{
	sigset_t all;

	(void)arg;
	/* Signals stay blocked for the rest of the thread's life: a handler
	 * running after this could not register again (the destructor
	 * rounds are limited). Destructors of other keys that run after us
	 * and use storage register again, which re-arms this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (st_registered == 1 && URCU_TLS(urcu_memb_reader).registered)
		urcu_memb_unregister_thread();
	st_registered = 0;
}

/* Created at load time, before almost any other key, so that its value
 * lives in the thread descriptor and pthread_setspecific never allocates
 * (glibc: keys below PTHREAD_KEY_2NDLEVEL_SIZE = 32); the thread registry
 * of src/lock relies on the same property. */
__attribute__((constructor)) static void storage_load(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

void st_register_slow(void)
{
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/* Re-check with signals blocked: a handler may have registered the
	 * thread between the caller's test and the mask change. */
	if (!URCU_TLS(urcu_memb_reader).registered) {
		if (!exit_key_ok) {
			static const char msg[] =
				"librqspin: storage: no pthread key for thread exit\n";
			ssize_t r = write(2, msg, sizeof(msg) - 1);

			(void)r;
			abort();
		}
		urcu_memb_register_thread();
		pthread_setspecific(exit_key, (void *)1);
		st_registered = 1;
	} else if (!st_registered) {
		st_registered = 2; /* the program registered it; leave it */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int st_setup(void)
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
		ok = urcu_memb_get_default_call_rcu_data() != NULL;
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

void st_assert_not_reading(const char *what)
{
	if (URCU_TLS(urcu_memb_reader).registered && urcu_memb_read_ongoing())
		rqspin__misuse(what, NULL);
}

/* ---- deferred frees -------------------------------------------------------- */

static void elem_free_cb(struct rcu_head *h)
{
	struct st_elem *e = caa_container_of(h, struct st_elem, rcu);

	ST_TSAN_ACQUIRE_GP();
	st_free_elem_now(e);
}

static void local_free_cb(struct rcu_head *h)
{
	struct st_local *l = caa_container_of(h, struct st_local, rcu);

	ST_TSAN_ACQUIRE_GP();
	/* The first element goes with its storage (see ST_EMB_LIVE). */
	if (l->first)
		rqspin_free_nolock(l->first);
	rqspin_free_nolock(l);
}

static void xtab_free_cb(struct rcu_head *h)
{
	struct st_xtab *x = caa_container_of(h, struct st_xtab, rcu);

	ST_TSAN_ACQUIRE_GP();
	/* With the tables it replaced (see struct st_xtab). */
	while (x) {
		struct st_xtab *older = x->older;

		rqspin_free_nolock(x);
		x = older;
	}
}

void st_free_elem_now(struct st_elem *e)
{
	if (atomic_load_explicit(&e->state, memory_order_relaxed) & ST_FROM_MALLOC)
		free(e);
	else
		rqspin_free_nolock(e);
}

void st_release_embedded(struct st_local *l)
{
	/* acq_rel: orders the element's unlinking before the storage's free,
	 * whichever side does it (see ST_EMB_LIVE). */
	uint32_t old = atomic_fetch_and_explicit(&l->flags, ~ST_EMB_LIVE, memory_order_acq_rel);

	if (old & ST_CLEANED)
		st_free_local_rcu(l);
}

void st_free_elem_rcu(struct st_elem *e)
{
	if (atomic_load_explicit(&e->state, memory_order_relaxed) & ST_EMBEDDED) {
		st_release_embedded(e->local);
		return;
	}
	ST_TSAN_RELEASE_GP();
	urcu_memb_call_rcu(&e->rcu, elem_free_cb);
}

void st_free_local_rcu(struct st_local *l)
{
	ST_TSAN_RELEASE_GP();
	urcu_memb_call_rcu(&l->rcu, local_free_cb);
}

void st_free_xtab_rcu(struct st_xtab *x)
{
	ST_TSAN_RELEASE_GP();
	urcu_memb_call_rcu(&x->rcu, xtab_free_cb);
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
	if (!URCU_TLS(urcu_memb_reader).registered)
		st_register_slow();
}

RQSPIN_API void rqspin_storage_synchronize(void)
{
	rqspin_storage_thread_init();
	st_assert_not_reading("rqspin_storage_synchronize inside a read-side section");
	urcu_memb_synchronize_rcu();
	ST_TSAN_ACQUIRE_GP();
}

RQSPIN_API void rqspin_storage_barrier(void)
{
	rqspin_storage_thread_init();
	st_assert_not_reading("rqspin_storage_barrier inside a read-side section");
	urcu_memb_barrier();
	ST_TSAN_ACQUIRE_GP();
}
