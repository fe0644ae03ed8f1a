/* SPDX-License-Identifier: MIT */
/*
 * Failure reports.
 *
 *  1. RQSPIN_REPORT=1 / =stderr (read at load time): a child process (this
 *     binary, re-executed with posix_spawn) provokes an AA, a timeout and an
 *     owner-dead takeover; its stderr carries "rqspin: AA on lock <addr>,
 *     error -35, ..." and the thread line with its tid and table. Without
 *     the variable nothing is written; with a hook installed the hook gets
 *     the report and stderr stays quiet. RQSPIN_TIMEOUT_MS sets the default
 *     timeout; an invalid value is refused with a message.
 *  2. rqspin_report_write into a pipe produces the expected text, byte for
 *     byte, including the largest report (8 threads x 31 held locks).
 *  3. rqspin_event_name.
 */
#include <spawn.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "rqspin_util.h"

extern char **environ;

/* ---- child side ----------------------------------------------------------- */

static unsigned hook_calls;
static struct rqspin_report hook_rep;

static void count_hook(const struct rqspin_report *r, void *arg)
{
	(void)arg;
	hook_calls++;
	hook_rep = *r;
}

static int child(const char *mode, const char *arg)
{
	static rqspinlock_t l = RQSPINLOCK_INIT;

	/* What the parent matches: "<lock address> <tid>". */
	printf("%#lx %d\n", (unsigned long)(uintptr_t)&l, (int)ru_gettid());
	fflush(stdout);
	if (!strcmp(mode, "aa") || !strcmp(mode, "aa-hook")) {
		if (!strcmp(mode, "aa-hook"))
			rqspin_set_report_hook(count_hook, NULL);
		RU_CHECK_RET(rqspin_lock(&l), 0);
		RU_CHECK_RET(rqspin_lock(&l), -EDEADLK);
		rqspin_unlock(&l);
		if (!strcmp(mode, "aa-hook")) {
			CHECK_EQ_U64(hook_calls, 1);
			CHECK(hook_rep.event == RQSPIN_EV_AA);
			CHECK(hook_rep.error == -EDEADLK);
			CHECK(hook_rep.lock == &l);
			CHECK_EQ_U64(hook_rep.nthreads, 1);
			CHECK(hook_rep.threads[0].tid == ru_gettid());
			/* The failed attempt is dropped before the hook runs. */
			CHECK_EQ_U64(hook_rep.threads[0].nheld, 1);
			CHECK(hook_rep.threads[0].held[0] == &l && hook_rep.threads[0].held[1] == NULL);
		}
		return 0;
	}
	if (!strcmp(mode, "timeout")) {
		struct ru_actor o;

		ru_actor_start(&o, 1);
		RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &l), 0);
		RU_CHECK_RET(rqspin_lock_timeout(&l, 20 * RU_MS), -ETIMEDOUT);
		RU_CHECK_RET(ru_actor_do(&o, RU_UNLOCK, &l), 0);
		ru_actor_exit(&o);
		return 0;
	}
	if (!strcmp(mode, "owner-dead")) {
		struct ru_actor o;

		ru_actor_start(&o, 1);
		RU_CHECK_RET(ru_actor_do(&o, RU_LOCK, &l), 0);
		ru_actor_exit(&o);
		RU_CHECK_RET(rqspin_lock(&l), -EOWNERDEAD);
		rqspin_unlock(&l);
		return 0;
	}
	if (!strcmp(mode, "default-timeout")) {
		uint64_t want = strtoull(arg, NULL, 10) * RU_MS;

		CHECK_EQ_U64(rqspin_get_default_timeout(), want);
		return 0;
	}
	fprintf(stderr, "unknown child mode %s\n", mode);
	return 2;
}

/* ---- parent side ---------------------------------------------------------- */

struct child_out {
	int status;
	char out[4096], err[8192];
};

static void read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	for (;;) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap - 1)
			break;
	}
	buf[len] = '\0';
}

/* Run this binary as "child <mode> <arg>" with the environment changed:
 * every name in unset[] removed, every "NAME=value" in set[] added. */
