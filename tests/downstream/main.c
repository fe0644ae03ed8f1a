/* SPDX-License-Identifier: MIT */
/* A program built against the installed library: the lock, the allocator,
 * storage (liburcu underneath, which a static link must bring along) and
 * the version. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <rqspin/rqspin.h>

struct conn {
	int fd;
	struct rqspin_storage_owner st;
};

int main(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	qspinlock_t q = QSPINLOCK_INIT;
	struct conn c = { 0, RQSPIN_STORAGE_OWNER_INIT };
	struct rqspin_storage_map *m;
	long *v;
	void *p;
	int err = 0;

	if (rqspin_lock(&l) != 0 || rqspin_lock(&l) != -EDEADLK)
		return 1;
	rqspin_unlock(&l);
	qspin_lock(&q);
	qspin_unlock(&q);

	p = rqspin_malloc_nolock(32, 0);
	if (!p)
		return 2;
	rqspin_free_nolock(p);

	m = rqspin_storage_map_create(sizeof(long), 0);
	if (!m)
		return 3;
	v = rqspin_storage_get(m, &c.st, NULL, RQSPIN_STORAGE_F_CREATE, &err);
	if (!v || err)
		return 4;
	*v = 1;
	rqspin_storage_owner_destroy(&c.st);
	rqspin_storage_map_destroy(m);

	if (rqspin_version() != RQSPIN_VERSION ||
	    strcmp(rqspin_version_string(), RQSPIN_VERSION_STRING) != 0)
		return 5;
	return 0;
}
