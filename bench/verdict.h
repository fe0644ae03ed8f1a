/* SPDX-License-Identifier: MIT */
/*
 * Verdicts: a target of a suite checked against a figure measured in the
 * run. Every suite fills one verdict list; the harness prints, counts and
 * stores them (JSON) the same way for all suites.
 */
#ifndef BENCH_VERDICT_H
#define BENCH_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "json.h"
#include "sysinfo.h"

enum verdict_status { V_FAIL = 0, V_PASS = 1, V_INFO = 2 };

struct verdict {
	char target[112];  /* "2 threads: qspin >= 0.9x pthread_spin" */
	char measured[112];/* "12.1M vs 11.5M ops/s" */
	const char *area;  /* what the target is about: "lock", "rqspin", "harness", "info" */
	double value;      /* the measured ratio, or a count (NaN: none) */
	bool is_count;     /* value is a count (failures), not a ratio */
	double limit;
	enum verdict_status status;
};

#define VERDICT_MAX 64

struct verdict_list {
	struct verdict v[VERDICT_MAX];
	size_t n;
};

/* Other processes used more than this share of the CPU time: say that the
 * figures are noisy. */
#define VERDICT_BUSY_SHARE 0.10

/* Append a verdict: PASS when value >= limit (ge) or value <= limit (!ge),
 * FAIL when value is NaN. NULL when the list is full. target/measured are
 * left empty for the caller. */
struct verdict *vl_add(struct verdict_list *l, const char *area, double value, double limit,
		       bool ge);
/* Print "title", one line per verdict, then "N passed, M failed" (noting a
 * busy machine when load says so); nothing when the list is empty. */
void vl_print(FILE *f, const char *title, const struct verdict_list *l,
	      const struct load_share *load);
/* A JSON array named key with one object per verdict. */
void vl_json(struct json *j, const char *key, const struct verdict_list *l);
/* Adds the list's passed and failed verdicts to *pass and *fail. */
void vl_count(const struct verdict_list *l, size_t *pass, size_t *fail);

#endif
