/* SPDX-License-Identifier: MIT */
/*
 * kv_client: drives kv_server and checks its answers.
 *
 *   kv_client [--conns N] [--ops M] [--keys K] [--usr1 PID] [--usr1-count C]
 *             [--shutdown] PORT
 *
 * Opens N connections to 127.0.0.1:PORT (default 4), each doing M random
 * GET/SET/DEL/STATS commands (default 1000) on K keys of its own (default
 * 64; key names include this process's pid and the connection number, so
 * runs never collide). Every connection keeps a model of what the server
 * must hold and checks each reply against it, then reads all its keys
 * back and compares the server's per-connection counters (STATS, kept in
 * object-local storage) with its own. The buckets of all connections'
 * keys are shared, so the connections contend on the server's locks.
 *
 * "ERR busy ..." replies (the server could not take a lock) are retried;
 * they change nothing on the server. With --usr1 PID the client sends
 * SIGUSR1 to the server C times (default 5), spread over the run. With
 * --shutdown it sends SHUTDOWN at the end. Exit status 0 when everything
 * matched ("kv_client: verify OK").
 */
/* Before any header: pthread_barrier_t is POSIX, which a strict -std=c11
 * build hides. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_KEYS 4096
#define REPLY_MAX 1024
#define BUSY_RETRIES 200

struct client {
	int idx, fd;
	char rbuf[REPLY_MAX];
	size_t rhave;
	uint64_t rng;
	/* the model: what the server must hold for our keys */
	char (*val)[32];
	unsigned char *present;
	/* what we did (server must agree) */
	uint64_t gets, hits, sets, dels, stats, errors, busy;
	unsigned mismatches;
	int io_failed;
	pthread_t thread;
};

