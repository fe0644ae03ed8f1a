/* SPDX-License-Identifier: MIT */
/*
 * Progress on stderr with a time left that corrects itself.
 *
 * A suite's estimate_s is a model of its work: seconds per piece (a
 * measurement, a child process, a batch of trials) on the 2-core reference
 * machine. The harness starts each run with the model's total; the suite
 * ends each progress line with progress_step(), giving the model's seconds
 * for the work that line stands for. The time left is then the model's
 * remaining seconds scaled by the pace so far (elapsed / model seconds
 * done): a machine slower or faster than the model's, or busier, is
 * accounted for from the first pieces on, and the model only has to be
 * right in proportion between its pieces.
 *
 * One run at a time, from the thread that runs the suite. Not
 * async-signal-safe (stdio).
 */
#ifndef BENCH_PROGRESS_H
#define BENCH_PROGRESS_H

#include <stdbool.h>

/* The harness: a run of a suite starts, its model says est_s seconds. */
void progress_begin(double est_s);
/* CLOCK_MONOTONIC in seconds. */
double progress_now_s(void);
/* Seconds since progress_begin. */
double progress_elapsed_s(void);
/* Seconds left: the model's remainder at the pace so far (the model's own
 * figure before any step). */
double progress_left_s(void);

/* The suite: work worth model_s seconds of the model is done. Ends the
 * current progress line with " (E s, ~L s left)" (unless quiet). */
void progress_step(bool quiet, double model_s);
/* The same without printing (work between progress lines). */
void progress_add(double model_s);

/* Time left of a sequence of runs (`all`): the estimates of the runs
 * not done, scaled by the pace of those done (elapsed_s over est_done_s). */
double progress_scaled_left(double est_total_s, double est_done_s, double elapsed_s);

#endif
