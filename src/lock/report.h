/* SPDX-License-Identifier: MIT */
/* Failure reports (report.c). */
#ifndef RQSPIN_REPORT_H
#define RQSPIN_REPORT_H

#include <stdbool.h>

#include <rqspin/lock_diag.h>

/* Deliver a report to the hook, or to stderr when RQSPIN_REPORT asks. */
void rqs_report_emit(const struct rqspin_report *rep);
/* Is anybody listening? (Saves building reports nobody reads.) */
bool rqs_report_wanted(void);
/* RQSPIN_REPORT asked for reports on stderr (env.c, at load time). */
void rqs_report_use_stderr(bool on);

#endif
