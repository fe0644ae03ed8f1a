/* SPDX-License-Identifier: MIT */
/*
 * Kept for programs that included it: the lock word and the other pieces
 * the inline lock functions share now live in rqspin/static/lock_word.h,
 * the attributes in rqspin/defs.h. New code includes the API headers
 * (rqspin/qspinlock.h, rqspin/rqspinlock.h) instead.
 */
#ifndef RQSPIN_LOCK_COMMON_H
#define RQSPIN_LOCK_COMMON_H

#include <rqspin/defs.h>
#include <rqspin/static/lock_word.h>

#endif /* RQSPIN_LOCK_COMMON_H */
