/* SPDX-License-Identifier: MIT */
/*
 * kv_server: a small multi-threaded TCP key-value server on 127.0.0.1.
 *
 *   kv_server [--max-conns N] [--max-runtime SEC] [--demo-interrupt N] PORT
 *
 * PORT 0 picks a free port; the server prints "kv_server: listening on
 * 127.0.0.1:<port>". Drive it with kv_client (same directory), or by hand:
 *
 *   $ printf 'SET a 1\nGET a\nSTATS\nQUIT\n' | nc 127.0.0.1 <port>
 *
 * Protocol: one command per line, one reply line per command.
 *   GET key          -> VALUE <value> | NOT_FOUND
 *   SET key value    -> OK
 *   DEL key          -> DELETED | NOT_FOUND
 *   STATS            -> STATS conn=<id> gets=.. hits=.. sets=.. dels=.. stats=..
 *                       errors=.. conns=<live> ops=<server total> keys=<server total>
 *   QUIT             -> BYE (closes the connection)
 *   SHUTDOWN         -> BYE (and the server exits)
 *   anything wrong   -> ERR <reason>; "ERR busy ..." means "try again"
 * Keys and values are single words (no spaces), at most 64 and 256 bytes.
 *
 * What it shows:
 *  - The shared table's buckets are guarded by rqspinlocks. Every
 *    acquisition is checked: a lock that cannot be taken (-EDEADLK,
 *    -ETIMEDOUT) becomes an "ERR busy" reply, never a hang or a crash.
 *  - Each connection object embeds a struct rqspin_storage_owner and keeps
 *    its state and its counters in object-local storage (two maps): no
 *    per-connection fields to add to a shared struct, no global registry
 *    of connections to lock, and a signal handler can walk them all.
 *  - kill -USR1 <pid> prints live statistics from a signal handler that
 *    takes the same bucket locks and storage value locks as the workers.
 *    When the signal interrupted a thread that holds (or waits for) one of
 *    them, rqspin returns -EDEADLK at once instead of self-deadlocking; the
 *    handler skips that bucket and counts it. --demo-interrupt N makes a
 *    worker raise SIGUSR1 itself while holding a bucket lock every N
 *    commands, so that path is seen without luck.
 *  - Table entries come from rqspin_malloc_nolock, so the handler can also
 *    print rqspin_alloc_stats_get figures.
 *  - Bounded threads: the main thread accepts; one worker per connection,
 *    at most --max-conns (default 32); shutdown on SHUTDOWN, SIGTERM or
 *    SIGINT closes every connection and joins every worker.
 */
/* Before any header: pipe2() is a GNU extension, which a strict -std=c11
 * build hides. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/rqspin.h>

#define KV_BUCKETS 256
#define KV_MAX_KEY 64
#define KV_MAX_VAL 256
#define KV_LINE_MAX 512        /* longest request line */
#define MAX_CONNS_LIMIT 1024   /* upper bound for --max-conns */
#define WORKER_STACK (256 * 1024)
/* How long the SIGUSR1 handler waits for one lock before skipping it. The
 * handler walks 256 buckets; short waits keep it bounded. */
#define HANDLER_LOCK_NS (2 * 1000 * 1000ull)

/* The counters below are updated from signal handlers too; lock-free
 * atomics are async-signal-safe. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free");

/* ------------------------------------------------------------------ */
/* The shared key-value table                                          */

struct kv_entry {
	struct kv_entry *next;
	uint16_t klen, vlen;
	char data[]; /* key '\0' value '\0' */
};

struct kv_bucket {
	_Alignas(64) rqspinlock_t lock; /* one cache line per bucket */
	uint32_t nkeys;
	struct kv_entry *head;
};

static struct kv_bucket table[KV_BUCKETS]; /* zeroed = unlocked, empty */

/* Per-connection values, one map each (see struct conn). */
enum { PHASE_IDLE, PHASE_EXEC };
struct conn_state {
	uint32_t id;
	uint16_t peer_port;
	uint8_t phase;        /* PHASE_IDLE: waiting for a request */
	char last_cmd[9];     /* last command word */
	uint64_t connected_ns;
};
struct conn_counters {
	uint64_t gets, hits, sets, dels, stats, errors;
};

