/* SPDX-License-Identifier: MIT */
/* Looking up the results of the lock suite (lock_bench.h), for the
 * report and the verdicts. */
#include "lock_bench.h"

#include <string.h>

const struct lb_cell *lb_find(const struct lb_results *r, const char *lock, unsigned threads)
{
	for (size_t ti = 0; ti < r->cfg->nthreads; ti++) {
		if (r->cfg->threads[ti] != threads)
			continue;
		for (size_t li = 0; li < r->cfg->nlocks; li++) {
			const struct lb_cell *c = lb_cell_at(r, ti, li);

			if (strcmp(c->lock->name, lock) == 0)
				return c->nrep ? c : NULL;
		}
	}
	return NULL;
}

const struct lb_unc *lb_find_unc(const struct lb_results *r, const char *lock)
{
	if (!r->unc)
		return NULL;
	for (size_t li = 0; li < r->cfg->nlocks; li++)
		if (strcmp(r->unc[li].lock->name, lock) == 0)
			return r->unc[li].n ? &r->unc[li] : NULL;
	return NULL;
}

/* The results of the scenario with think time think; with_unc: it runs the
 * uncontended pass. */
