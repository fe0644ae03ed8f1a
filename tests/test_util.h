/* SPDX-License-Identifier: MIT */
/*
 * Tiny helpers shared by the test programs (header-only, C11, no library
 * dependency). Conventions: a test is a plain program, exit code 0 = pass;
 * a failed CHECK prints "file:line: CHECK failed: expr" to stderr and aborts.
 *
 * Everything whose comment says "async-signal-safe" may be used in a signal
 * handler (CHECK and CHECK_EQ_U64 only use write(2) and abort()).
 */
#ifndef RQSPIN_TEST_UTIL_H
#define RQSPIN_TEST_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- ThreadSanitizer detection and iteration scaling -------------------- */

#if defined(__SANITIZE_THREAD__)
#define TU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_TSAN 1
#endif
#endif

#ifdef TU_TSAN
#define TU_SANITIZER_SLOWDOWN 10u
#else
#define TU_SANITIZER_SLOWDOWN 1u
#endif

/*
 * How many times slower than natively the tests run: 10 under TSan, times
 * RQSPIN_TEST_SLOWDOWN from the environment (an integer >= 1; the aarch64
 * runs under qemu-user set it, see scripts/test-aarch64.sh). Iteration
 * counts are divided by it and hang guards and lock timeouts multiplied:
 * an emulated run does less work with the same checks, it is not skipped.
 *
 * Read once, before main (a constructor), so that signal handlers only
 * load the cached value: async-signal-safe after start-up.
 */
static _Atomic unsigned tu_env_slowdown_ = 1;

__attribute__((constructor)) static void tu_read_slowdown_(void)
{
	const char *v = getenv("RQSPIN_TEST_SLOWDOWN");
	char *end;
	unsigned long n;

	if (!v || !*v)
		return;
	n = strtoul(v, &end, 10);
	if (*end != '\0' || n < 1 || n > 1000) {
		fprintf(stderr, "RQSPIN_TEST_SLOWDOWN=%s: want an integer in 1..1000\n", v);
		exit(2);
	}
	atomic_store_explicit(&tu_env_slowdown_, (unsigned)n, memory_order_relaxed);
}

static inline unsigned tu_slowdown(void)
{
	/* Relaxed: written once by the constructor, before any thread. */
	return TU_SANITIZER_SLOWDOWN * atomic_load_explicit(&tu_env_slowdown_, memory_order_relaxed);
}

#define TU_SLOWDOWN tu_slowdown()

/* An iteration count scaled down by TU_SLOWDOWN; >= 1. */
#define TU_ITERS(n) ((n) / TU_SLOWDOWN > 0 ? (n) / TU_SLOWDOWN : 1)

/*
 * True when the test runs under a user-mode emulator (RQSPIN_TEST_EMULATOR
 * names it, e.g. qemu-aarch64): process-wide figures such as the RSS then
 * include the emulator's own memory (translated code, per-thread CPU
 * state), so checks on them are left to the allocator's own counters.
 */
static inline bool tu_emulated(void)
{
	const char *v = getenv("RQSPIN_TEST_EMULATOR");

	return v && *v;
}

/* ---- failure reporting (async-signal-safe) ------------------------------ */

static inline void tu_write_str(const char *s)
{
	size_t len = strlen(s);

	while (len > 0) {
		ssize_t n = write(2, s, len);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return;
		}
		s += n;
		len -= (size_t)n;
	}
}

static inline void tu_write_u64(uint64_t v)
{
	char buf[24];
	char *p = buf + sizeof(buf) - 1;

	*p = '\0';
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	tu_write_str(p);
}

static inline void tu_write_hex(uint64_t v)
{
	char buf[24];
	char *p = buf + sizeof(buf) - 1;

	*p = '\0';
	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x';
	*--p = '0';
	tu_write_str(p);
}

static inline void tu_fail_head(const char *file, int line, const char *what)
{
	tu_write_str(file);
	tu_write_str(":");
	tu_write_u64((uint64_t)line);
	tu_write_str(": CHECK failed: ");
	tu_write_str(what);
}

