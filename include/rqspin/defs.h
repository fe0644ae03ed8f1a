/* SPDX-License-Identifier: MIT */
/*
 * librqspin's definitions every public header needs, and nothing else:
 * the export and checking attributes and, through rqspin/version.h, the
 * version macros. A header that only declares functions (alloc.h) includes
 * this one alone.
 */
#ifndef RQSPIN_DEFS_H
#define RQSPIN_DEFS_H

/* Exported from librqspin: the library compiles with hidden visibility. */
#define RQSPIN_API __attribute__((visibility("default")))
/* The result says whether the call did what was asked. */
#define RQSPIN_MUST_CHECK __attribute__((warn_unused_result))

#include <rqspin/version.h>

#endif /* RQSPIN_DEFS_H */
