/* SPDX-License-Identifier: MIT */
/* Failure reports and the process-wide lock settings. */
#ifndef RQSPIN_REPORT_H
#define RQSPIN_REPORT_H

#include <stdint.h>

#include <rqspin/lock_diag.h>

/* Deliver a report to the hook, or to stderr when RQSPIN_REPORT asks. */
void rqs_report_emit(const struct rqspin_report *rep);
/* Is anybody listening? (Saves building reports nobody reads.) */
bool rqs_report_wanted(void);

/* Default timeout T in ns (see rqspin_set_default_timeout). */
uint64_t rqs_lock_default_timeout(void);

#endif