static void run_child(const char *self, const char *mode, const char *arg, const char *const *set,
		      const char *const *unset, struct child_out *co)
{
	char *argv[] = { (char *)self, (char *)"child", (char *)mode, (char *)arg, NULL };
	char *envp[512];
	int n = 0, po[2], pe[2];
	posix_spawn_file_actions_t fa;
	pid_t pid;

	for (char **e = environ; *e && n < 500; e++) {
		bool drop = false;

		for (const char *const *u = unset; u && *u; u++)
			if (!strncmp(*e, *u, strlen(*u)) && (*e)[strlen(*u)] == '=')
				drop = true;
		for (const char *const *s = set; s && *s; s++)
			if (!strncmp(*e, *s, (size_t)(strchr(*s, '=') - *s + 1)))
				drop = true;
		if (!drop)
			envp[n++] = *e;
	}
	for (const char *const *s = set; s && *s; s++)
		envp[n++] = (char *)*s;
	envp[n] = NULL;

	CHECK(pipe(po) == 0 && pipe(pe) == 0);
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, po[1], 1) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, pe[1], 2) == 0);
	CHECK(posix_spawn_file_actions_addclose(&fa, po[0]) == 0);
	CHECK(posix_spawn_file_actions_addclose(&fa, pe[0]) == 0);
	CHECK(posix_spawn(&pid, self, &fa, NULL, argv, envp) == 0);
	posix_spawn_file_actions_destroy(&fa);
	close(po[1]);
	close(pe[1]);
	/* The child writes little: read stdout, then stderr. */
	read_all(po[0], co->out, sizeof(co->out));
	read_all(pe[0], co->err, sizeof(co->err));
	close(po[0]);
	close(pe[0]);
	CHECK(waitpid(pid, &co->status, 0) == pid);
	if (!WIFEXITED(co->status) || WEXITSTATUS(co->status) != 0) {
		fprintf(stderr, "child %s failed (status %#x); stderr:\n%s\n", mode, co->status,
			co->err);
		CHECK(!"child failed");
	}
}

static bool has(const char *hay, const char *needle)
{
	return strstr(hay, needle) != NULL;
}

static void test_env(const char *self)
{
	static const char *const report1[] = { "RQSPIN_REPORT=1", NULL };
	static const char *const report_stderr[] = { "RQSPIN_REPORT=stderr", NULL };
	static const char *const report_no[] = { "RQSPIN_REPORT=0", NULL };
	static const char *const unset_report[] = { "RQSPIN_REPORT", "RQSPIN_TIMEOUT_MS", NULL };
	struct child_out co;
	char lockstr[64], want[256];
	int tid;

	/* AA with RQSPIN_REPORT=1. */
	run_child(self, "aa", "", report1, unset_report, &co);
	CHECK(sscanf(co.out, "%63s %d", lockstr, &tid) == 2);
	snprintf(want, sizeof(want), "rqspin: AA on lock %s, error -%d, waited ", lockstr, EDEADLK);
	if (!has(co.err, want))
		fprintf(stderr, "want \"%s\" in child stderr:\n%s\n", want, co.err);
	CHECK(has(co.err, "rqspin: AA"));
	CHECK(has(co.err, want));
	/* The failed attempt is out of the table before the report. */
	snprintf(want, sizeof(want), "  thread %d waits for %s, table (1): %s\n", tid, lockstr,
		 lockstr);
	if (!has(co.err, want))
		fprintf(stderr, "want \"%s\" in child stderr:\n%s\n", want, co.err);
	CHECK(has(co.err, want));
	printf("RQSPIN_REPORT=1, AA:\n%s", co.err);

	/* RQSPIN_REPORT=stderr works too; =0 and unset are silent. */
	run_child(self, "aa", "", report_stderr, unset_report, &co);
	CHECK(has(co.err, "rqspin: AA on lock "));
	run_child(self, "aa", "", report_no, unset_report, &co);
	CHECK(!has(co.err, "rqspin:"));
	run_child(self, "aa", "", NULL, unset_report, &co);
	CHECK(!has(co.err, "rqspin:"));

	/* A hook takes precedence over the environment. */
	run_child(self, "aa-hook", "", report1, unset_report, &co);
	CHECK(!has(co.err, "rqspin:"));

	/* Timeout and owner-dead reports. */
	run_child(self, "timeout", "", report1, unset_report, &co);
	CHECK(sscanf(co.out, "%63s %d", lockstr, &tid) == 2);
	snprintf(want, sizeof(want), "rqspin: timeout on lock %s, error -%d, waited ", lockstr,
		 ETIMEDOUT);
	if (!has(co.err, want))
		fprintf(stderr, "want \"%s\" in child stderr:\n%s\n", want, co.err);
	CHECK(has(co.err, want));
	run_child(self, "owner-dead", "", report1, unset_report, &co);
	CHECK(sscanf(co.out, "%63s %d", lockstr, &tid) == 2);
	snprintf(want, sizeof(want), "rqspin: owner-dead on lock %s, error -%d, ", lockstr,
		 EOWNERDEAD);
	if (!has(co.err, want))
		fprintf(stderr, "want \"%s\" in child stderr:\n%s\n", want, co.err);
	CHECK(has(co.err, want));

	/* RQSPIN_TIMEOUT_MS. */
	{
		static const char *const t123[] = { "RQSPIN_TIMEOUT_MS=123", NULL };
		static const char *const tbad[] = { "RQSPIN_TIMEOUT_MS=12x", NULL };
		static const char *const tzero[] = { "RQSPIN_TIMEOUT_MS=0", NULL };
		/* 2^64 ns / 10^6, rounded up: ms * 10^6 wraps to 448 us. */
		static const char *const twrap[] = { "RQSPIN_TIMEOUT_MS=18446744073710", NULL };
		static const char *const tneg[] = { "RQSPIN_TIMEOUT_MS=-5", NULL };

		run_child(self, "default-timeout", "123", t123, unset_report, &co);
		CHECK(!has(co.err, "RQSPIN_TIMEOUT_MS"));
		run_child(self, "default-timeout", "250", tbad, unset_report, &co);
		CHECK(has(co.err, "RQSPIN_TIMEOUT_MS"));
		run_child(self, "default-timeout", "250", tzero, unset_report, &co);
		CHECK(has(co.err, "RQSPIN_TIMEOUT_MS"));
		run_child(self, "default-timeout", "250", twrap, unset_report, &co);
		CHECK(has(co.err, "RQSPIN_TIMEOUT_MS"));
		run_child(self, "default-timeout", "250", tneg, unset_report, &co);
		CHECK(has(co.err, "RQSPIN_TIMEOUT_MS"));
		run_child(self, "default-timeout", "250", NULL, unset_report, &co);
	}
	printf("environment: ok\n");
}

