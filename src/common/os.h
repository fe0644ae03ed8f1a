/* SPDX-License-Identifier: MIT */
/*
 * System calls the library makes from any context. Each one is
 * async-signal-safe and leaves errno as it found it, so a signal handler
 * that takes a lock or allocates cannot clobber the interrupted code's.
 */
#ifndef RQS_COMMON_OS_H
#define RQS_COMMON_OS_H

#include <stddef.h>
#include <stdint.h>

/* Zero-filled private read-write memory, NULL when mmap fails. The whole
 * range is described to Valgrind's race checkers as the library's own
 * (changed with atomics only; valgrind/vg.h). */
void *rqs_os_map(size_t len);
/* The same, address space only (MAP_NORESERVE): pages become resident
 * when first written. */
void *rqs_os_reserve(size_t len);
void rqs_os_unmap(void *p, size_t len);

/* The calling thread's kernel id. */
int32_t rqs_os_gettid(void);
/* Give the CPU to another runnable thread. */
void rqs_os_yield(void);

#endif /* RQS_COMMON_OS_H */
