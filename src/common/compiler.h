/* SPDX-License-Identifier: MIT */
/*
 * Compiler facts for the library's sources, each spelled once: branch
 * hints, which sanitizer the build runs under, the cache-line size. The
 * public inline headers test the same facts (rqspin/static/compiler.h);
 * these names alias theirs so the two can never disagree.
 */
#ifndef RQS_COMMON_COMPILER_H
#define RQS_COMMON_COMPILER_H

#include <rqspin/static/compiler.h>

#define RQS_LIKELY(x) RQSPIN__LIKELY(x)
#define RQS_UNLIKELY(x) RQSPIN__UNLIKELY(x)

#ifdef RQSPIN__TSAN
#define RQS_TSAN 1
#endif

#if defined(__SANITIZE_ADDRESS__)
#define RQS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RQS_ASAN 1
#endif
#endif

/* Both supported CPUs (x86-64, aarch64 Neoverse/Cortex-A) have 64-byte
 * lines; records that other threads write are aligned to it. */
#define RQS_CACHELINE 64

#endif /* RQS_COMMON_COMPILER_H */
