/* SPDX-License-Identifier: MIT */
/*
 * Private futexes on 32-bit words. Async-signal-safe; errno is kept.
 */
#ifndef RQS_COMMON_FUTEX_H
#define RQS_COMMON_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/* Sleep while *word == val (FUTEX_WAIT, private). Returns on wake-up,
 * value change or a signal; the caller re-checks. */
void rqs_futex_wait(_Atomic uint32_t *word, uint32_t val);
/* The same, for at most ns nanoseconds. */
void rqs_futex_wait_ns(_Atomic uint32_t *word, uint32_t val, uint64_t ns);
/* Wake one sleeper on word. */
void rqs_futex_wake(_Atomic uint32_t *word);

#endif /* RQS_COMMON_FUTEX_H */
