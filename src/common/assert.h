/* SPDX-License-Identifier: MIT */
/*
 * rqs_assert(cond): checks an invariant that a comment states. On in
 * debug builds of the library (RQS_ASSERT, set by CMake for Debug and
 * sanitizer builds or with -DRQSPIN_ASSERT=ON), compiled out otherwise (the
 * condition is then not evaluated). A failure writes the file, line and
 * condition to stderr and aborts: only write(2) and abort(), so it may fire
 * inside a signal handler or a lock's slow path.
 */
#ifndef RQS_COMMON_ASSERT_H
#define RQS_COMMON_ASSERT_H

#include "common/compiler.h"

#ifndef RQS_ASSERT
#define RQS_ASSERT 0
#endif

__attribute__((noreturn, cold)) void rqs_assert_fail(const char *file, unsigned line,
						     const char *cond);

#if RQS_ASSERT
#define rqs_assert(cond) \
	(RQS_LIKELY(cond) ? (void)0 : rqs_assert_fail(__FILE__, __LINE__, #cond))
#else
/* sizeof: the condition is still compiled (no unused-variable warnings,
 * no rot) but never evaluated. */
#define rqs_assert(cond) ((void)sizeof(!(cond)))
#endif

#endif /* RQS_COMMON_ASSERT_H */