__attribute__((noreturn, cold)) static inline void tu_fail(const char *file, int line,
							   const char *what)
{
	tu_fail_head(file, line, what);
	tu_write_str("\n");
	abort();
}

__attribute__((noreturn, cold)) static inline void
tu_fail_u64(const char *file, int line, const char *what, uint64_t a, uint64_t b)
{
	tu_fail_head(file, line, what);
	tu_write_str(" (");
	tu_write_u64(a);
	tu_write_str(" vs ");
	tu_write_u64(b);
	tu_write_str(")\n");
	abort();
}

/* Abort with file:line and the expression when cond is false.
 * Async-signal-safe. */
#define CHECK(cond)                                                  \
	do {                                                         \
		if (!(cond))                                         \
			tu_fail(__FILE__, __LINE__, #cond);          \
	} while (0)

/* Binary comparisons of unsigned 64-bit values that print both sides.
 * Async-signal-safe. */
#define TU_CHECK_OP_U64(a, op, b)                                                  \
	do {                                                                       \
		uint64_t tu_a_ = (uint64_t)(a), tu_b_ = (uint64_t)(b);             \
		if (!(tu_a_ op tu_b_))                                             \
			tu_fail_u64(__FILE__, __LINE__, #a " " #op " " #b, tu_a_, tu_b_); \
	} while (0)
#define CHECK_EQ_U64(a, b) TU_CHECK_OP_U64(a, ==, b)
#define CHECK_LE_U64(a, b) TU_CHECK_OP_U64(a, <=, b)
#define CHECK_GE_U64(a, b) TU_CHECK_OP_U64(a, >=, b)

/* CHECK that a pthread-style call returned 0. */
#define CHECK_OK(call)                                                   \
	do {                                                             \
		int tu_rc_ = (call);                                     \
		if (tu_rc_ != 0)                                         \
			tu_fail_u64(__FILE__, __LINE__, #call " == 0", \
				    (uint64_t)(int64_t)tu_rc_, 0);       \
	} while (0)

/* ---- deterministic PRNG (xorshift64*) ----------------------------------- */

typedef struct {
	uint64_t s;
} tu_rng;

static inline void tu_rng_seed(tu_rng *r, uint64_t seed)
{
	/* splitmix64 step so that small seeds give unrelated streams */
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	r->s = z ? z : 1;
}

/* Async-signal-safe (on a generator the handler owns). */
static inline uint64_t tu_rng_next(tu_rng *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform-ish in [0, n), n > 0. */
static inline uint32_t tu_rng_below(tu_rng *r, uint32_t n)
{
	return (uint32_t)(((tu_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Shuffle a[0..n) in place (Fisher-Yates). */
static inline void tu_shuffle(tu_rng *r, int *a, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)tu_rng_below(r, (uint32_t)i + 1), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

/* ---- threads ------------------------------------------------------------ */

static inline pthread_t tu_thread_start(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	CHECK_OK(pthread_create(&t, NULL, fn, arg));
	return t;
}

static inline void *tu_thread_join(pthread_t t)
{
	void *ret = NULL;

	CHECK_OK(pthread_join(t, &ret));
	return ret;
}

/*
 * Run fn on n threads at once and join them all. Thread i gets
 * (char *)args + i * arg_size (args may be NULL, then every thread gets
 * NULL). n <= 1024.
 */
static inline void tu_run_threads(int n, void *(*fn)(void *), void *args, size_t arg_size)
{
	pthread_t t[1024];

	CHECK(n >= 0 && n <= 1024);
	for (int i = 0; i < n; i++)
		t[i] = tu_thread_start(fn, args ? (char *)args + (size_t)i * arg_size : NULL);
	for (int i = 0; i < n; i++)
		tu_thread_join(t[i]);
}

/* ---- waiting ------------------------------------------------------------ */

static inline void tu_sleep_us(unsigned us);

/* One step of a polling wait: yield the CPU for the first rounds, then
 * sleep a little, so that waiters do not starve the threads they wait for
 * on a loaded machine. */
static inline void tu_backoff(unsigned *round)
{
	if (*round < 64) {
		++*round;
		sched_yield();
	} else {
		tu_sleep_us(50);
	}
}

/* Poll until cond is true. Bounded by the watchdog / ctest timeout, not by
 * this loop. */
#define TU_WAIT_UNTIL(cond)                        \
	do {                                       \
		unsigned tu_round_ = 0;            \
		while (!(cond))                    \
			tu_backoff(&tu_round_);    \
	} while (0)

/* Futex on a 32-bit atomic (private). Waits while *w == val; returns on a
 * wake-up, a signal or a changed value: the caller re-checks. */
static inline void tu_futex_wait(atomic_uint *w, unsigned val)
{
	int e = errno;

	syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
	errno = e;
}

static inline void tu_futex_wake_all(atomic_uint *w)
{
	int e = errno;

	syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
	errno = e;
}

/* ---- a reusable barrier (atomics + futex; works under TSan) ------------- */

typedef struct {
	atomic_uint count;
	atomic_uint generation; /* futex word */
	unsigned n;
} tu_barrier;

static inline void tu_barrier_init(tu_barrier *b, unsigned n)
{
	atomic_init(&b->count, 0);
	atomic_init(&b->generation, 0);
	b->n = n;
}

/* Wait until n threads have arrived. Returns true in exactly one of them
 * (the last to arrive) per round. */
static inline bool tu_barrier_wait(tu_barrier *b)
{
	unsigned gen = atomic_load_explicit(&b->generation, memory_order_acquire);
	unsigned spins = 0;

	if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) + 1 == b->n) {
		atomic_store_explicit(&b->count, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
		tu_futex_wake_all(&b->generation);
		return true;
	}
	while (atomic_load_explicit(&b->generation, memory_order_acquire) == gen) {
		if (++spins < 16)
			sched_yield();
		else
			tu_futex_wait(&b->generation, gen);
	}
	return false;
}

/* A one-way event: tu_event_set() wakes every tu_event_wait(). */
typedef struct {
	atomic_uint v; /* futex word */
} tu_event;

static inline void tu_event_set(tu_event *e, unsigned v)
{
	atomic_store_explicit(&e->v, v, memory_order_release);
	tu_futex_wake_all(&e->v);
}

/* Wait until the event's value is want. */
static inline void tu_event_wait(tu_event *e, unsigned want)
{
	unsigned v;

	while ((v = atomic_load_explicit(&e->v, memory_order_acquire)) != want)
		tu_futex_wait(&e->v, v);
}

/* ---- signals ------------------------------------------------------------ */

/* Install fn for sig with sigaction. flags: SA_* (SA_RESTART is usual);
 * block: signals to block while fn runs, 0-terminated list (may be NULL). */
static inline void tu_set_handler(int sig, void (*fn)(int), int flags, const int *block)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	for (; block && *block; block++)
		sigaddset(&sa.sa_mask, *block);
	CHECK(sigaction(sig, &sa, NULL) == 0);
}

/* Restore the default disposition of sig. */
static inline void tu_reset_handler(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(sig, &sa, NULL) == 0);
}

/* ---- time (for reporting only; tests are bounded by iterations) -------- */

static inline uint64_t tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tu_sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000u, (long)(us % 1000000u) * 1000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- watchdog: abort with a message instead of hanging ----------------- */

static inline void tu_watchdog_handler_(int sig)
{
	(void)sig;
	tu_write_str("watchdog: test did not finish in time (hang?)\n");
	abort();
}

/* Abort the process after seconds * TU_SLOWDOWN seconds (SIGALRM). Use a
 * value well above the expected run time: this catches hangs, it does not
 * bound the work. */
static inline void tu_watchdog(unsigned seconds)
{
	tu_set_handler(SIGALRM, tu_watchdog_handler_, 0, NULL);
	alarm(seconds * TU_SLOWDOWN);
}

#endif /* RQSPIN_TEST_UTIL_H */
