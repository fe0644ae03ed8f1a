/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "arch/clock.h"

/* clock_gettime is on POSIX's async-signal-safe list and, for
 * CLOCK_MONOTONIC, served by the vDSO without entering the kernel. A raw
 * cycle counter would be cheaper but needs calibration and is not
 * synchronised across sockets on every machine; waits here check the
 * clock at most once per spin budget, so the vDSO cost does not matter. */
uint64_t rqs_arch_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
