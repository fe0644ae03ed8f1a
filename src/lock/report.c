/* SPDX-License-Identifier: MIT */
/* Failure reports: the hook, the stderr writer and its formatter. */
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include <rqspin/rqspinlock.h>

#include "lock/report.h"

static _Atomic(rqspin_report_fn) hook;
static _Atomic(void *) hook_arg;
static bool report_to_stderr;

void rqspin_set_report_hook(rqspin_report_fn fn, void *arg)
{
	/* arg first; the release on fn makes it visible to a reader that
	 * sees the new fn (acquire). Two racing setters may mix fn and arg:
	 * set the hook once, at start-up. */
	atomic_store_explicit(&hook_arg, arg, memory_order_relaxed);
	atomic_store_explicit(&hook, fn, memory_order_release);
}

void rqs_report_use_stderr(bool on)
{
	report_to_stderr = on;
}

bool rqs_report_wanted(void)
{
	return report_to_stderr || atomic_load_explicit(&hook, memory_order_relaxed);
}

void rqs_report_emit(const struct rqspin_report *rep)
{
	rqspin_report_fn fn = atomic_load_explicit(&hook, memory_order_acquire);

	if (fn)
		fn(rep, atomic_load_explicit(&hook_arg, memory_order_relaxed));
	else if (report_to_stderr)
		rqspin_report_write(STDERR_FILENO, rep);
}

const char *rqspin_event_name(enum rqspin_event ev)
{
	switch (ev) {
	case RQSPIN_EV_AA: return "AA";
	case RQSPIN_EV_ABBA: return "ABBA";
	case RQSPIN_EV_CYCLE: return "cycle";
	case RQSPIN_EV_NEST_FAIL: return "nesting";
	case RQSPIN_EV_TIMEOUT: return "timeout";
	case RQSPIN_EV_OWNER_DEAD: return "owner-dead";
	}
	return "unknown";
}

/* A tiny append-only formatter that flushes as it fills: stdio is not
 * async-signal-safe. */
struct out {
	int fd;
	size_t len;
	char buf[256];
};

static void flush(struct out *o)
{
	size_t off = 0;
	int e = errno;

	while (off < o->len) {
		ssize_t w = write(o->fd, o->buf + off, o->len - off);

		if (w <= 0 && errno != EINTR)
			break;
		if (w > 0)
			off += (size_t)w;
	}
	o->len = 0;
	errno = e;
}

static void put_str(struct out *o, const char *s)
{
	while (*s) {
		if (o->len == sizeof(o->buf))
			flush(o);
		o->buf[o->len++] = *s++;
	}
}

static void put_num(struct out *o, uint64_t v, unsigned base)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (base == 16)
		put_str(o, "0x");
	while (n) {
		char c[2] = { tmp[--n], 0 };

		put_str(o, c);
	}
}

void rqspin_report_write(int fd, const struct rqspin_report *rep)
{
	struct out o = { .fd = fd, .len = 0 };
	uint32_t t, i;

	put_str(&o, "rqspin: ");
	put_str(&o, rqspin_event_name(rep->event));
	put_str(&o, " on lock ");
	put_num(&o, (uintptr_t)rep->lock, 16);
	put_str(&o, ", error -");
	put_num(&o, (uint64_t)-rep->error, 10);
	put_str(&o, ", waited ");
	put_num(&o, rep->waited_ns / 1000, 10);
	put_str(&o, " us\n");
	for (t = 0; t < rep->nthreads && t < RQSPIN_REPORT_MAX_CYCLE; t++) {
		const struct rqspin_report_thread *th = &rep->threads[t];
		uint32_t n = th->nheld < RQSPIN_NR_HELD ? th->nheld : RQSPIN_NR_HELD;

		put_str(&o, "  thread ");
		put_num(&o, (uint64_t)th->tid, 10);
		put_str(&o, " waits for ");
		put_num(&o, (uintptr_t)th->waits_for, 16);
		put_str(&o, ", table (");
		put_num(&o, th->nheld, 10);
		put_str(&o, "):");
		for (i = 0; i < n; i++) {
			put_str(&o, " ");
			put_num(&o, (uintptr_t)th->held[i], 16);
		}
		put_str(&o, "\n");
	}
	flush(&o);
}
