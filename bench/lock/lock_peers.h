/* SPDX-License-Identifier: MIT */
/*
 * The table of locks the harness compares, behind one vtable. A lock object
 * is created for a known number of threads (queue locks keep per-thread
 * nodes in it); each thread passes its own context to every operation.
 */
#ifndef BENCH_LOCK_PEERS_H
#define BENCH_LOCK_PEERS_H

#include <stdbool.h>
#include <stddef.h>

enum lock_peer_flags {
	LP_FIFO = 1u << 0,      /* hands the lock over in arrival order */
	LP_CAN_FAIL = 1u << 1,  /* lock() may return an error (rqspin) */
	LP_LIBRQSPIN = 1u << 2, /* implemented by librqspin */
	LP_NOT_DEFAULT = 1u << 3, /* not in --locks all: only when named */
};

struct lock_peer {
	const char *name;
	const char *desc;
	unsigned flags;
	/* A new unlocked lock for up to nthreads users; NULL when out of
	 * memory. Free it with destroy(), only once nobody uses it. */
	void *(*create)(unsigned nthreads);
	void (*destroy)(void *obj);
	/* Context of user number idx (< nthreads) of obj. */
	void *(*ctx)(void *obj, unsigned idx);
	int (*lock)(void *obj, void *ctx); /* 0 or a negative errno */
	void (*unlock)(void *obj, void *ctx);
	bool (*trylock)(void *obj, void *ctx); /* NULL: the lock has none */
	/* Thread entry of the measured loop (arg: struct lw_thread *), the
	 * lock's operations inlined into it. See lock_worker.h. */
	void *(*worker)(void *arg);
};

/* All locks, in display order, and their number. */
extern const struct lock_peer *const lock_peers[];
extern const size_t lock_peers_count;

/* The lock called name, or NULL. */
const struct lock_peer *lock_peer_find(const char *name);

/* --locks: "all" (the default set) or a comma-separated list of lock names,
 * duplicates dropped. Frees *locks first; *locks is malloc'ed. false after
 * saying what is wrong. */
bool lock_peers_parse(const char *s, const struct lock_peer ***locks, size_t *nlocks);

/* The same as a CLI_CUSTOM option parser; dest: a struct lock_selection. */
struct lock_selection {
	const struct lock_peer ***locks;
	size_t *n;
};
bool lock_peers_parse_opt(const char *value, void *dest);

struct json;
/* The names of locks[0..n) as a JSON array. */
void lock_peers_json(struct json *j, const char *key, const struct lock_peer *const *locks,
		     size_t n);

#endif
