/* SPDX-License-Identifier: MIT */
/* librqspin umbrella header: resilient queued spinlocks, the any-context
 * allocator and object-local storage. */
#ifndef RQSPIN_RQSPIN_H
#define RQSPIN_RQSPIN_H

#include <rqspin/qspinlock.h>
#include <rqspin/rqspinlock.h>
#include <rqspin/lock_diag.h>
#include <rqspin/alloc.h>
#include <rqspin/storage.h>
#include <rqspin/version.h>

#endif /* RQSPIN_RQSPIN_H */