static struct {
	_Atomic uint64_t ops;           /* commands executed, all connections */
	_Atomic int64_t keys;           /* entries in the table */
	_Atomic uint64_t conns_live, conns_total, conns_refused;
	_Atomic uint64_t busy_replies;  /* ERR busy sent (a lock failed) */
	_Atomic uint64_t storage_errors;/* storage calls that failed (counters lost) */
	_Atomic uint64_t usr1;          /* SIGUSR1 handled */
	_Atomic uint64_t usr1_edeadlk;  /* handler lock attempts that got -EDEADLK */
	_Atomic uint64_t usr1_timeout;  /* ... that got -ETIMEDOUT */
	_Atomic int stop;               /* 1 SHUTDOWN, 2 signal, 3 max-runtime */
	int wake_pipe[2];               /* wakes the accept loop */
	unsigned demo_every;            /* --demo-interrupt */
	struct rqspin_storage_map *state_map, *counters_map;
} g;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t hash_key(const char *k, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 16777619u;
	return h;
}

/*
 * Take a bucket lock. 0: held. Otherwise the lock is NOT held and the
 * negative error is returned (-EDEADLK: this thread already holds or waits
 * for it, e.g. we are a signal handler that interrupted the holder; or
 * -ETIMEDOUT). Async-signal-safe.
 */
static int bucket_lock(struct kv_bucket *b, uint64_t timeout_ns)
{
	int err = rqspin_lock_timeout(&b->lock, timeout_ns);

	if (err == -EOWNERDEAD) {
		/* A thread died holding it: the lock is ours but the list may
		 * be half-updated. Workers here never exit inside a critical
		 * section, so this is defensive. Drop (leak) the contents
		 * rather than trust them. */
		atomic_fetch_sub(&g.keys, (int64_t)b->nkeys);
		b->head = NULL;
		b->nkeys = 0;
		return 0;
	}
	return err;
}

/* A worker raises SIGUSR1 on itself while it holds a bucket lock (see
 * --demo-interrupt): the handler then finds that bucket held by the code
 * it interrupted, and gets -EDEADLK for it. */
static void demo_interrupt_point(void)
{
	static _Thread_local unsigned n;

	if (g.demo_every && ++n % g.demo_every == 0)
		pthread_kill(pthread_self(), SIGUSR1);
}

static struct kv_entry **find_slot(struct kv_bucket *b, const char *key, size_t klen)
{
	struct kv_entry **pp;

	for (pp = &b->head; *pp; pp = &(*pp)->next)
		if ((*pp)->klen == klen && !memcmp((*pp)->data, key, klen))
			return pp;
	return NULL;
}

/* GET: copies the value out under the lock (no I/O under a spinlock).
 * Returns 1 found, 0 not found, or a negative lock error. */
static int kv_get(const char *key, size_t klen, char *val, size_t valsz)
{
	struct kv_bucket *b = &table[hash_key(key, klen) % KV_BUCKETS];
	struct kv_entry **pp;
	int err = bucket_lock(b, RQSPIN_TIMEOUT_DEFAULT);

	if (err)
		return err;
	demo_interrupt_point();
	pp = find_slot(b, key, klen);
	if (pp) {
		size_t n = (*pp)->vlen < valsz - 1 ? (*pp)->vlen : valsz - 1;

		memcpy(val, (*pp)->data + (*pp)->klen + 1, n);
		val[n] = '\0';
	}
	rqspin_unlock(&b->lock);
	return pp != NULL;
}

/* SET: the new entry is allocated before the lock is taken and the old
 * one freed after it is released, to keep the critical section short.
 * Returns 0, -ENOMEM or a negative lock error. */
static int kv_set(const char *key, size_t klen, const char *val, size_t vlen)
{
	struct kv_bucket *b = &table[hash_key(key, klen) % KV_BUCKETS];
	struct kv_entry *e, *old = NULL, **pp;
	int err;

	e = rqspin_malloc_nolock(sizeof(*e) + klen + vlen + 2, 0);
	if (!e)
		return -ENOMEM;
	e->klen = (uint16_t)klen;
	e->vlen = (uint16_t)vlen;
	memcpy(e->data, key, klen);
	e->data[klen] = '\0';
	memcpy(e->data + klen + 1, val, vlen);
	e->data[klen + 1 + vlen] = '\0';

	err = bucket_lock(b, RQSPIN_TIMEOUT_DEFAULT);
	if (err) {
		rqspin_free_nolock(e);
		return err;
	}
	demo_interrupt_point();
	pp = find_slot(b, key, klen);
	if (pp) { /* replace in place */
		old = *pp;
		e->next = old->next;
		*pp = e;
	} else {
		e->next = b->head;
		b->head = e;
		b->nkeys++;
		atomic_fetch_add(&g.keys, 1);
	}
	rqspin_unlock(&b->lock);
	rqspin_free_nolock(old); /* NULL is a no-op */
	return 0;
}

