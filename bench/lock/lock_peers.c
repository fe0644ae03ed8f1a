/* SPDX-License-Identifier: MIT */
#include "lock_peers.h"

#include <stdlib.h>
#include <string.h>

#include "lock_impl.h"
#include "lock_worker.h"

static void *alloc_aligned(size_t size)
{
	void *p;

	size = (size + BL_CACHELINE - 1) / BL_CACHELINE * BL_CACHELINE;
	p = aligned_alloc(BL_CACHELINE, size);
	if (p)
		memset(p, 0, size);
	return p;
}

static void *no_ctx(void *obj, unsigned idx)
{
	(void)obj;
	(void)idx;
	return NULL;
}

static void free_obj(void *obj)
{
	free(obj);
}

/* The generic entry points and the measured loop of one lock. */
#define PEER_OPS(name)                                                             \
	static int name##_lock_fn(void *o, void *c) { return bl_##name##_lock(o, c); } \
	static void name##_unlock_fn(void *o, void *c) { bl_##name##_unlock(o, c); }   \
	static void *name##_worker(void *arg)                                       \
	{                                                                           \
		lw_loop(arg, bl_##name##_lock, bl_##name##_unlock);                    \
		return NULL;                                                        \
	}
#define PEER_TRYLOCK(name)                                                   \
	static bool name##_trylock_fn(void *o, void *c) { return bl_##name##_trylock(o, c); }

/* ---- librqspin ---- */
static void *qspin_create(unsigned n)
{
	struct bl_qspin *l = alloc_aligned(sizeof(*l));

	(void)n;
	if (l)
		qspin_lock_init(&l->l);
	return l;
}
PEER_OPS(qspin)
PEER_TRYLOCK(qspin)

static void *rqspin_create(unsigned n)
{
	struct bl_rqspin *l = alloc_aligned(sizeof(*l));

	(void)n;
	if (l)
		rqspin_lock_init(&l->l);
	return l;
}
PEER_OPS(rqspin)
PEER_TRYLOCK(rqspin)

/* ---- pthread ---- */
static void *pthread_spin_create(unsigned n)
{
	struct bl_pthread_spin *l = alloc_aligned(sizeof(*l));

	(void)n;
	if (l && pthread_spin_init(&l->l, PTHREAD_PROCESS_PRIVATE) != 0) {
		free(l);
		return NULL;
	}
	return l;
}
static void pthread_spin_destroy_obj(void *o)
{
	pthread_spin_destroy(&((struct bl_pthread_spin *)o)->l);
	free(o);
}
PEER_OPS(pthread_spin)
PEER_TRYLOCK(pthread_spin)

static void *pthread_mutex_create(unsigned n)
{
	struct bl_pthread_mutex *l = alloc_aligned(sizeof(*l));

	(void)n;
	if (l && pthread_mutex_init(&l->l, NULL) != 0) {
		free(l);
		return NULL;
	}
	return l;
}
static void pthread_mutex_destroy_obj(void *o)
{
	pthread_mutex_destroy(&((struct bl_pthread_mutex *)o)->l);
	free(o);
}
PEER_OPS(pthread_mutex)
PEER_TRYLOCK(pthread_mutex)

/* ---- own simple locks ---- */
static void *ttas_create(unsigned n)
{
	(void)n;
	return alloc_aligned(sizeof(struct bl_ttas));
}
PEER_OPS(ttas)
PEER_TRYLOCK(ttas)

static void *cas_floor_create(unsigned n)
{
	(void)n;
	return alloc_aligned(sizeof(struct bl_cas_floor));
}
PEER_OPS(cas_floor)
PEER_TRYLOCK(cas_floor)

static void *none_create(unsigned n)
{
	(void)n;
	return alloc_aligned(sizeof(struct bl_none));
}
PEER_OPS(none)
PEER_TRYLOCK(none)

#ifdef RQSPIN_BENCH_HAVE_CK
/* ---- Concurrency Kit ---- */
struct ck_mcs_obj {
	struct bl_ck_mcs lock;
	struct bl_ck_mcs_ctx node[]; /* one per thread */
};
static void *ck_mcs_create(unsigned n)
{
	struct ck_mcs_obj *o = alloc_aligned(sizeof(*o) + (size_t)n * sizeof(o->node[0]));

	if (o)
		ck_spinlock_mcs_init(&o->lock.tail);
	return o;
}
static void *ck_mcs_ctx(void *obj, unsigned idx)
{
	return &((struct ck_mcs_obj *)obj)->node[idx];
}
PEER_OPS(ck_mcs)
PEER_TRYLOCK(ck_mcs)

static void *ck_ticket_create(unsigned n)
{
	struct bl_ck_ticket *l = alloc_aligned(sizeof(*l));

	(void)n;
	if (l)
		ck_spinlock_ticket_init(&l->l);
	return l;
}
PEER_OPS(ck_ticket)
#if BL_CK_TICKET_HAS_TRYLOCK
PEER_TRYLOCK(ck_ticket)
#else
#define ck_ticket_trylock_fn NULL
#endif

static void *ck_clh_create(unsigned n)
{
	struct bl_ck_clh *l = alloc_aligned(sizeof(*l));

	if (!l)
		return NULL;
	l->nthreads = n;
	l->ctx = alloc_aligned((size_t)(n ? n : 1) * sizeof(*l->ctx));
	l->nodes = alloc_aligned((size_t)(n + 1) * sizeof(*l->nodes));
	if (!l->ctx || !l->nodes) {
		free(l->ctx);
		free(l->nodes);
		free(l);
		return NULL;
	}
	ck_spinlock_clh_init(&l->tail, &l->nodes[n].n);
	for (unsigned i = 0; i < n; i++)
		l->ctx[i].mine = &l->nodes[i].n;
	return l;
}
static void ck_clh_destroy(void *o)
{
	struct bl_ck_clh *l = o;

	free(l->ctx);
	free(l->nodes);
	free(l);
}
static void *ck_clh_ctx(void *obj, unsigned idx)
{
	return &((struct bl_ck_clh *)obj)->ctx[idx];
}
PEER_OPS(ck_clh)
#endif /* RQSPIN_BENCH_HAVE_CK */

#define PEER(nm, dsc, fl, dtor, ctxf, tryf)                                              \
	static const struct lock_peer peer_##nm = {                                      \
		.name = #nm, .desc = dsc, .flags = fl, .create = nm##_create,            \
		.destroy = dtor, .ctx = ctxf, .lock = nm##_lock_fn, .unlock = nm##_unlock_fn, \
		.trylock = tryf, .worker = nm##_worker,                                   \
	};

