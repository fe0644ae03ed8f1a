/* SPDX-License-Identifier: MIT */
/*
 * Small statistics for the benchmark harness: order statistics of a few
 * repeats, Jain's fairness index, and a log-linear latency histogram.
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Median of n values (the mean of the two middle ones when n is even);
 * NaN when n == 0. The input is not modified. */
double stats_median(const double *v, size_t n);
/* Smallest / largest of n values; NaN when n == 0. */
double stats_min(const double *v, size_t n);
double stats_max(const double *v, size_t n);

/* Paired ratios: the median of a[i] / b[i] over the i where both are
 * finite and b[i] > 0 (a repeat in which both were measured, close in
 * time, so drift between repeats cancels). *lo / *hi (if not NULL) get the
 * smallest and largest ratio, *n the number of pairs. NaN without pairs. */
double stats_paired_ratio(const double *a, const double *b, size_t len, double *lo, double *hi,
			  size_t *n);

/* Jain's fairness index (sum x)^2 / (n * sum x^2): 1 = perfectly even,
 * 1/n = one thread did everything. 1 for n <= 1 or an all-zero input. */
double stats_jain(const uint64_t *x, size_t n);
/* The smallest x_i divided by the fair share (sum x / n): 1 = even,
 * 0 = some thread starved. 1 for n <= 1, 0 when nothing was counted. */
double stats_min_share(const uint64_t *x, size_t n);

/*
 * Latency histogram in nanoseconds, log-linear: values below 8 have their
 * own bucket, then every power of two is split into 8 equal sub-buckets,
 * so a percentile is known to within 1/16 of its value (~6%). Plain
 * counters: one histogram per thread, merged after the threads finished.
 */
#define HIST_SUB_BITS 3
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t n;
	uint64_t max;
	uint64_t sum;
	uint64_t bucket[HIST_BUCKETS];
};

static inline unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
	return (e - HIST_SUB_BITS + 1) * HIST_SUB +
	       (unsigned)((v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

static inline void hist_add(struct hist *h, uint64_t v)
{
	h->bucket[hist_index(v)]++;
	h->n++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

void hist_reset(struct hist *h);
void hist_merge(struct hist *into, const struct hist *from);
/* The value below which a fraction q (0..1) of the samples lie: the
 * midpoint of the bucket holding that rank, capped at the maximum.
 * 0 when the histogram is empty. */
uint64_t hist_quantile(const struct hist *h, double q);
/* Lowest value a bucket holds, and its width. */
uint64_t hist_bucket_low(unsigned idx);
uint64_t hist_bucket_width(unsigned idx);

/* The library's event counters b - a into *d (the slot figures are b's). */
struct rqspin_lock_stats;
void stats_lib_delta(struct rqspin_lock_stats *d, const struct rqspin_lock_stats *a,
		     const struct rqspin_lock_stats *b);

/* SplitMix64: a well-mixed 64-bit value from x (seeds, shuffles). */
static inline uint64_t stats_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
