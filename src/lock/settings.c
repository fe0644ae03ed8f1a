/* SPDX-License-Identifier: MIT */
/* The process-wide lock settings: the default timeout T. */
#include <errno.h>
#include <stdatomic.h>

#include <rqspin/rqspinlock.h>

#include "lock/settings.h"

/* relaxed: a single word read on its own; a lock call that starts after
 * the setter returned sees the new value (coherence), and one that races
 * with it may use either. */
static _Atomic uint64_t default_timeout = RQSPIN_DEFAULT_TIMEOUT_NS;

#define MAX_TIMEOUT_NS (3600ull * 1000000000ull)

int rqspin_set_default_timeout(uint64_t timeout_ns)
{
	if (timeout_ns == 0 || timeout_ns > MAX_TIMEOUT_NS)
		return -EINVAL;
	atomic_store_explicit(&default_timeout, timeout_ns, memory_order_relaxed);
	return 0;
}

uint64_t rqspin_get_default_timeout(void)
{
	return atomic_load_explicit(&default_timeout, memory_order_relaxed);
}

uint64_t rqs_lock_default_timeout(void)
{
	return atomic_load_explicit(&default_timeout, memory_order_relaxed);
}