/* DEL: returns 1 deleted, 0 not found, or a negative lock error. */
static int kv_del(const char *key, size_t klen)
{
	struct kv_bucket *b = &table[hash_key(key, klen) % KV_BUCKETS];
	struct kv_entry *old = NULL, **pp;
	int err = bucket_lock(b, RQSPIN_TIMEOUT_DEFAULT);

	if (err)
		return err;
	demo_interrupt_point();
	pp = find_slot(b, key, klen);
	if (pp) {
		old = *pp;
		*pp = old->next;
		b->nkeys--;
		atomic_fetch_sub(&g.keys, 1);
	}
	rqspin_unlock(&b->lock);
	rqspin_free_nolock(old);
	return old != NULL;
}

/* ------------------------------------------------------------------ */
/* SIGUSR1: live statistics from a signal handler                      */

/* No stdio in a handler: format into a buffer, then write(2). */
struct sbuf {
	char b[4096];
	size_t n;
};

static void sb_str(struct sbuf *s, const char *str)
{
	while (*str && s->n < sizeof(s->b))
		s->b[s->n++] = *str++;
}

static void sb_u64(struct sbuf *s, uint64_t v)
{
	char tmp[20];
	int i = 0;

	do
		tmp[i++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (i > 0 && s->n < sizeof(s->b))
		s->b[s->n++] = tmp[--i];
}

static void sb_kv(struct sbuf *s, const char *name, uint64_t v)
{
	sb_str(s, name);
	sb_u64(s, v);
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

struct usr1_walk {
	struct sbuf *out;
	uint64_t now, conns, conns_exec, shown;
	struct conn_counters sum;
	uint64_t busy;  /* values whose lock we could not take */
};

/* rqspin_storage_map_iter callbacks. Each takes the value's own lock
 * (the one the worker holds while it updates the value). */
static int usr1_counters_fn(struct rqspin_storage_owner *owner, void *value, void *arg)
{
	struct usr1_walk *w = arg;
	struct conn_counters c;
	int err = rqspin_lock_timeout(rqspin_storage_value_lock(value), HANDLER_LOCK_NS);

	(void)owner; /* not dereferenced: owners are freed concurrently */
	if (err && err != -EOWNERDEAD) { /* counters: nothing to repair */
		atomic_fetch_add(err == -EDEADLK ? &g.usr1_edeadlk : &g.usr1_timeout, 1);
		w->busy++;
		return 0; /* keep walking */
	}
	c = *(struct conn_counters *)value;
	rqspin_unlock(rqspin_storage_value_lock(value));
	w->sum.gets += c.gets;
	w->sum.hits += c.hits;
	w->sum.sets += c.sets;
	w->sum.dels += c.dels;
	w->sum.stats += c.stats;
	w->sum.errors += c.errors;
	return 0;
}

static int usr1_state_fn(struct rqspin_storage_owner *owner, void *value, void *arg)
{
	struct usr1_walk *w = arg;
	struct conn_state s;
	int err = rqspin_lock_timeout(rqspin_storage_value_lock(value), HANDLER_LOCK_NS);

	(void)owner;
	if (err && err != -EOWNERDEAD) {
		atomic_fetch_add(err == -EDEADLK ? &g.usr1_edeadlk : &g.usr1_timeout, 1);
		w->busy++;
		return 0;
	}
	s = *(struct conn_state *)value;
	rqspin_unlock(rqspin_storage_value_lock(value));
	w->conns++;
	w->conns_exec += s.phase == PHASE_EXEC;
	if (w->shown++ < 8) { /* bounded output */
		sb_kv(w->out, "  conn #", s.id);
		sb_kv(w->out, " 127.0.0.1:", s.peer_port);
		sb_kv(w->out, " up ", (w->now - s.connected_ns) / 1000000);
		sb_str(w->out, " ms, last ");
		sb_str(w->out, s.last_cmd[0] ? s.last_cmd : "-");
		sb_str(w->out, s.phase == PHASE_EXEC ? " (executing)\n" : " (idle)\n");
	}
	return 0;
}

static void on_sigusr1(int sig)
{
	int saved_errno = errno; /* write(2) and friends may change it */
	struct sbuf out; /* 4 KiB of the interrupted thread's stack */
	struct usr1_walk w;
	struct rqspin_lock_stats ls;
	struct rqspin_alloc_stats as;
	uint64_t nkeys = 0, aa = 0, tmo = 0;

	(void)sig;
	out.n = 0;
	memset(&w, 0, sizeof(w));
	w.out = &out;
	w.now = now_ns();
	sb_kv(&out, "[SIGUSR1 #", atomic_fetch_add(&g.usr1, 1) + 1);
	sb_str(&out, "]\n");

	/* 1. The shared table: the same bucket locks the workers take. If
	 * this thread was interrupted while holding or waiting for one,
	 * rqspin_lock says -EDEADLK at once: skip that bucket. */
	for (unsigned i = 0; i < KV_BUCKETS; i++) {
		int err = bucket_lock(&table[i], HANDLER_LOCK_NS);

		if (err == -EDEADLK) {
			aa++;
			continue;
		}
		if (err) { /* -ETIMEDOUT: a holder on another CPU is slow */
			tmo++;
			continue;
		}
		nkeys += table[i].nkeys;
		rqspin_unlock(&table[i].lock);
	}
	atomic_fetch_add(&g.usr1_edeadlk, aa);
	atomic_fetch_add(&g.usr1_timeout, tmo);

	/* 2. Object-local storage of every live connection: a lock-free RCU
	 * walk; values of connections closing meanwhile may or may not be
	 * seen. Our callbacks return 0, so only -EINVAL could come back. */
	if (rqspin_storage_map_iter(g.state_map, usr1_state_fn, &w) ||
	    rqspin_storage_map_iter(g.counters_map, usr1_counters_fn, &w))
		sb_str(&out, "  (storage walk failed)\n");
	if (w.shown > 8) {
		sb_kv(&out, "  ... and ", w.shown - 8);
		sb_str(&out, " more\n");
	}

	sb_kv(&out, "  conns: live ", w.conns);
	sb_kv(&out, " (executing ", w.conns_exec);
	sb_kv(&out, "), total ", atomic_load(&g.conns_total));
	sb_kv(&out, ", refused ", atomic_load(&g.conns_refused));
	sb_kv(&out, "\n  ops: ", atomic_load(&g.ops));
	sb_kv(&out, " total; live conns: gets ", w.sum.gets);
	sb_kv(&out, " hits ", w.sum.hits);
	sb_kv(&out, " sets ", w.sum.sets);
	sb_kv(&out, " dels ", w.sum.dels);
	sb_kv(&out, " stats ", w.sum.stats);
	sb_kv(&out, " errors ", w.sum.errors);
	sb_kv(&out, "\n  table: keys ", nkeys);
	sb_kv(&out, " in ", KV_BUCKETS - aa - tmo);
	sb_kv(&out, " buckets walked; skipped: EDEADLK ", aa);
	sb_kv(&out, " (interrupted holder), ETIMEDOUT ", tmo);
	sb_kv(&out, "; storage values skipped ", w.busy);

	/* 3. Library statistics (both calls only read). */
	rqspin_lock_stats_get(&ls);
	sb_kv(&out, "\n  locks: fast ", ls.fast);
	sb_kv(&out, " pending ", ls.pending);
	sb_kv(&out, " queued ", ls.queued);
	sb_kv(&out, " parked ", ls.parked);
	sb_kv(&out, " | EDEADLK aa ", ls.aa);
	sb_kv(&out, " abba ", ls.abba);
	sb_kv(&out, " cycle ", ls.cycle);
	sb_kv(&out, " | ETIMEDOUT ", ls.timeout);
	rqspin_alloc_stats_get(&as);
	sb_kv(&out, "\n  alloc: live ", as.small_objects + as.large_objects);
	sb_kv(&out, " objects / ", as.small_bytes + as.large_bytes);
	sb_kv(&out, " bytes, mapped ", as.mapped_bytes);
	sb_kv(&out, ", nested ", as.nested);
	sb_kv(&out, ", deferred frees ", as.deferred_frees);
	sb_kv(&out, "\n  handler totals: EDEADLK ", atomic_load(&g.usr1_edeadlk));
	sb_kv(&out, ", ETIMEDOUT ", atomic_load(&g.usr1_timeout));
	sb_str(&out, "\n");
	write_all(STDOUT_FILENO, out.b, out.n);
	errno = saved_errno;
}

/* SIGTERM / SIGINT: ask the accept loop to stop. */
static void on_stop_signal(int sig)
{
	int saved_errno = errno;
	ssize_t r;

	(void)sig;
	g.stop = 2;
	r = write(g.wake_pipe[1], "s", 1); /* full pipe: already woken */
	(void)r;
	errno = saved_errno;
}

/* ------------------------------------------------------------------ */
/* Connections                                                         */

struct conn {
	int fd;                 /* owned by the accept thread (closed after join) */
	uint32_t id;
	uint16_t peer_port;
	pthread_t thread;
	_Atomic int done;       /* the worker has finished */
	/* The connection's object-local storage: its conn_state and
	 * conn_counters values hang off this one pointer. */
	struct rqspin_storage_owner st;
};

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Record the phase and command word in the connection's state value
 * (rqspin_storage_update copies it under the value's lock). */
static void set_state(struct conn *c, struct conn_state *s, uint8_t phase, const char *cmd)
{
	int err;

	s->phase = phase;
	if (cmd) {
		size_t i;

		for (i = 0; i < sizeof(s->last_cmd) - 1 && cmd[i]; i++)
			s->last_cmd[i] = cmd[i];
		s->last_cmd[i] = '\0';
	}
	err = rqspin_storage_update(g.state_map, &c->st, s, RQSPIN_STORAGE_EXIST);
	if (err)
		atomic_fetch_add(&g.storage_errors, 1); /* only monitoring is lost */
}

/* Bump one of this connection's counters under the value's lock (the
 * SIGUSR1 handler reads them under the same lock). */
static void count(struct conn_counters *cnt, uint64_t *field)
{
	rqspinlock_t *l = rqspin_storage_value_lock(cnt);
	int err = rqspin_lock(l);

	if (err && err != -EOWNERDEAD) { /* counters: nothing to repair */
		atomic_fetch_add(&g.storage_errors, 1);
		return;
	}
	(*field)++;
	rqspin_unlock(l);
}

static const char *busy_reply(int err)
{
	switch (err) {
	case -EDEADLK:
		return "ERR busy (deadlock avoided)\n";
	case -ETIMEDOUT:
		return "ERR busy (lock timeout)\n";
	case -ENOMEM:
		return "ERR out of memory\n";
	default:
		return "ERR internal\n";
	}
}

/* Split "CMD a b" in place. Returns the number of words (at most 3;
 * 4 means too many). */
static int split(char *line, char *w[3])
{
	int n = 0;
	char *p = line;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			*p++ = '\0';
		if (!*p)
			return n;
		if (n == 3)
			return 4;
		w[n++] = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
}

/* Execute one request line. Returns 0 to keep going, 1 to close. */
static int handle_line(struct conn *c, struct conn_state *st, struct conn_counters *cnt,
		       char *line)
{
	char reply[KV_MAX_VAL + 256];
	char *w[3] = { NULL, NULL, NULL };
	int n = split(line, w), r = 0, close_after = 0;
	const char *msg = NULL; /* fixed replies */

	if (n == 0)
		return 0; /* empty line */
	set_state(c, st, PHASE_EXEC, w[0]);
	atomic_fetch_add(&g.ops, 1);
	reply[0] = '\0';

	if (!strcmp(w[0], "GET") && n == 2 && strlen(w[1]) <= KV_MAX_KEY) {
		char val[KV_MAX_VAL + 1];

		r = kv_get(w[1], strlen(w[1]), val, sizeof(val));
		if (r >= 0) {
			count(cnt, &cnt->gets);
			if (r) {
				count(cnt, &cnt->hits);
				snprintf(reply, sizeof(reply), "VALUE %s\n", val);
			} else {
				msg = "NOT_FOUND\n";
			}
		}
	} else if (!strcmp(w[0], "SET") && n == 3 && strlen(w[1]) <= KV_MAX_KEY &&
		   strlen(w[2]) <= KV_MAX_VAL) {
		r = kv_set(w[1], strlen(w[1]), w[2], strlen(w[2]));
		if (r >= 0) {
			count(cnt, &cnt->sets);
			msg = "OK\n";
		}
	} else if (!strcmp(w[0], "DEL") && n == 2 && strlen(w[1]) <= KV_MAX_KEY) {
		r = kv_del(w[1], strlen(w[1]));
		if (r >= 0) {
			count(cnt, &cnt->dels);
			msg = r ? "DELETED\n" : "NOT_FOUND\n";
		}
	} else if (!strcmp(w[0], "STATS") && n == 1) {
		struct conn_counters mine;

		/* A consistent copy of our own counters, under their lock. */
		r = rqspin_storage_lookup_copy(g.counters_map, &c->st, &mine);
		if (r == 0) {
			snprintf(reply, sizeof(reply),
				 "STATS conn=%u gets=%llu hits=%llu sets=%llu dels=%llu stats=%llu "
				 "errors=%llu conns=%llu ops=%llu keys=%lld\n",
				 c->id, (unsigned long long)mine.gets,
				 (unsigned long long)mine.hits, (unsigned long long)mine.sets,
				 (unsigned long long)mine.dels, (unsigned long long)mine.stats,
				 (unsigned long long)mine.errors,
				 (unsigned long long)atomic_load(&g.conns_live),
				 (unsigned long long)atomic_load(&g.ops),
				 (long long)atomic_load(&g.keys));
			count(cnt, &cnt->stats);
		}
	} else if (!strcmp(w[0], "QUIT") && n == 1) {
		msg = "BYE\n";
		close_after = 1;
	} else if (!strcmp(w[0], "SHUTDOWN") && n == 1) {
		msg = "BYE\n";
		close_after = 2; /* stop the server once the reply is out */
	} else {
		msg = "ERR bad request\n";
		r = -EINVAL;
	}

	if (r < 0) { /* a lock or the allocator said no: tell the client */
		if (r != -EINVAL) {
			msg = busy_reply(r);
			atomic_fetch_add(&g.busy_replies, 1);
		}
		count(cnt, &cnt->errors);
	}
	if (!msg)
		msg = reply;
	set_state(c, st, PHASE_IDLE, NULL);
	if (send_all(c->fd, msg, strlen(msg)))
		return 1;
	if (close_after == 2) {
		ssize_t wr;

		g.stop = 1;
		wr = write(g.wake_pipe[1], "s", 1); /* wake the accept loop */
		(void)wr;
	}
	return close_after != 0;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct conn_state st = { .id = c->id, .peer_port = c->peer_port,
				 .connected_ns = now_ns() };
	struct conn_counters *cnt;
	char buf[KV_LINE_MAX + 1];
	size_t have = 0;
	sigset_t usr1;
	int err;

	/* The accept thread blocks SIGUSR1 (see main); workers take it, so
	 * the handler lands in the middle of request processing. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);

	/* Create this connection's two storage values. The counters pointer
	 * stays valid without a read-side section: only this thread deletes
	 * this owner's values (rqspin_storage_owner_destroy at the end). */
	err = rqspin_storage_update(g.state_map, &c->st, &st, RQSPIN_STORAGE_NOEXIST);
	cnt = err ? NULL
		  : rqspin_storage_get(g.counters_map, &c->st, NULL, RQSPIN_STORAGE_F_CREATE,
				       &err);
	if (!cnt) {
		const char *m = busy_reply(err);

		(void)send_all(c->fd, m, strlen(m));
		goto out;
	}

	for (;;) {
		char *nl = memchr(buf, '\n', have);
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - buf) + 1;

			*nl = '\0';
			if (nl > buf && nl[-1] == '\r')
				nl[-1] = '\0';
			if (handle_line(c, &st, cnt, buf))
				break;
			memmove(buf, buf + len, have - len);
			have -= len;
			continue;
		}
		if (have == KV_LINE_MAX) {
			(void)send_all(c->fd, "ERR line too long\n", 18);
			break;
		}
		n = recv(c->fd, buf + have, KV_LINE_MAX - have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* peer closed, error, or shutdown() by the accept thread */
		have += (size_t)n;
	}
out:
	/* Frees both values (after a grace period); never fails or waits. */
	rqspin_storage_owner_destroy(&c->st);
	atomic_fetch_sub(&g.conns_live, 1);
	atomic_store(&c->done, 1);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Main: setup, accept loop, shutdown                                  */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--max-conns N] [--max-runtime SEC] [--demo-interrupt N] PORT\n"
		"  PORT 0 picks a free port (printed). Listens on 127.0.0.1 only.\n",
		argv0);
	exit(2);
}

