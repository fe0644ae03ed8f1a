/* SPDX-License-Identifier: MIT */
/*
 * The thread-exit key never makes the allocator call malloc in a signal
 * handler. A constructor that runs before the allocator's creates 40
 * pthread keys, so the allocator's own key would be one whose first
 * pthread_setspecific in a thread allocates (glibc: keys from 32 on). The
 * test counts calloc/malloc calls made while a signal handler runs the
 * thread's very first allocator call: there must be none. Without exit
 * notices the allocator still reuses the heaps of dead threads: after many
 * threads came and went, the number of heaps stays at the peak number of
 * threads alive, and objects freed after their thread's exit are
 * collected.
 *
 * Linked with the static debug flavour, whose constructor has the default
 * priority (it runs after ours).
 */
#include "alloc_common.h"

#define EARLY_KEYS 40

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);

static __thread volatile int t_in_handler;
static atomic_ulong g_handler_mallocs;

void *malloc(size_t n)
{
	if (t_in_handler)
		atomic_fetch_add(&g_handler_mallocs, 1);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	if (t_in_handler)
		atomic_fetch_add(&g_handler_mallocs, 1);
	return __libc_calloc(n, m);
}

__attribute__((constructor(101))) static void make_early_keys(void)
{
	pthread_key_t k;

	for (int i = 0; i < EARLY_KEYS; i++)
		if (pthread_key_create(&k, NULL) != 0)
			abort();
}

static void *g_obj;

static void on_usr1(int sig)
{
	(void)sig;
	t_in_handler = 1;
	g_obj = rqspin_malloc_nolock(64, 0); /* this thread's first call */
	t_in_handler = 0;
}

static void *first_call_in_handler(void *arg)
{
	(void)arg;
	raise(SIGUSR1);
	CHECK(g_obj != NULL);
	ac_fill(g_obj, 64, 5);
	return NULL;
}

static void *short_lived(void *arg)
{
	void **keep = arg;
	void *p[64];

	for (int i = 0; i < 64; i++)
		CHECK((p[i] = rqspin_malloc_nolock(200, 0)) != NULL);
	for (int i = 1; i < 64; i++)
		rqspin_free_nolock(p[i]);
	*keep = p[0];
	return NULL;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	void *keep[200];
	struct rqspin_alloc_stats st;

	tu_watchdog(120);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	for (int i = 0; i < 20; i++) {
		tu_thread_join(tu_thread_start(first_call_in_handler, NULL));
		AC_CHECK(g_obj, 64, 5);
		rqspin_free_nolock(g_obj);
		g_obj = NULL;
	}
	CHECK_EQ_U64(atomic_load(&g_handler_mallocs), 0);
	/* dead threads' heaps are taken over: one at a time alive, so the
	 * heaps are the main thread's and one more (plus one in a race with
	 * the kernel finishing a thread's exit) */
	for (int i = 0; i < 200; i++)
		tu_thread_join(tu_thread_start(short_lived, &keep[i]));
	st = ac_stats();
	CHECK_LE_U64(st.heaps, 4);
	for (int i = 0; i < 200; i++)
		rqspin_free_nolock(keep[i]);
	rqspin_alloc_trim();
	st = ac_stats();
	CHECK_EQ_U64(st.small_objects, 0);
	CHECK_LE_U64(st.pages_active, 8);
	tu_write_str("alloc_key: ok\n");
	return 0;
}
