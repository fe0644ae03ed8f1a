/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/futex.h"

/* These run inside signal handlers: they keep errno as they found it, so
 * a handler that takes a lock cannot clobber the interrupted code's. */
void rqs_futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	int e = errno;

	/* EINTR, EAGAIN (value already changed): the caller's loop re-checks. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	errno = e;
}

void rqs_futex_wait_ns(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	int e = errno;

	/* Relative timeout; ETIMEDOUT, EINTR and EAGAIN all mean "look
	 * again". */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
	errno = e;
}

void rqs_futex_wake(_Atomic uint32_t *word)
{
	int e = errno;

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = e;
}
