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

#define RQSPIN_VERSION_MAJOR 0
#define RQSPIN_VERSION_MINOR 1
#define RQSPIN_VERSION_PATCH 0

#endif /* RQSPIN_RQSPIN_H */