static unsigned long parse_num(const char *s, unsigned long max, const char *argv0)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max)
		usage(argv0);
	return v;
}

/* Join finished workers and close their sockets. all: every worker. */
static unsigned reap(struct conn **slots, unsigned max, int all)
{
	unsigned live = 0;

	for (unsigned i = 0; i < max; i++) {
		struct conn *c = slots[i];

		if (!c)
			continue;
		if (all && !atomic_load(&c->done))
			shutdown(c->fd, SHUT_RDWR); /* wakes its recv() */
		if (all || atomic_load(&c->done)) {
			pthread_join(c->thread, NULL);
			close(c->fd);
			free(c);
			slots[i] = NULL;
		} else {
			live++;
		}
	}
	return live;
}

int main(int argc, char **argv)
{
	unsigned long max_conns = 32, max_runtime = 0, port;
	struct conn **slots;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	struct sigaction sa;
	sigset_t usr1, usr1_unblocked;
	pthread_attr_t attr;
	struct rqspin_alloc_stats as0, as1;
	uint64_t start = now_ns(), base_bytes;
	unsigned live = 0;
	uint32_t next_id = 1;
	int lfd, i, one = 1;
	const char *why;

	for (i = 1; i < argc - 1; i += 2) {
		if (!strcmp(argv[i], "--max-conns"))
			max_conns = parse_num(argv[i + 1], MAX_CONNS_LIMIT, argv[0]);
		else if (!strcmp(argv[i], "--max-runtime"))
			max_runtime = parse_num(argv[i + 1], 86400, argv[0]);
		else if (!strcmp(argv[i], "--demo-interrupt"))
			g.demo_every = (unsigned)parse_num(argv[i + 1], 1000000000, argv[0]);
		else
			usage(argv[0]);
	}
	if (i != argc - 1 || max_conns == 0)
		usage(argv[0]);
	port = parse_num(argv[i], 65535, argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0); /* the handler write(2)s between our lines */

	/* Block SIGUSR1 before any thread exists, including the threads the
	 * library starts (liburcu's call_rcu worker, created by the first
	 * map): they inherit the mask, and a handler must not run on them
	 * while the maps are torn down at exit. Workers unblock it. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &usr1_unblocked);
	sigdelset(&usr1_unblocked, SIGUSR1);

	rqspin_alloc_stats_get(&as0);
	base_bytes = as0.small_bytes + as0.large_bytes;

	g.state_map = rqspin_storage_map_create(sizeof(struct conn_state), 0);
	g.counters_map = rqspin_storage_map_create(sizeof(struct conn_counters), 0);
	slots = calloc(max_conns, sizeof(*slots));
	if (!g.state_map || !g.counters_map || !slots) {
		perror("kv_server: setup");
		return 1;
	}
	if (pipe2(g.wake_pipe, O_CLOEXEC | O_NONBLOCK)) {
		perror("kv_server: pipe2");
		return 1;
	}

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_sigusr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_stop_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* loopback only */
	addr.sin_port = htons((uint16_t)port);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 64) ||
	    getsockname(lfd, (struct sockaddr *)&addr, &alen)) {
		perror("kv_server: listen");
		return 1;
	}
	printf("kv_server: listening on 127.0.0.1:%u (pid %ld, max %lu conns)\n",
	       ntohs(addr.sin_port), (long)getpid(), max_conns);

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK);

	while (!g.stop) {
		struct pollfd pfd[2] = { { .fd = lfd, .events = POLLIN },
					 { .fd = g.wake_pipe[0], .events = POLLIN } };
		struct timespec tick = { 0, 100 * 1000 * 1000 };
		struct conn *c;
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);
		char drain[64];
		int fd, n;

		live = reap(slots, (unsigned)max_conns, 0);
		if (max_runtime && now_ns() - start > max_runtime * 1000000000ull) {
			g.stop = 3;
			break;
		}
		/* While workers exist, SIGUSR1 goes to them; when idle, this
		 * thread takes it inside ppoll (the mask argument). */
		n = ppoll(pfd, 2, &tick, live ? NULL : &usr1_unblocked);
		if (n < 0 && errno != EINTR) {
			perror("kv_server: ppoll");
			break;
		}
		if (n <= 0)
			continue;
		if (pfd[1].revents)
			while (read(g.wake_pipe[0], drain, sizeof(drain)) > 0)
				;
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
		if (fd < 0)
			continue; /* EINTR, ECONNABORTED, EMFILE...: try again later */
		for (i = 0; i < (int)max_conns && slots[i]; i++)
			;
		c = i < (int)max_conns ? calloc(1, sizeof(*c)) : NULL;
		if (!c) {
			atomic_fetch_add(&g.conns_refused, 1);
			(void)send_all(fd, "ERR server full\n", 16);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = next_id++;
		c->peer_port = ntohs(peer.sin_port);
		/* c->st is zero (calloc): "no storage yet". */
		atomic_fetch_add(&g.conns_live, 1);
		atomic_fetch_add(&g.conns_total, 1);
		if (pthread_create(&c->thread, &attr, conn_main, c)) {
			atomic_fetch_sub(&g.conns_live, 1);
			atomic_fetch_add(&g.conns_refused, 1);
			(void)send_all(fd, "ERR server busy\n", 16);
			close(fd);
			free(c);
			continue;
		}
		slots[i] = c;
	}

	i = atomic_load(&g.stop);
	why = i == 1 ? "SHUTDOWN command" : i == 2 ? "signal" : "max runtime";
	printf("kv_server: stopping (%s)\n", why);
	close(lfd);
	reap(slots, (unsigned)max_conns, 1); /* closes connections, joins workers */
	pthread_attr_destroy(&attr);

	/* Only this thread is left, with SIGUSR1 blocked: tear down. */
	for (i = 0; i < KV_BUCKETS; i++) {
		struct kv_bucket *b = &table[i];

		if (bucket_lock(b, RQSPIN_TIMEOUT_DEFAULT)) { /* cannot happen now */
			fprintf(stderr, "kv_server: bucket %d still locked\n", i);
			continue;
		}
		while (b->head) {
			struct kv_entry *e = b->head;

			b->head = e->next;
			rqspin_free_nolock(e);
		}
		rqspin_unlock(&b->lock);
	}
	/* Waits for the grace period and frees every connection's values. */
	rqspin_storage_map_destroy(g.state_map);
	rqspin_storage_map_destroy(g.counters_map);
	rqspin_alloc_stats_get(&as1);

	printf("kv_server: served %llu connections (%llu refused), %llu ops, %llu busy replies, "
	       "%llu storage errors\n",
	       (unsigned long long)atomic_load(&g.conns_total),
	       (unsigned long long)atomic_load(&g.conns_refused),
	       (unsigned long long)atomic_load(&g.ops),
	       (unsigned long long)atomic_load(&g.busy_replies),
	       (unsigned long long)atomic_load(&g.storage_errors));
	printf("kv_server: SIGUSR1 handled %llu times; handler EDEADLK %llu, ETIMEDOUT %llu\n",
	       (unsigned long long)atomic_load(&g.usr1),
	       (unsigned long long)atomic_load(&g.usr1_edeadlk),
	       (unsigned long long)atomic_load(&g.usr1_timeout));
	printf("kv_server: allocator live bytes %llu at start, %llu at exit%s\n",
	       (unsigned long long)base_bytes,
	       (unsigned long long)(as1.small_bytes + as1.large_bytes),
	       as1.small_bytes + as1.large_bytes == base_bytes ? " (all freed)" : " (LEAK?)");
	free(slots);
	close(g.wake_pipe[0]);
	close(g.wake_pipe[1]);
	printf("kv_server: clean shutdown\n");
	return 0;
}
