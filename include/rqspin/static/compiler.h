/* SPDX-License-Identifier: MIT */
/*
 * Inline-support header (not API): the compiler facts the inline fast paths
 * of the lock headers test. The library's own sources take them from here
 * too (src/common/compiler.h), so each is spelled once.
 */
#ifndef RQSPIN_STATIC_COMPILER_H
#define RQSPIN_STATIC_COMPILER_H

#include <rqspin/defs.h>

#define RQSPIN__LIKELY(x) __builtin_expect(!!(x), 1)
#define RQSPIN__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ThreadSanitizer builds: GCC says so with a macro, Clang with a feature.
 * Tested by the counters (their instruction) and the lock annotations. */
#if defined(__SANITIZE_THREAD__)
#define RQSPIN__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RQSPIN__TSAN 1
#endif
#endif

/* Debug checks in the inline functions follow the *caller's* build:
 * on unless NDEBUG, or forced with -DRQSPIN_DEBUG=0/1. */
#ifndef RQSPIN_DEBUG
#ifdef NDEBUG
#define RQSPIN_DEBUG 0
#else
#define RQSPIN_DEBUG 1
#endif
#endif

#endif /* RQSPIN_STATIC_COMPILER_H */