/* ---- rqspin_report_write ---------------------------------------------------- */

static void write_and_read(const struct rqspin_report *r, char *buf, size_t cap)
{
	int p[2];

	CHECK(pipe(p) == 0);
	rqspin_report_write(p[1], r);
	close(p[1]);
	read_all(p[0], buf, cap);
	close(p[0]);
}

static size_t append(char *buf, size_t len, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t append(char *buf, size_t len, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + len, cap - len, fmt, ap);
	va_end(ap);
	CHECK(n >= 0 && (size_t)n < cap - len);
	return len + (size_t)n;
}

static void expect_text(const struct rqspin_report *r)
{
	static char got[16384], want[16384];
	size_t len = 0;

	write_and_read(r, got, sizeof(got));
	len = append(want, len, sizeof(want), "rqspin: %s on lock %#lx, error -%d, waited %llu us\n",
		     rqspin_event_name(r->event), (unsigned long)(uintptr_t)r->lock, -r->error,
		     (unsigned long long)(r->waited_ns / 1000));
	for (uint32_t t = 0; t < r->nthreads; t++) {
		const struct rqspin_report_thread *th = &r->threads[t];
		uint32_t n = th->nheld < RQSPIN_NR_HELD ? th->nheld : RQSPIN_NR_HELD;

		len = append(want, len, sizeof(want), "  thread %d waits for %#lx, table (%u):",
			     (int)th->tid, (unsigned long)(uintptr_t)th->waits_for, th->nheld);
		for (uint32_t i = 0; i < n; i++)
			len = append(want, len, sizeof(want), " %#lx",
				     (unsigned long)(uintptr_t)th->held[i]);
		len = append(want, len, sizeof(want), "\n");
	}
	if (strcmp(got, want)) {
		size_t off = 0, from;

		while (got[off] && got[off] == want[off])
			off++;
		from = off > 60 ? off - 60 : 0;
		fprintf(stderr,
			"rqspin_report_write: %zu bytes written, %zu expected (%u threads, "
			"%u held each); first difference at byte %zu:\n"
			"  want ...%.100s\n  got  ...%.100s\n",
			strlen(got), strlen(want), r->nthreads, r->threads[0].nheld, off,
			want + from, got + from);
		CHECK(!"rqspin_report_write output");
	}
}

