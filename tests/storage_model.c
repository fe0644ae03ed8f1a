/* SPDX-License-Identifier: MIT */
/*
 * Object-local storage against a reference model: random sequences of
 * get / get-create / update (ANY, NOEXIST, EXIST) / lookup_copy / in-place
 * writes / delete / owner destroy / map destroy and re-create / iteration,
 * over more maps than the kernel's 16 cache slots, with several value sizes
 * and both allocators. Every result, error code and value byte is checked,
 * value pointers must stay stable while a value lives, and at the end the
 * allocator's live bytes are back where they started.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rqspin/alloc.h>
#include <rqspin/storage.h>

#include "test_util.h"

/* The exported rqspin_storage_get (for FFI users), not the header's inline
 * function of the same name. */
void *get_exported(struct rqspin_storage_map *map, struct rqspin_storage_owner *owner,
		   const void *init, unsigned flags, int *err) __asm__("rqspin_storage_get");

#ifdef TU_TSAN
/* liburcu is not instrumented: its own call_rcu/rcu_barrier bookkeeping
 * (calloc in one thread, free in its worker, ordered by futexes that
 * ThreadSanitizer cannot see) would be reported. The library's frees in its
 * call_rcu callbacks are not affected (they are called from librqspin, and
 * annotated). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
	return "called_from_lib:liburcu-bp.so\ncalled_from_lib:liburcu-common.so\n";
}
#endif

#define NMAPS 40
#define NOWNERS 48

static const size_t sizes[] = { 1, 8, 8, 24, 100, 1000, 4000, 8 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct map_slot {
	struct rqspin_storage_map *map;
	size_t size;
	unsigned flags;
	unsigned char *val[NOWNERS]; /* expected bytes; NULL = absent */
	void *ptr[NOWNERS];          /* pointer the library gave for it */
};

static struct map_slot maps[NMAPS];
static struct rqspin_storage_owner owners[NOWNERS];
static tu_rng rng;
static unsigned long counts[16];

static uint64_t live_bytes(void)
{
	struct rqspin_alloc_stats s;

	rqspin_alloc_trim();
	rqspin_alloc_stats_get(&s);
	return s.small_bytes + s.large_bytes;
}

static void fill_random(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)tu_rng_next(&rng);
}

static void map_open(int i)
{
	struct map_slot *s = &maps[i];

	s->size = sizes[tu_rng_below(&rng, NSIZES)];
	s->flags = tu_rng_below(&rng, 4) == 0 ? RQSPIN_STORAGE_MAP_F_MALLOC : 0;
	s->map = rqspin_storage_map_create(s->size, s->flags);
	CHECK(s->map != NULL);
	CHECK_EQ_U64(rqspin_storage_map_value_size(s->map), s->size);
	memset(s->val, 0, sizeof(s->val));
	memset(s->ptr, 0, sizeof(s->ptr));
}

static void map_close(int i)
{
	struct map_slot *s = &maps[i];

	rqspin_storage_map_destroy(s->map);
	for (int o = 0; o < NOWNERS; o++)
		free(s->val[o]);
	memset(s->val, 0, sizeof(s->val));
	s->map = NULL;
}

static void model_set(struct map_slot *s, int o, const void *bytes, void *ptr)
{
	if (!s->val[o]) {
		s->val[o] = malloc(s->size);
		CHECK(s->val[o] != NULL);
	}
	if (bytes)
		memcpy(s->val[o], bytes, s->size);
	else
		memset(s->val[o], 0, s->size);
	if (ptr)
		s->ptr[o] = ptr;
}

static void model_clear(struct map_slot *s, int o)
{
	free(s->val[o]);
	s->val[o] = NULL;
	s->ptr[o] = NULL;
}

static void check_present(struct map_slot *s, int o, void *p)
{
	CHECK(p != NULL);
	CHECK(((uintptr_t)p & 7) == 0);
	CHECK(p == s->ptr[o]);
	CHECK(memcmp(p, s->val[o], s->size) == 0);
}

struct iter_ctx {
	struct map_slot *s;
	int seen[NOWNERS];
	int n;
};

static int iter_cb(struct rqspin_storage_owner *owner, void *value, void *arg)
{
	struct iter_ctx *c = arg;
	long o = owner - owners;

	CHECK(o >= 0 && o < NOWNERS);
	CHECK(c->s->val[o] != NULL);
	CHECK(value == c->s->ptr[o]);
	CHECK(memcmp(value, c->s->val[o], c->s->size) == 0);
	CHECK(c->seen[o] == 0);
	c->seen[o] = 1;
	c->n++;
	return 0;
}

static int iter_stop_cb(struct rqspin_storage_owner *owner, void *value, void *arg)
{
	(void)owner;
	(void)value;
	(*(int *)arg)++;
	return 42;
}

