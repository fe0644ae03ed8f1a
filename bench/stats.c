/* SPDX-License-Identifier: MIT */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/lock_diag.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double stats_median(const double *v, size_t n)
{
	double *tmp, m;

	if (n == 0)
		return NAN;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		return NAN;
	memcpy(tmp, v, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	m = (n & 1) ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
	free(tmp);
	return m;
}

double stats_min(const double *v, size_t n)
{
	double m = NAN;

	for (size_t i = 0; i < n; i++)
		if (i == 0 || v[i] < m)
			m = v[i];
	return m;
}

double stats_max(const double *v, size_t n)
{
	double m = NAN;

	for (size_t i = 0; i < n; i++)
		if (i == 0 || v[i] > m)
			m = v[i];
	return m;
}

double stats_paired_ratio(const double *a, const double *b, size_t len, double *lo, double *hi,
			  size_t *n)
{
	double *q, m;
	size_t k = 0;

	if (lo)
		*lo = NAN;
	if (hi)
		*hi = NAN;
	if (n)
		*n = 0;
	if (len == 0 || !(q = malloc(len * sizeof(*q))))
		return NAN;
	for (size_t i = 0; i < len; i++)
		if (isfinite(a[i]) && isfinite(b[i]) && b[i] > 0)
			q[k++] = a[i] / b[i];
	m = stats_median(q, k);
	if (lo)
		*lo = stats_min(q, k);
	if (hi)
		*hi = stats_max(q, k);
	if (n)
		*n = k;
	free(q);
	return m;
}

double stats_jain(const uint64_t *x, size_t n)
{
	double s = 0, s2 = 0;

	if (n <= 1)
		return 1;
	for (size_t i = 0; i < n; i++) {
		s += (double)x[i];
		s2 += (double)x[i] * (double)x[i];
	}
	if (s2 == 0)
		return 1;
	return s * s / ((double)n * s2);
}

double stats_min_share(const uint64_t *x, size_t n)
{
	double s = 0;
	uint64_t m = UINT64_MAX;

	if (n <= 1)
		return 1;
	for (size_t i = 0; i < n; i++) {
		s += (double)x[i];
		if (x[i] < m)
			m = x[i];
	}
	if (s == 0)
		return 0;
	return (double)m * (double)n / s;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_merge(struct hist *into, const struct hist *from)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
	into->n += from->n;
	into->sum += from->sum;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t hist_bucket_low(unsigned idx)
{
	unsigned e, sub;

	if (idx < HIST_SUB)
		return idx;
	e = idx / HIST_SUB + HIST_SUB_BITS - 1;
	sub = idx % HIST_SUB;
	return (uint64_t)(HIST_SUB + sub) << (e - HIST_SUB_BITS);
}

uint64_t hist_bucket_width(unsigned idx)
{
	if (idx < HIST_SUB)
		return 1;
	return 1ull << (idx / HIST_SUB - 1);
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (h->n == 0)
		return 0;
	if (q <= 0)
		q = 0;
	if (q >= 1)
		return h->max;
	/* The sample of rank ceil(q * n) (1-based). */
	rank = (uint64_t)ceil(q * (double)h->n);
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t v = hist_bucket_low(i) + hist_bucket_width(i) / 2;

			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

void stats_lib_delta(struct rqspin_lock_stats *d, const struct rqspin_lock_stats *a,
		     const struct rqspin_lock_stats *b)
{
#define D(f) d->f = b->f - a->f
	D(fast);
	D(pending);
	D(queued);
	D(stolen);
	D(parked);
	D(yielded);
	D(nonode);
	D(aa);
	D(abba);
	D(cycle);
	D(nest_fail);
	D(timeout);
	D(owner_dead);
	D(deadlock_checks);
	D(stall_checks);
	D(deadline_extended);
#undef D
	d->slots_in_use = b->slots_in_use;
	d->slots_high_water = b->slots_high_water;
	d->slot_limit = b->slot_limit;
}
