/* SPDX-License-Identifier: MIT */
/*
 * Per-thread heaps: the heap table, attaching a heap to a thread, thread
 * exit (abandon), adoption and reaping of abandoned heaps, fork.
 *
 * Heaps live in chunks that are mapped once and never unmapped, so a page
 * descriptor's owner pointer is always valid memory. A heap's state word
 * hands it from thread to thread: OWNED by exactly one thread (its owner, a
 * thread borrowing it for one call, or a reaper), or ABANDONED (nobody);
 * the owner gives it up with a release store and the next one takes it
 * with an acquire CAS, so each sees everything the previous one did.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"

#define HEAPS_PER_CHUNK 64u
#define MAX_HEAP_CHUNKS 1024u /* 65536 heaps */
#define MAX_HEAPS (HEAPS_PER_CHUNK * MAX_HEAP_CHUNKS)

/* initial-exec: a general-dynamic TLS access in a shared object can call
 * malloc on its first use, which a signal handler must not do. */
__thread struct heap *rqs_alloc_tls_heap __attribute__((tls_model("initial-exec")));

static _Atomic(void *) chunks[MAX_HEAP_CHUNKS];
static _Atomic uint32_t heap_bump; /* heap slots handed out (may pass MAX_HEAPS) */
/* The heaps: mapped a chunk at a time, never unmapped (common/table.h). */
static const struct rqs_table heaps = {
	.chunks = chunks,
	.bump = &heap_bump,
	.entry_size = sizeof(struct heap),
	.per_chunk = HEAPS_PER_CHUNK,
	.limit = MAX_HEAPS,
};
static pthread_key_t exit_key;
/* Set once at load time: threads are told to run heap_thread_exit. */
static bool exit_key_ok;
/* Heaps probed for a dead holder before a claim takes a new slot. */
#define DEAD_PROBES_PER_CLAIM 4u

/*
 * glibc stores the values of the first 32 keys in the thread descriptor;
 * a higher key's first pthread_setspecific in a thread may calloc a block
 * for it, which a signal handler (rqs_heap_attach can run in one) must not do.
 * Other C libraries store every key in place. Without a usable key the
 * allocator does without exit notices: a heap whose owner thread has died
 * (its thread id is gone) is taken over by the next thread that needs a
 * heap, or by a reaper (heap_take_dead). With the key, a few heaps are
 * still probed so (heap_probe_dead): a key set in glibc's last destructor
 * round is never run.
 */
#ifdef __GLIBC__
#define KEY_INPLACE_MAX 32u
#else
#define KEY_INPLACE_MAX UINT32_MAX
#endif

/* The calling thread's id, asked of the kernel once per thread: a thread
 * that frees into heaps of exited threads claims them often (rqs_heap_reap_one),
 * and a system call per claim was a large part of that. Reset in a forked
 * child, whose thread has a new id. */
static __thread int32_t tls_tid __attribute__((tls_model("initial-exec")));

static int32_t my_tid(void)
{
	int e;
	int32_t t = tls_tid;

	if (RQS_LIKELY(t != 0))
		return t;
	e = errno;
	t = (int32_t)syscall(SYS_gettid);
	errno = e;
	/* A handler that interrupted us here stores the same value. */
	tls_tid = t;
	return t;
}

/* Has thread tid of this process exited? */
static bool thread_gone(int32_t tid)
{
	int e = errno;
	bool gone = syscall(SYS_tgkill, (pid_t)getpid(), (pid_t)tid, 0) != 0 && errno == ESRCH;

	errno = e;
	return gone;
}

uint32_t rqs_heap_count(void)
{
	return rqs_table_count(&heaps);
}

struct heap *rqs_heap_at(uint32_t i)
{
	return rqs_table_at(&heaps, i);
}

static void heap_init(struct heap *h, uint32_t idx)
{
	unsigned c;

	for (c = 0; c < NCLASSES; c++)
		h->cls[c].page = &rqs_alloc_empty_page;
	h->idx = idx;
}

static bool heap_any_busy(const struct heap *h);

/*
 * Take h if its holder has died without an exit notice: always so without
 * exit keys; with them, a thread whose first allocator call came after
 * its last key destructor round (POSIX lets a destructor set a key again;
 * glibc runs 4 rounds, and a key set in the last one is never run), or a
 * handler's first call after the destructors ran. The CAS on the
 * holder's id makes the taker exclusive: owner_tid is that thread's id
 * only while it holds the heap (it is set after the claim and cleared
 * before the release), and a dead thread changes nothing. A heap left
 * in the middle of an operation is lost, as in heap_abandon.
 */
