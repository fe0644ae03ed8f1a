/* SPDX-License-Identifier: MIT */
/*
 * The allocator suite: the measuring child (alloc_child.c) and the parent
 * that schedules, reports and judges (alloc_suite.c). Every measurement
 * runs in a re-executed copy of the process (one peer allocator per
 * process: jemalloc and mimalloc are preloaded); the environment variable
 * ALLOC_CHILD_ENV tells the copy which peer and test, and the copy prints
 * one "RESULT v0 [v1 [v2]]" line.
 */
#ifndef BENCH_ALLOC_H
#define BENCH_ALLOC_H

#include <stdbool.h>

#define ALLOC_CHILD_ENV "RQSPIN_ALLOC_BENCH_CHILD"

enum alloc_peer { P_GLIBC, P_JEMALLOC, P_MIMALLOC, P_RQSPIN, ALLOC_NPEERS };

extern const char *const alloc_peer_name[ALLOC_NPEERS];

/* In the child: spec is "PEER TEST QUICK" (QUICK 0 or 1). Prints the
 * RESULT line; returns the exit status (2: a bad spec). */
int alloc_child_main(const char *spec);

#endif
