/* SPDX-License-Identifier: MIT */
/* Monotonic time for waiting loops, async-signal-safe. */
#ifndef RQSPIN_CLOCK_H
#define RQSPIN_CLOCK_H

#include <stdint.h>

/* Nanoseconds of CLOCK_MONOTONIC (through the vDSO: no syscall, no lock,
 * safe in signal handlers). Implemented per architecture. */
uint64_t rqs_arch_now_ns(void);

#endif