PEER(qspin, "librqspin qspinlock (queued spinlock)", LP_LIBRQSPIN, free_obj, no_ctx,
     qspin_trylock_fn)
PEER(rqspin, "librqspin rqspinlock (resilient: timeouts, deadlock checks)",
     LP_LIBRQSPIN | LP_CAN_FAIL, free_obj, no_ctx, rqspin_trylock_fn)
PEER(pthread_spin, "glibc pthread_spin_lock (TTAS)", 0, pthread_spin_destroy_obj, no_ctx,
     pthread_spin_trylock_fn)
PEER(pthread_mutex, "glibc pthread_mutex_lock (futex, default type)", 0,
     pthread_mutex_destroy_obj, no_ctx, pthread_mutex_trylock_fn)
#ifdef RQSPIN_BENCH_HAVE_CK
PEER(ck_mcs, "Concurrency Kit MCS queue lock", LP_FIFO, free_obj, ck_mcs_ctx, ck_mcs_trylock_fn)
PEER(ck_ticket, "Concurrency Kit ticket lock", LP_FIFO, free_obj, no_ctx, ck_ticket_trylock_fn)
PEER(ck_clh, "Concurrency Kit CLH queue lock", LP_FIFO, ck_clh_destroy, ck_clh_ctx, NULL)
#endif
PEER(ttas, "test-and-test-and-set, exponential backoff (bench/lock_impl.h)", 0, free_obj,
     no_ctx, ttas_trylock_fn)
PEER(cas_floor, "bare acquire CAS + release store, retry only: 1-thread cost floor", 0,
     free_obj, no_ctx, cas_floor_trylock_fn)
PEER(none, "no lock at all: a harness self-test that must fail (not in 'all')",
     LP_NOT_DEFAULT, free_obj, no_ctx, none_trylock_fn)

const struct lock_peer *const lock_peers[] = {
	&peer_qspin,     &peer_rqspin,   &peer_pthread_spin, &peer_pthread_mutex,
#ifdef RQSPIN_BENCH_HAVE_CK
	&peer_ck_mcs,    &peer_ck_ticket, &peer_ck_clh,
#endif
	&peer_ttas,      &peer_cas_floor, &peer_none,
};
const size_t lock_peers_count = sizeof(lock_peers) / sizeof(lock_peers[0]);

const struct lock_peer *lock_peer_find(const char *name)
{
	for (size_t i = 0; i < lock_peers_count; i++)
		if (strcmp(lock_peers[i]->name, name) == 0)
			return lock_peers[i];
	return NULL;
}