static void check_iter(struct map_slot *s)
{
	struct iter_ctx c;
	int expect = 0, calls = 0;

	memset(&c, 0, sizeof(c));
	c.s = s;
	CHECK(rqspin_storage_map_iter(s->map, iter_cb, &c) == 0);
	for (int o = 0; o < NOWNERS; o++)
		expect += s->val[o] != NULL;
	CHECK_EQ_U64(c.n, expect);
	CHECK(rqspin_storage_map_iter(s->map, iter_stop_cb, &calls) == (expect ? 42 : 0));
	CHECK_EQ_U64(calls, expect ? 1 : 0);
}

static void check_errors(void)
{
	struct rqspin_storage_owner o = RQSPIN_STORAGE_OWNER_INIT;
	unsigned char buf[8] = { 0 };
	int err = 0;

	errno = 0;
	CHECK(rqspin_storage_map_create(0, 0) == NULL && errno == EINVAL);
	CHECK(rqspin_storage_map_create(RQSPIN_STORAGE_MAX_VALUE_SIZE + 1, 0) == NULL &&
	      errno == EINVAL);
	CHECK(rqspin_storage_map_create(8, 0x80) == NULL && errno == EINVAL);
	CHECK(rqspin_storage_get(NULL, &o, NULL, 0, &err) == NULL && err == -EINVAL);
	CHECK(rqspin_storage_get(maps[0].map, NULL, NULL, 0, &err) == NULL && err == -EINVAL);
	CHECK(rqspin_storage_get(maps[0].map, &o, NULL, 0x10, &err) == NULL && err == -EINVAL);
	CHECK(rqspin_storage_get(maps[0].map, &o, NULL, 0, NULL) == NULL);
	CHECK(rqspin_storage_update(NULL, &o, buf, 0) == -EINVAL);
	CHECK(rqspin_storage_update(maps[0].map, &o, NULL, 0) == -EINVAL);
	CHECK(rqspin_storage_update(maps[0].map, &o, buf, 3) == -EINVAL);
	CHECK(rqspin_storage_lookup_copy(maps[0].map, NULL, buf) == -EINVAL);
	CHECK(rqspin_storage_delete(NULL, &o) == -EINVAL);
	CHECK(rqspin_storage_delete(maps[0].map, &o) == -ENOENT);
	CHECK(rqspin_storage_map_iter(NULL, iter_stop_cb, buf) == -EINVAL);
	CHECK(rqspin_storage_value_lock(NULL) == NULL);
	rqspin_storage_owner_destroy(NULL);
	rqspin_storage_owner_destroy(&o); /* no storage: ends the owner all the same */
	rqspin_storage_map_destroy(NULL);
	{
		int err = 0;

		CHECK(rqspin_storage_get(maps[0].map, &o, NULL, RQSPIN_STORAGE_F_CREATE, &err) ==
		      NULL && err == -EIDRM);
		CHECK(rqspin_storage_update(maps[0].map, &o, buf, RQSPIN_STORAGE_EXIST) == -ENOENT);
		CHECK(rqspin_storage_update(maps[0].map, &o, buf, RQSPIN_STORAGE_ANY) == -EIDRM);
		CHECK(rqspin_storage_lookup_copy(maps[0].map, &o, buf) == -ENOENT);
		CHECK(rqspin_storage_delete(maps[0].map, &o) == -ENOENT);
		rqspin_storage_owner_destroy(&o); /* twice: nothing more */
	}
	o = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT; /* reuse */
	CHECK(rqspin_storage_delete(maps[0].map, &o) == -ENOENT);
}

