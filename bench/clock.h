/* SPDX-License-Identifier: MIT */
/* Time for the suites: CLOCK_MONOTONIC in ns, and busy waits. */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Async-signal-safe. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy-wait (no yield) for ns: a critical section or think time that
 * takes time. Async-signal-safe. */
static inline void bench_busy_ns(uint64_t ns)
{
	uint64_t end;

	if (!ns)
		return;
	end = bench_now_ns() + ns;
	while (bench_now_ns() < end)
		;
}

/* The CPU's spin-wait hint, for loops that watch memory another thread
 * writes. Async-signal-safe. */
static inline __attribute__((always_inline)) void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("isb" ::: "memory"); /* YIELD is a NOP without SMT */
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
