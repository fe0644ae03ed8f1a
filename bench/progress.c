/* SPDX-License-Identifier: MIT */
#include "progress.h"

#include <time.h>

#include "cli.h"

static struct {
	double t0;    /* CLOCK_MONOTONIC at progress_begin, s */
	double est;   /* the model's total, s */
	double done;  /* the model's seconds done */
} pr;

double progress_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_begin(double est_s)
{
	pr.t0 = progress_now_s();
	pr.est = est_s;
	pr.done = 0;
}

double progress_elapsed_s(void)
{
	return progress_now_s() - pr.t0;
}

double progress_scaled_left(double est_total_s, double est_done_s, double elapsed_s)
{
	double rest = est_total_s - est_done_s;

	if (rest <= 0)
		return 0;
	/* Too little done to judge the pace by: the model as it is. */
	if (est_done_s < 0.02 * est_total_s || elapsed_s <= 0)
		return rest;
	return rest * elapsed_s / est_done_s;
}

double progress_left_s(void)
{
	return progress_scaled_left(pr.est, pr.done, progress_elapsed_s());
}

void progress_add(double model_s)
{
	pr.done += model_s;
}

void progress_step(bool quiet, double model_s)
{
	double left;

	pr.done += model_s;
	left = progress_left_s();
	/* The last step leaves rounding errors of the model's sum. */
	if (pr.done < 0.999 * pr.est)
		cli_progress(quiet, " (%.0f s, ~%.0f s left)\n", progress_elapsed_s(), left);
	else
		cli_progress(quiet, " (%.0f s)\n", progress_elapsed_s());
}