static void test_write(void)
{
	struct rqspin_report r;
	static char got[4096];

	/* A small ABBA report, spelled out literally once. */
	memset(&r, 0, sizeof(r));
	r.event = RQSPIN_EV_ABBA;
	r.error = -EDEADLK;
	r.lock = (const void *)0x1000;
	r.waited_ns = 5999;
	r.nthreads = 2;
	r.threads[0] = (struct rqspin_report_thread){ .tid = 11, .waits_for = (const void *)0x1000,
						      .nheld = 2 };
	r.threads[0].held[0] = (const void *)0x2000;
	r.threads[0].held[1] = (const void *)0x1000;
	r.threads[1] = (struct rqspin_report_thread){ .tid = 22, .waits_for = (const void *)0x2000,
						      .nheld = 2 };
	r.threads[1].held[0] = (const void *)0x1000;
	r.threads[1].held[1] = (const void *)0x2000;
	write_and_read(&r, got, sizeof(got));
	{
		char want[256];

		snprintf(want, sizeof(want),
			 "rqspin: ABBA on lock 0x1000, error -%d, waited 5 us\n"
			 "  thread 11 waits for 0x1000, table (2): 0x2000 0x1000\n"
			 "  thread 22 waits for 0x2000, table (2): 0x1000 0x2000\n",
			 EDEADLK);
		if (strcmp(got, want))
			fprintf(stderr, "want:\n%sgot:\n%s", want, got);
		CHECK(!strcmp(got, want));
	}
	expect_text(&r);

	/* No threads: the headline only. */
	r.nthreads = 0;
	expect_text(&r);

	/* A timeout of a thread holding more than the table tracks: the
	 * count says so, the entries are the 31 tracked ones. */
	memset(&r, 0, sizeof(r));
	r.event = RQSPIN_EV_TIMEOUT;
	r.error = -ETIMEDOUT;
	r.lock = (const void *)0xabc0;
	r.waited_ns = 250000000;
	r.nthreads = 1;
	r.threads[0].tid = 4242;
	r.threads[0].waits_for = r.lock;
	r.threads[0].nheld = 40;
	for (int i = 0; i < RQSPIN_NR_HELD; i++)
		r.threads[0].held[i] = (const void *)(uintptr_t)(0x100 + 0x40 * i);
	expect_text(&r);

	/* The largest report: a cycle of 8 threads, each with a full table
	 * of realistic (48-bit, 12-hex-digit) addresses and a 7-digit tid. */
	memset(&r, 0, sizeof(r));
	r.event = RQSPIN_EV_CYCLE;
	r.error = -EDEADLK;
	r.lock = (const void *)(uintptr_t)0x7ffd12345678ull;
	r.waited_ns = 1234567890123ull;
	r.nthreads = RQSPIN_REPORT_MAX_CYCLE;
	for (int t = 0; t < RQSPIN_REPORT_MAX_CYCLE; t++) {
		r.threads[t].tid = 4000000 + t;
		r.threads[t].waits_for = (const void *)(uintptr_t)(0x7ffd12345000ull + 0x40 * t);
		r.threads[t].nheld = RQSPIN_NR_HELD;
		for (int i = 0; i < RQSPIN_NR_HELD; i++)
			r.threads[t].held[i] =
				(const void *)(uintptr_t)(0x7f0123450000ull + 0x1000 * t + 0x40 * i);
	}
	expect_text(&r);
	printf("rqspin_report_write: ok\n");
}

/* ---- event names ------------------------------------------------------------ */

static void test_names(void)
{
	static const enum rqspin_event ev[] = { RQSPIN_EV_AA,	     RQSPIN_EV_ABBA,
						RQSPIN_EV_CYCLE,     RQSPIN_EV_NEST_FAIL,
						RQSPIN_EV_TIMEOUT,   RQSPIN_EV_OWNER_DEAD };
	const char *names[6];

	CHECK(!strcmp(rqspin_event_name(RQSPIN_EV_AA), "AA"));
	CHECK(!strcmp(rqspin_event_name(RQSPIN_EV_ABBA), "ABBA"));
	for (int i = 0; i < 6; i++) {
		names[i] = rqspin_event_name(ev[i]);
		CHECK(names[i] && names[i][0]);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(names[i], names[j]) != 0);
		printf("event %d: %s\n", (int)ev[i], names[i]);
	}
	CHECK(rqspin_event_name((enum rqspin_event)0) != NULL);
	CHECK(rqspin_event_name((enum rqspin_event)99) != NULL);
	printf("event names: ok\n");
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "child"))
		return child(argv[2], argc >= 4 ? argv[3] : "");
	setvbuf(stdout, NULL, _IOLBF, 0);
	tu_watchdog(120);
	test_names();
	test_env("/proc/self/exe");
	test_write();
	printf("rqspin_report: PASS\n");
	return 0;
}