static unsigned nconns = 4, nops = 1000, nkeys = 64;
static unsigned short port;
static _Atomic uint64_t ops_done;
static _Atomic unsigned conns_finished;
static pthread_barrier_t start_line; /* all connections open before the first op */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int connect_server(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { 30, 0 }; /* never hang on a dead server */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send one formatted line, read one reply line into out (without '\n').
 * Retries "ERR busy" replies. Returns 0, or -1 on an I/O failure. */
static int rpc(struct client *c, char *out, const char *fmt, ...)
{
	char req[512];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(req, sizeof(req) - 1, fmt, ap);
	va_end(ap);
	if (len < 0 || len >= (int)sizeof(req) - 1)
		return -1;
	req[len++] = '\n';

	for (int attempt = 0;; attempt++) {
		size_t off = 0;
		char *nl;

		while (off < (size_t)len) {
			ssize_t w = send(c->fd, req + off, (size_t)len - off, MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return -1;
			off += (size_t)w;
		}
		while (!(nl = memchr(c->rbuf, '\n', c->rhave))) {
			ssize_t r;

			if (c->rhave == sizeof(c->rbuf))
				return -1; /* reply too long */
			r = recv(c->fd, c->rbuf + c->rhave, sizeof(c->rbuf) - c->rhave, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return -1; /* closed, error or 30 s timeout */
			c->rhave += (size_t)r;
		}
		*nl = '\0';
		strcpy(out, c->rbuf);
		c->rhave -= (size_t)(nl + 1 - c->rbuf);
		memmove(c->rbuf, nl + 1, c->rhave);
		if (strncmp(out, "ERR", 3))
			return 0;
		c->errors++; /* the server counts every ERR it sends */
		if (strncmp(out, "ERR busy", 8))
			return 0;
		/* The server could not take a lock and changed nothing. */
		c->busy++;
		if (attempt == BUSY_RETRIES)
			return 0; /* give up: the caller sees the ERR */
		sleep_ms(1);
	}
}

static void mismatch(struct client *c, const char *what, const char *got, const char *want)
{
	if (c->mismatches++ < 5)
		fprintf(stderr, "kv_client: conn %d: %s: got \"%s\", want \"%s\"\n", c->idx,
			what, got, want);
}

static uint64_t rnd(struct client *c)
{
	c->rng ^= c->rng << 13; /* xorshift64 */
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return c->rng;
}

/* Parse "name=<n>" out of a STATS reply; -1 if absent. */
static long long stat_field(const char *reply, const char *name)
{
	char pat[32];
	const char *p;

	snprintf(pat, sizeof(pat), " %s=", name);
	p = strstr(reply, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* STATS must report exactly what this connection did so far. */
static void check_stats(struct client *c, const char *reply)
{
	static const char *names[] = { "gets", "hits", "sets", "dels", "stats", "errors" };
	uint64_t mine[] = { c->gets, c->hits, c->sets, c->dels, c->stats, c->errors };
	char got[48], want[48];

	if (strncmp(reply, "STATS ", 6)) {
		mismatch(c, "STATS", reply, "STATS ...");
		return;
	}
	for (unsigned i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		long long v = stat_field(reply, names[i]);

		if (v != (long long)mine[i]) {
			snprintf(got, sizeof(got), "%s=%lld", names[i], v);
			snprintf(want, sizeof(want), "%s=%llu", names[i],
				 (unsigned long long)mine[i]);
			mismatch(c, "STATS counter", got, want);
		}
	}
}

/* One GET checked against the model. */
static int do_get(struct client *c, unsigned k)
{
	char reply[REPLY_MAX], want[64];

	if (rpc(c, reply, "GET k%ld.%d.%u", (long)getpid(), c->idx, k))
		return -1;
	if (!strncmp(reply, "ERR", 3))
		return 0; /* counted in c->errors by rpc() */
	c->gets++;
	if (c->present[k]) {
		snprintf(want, sizeof(want), "VALUE %s", c->val[k]);
		c->hits++;
	} else {
		snprintf(want, sizeof(want), "NOT_FOUND");
	}
	if (strcmp(reply, want))
		mismatch(c, "GET", reply, want);
	return 0;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	char reply[REPLY_MAX];
	long pid = (long)getpid();

	c->fd = connect_server();
	pthread_barrier_wait(&start_line); /* run the connections side by side */
	if (c->fd < 0) {
		perror("kv_client: connect");
		c->io_failed = 1;
		goto out;
	}
	for (unsigned op = 0; op < nops; op++, atomic_fetch_add(&ops_done, 1)) {
		unsigned k = (unsigned)(rnd(c) % nkeys), r = (unsigned)(rnd(c) % 100);

		if (r < 40) {
			if (do_get(c, k))
				goto io_fail;
		} else if (r < 75) {
			char v[32];

			snprintf(v, sizeof(v), "v%d.%u.%u", c->idx, k, op);
			if (rpc(c, reply, "SET k%ld.%d.%u %s", pid, c->idx, k, v))
				goto io_fail;
			if (!strncmp(reply, "ERR", 3))
				continue;
			c->sets++;
			if (strcmp(reply, "OK"))
				mismatch(c, "SET", reply, "OK");
			strcpy(c->val[k], v);
			c->present[k] = 1;
		} else if (r < 95) {
			const char *want = c->present[k] ? "DELETED" : "NOT_FOUND";

			if (rpc(c, reply, "DEL k%ld.%d.%u", pid, c->idx, k))
				goto io_fail;
			if (!strncmp(reply, "ERR", 3))
				continue;
			c->dels++;
			if (strcmp(reply, want))
				mismatch(c, "DEL", reply, want);
			c->present[k] = 0;
		} else {
			if (rpc(c, reply, "STATS"))
				goto io_fail;
			check_stats(c, reply);
			c->stats++;
		}
	}
	/* Read everything back, then compare counters one last time. */
	for (unsigned k = 0; k < nkeys; k++)
		if (do_get(c, k))
			goto io_fail;
	if (rpc(c, reply, "STATS"))
		goto io_fail;
	check_stats(c, reply);
	c->stats++;
	if (rpc(c, reply, "QUIT"))
		goto io_fail;
	if (strcmp(reply, "BYE"))
		mismatch(c, "QUIT", reply, "BYE");
	goto out;
io_fail:
	fprintf(stderr, "kv_client: conn %d: connection failed\n", c->idx);
	c->io_failed = 1;
out:
	if (c->fd >= 0)
		close(c->fd);
	atomic_fetch_add(&conns_finished, 1);
	return NULL;
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--conns N] [--ops M] [--keys K] [--usr1 PID] [--usr1-count C] "
		"[--shutdown] PORT\n",
		argv0);
	exit(2);
}

static unsigned long parse_num(const char *s, unsigned long min, unsigned long max,
			       const char *argv0)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		usage(argv0);
	return v;
}

int main(int argc, char **argv)
{
	unsigned usr1_count = 5, usr1_sent = 0;
	pid_t usr1_pid = 0;
	int shutdown_server = 0, i, failed = 0;
	struct client *cl, ctl = { .idx = -1 };
	char reply[REPLY_MAX];
	long long keys_before, keys_after, keys_want = 0;
	uint64_t total;
	struct timespec t0, t1;

	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--conns"))
			nconns = (unsigned)parse_num(argv[++i], 1, 256, argv[0]);
		else if (!strcmp(argv[i], "--ops"))
			nops = (unsigned)parse_num(argv[++i], 0, 10000000, argv[0]);
		else if (!strcmp(argv[i], "--keys"))
			nkeys = (unsigned)parse_num(argv[++i], 1, MAX_KEYS, argv[0]);
		else if (!strcmp(argv[i], "--usr1"))
			usr1_pid = (pid_t)parse_num(argv[++i], 1, 1u << 30, argv[0]);
		else if (!strcmp(argv[i], "--usr1-count"))
			usr1_count = (unsigned)parse_num(argv[++i], 0, 1000, argv[0]);
		else if (!strcmp(argv[i], "--shutdown"))
			shutdown_server = 1;
		else
			usage(argv[0]);
	}
	if (i != argc - 1)
		usage(argv[0]);
	port = (unsigned short)parse_num(argv[i], 1, 65535, argv[0]);

	/* A control connection: the server's key count before and after. */
	ctl.fd = connect_server();
	if (ctl.fd < 0 || rpc(&ctl, reply, "STATS")) {
		fprintf(stderr, "kv_client: cannot reach 127.0.0.1:%u\n", port);
		return 1;
	}
	keys_before = stat_field(reply, "keys");

	cl = calloc(nconns, sizeof(*cl));
	if (!cl || pthread_barrier_init(&start_line, NULL, nconns))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned c = 0; c < nconns; c++) {
		cl[c].idx = (int)c;
		cl[c].fd = -1;
		cl[c].rng = 0x9e3779b97f4a7c15ull * (c + 1);
		cl[c].val = calloc(nkeys, sizeof(*cl[c].val));
		cl[c].present = calloc(nkeys, 1);
		if (!cl[c].val || !cl[c].present ||
		    pthread_create(&cl[c].thread, NULL, client_main, &cl[c])) {
			fprintf(stderr, "kv_client: cannot start connection %u\n", c);
			return 1;
		}
	}

	/* SIGUSR1 at evenly spaced points of progress, while the
	 * connections run. */
	total = (uint64_t)nconns * nops;
	for (;;) {
		int finished = atomic_load(&conns_finished) == nconns;

		while (usr1_pid && usr1_sent < usr1_count &&
		       atomic_load(&ops_done) >= total * (usr1_sent + 1) / (usr1_count + 1)) {
			if (kill(usr1_pid, SIGUSR1))
				perror("kv_client: kill");
			usr1_sent++;
		}
		if (finished)
			break;
		sleep_ms(1);
	}
	for (unsigned c = 0; c < nconns; c++)
		pthread_join(cl[c].thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	for (unsigned c = 0; c < nconns; c++) {
		struct client *x = &cl[c];

		for (unsigned k = 0; k < nkeys; k++)
			keys_want += x->present[k];
		failed |= x->io_failed || x->mismatches;
		printf("kv_client: conn %u: gets %llu (hits %llu) sets %llu dels %llu stats %llu, "
		       "busy retries %llu, mismatches %u%s\n",
		       c, (unsigned long long)x->gets, (unsigned long long)x->hits,
		       (unsigned long long)x->sets, (unsigned long long)x->dels,
		       (unsigned long long)x->stats, (unsigned long long)x->busy, x->mismatches,
		       x->io_failed ? ", CONNECTION FAILED" : "");
	}

	/* All connections are done: the server holds exactly our keys more. */
	if (rpc(&ctl, reply, "STATS")) {
		fprintf(stderr, "kv_client: control connection lost\n");
		return 1;
	}
	keys_after = stat_field(reply, "keys");
	printf("kv_client: %u conns x %u ops in %.2f s; server keys %lld -> %lld (want +%lld); "
	       "SIGUSR1 sent %u\n",
	       nconns, nops, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9,
	       keys_before, keys_after, keys_want, usr1_sent);
	if (keys_before < 0 || keys_after - keys_before != keys_want) {
		fprintf(stderr, "kv_client: server key count is wrong\n");
		failed = 1;
	}
	if (usr1_pid && usr1_sent < usr1_count) {
		fprintf(stderr, "kv_client: sent only %u of %u SIGUSR1\n", usr1_sent, usr1_count);
		failed = 1;
	}
	if (shutdown_server && (rpc(&ctl, reply, "SHUTDOWN") || strcmp(reply, "BYE"))) {
		fprintf(stderr, "kv_client: SHUTDOWN not acknowledged\n");
		failed = 1;
	}
	close(ctl.fd);
	for (unsigned c = 0; c < nconns; c++) {
		free(cl[c].val);
		free(cl[c].present);
	}
	free(cl);
	pthread_barrier_destroy(&start_line);
	printf("kv_client: verify %s\n", failed ? "FAILED" : "OK");
	return failed;
}
