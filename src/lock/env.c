/* SPDX-License-Identifier: MIT */
/* The environment variables of the lock, read once at load time (getenv
 * is not async-signal-safe, the lock calls are). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rqspin/rqspinlock.h>

#include "lock/report.h"

__attribute__((constructor)) static void lock_env_init(void)
{
	const char *r = getenv("RQSPIN_REPORT");
	const char *t = getenv("RQSPIN_TIMEOUT_MS");

	rqs_report_use_stderr(r && (!strcmp(r, "1") || !strcmp(r, "stderr")));
	if (t && *t) {
		char *end;
		unsigned long long ms = strtoull(t, &end, 10);

		/* strtoull takes "-5" as 2^64 - 5, and ms * 10^6 may wrap
		 * round to a valid-looking value. */
		if (*end || strchr(t, '-') || ms > UINT64_MAX / 1000000ull ||
		    rqspin_set_default_timeout(ms * 1000000ull) != 0) {
			static const char msg[] =
				"rqspin: ignoring invalid RQSPIN_TIMEOUT_MS (want 1..3600000)\n";
			ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
			(void)w;
		}
	}
}