static bool heap_take_dead(struct heap *h)
{
	int32_t tid;

	if (atomic_load_explicit(&h->state, memory_order_relaxed) != HEAP_OWNED)
		return false;
	tid = atomic_load_explicit(&h->owner_tid, memory_order_relaxed);
	if (tid <= 0 || !thread_gone(tid))
		return false;
	/* relaxed: no atomic of the dead thread can order its last writes
	 * to the heap before ours; what does is the kernel: the thread's
	 * exit completed before tgkill reported ESRCH, and both are system
	 * calls, which are full barriers on the CPUs we run on. The CAS
	 * only makes us the single taker. */
	if (!atomic_compare_exchange_strong_explicit(&h->owner_tid, &tid, my_tid(),
						     memory_order_relaxed, memory_order_relaxed))
		return false;
	if (heap_any_busy(h)) {
		atomic_store_explicit(&h->state, RQS_TABLE_RETIRED, memory_order_relaxed);
		return false;
	}
	return true;
}

/* Claim an abandoned heap (or one whose holder died); false if somebody
 * else holds it. */
static bool heap_try_hold(struct heap *h)
{
	uint32_t expect = HEAP_ABANDONED;

	/* acquire: pairs with the release store of the last holder. */
	if (atomic_load_explicit(&h->state, memory_order_relaxed) == HEAP_ABANDONED &&
	    atomic_compare_exchange_strong_explicit(&h->state, &expect, HEAP_OWNED,
						    memory_order_acquire, memory_order_relaxed)) {
		atomic_store_explicit(&h->owner_tid, my_tid(), memory_order_relaxed);
		return true;
	}
	/* With exit notices, a dead holder is the exception: probing every
	 * heap (a system call each) at every claim would cost a thread start
	 * one call per live thread. heap_probe_dead probes a few. */
	return !exit_key_ok && heap_take_dead(h);
}

/* Heaps that may have a dead holder despite exit notices are probed a few
 * at a time, round robin over all heaps (relaxed: the cursor only spreads
 * the probes). */
static _Atomic uint32_t dead_cursor;

static struct heap *heap_probe_dead(uint32_t *probes)
{
	uint32_t n = rqs_heap_count();

	if (!exit_key_ok)
		return NULL; /* heap_try_hold already probes every heap */
	if (*probes > n)
		*probes = n;
	while (*probes > 0) {
		uint32_t i = atomic_fetch_add_explicit(&dead_cursor, 1, memory_order_relaxed) % n;
		struct heap *h = rqs_heap_at(i);

		--*probes;
		if (h && heap_take_dead(h))
			return h;
	}
	return NULL;
}

struct heap *rqs_heap_claim(bool *adopted)
{
	uint32_t n = rqs_heap_count();
	uint32_t i;
	struct heap *h;
	size_t mapped;

	*adopted = false;
	/* An abandoned heap first: it comes with pages (and keeps the number
	 * of heaps at the peak number of threads). */
	for (i = 0; i < n; i++) {
		h = rqs_heap_at(i);
		if (h && heap_try_hold(h)) {
			*adopted = true;
			return h;
		}
	}
	/* Before a new slot, a few heaps whose holder may have died without
	 * an exit notice: their number then stays near the peak number of
	 * threads too. */
	h = heap_probe_dead(&(uint32_t){ DEAD_PROBES_PER_CLAIM });
	if (h) {
		*adopted = true;
		return h;
	}
	/* A fresh slot reads HEAP_FRESH, which nobody else claims. */
	h = rqs_table_bump(&heaps, &i, &mapped);
	if (mapped)
		count_shared(&rqs_alloc_gstats.meta_bytes, mapped);
	if (!h)
		return NULL;
	heap_init(h, i);
	atomic_store_explicit(&h->owner_tid, my_tid(), memory_order_relaxed);
	atomic_store_explicit(&h->state, HEAP_OWNED, memory_order_relaxed);
	return h;
}

void rqs_heap_release(struct heap *h)
{
	/* Before the release store: from then on, a dead holder's id must
	 * not be found here (heap_take_dead). */
	atomic_store_explicit(&h->owner_tid, 0, memory_order_relaxed);
	/* release: the next owner's acquire CAS sees all we did. */
	atomic_store_explicit(&h->state, HEAP_ABANDONED, memory_order_release);
}

struct heap *rqs_heap_attach(void)
{
	struct heap *cur = NULL;
	bool adopted;
	struct heap *h = rqs_heap_claim(&adopted);

	if (!h)
		return NULL;
	/* A CAS on our own TLS word: atomic against our signal handlers, one
	 * of which may have attached a heap while we were claiming. */
	if (!__atomic_compare_exchange_n(&rqs_alloc_tls_heap, &cur, h, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED)) {
		rqs_heap_release(h);
		return heap_is_real(cur) ? cur : NULL;
	}
	if (adopted)
		count_shared(&rqs_alloc_gstats.heaps_adopted, 1);
	/* Ask for a call at thread exit. The key is used only if setting it
	 * allocates nothing (KEY_INPLACE_MAX), so this is safe in a signal
	 * handler. */
	if (exit_key_ok)
		pthread_setspecific(exit_key, h);
	return h;
}