static void step(void)
{
	int mi = (int)tu_rng_below(&rng, NMAPS), o = (int)tu_rng_below(&rng, NOWNERS);
	struct map_slot *s = &maps[mi];
	unsigned char in[4096], out[4096];
	unsigned op = tu_rng_below(&rng, 1000);
	int err = 1, ret;
	void *p;

	CHECK(s->size <= sizeof(in));
	fill_random(in, s->size);
	if (op < 250) { /* get */
		counts[0]++;
		p = rqspin_storage_get(s->map, &owners[o], NULL, 0, &err);
		if (s->val[o]) {
			CHECK(err == 0);
			check_present(s, o, p);
		} else {
			CHECK(p == NULL && err == -ENOENT);
		}
		/* The inline fast path, the exported function and the
		 * library's full lookup agree. */
		{
			int err2 = 1, err3 = 1;

			CHECK(get_exported(s->map, &owners[o], NULL, 0, &err2) == p && err2 == err);
			CHECK(rqspin__storage_get_slow(s->map, &owners[o], NULL, 0, &err3) == p &&
			      err3 == err);
		}
	} else if (op < 450) { /* get-create, zeroed or from init */
		const void *init = tu_rng_below(&rng, 2) ? in : NULL;

		counts[1]++;
		p = rqspin_storage_get(s->map, &owners[o], init, RQSPIN_STORAGE_F_CREATE, &err);
		CHECK(p != NULL && err == 0);
		if (s->val[o]) {
			check_present(s, o, p);
		} else {
			model_set(s, o, init, p);
			check_present(s, o, p);
		}
	} else if (op < 600) { /* update */
		unsigned fl = tu_rng_below(&rng, 3);

		counts[2]++;
		ret = rqspin_storage_update(s->map, &owners[o], in, fl);
		if (fl == RQSPIN_STORAGE_NOEXIST && s->val[o]) {
			CHECK(ret == -EEXIST);
		} else if (fl == RQSPIN_STORAGE_EXIST && !s->val[o]) {
			CHECK(ret == -ENOENT);
		} else {
			CHECK(ret == 0);
			if (!s->val[o]) {
				p = rqspin_storage_get(s->map, &owners[o], NULL, 0, &err);
				CHECK(p != NULL);
				model_set(s, o, in, p);
			} else {
				model_set(s, o, in, NULL);
			}
		}
	} else if (op < 700) { /* lookup_copy */
		counts[3]++;
		ret = rqspin_storage_lookup_copy(s->map, &owners[o], out);
		if (s->val[o]) {
			CHECK(ret == 0);
			CHECK(memcmp(out, s->val[o], s->size) == 0);
		} else {
			CHECK(ret == -ENOENT);
		}
	} else if (op < 780) { /* write in place under the value's lock */
		counts[4]++;
		p = rqspin_storage_get(s->map, &owners[o], NULL, 0, &err);
		if (p) {
			rqspinlock_t *lk = rqspin_storage_value_lock(p);

			CHECK(rqspin_lock(lk) == 0);
			memcpy(p, in, s->size);
			rqspin_unlock(lk);
			model_set(s, o, in, NULL);
		}
	} else if (op < 960) { /* delete */
		counts[5]++;
		ret = rqspin_storage_delete(s->map, &owners[o]);
		if (s->val[o]) {
			CHECK(ret == 0);
			model_clear(s, o);
		} else {
			CHECK(ret == -ENOENT);
		}
	} else if (op < 985) { /* the owner goes away (and is reused) */
		counts[6]++;
		int err = 0;

		rqspin_storage_owner_destroy(&owners[o]);
		/* Ended: nothing can be created on it until it is zeroed. */
		CHECK(!rqspin_storage_get(maps[o % NMAPS].map, &owners[o], NULL,
					  RQSPIN_STORAGE_F_CREATE, &err) && err == -EIDRM);
		owners[o] = (struct rqspin_storage_owner)RQSPIN_STORAGE_OWNER_INIT;
		for (int m = 0; m < NMAPS; m++)
			if (maps[m].val[o])
				model_clear(&maps[m], o);
	} else if (op < 998) { /* iterate */
		counts[7]++;
		check_iter(s);
	} else { /* the map goes away; a new one takes its place */
		counts[8]++;
		map_close(mi);
		map_open(mi);
	}
}

int main(void)
{
	uint64_t base;
	int steps = (int)TU_ITERS(300000u);

	tu_watchdog(300);
	tu_rng_seed(&rng, 6);
	base = live_bytes();
	for (int i = 0; i < NMAPS; i++)
		map_open(i);
	check_errors();
	for (int i = 0; i < steps; i++) {
		step();
		/* Full cross-check now and then. */
		if (i % 20000 == 0) {
			for (int m = 0; m < NMAPS; m++) {
				check_iter(&maps[m]);
				for (int o = 0; o < NOWNERS; o++) {
					void *p = rqspin_storage_get(maps[m].map, &owners[o], NULL, 0,
								     NULL);

					if (maps[m].val[o])
						check_present(&maps[m], o, p);
					else
						CHECK(p == NULL);
				}
			}
		}
	}
	/* Many maps on one owner: past every table size, then back down. */
	for (int round = 0; round < 3; round++) {
		for (int m = 0; m < NMAPS; m++)
			CHECK(rqspin_storage_get(maps[m].map, &owners[0], NULL,
						 RQSPIN_STORAGE_F_CREATE, NULL) != NULL);
		for (int m = 0; m < NMAPS; m++) {
			void *p = rqspin_storage_get(maps[m].map, &owners[0], NULL, 0, NULL);

			CHECK(p != NULL);
			if (!maps[m].val[0])
				model_set(&maps[m], 0, p, p);
			check_present(&maps[m], 0, p);
		}
		for (int m = 0; m < NMAPS; m += 1 + round) {
			CHECK(rqspin_storage_delete(maps[m].map, &owners[0]) == 0);
			model_clear(&maps[m], 0);
		}
	}
	/* Half the owners go first, then the maps, then the rest. */
	for (int o = 0; o < NOWNERS / 2; o++)
		rqspin_storage_owner_destroy(&owners[o]);
	for (int m = 0; m < NMAPS; m++)
		map_close(m);
	for (int o = NOWNERS / 2; o < NOWNERS; o++)
		rqspin_storage_owner_destroy(&owners[o]);
	rqspin_storage_barrier();
	CHECK_EQ_U64(live_bytes(), base);
	printf("storage_model: %d steps (get %lu, create %lu, update %lu, copy %lu, write %lu, "
	       "delete %lu, owner destroy %lu, iterate %lu, map destroy %lu); no leak\n",
	       steps, counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6],
	       counts[7], counts[8]);
	return 0;
}
