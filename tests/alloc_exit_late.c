/* SPDX-License-Identifier: MIT */
/*
 * A thread whose first allocator call comes from a pthread key destructor
 * in the last destructor round (POSIX lets a destructor set its key again;
 * glibc runs 4 rounds) sets the allocator's exit key too late to be run:
 * its heap is never abandoned at exit. Such heaps are found by their dead
 * holder's thread id: a few are probed before a claim takes a new heap
 * slot, a few before a refill maps a new segment, and all of them by
 * rqspin_alloc_trim(). Before, every such thread left a heap and its pages
 * owned by a dead thread for the rest of the process.
 *
 * The checks poll for a while: a joined thread's id can stay visible to
 * tgkill until the kernel has released it.
 */
#include "alloc_common.h"

#include <limits.h>

#define THREADS 64
#define OBJS 8

static pthread_key_t g_key;
static _Atomic unsigned g_late_calls;

static void late_destructor(void *v)
{
	uintptr_t round = (uintptr_t)v;
	void *p[OBJS];

	if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
		CHECK(pthread_setspecific(g_key, (void *)(round + 1)) == 0);
		return;
	}
	/* The last round: the thread's first allocator calls. */
	for (unsigned i = 0; i < OBJS; i++) {
		p[i] = rqspin_malloc_nolock(1024, 0);
		CHECK(p[i] != NULL);
		ac_fill(p[i], 1024, i);
	}
	for (unsigned i = 0; i < OBJS; i++) {
		AC_CHECK(p[i], 1024, i);
		rqspin_free_nolock(p[i]);
	}
	atomic_fetch_add(&g_late_calls, 1);
}

static void *thread_main(void *arg)
{
	(void)arg;
	CHECK(pthread_setspecific(g_key, (void *)1) == 0);
	return NULL;
}

int main(void)
{
	struct rqspin_alloc_stats st;
	unsigned round = 0;

	CHECK(pthread_key_create(&g_key, late_destructor) == 0);
	for (unsigned i = 0; i < THREADS; i++)
		tu_thread_join(tu_thread_start(thread_main, NULL));
	CHECK_EQ_U64(atomic_load(&g_late_calls), THREADS);
	st = ac_stats();
	tu_write_str("alloc_exit_late: heaps after the threads: ");
	tu_write_u64(st.heaps);
	tu_write_str("\n");
	/* Claims adopted the dead threads' heaps (before: one heap each). */
	CHECK(st.heaps <= THREADS / 2);
	/* A trim takes the rest: every heap abandoned, no page held. */
	for (;;) {
		rqspin_alloc_trim();
		st = ac_stats();
		if ((st.heaps == st.heaps_abandoned && st.pages_active == 0) || ++round == 500)
			break;
		tu_sleep_us(10000);
	}
	tu_write_str("alloc_exit_late: heaps ");
	tu_write_u64(st.heaps);
	tu_write_str(", abandoned ");
	tu_write_u64(st.heaps_abandoned);
	tu_write_str(", pages active ");
	tu_write_u64(st.pages_active);
	tu_write_str("\n");
	CHECK_EQ_U64(st.heaps_abandoned, st.heaps);
	CHECK_EQ_U64(st.pages_active, 0);
	CHECK_EQ_U64(st.small_objects, 0);
	return 0;
}