size_t rqs_heap_flush_cache(struct heap *h)
{
	size_t n = 0;

	if (busy_get(&h->hbusy))
		return 0;
	busy_set(&h->hbusy);
	while (h->ncache) {
		struct page *pg = h->cache[h->ncache - 1];

		__atomic_store_n(&h->ncache, h->ncache - 1, __ATOMIC_RELAXED);
		rqs_pool_put(pg);
		n++;
	}
	busy_clear(&h->hbusy);
	return n;
}

static bool heap_any_busy(const struct heap *h)
{
	unsigned c;

	for (c = 0; c < NCLASSES; c++)
		if (busy_get(&h->cls[c].busy))
			return true;
	return busy_get(&h->hbusy);
}

/* The owner is leaving. A heap left in the middle of an operation (the
 * thread exited from a signal handler that interrupted the allocator) is
 * not trusted: it is lost, never adopted. */
static void heap_abandon(struct heap *h)
{
	if (heap_any_busy(h)) {
		atomic_store_explicit(&h->state, RQS_TABLE_RETIRED, memory_order_relaxed);
		return;
	}
	rqs_heap_collect_all(h, true);
	rqs_heap_release(h);
}

static void heap_thread_exit(void *arg)
{
	struct heap *h = arg;

	if (rqs_alloc_tls_heap != h)
		return;
	/* From now on this thread's calls (other destructors, handlers)
	 * borrow heaps; nobody else can reach h until we release it. */
	__atomic_store_n(&rqs_alloc_tls_heap, TLS_EXITED, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	heap_abandon(h);
}

size_t rqs_heap_reap_one(struct heap *h)
{
	size_t bytes;

	/* A heap that somebody else holds (its new owner, a borrower,
	 * another reaper) is left to them. */
	if (!heap_try_hold(h))
		return 0;
	bytes = rqs_heap_collect_all(h, true);
	rqs_heap_release(h);
	return bytes;
}

size_t rqs_heap_reap_dead(uint32_t probes)
{
	size_t bytes = 0;
	struct heap *h;

	/* A heap we took is ours alone: collect it, then abandon it. */
	while ((h = heap_probe_dead(&probes)) != NULL) {
		bytes += rqs_heap_collect_all(h, true);
		rqs_heap_release(h);
	}
	return bytes;
}

size_t rqs_heap_reap_abandoned(unsigned max_heaps)
{
	uint32_t n = rqs_heap_count();
	size_t bytes = 0;
	uint32_t i;

	for (i = 0; i < n && max_heaps > 0; i++) {
		struct heap *h = rqs_heap_at(i);

		/* Only heaps that others freed into since they were abandoned
		 * (or whose holder died, without exit notices) have anything
		 * to give back. */
		if (!h ||
		    (atomic_load_explicit(&h->state, memory_order_relaxed) != HEAP_ABANDONED &&
		     exit_key_ok) ||
		    (!atomic_load_explicit(&h->notify, memory_order_relaxed) &&
		     !atomic_load_explicit(&h->deferred, memory_order_relaxed)))
			continue;
		bytes += rqs_heap_reap_one(h);
		max_heaps--;
	}
	return bytes;
}

/* In a child of fork() only the forking thread exists. Heaps of the others
 * are adopted like those of exited threads -- unless one was in the middle
 * of an operation, then it is lost (its memory stays mapped, unused). */
static void atfork_child(void)
{
	struct heap *me = rqs_alloc_tls_heap;
	uint32_t n = rqs_heap_count();
	uint32_t i;

	tls_tid = 0;
	for (i = 0; i < n; i++) {
		struct heap *h = rqs_heap_at(i);

		if (!h || atomic_load_explicit(&h->state, memory_order_relaxed) != HEAP_OWNED)
			continue;
		if (h == me) {
			/* this thread has a new id in the child */
			atomic_store_explicit(&h->owner_tid, my_tid(), memory_order_relaxed);
			continue;
		}
		atomic_store_explicit(&h->owner_tid, 0, memory_order_relaxed);
		atomic_store_explicit(&h->state, heap_any_busy(h) ? RQS_TABLE_RETIRED : HEAP_ABANDONED,
				      memory_order_relaxed);
	}
}

__attribute__((constructor)) static void alloc_init(void)
{
	exit_key_ok = pthread_key_create(&exit_key, heap_thread_exit) == 0;
	if (exit_key_ok && (uint64_t)exit_key >= KEY_INPLACE_MAX) {
		pthread_key_delete(exit_key);
		exit_key_ok = false;
	}

	pthread_atfork(NULL, NULL, atfork_child);
	rqs_segmap_init();
	rqs_alloc_init_fast();
}
