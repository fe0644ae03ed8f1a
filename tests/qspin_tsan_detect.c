/* SPDX-License-Identifier: MIT */
/*
 * Registered only in the ThreadSanitizer build, with halt_on_error=1: two
 * threads use a qspinlock correctly for one counter but ALSO update another
 * plain counter outside the lock. TSan must report that race (the lock's
 * annotations must not hide races on data it does not protect), so this
 * program exits non-zero under TSan; the tests expect exactly that
 * (WILL_FAIL / a PASS_REGULAR_EXPRESSION on the report). If it returns 0,
 * TSan missed the race.
 */
#include <rqspin/qspinlock.h>

#include "test_util.h"

static qspinlock_t g_lock = QSPINLOCK_INIT;
static uint64_t g_safe;  /* protected by g_lock */
static uint64_t g_racy;  /* deliberately NOT protected */
static tu_barrier g_bar;

static void *worker(void *p)
{
	(void)p;
	tu_barrier_wait(&g_bar);
	for (int i = 0; i < 10000; i++) {
		qspin_lock(&g_lock);
		g_safe++;
		qspin_unlock(&g_lock);
		g_racy++; /* the race */
	}
	return NULL;
}

int main(void)
{
	tu_barrier_init(&g_bar, 2);
	tu_run_threads(2, worker, NULL, 0);
	printf("no race reported (safe %llu, racy %llu)\n", (unsigned long long)g_safe,
	       (unsigned long long)g_racy);
	return 0;
}
