/* SPDX-License-Identifier: MIT */
/* Running the workers of one measurement (lock_worker.h): opening the start
 * gate, sleeping through the run, joining with a stall deadline. Shared by
 * the lock and torture suites. */
#include "lock_worker.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

uint64_t lw_gate_open(struct lw_gate *g, unsigned created, atomic_bool *stop, bool failed)
{
	uint64_t t0;

	pthread_mutex_lock(&g->m);
	if (failed)
		atomic_store(stop, true);
	while (g->ready < created)
		pthread_cond_wait(&g->cv, &g->m);
	t0 = lw_now_ns();
	g->go = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->m);
	return t0;
}

void lw_sleep_until(uint64_t end_ns)
{
	struct timespec until = { .tv_sec = (time_t)(end_ns / 1000000000u),
				  .tv_nsec = (long)(end_ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

bool lw_join_by(const pthread_t *tid, bool *joined, unsigned n, unsigned stall_ms)
{
	struct timespec dl;
	bool all = true;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += stall_ms / 1000;
	dl.tv_nsec += (long)(stall_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	for (unsigned i = 0; i < n; i++) {
		if (pthread_timedjoin_np(tid[i], NULL, &dl) == 0)
			joined[i] = true;
		else
			all = false;
	}
	return all;
}

void lw_detach_unjoined(const pthread_t *tid, const bool *joined, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!joined[i])
			pthread_detach(tid[i]);
}
