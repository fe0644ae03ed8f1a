/* SPDX-License-Identifier: MIT */
/*
 * The documented pattern under ThreadSanitizer: one thread replaces a value
 * with rqspin_storage_update (which copies under the value's lock inside
 * the library) while another reads it under rqspin_storage_value_lock().
 * Against a ThreadSanitizer build of the library (rqspin::rqspin_tsan) this
 * must run without a report; the release library's locking is invisible to
 * ThreadSanitizer and its copy is reported as a race.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <rqspin/rqspin.h>

#define ITERS 2000

struct pair {
	long a, b; /* always equal */
};

static struct rqspin_storage_map *map;
static struct rqspin_storage_owner owner = RQSPIN_STORAGE_OWNER_INIT;
static int torn;

static void *writer(void *arg)
{
	(void)arg;
	for (long i = 1; i <= ITERS; i++) {
		struct pair p = { i, i };
		int err;

		do
			err = rqspin_storage_update(map, &owner, &p, RQSPIN_STORAGE_ANY);
		while (err == -ETIMEDOUT || err == -EDEADLK);
		if (err)
			return (void *)1;
	}
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	for (int i = 0; i < ITERS; i++) {
		int err;
		struct pair *p = rqspin_storage_get(map, &owner, NULL, RQSPIN_STORAGE_F_CREATE, &err);
		rqspinlock_t *l;

		if (!p)
			return (void *)1;
		l = rqspin_storage_value_lock(p);
		if (rqspin_lock(l) != 0)
			continue;
		if (p->a != p->b)
			torn++;
		rqspin_unlock(l);
	}
	return NULL;
}

int main(void)
{
	pthread_t w, r;
	void *rw, *rr;

	map = rqspin_storage_map_create(sizeof(struct pair), 0);
	if (!map)
		return 1;
	pthread_create(&w, NULL, writer, NULL);
	pthread_create(&r, NULL, reader, NULL);
	pthread_join(w, &rw);
	pthread_join(r, &rr);
	rqspin_storage_owner_destroy(&owner);
	rqspin_storage_map_destroy(map);
	if (rw || rr || torn) {
		fprintf(stderr, "value_lock: failed (torn %d)\n", torn);
		return 1;
	}
	puts("value_lock: update and value-lock readers agree");
	return 0;
}
