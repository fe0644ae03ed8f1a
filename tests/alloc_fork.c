/* SPDX-License-Identifier: MIT */
/*
 * fork() while another thread owns a heap with live objects. In the child
 * that thread is gone: its heap is treated like an exited thread's
 * (abandoned, adoptable), so the child can free the objects (remote frees),
 * a new thread of the child adopts the heap, and trim gives the pages back.
 * The parent's state is untouched.
 */
#include <sys/wait.h>

#include "alloc_common.h"

#define N 2000
static void *g_obj[N];
static atomic_int g_phase;

static void *owner(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++) {
		g_obj[i] = rqspin_malloc_nolock(24 + i % 200, 0);
		ac_fill(g_obj[i], 24 + i % 200, (uint32_t)i);
	}
	atomic_store(&g_phase, 1);
	TU_WAIT_UNTIL(atomic_load(&g_phase) == 2);
	for (int i = 0; i < N; i++) {
		AC_CHECK(g_obj[i], 24 + i % 200, (uint32_t)i);
		rqspin_free_nolock(g_obj[i]);
	}
	return NULL;
}

static void *child_thread(void *arg)
{
	void *p[100];

	(void)arg;
	for (int i = 0; i < 100; i++) {
		p[i] = rqspin_malloc_nolock(64, 0);
		CHECK(p[i] != NULL);
		ac_fill(p[i], 64, 5);
	}
	for (int i = 0; i < 100; i++) {
		AC_CHECK(p[i], 64, 5);
		rqspin_free_nolock(p[i]);
	}
	return NULL;
}

int main(void)
{
	pthread_t t;
	pid_t pid;
	int st;

	tu_watchdog(120);
	t = tu_thread_start(owner, NULL);
	TU_WAIT_UNTIL(atomic_load(&g_phase) == 1);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct rqspin_alloc_stats s;

		alarm(60);
		for (int i = 0; i < N; i++) {
			AC_CHECK(g_obj[i], 24 + i % 200, (uint32_t)i);
			rqspin_free_nolock(g_obj[i]);
		}
		tu_thread_join(tu_thread_start(child_thread, NULL));
		rqspin_alloc_trim();
		s = ac_stats();
		CHECK_EQ_U64(s.small_objects, 0);
		CHECK_GE_U64(s.heaps_adopted, 1);
		CHECK_LE_U64(s.pages_active, 4);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ_U64(ac_stats().small_objects, N); /* the parent's are still live */
	atomic_store(&g_phase, 2);
	tu_thread_join(t);
	CHECK_EQ_U64(ac_stats().small_objects, 0);
	tu_write_str("alloc_fork: ok\n");
	return 0;
}
