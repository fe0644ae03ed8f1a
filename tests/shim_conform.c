/* pthread_spin_* conformance, run with librqspin-pthread.so preloaded
 * (tests/shim.cmake). Like any program it includes no librqspin header.
 *
 *   shim_conform posix        POSIX return values, a counter under a
 *                             private and under a process-shared lock
 *   shim_conform fork         process-shared lock in MAP_SHARED memory:
 *                             parent/child ping-pong, then a counter
 *                             bumped by two threads in each process
 *   shim_conform private-in-shared  the same with locks initialised
 *                             PTHREAD_PROCESS_PRIVATE, which glibc lets
 *                             programs share across processes
 *   shim_conform killed       a holder process killed with SIGKILL: a
 *                             sibling (holder still a zombie) and then
 *                             the parent (reaped) take the lock
 *   shim_conform pshared-stall a live holder process that never lets go:
 *                             the waiter reports the timeout once and
 *                             keeps waiting; once the holder is killed it
 *                             takes the lock (run with a short timeout)
 *   shim_conform relock-wait  default policy: a relock keeps waiting (a
 *                             watchdog checks it has not returned, that
 *                             it sleeps rather than spins, and that one
 *                             report line was written)
 *   shim_conform abba-wait    default policy: the same for ABBA
 *   shim_conform relock-error RQSPIN_PTHREAD_DEADLOCK=error: EDEADLK
 *   shim_conform relock-abort RQSPIN_PTHREAD_DEADLOCK=abort: SIGABRT
 *   shim_conform cross-unlock one thread locks, another unlocks; the
 *                             first then locks it again under contention
 *                             and must not see EDEADLK (run with =error)
 *   shim_conform pshared-cross-unlock
 *                             a process-shared lock locked by the parent
 *                             is unlocked by its child; the parent then
 *                             locks it again while the child holds it and
 *                             must not see EDEADLK (run with =error)
 *   shim_conform handler-own-wait
 *                             a signal handler locks the lock its thread
 *                             waits for (as the pending waiter that asked
 *                             for the hand-off): as with glibc it gets it
 *                             once the holder releases, the interrupted
 *                             lock call then completes, the holder can
 *                             take the lock again, and nothing is reported
 *   shim_conform handler-own-wait-nested
 *                             the same from a second handler nested in a
 *                             first one that waits for another lock
 *   shim_conform handler-queued-other
 *                             a signal handler locks another, busy lock
 *                             while its thread waits in a lock's queue:
 *                             the library gives such a nested call one
 *                             try (NEST_FAIL); the shim must keep trying
 *                             quietly, under =error too (run with it): 0,
 *                             and nothing on stderr
 *   shim_conform handoff      bounded barging: a waiter that has waited
 *                             its bound asks for the hand-off (bit 9 of
 *                             the word, librqspin-pthread(7)); from the
 *                             next release on, neither trylock nor lock
 *                             of another thread may take the lock first
 *   shim_conform exit-holding a thread exits holding a private lock: the
 *                             next lock call (the uncontended path, whose
 *                             exchange finds the dead holder's byte)
 *                             takes it over, holds it (another thread's
 *                             trylock fails), and reports it once; under
 *                             =error too (run with it)
 *   shim_conform handler-watch-wait
 *                             a signal handler locks the lock its thread
 *                             waits for while that wait is still in its
 *                             first, unmarked stretch (the watch): as
 *                             handler-own-wait, and no false AA report.
 *                             Run against a shim built with a long watch
 *                             and mark delay (tests/shim.cmake), so that
 *                             the signal lands inside that stretch on any
 *                             machine
 *
 * Exit status 0 on success; every wait is bounded by alarm().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Failures go to the original stderr, also once the shim's stderr is a
 * pipe the test reads. */
static int err_fd = 2;

#define CHECK(c)                                                                     \
	do {                                                                         \
		if (!(c)) {                                                          \
			dprintf(err_fd, "%s:%d: failed: %s\n", __FILE__, __LINE__, #c); \
			_exit(1);                                                    \
		}                                                                    \
	} while (0)

#define ITERS 20000

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *shared_mem(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	return p;
}

/* ---- posix ---- */

struct counted {
	pthread_spinlock_t lock;
	long counter, shadow;
};

static void *bump(void *arg)
{
	struct counted *c = arg;

	for (int i = 0; i < ITERS; i++) {
		CHECK(pthread_spin_lock(&c->lock) == 0);
		CHECK(c->counter == c->shadow);
		c->counter++;
		c->shadow++;
		CHECK(pthread_spin_unlock(&c->lock) == 0);
	}
	return NULL;
}

static void count_with(struct counted *c, int threads)
{
	pthread_t t[4];

	for (int i = 0; i < threads; i++)
		CHECK(pthread_create(&t[i], NULL, bump, c) == 0);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
}

static int test_posix(void)
{
	int kinds[] = { PTHREAD_PROCESS_PRIVATE, PTHREAD_PROCESS_SHARED };
	pthread_spinlock_t l;

	CHECK(pthread_spin_init(&l, 42) == EINVAL);
	CHECK(pthread_spin_init(&l, -1) == EINVAL);
	for (int k = 0; k < 2; k++) {
		struct counted c = { .counter = 0 };

		CHECK(pthread_spin_init(&l, kinds[k]) == 0);
		CHECK(pthread_spin_trylock(&l) == 0);
		CHECK(pthread_spin_trylock(&l) == EBUSY);
		CHECK(pthread_spin_destroy(&l) == EBUSY);
		CHECK(pthread_spin_unlock(&l) == 0);
		CHECK(pthread_spin_lock(&l) == 0);
		CHECK(pthread_spin_trylock(&l) == EBUSY);
		CHECK(pthread_spin_unlock(&l) == 0);
		CHECK(pthread_spin_destroy(&l) == 0);

		CHECK(pthread_spin_init(&c.lock, kinds[k]) == 0);
		count_with(&c, 4);
		CHECK(c.counter == 4L * ITERS);
		CHECK(pthread_spin_destroy(&c.lock) == 0);
	}
	return 0;
}

/* ---- fork ---- */

#define ROUNDS 2000

struct pingpong {
	pthread_spinlock_t lock;
	long turn; /* even: parent's move, odd: child's */
	struct counted c;
};

static void play(struct pingpong *pp, long parity)
{
	for (long moves = 0; moves < ROUNDS;) {
		CHECK(pthread_spin_lock(&pp->lock) == 0);
		if (pp->turn % 2 == parity) {
			pp->turn++;
			moves++;
		}
		CHECK(pthread_spin_unlock(&pp->lock) == 0);
		if (moves < ROUNDS)
			sched_yield();
	}
}

static int test_fork(int kind)
{
	struct pingpong *pp = shared_mem(sizeof(*pp));
	int status;
	pid_t pid;

	CHECK(pthread_spin_init(&pp->lock, kind) == 0);
	CHECK(pthread_spin_init(&pp->c.lock, kind) == 0);
	if (kind == PTHREAD_PROCESS_PRIVATE) {
		pthread_spinlock_t mine;

		/* The shim's encoding (docs/man/librqspin-pthread.7): a
		 * lock in shared memory gets the process-shared mark, bit
		 * 15; one in private memory does not. */
		CHECK(pp->lock & (1 << 15));
		CHECK(pthread_spin_init(&mine, PTHREAD_PROCESS_PRIVATE) == 0);
		CHECK(!(mine & (1 << 15)));
	}
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		play(pp, 1);
		count_with(&pp->c, 2);
		_exit(0);
	}
	play(pp, 0);
	count_with(&pp->c, 2);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(pp->turn == 2 * ROUNDS);
	CHECK(pp->c.counter == 4L * ITERS && pp->c.shadow == pp->c.counter);
	CHECK(pthread_spin_destroy(&pp->lock) == 0);
	return 0;
}

/* ---- killed ---- */

static int test_killed(void)
{
	struct counted *c = shared_mem(sizeof(*c));
	int ready[2], status;
	pid_t holder, waiter;
	char b;

	CHECK(pthread_spin_init(&c->lock, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pipe(ready) == 0);
	holder = fork();
	CHECK(holder >= 0);
	if (holder == 0) {
		CHECK(pthread_spin_lock(&c->lock) == 0);
		c->counter = 1; /* left half-done: the lock dies with us */
		CHECK(write(ready[1], "x", 1) == 1);
		for (;;)
			pause();
	}
	CHECK(read(ready[0], &b, 1) == 1);
	CHECK(pthread_spin_trylock(&c->lock) == EBUSY);
	CHECK(kill(holder, SIGKILL) == 0);
	/* The killed holder stays a zombie until reaped: a sibling must
	 * still see it as dead. */
	waiter = fork();
	CHECK(waiter >= 0);
	if (waiter == 0) {
		CHECK(pthread_spin_lock(&c->lock) == 0);
		c->counter = 2;
		CHECK(pthread_spin_unlock(&c->lock) == 0);
		_exit(0);
	}
	CHECK(waitpid(waiter, &status, 0) == waiter);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(waitpid(holder, &status, 0) == holder);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(c->counter == 2);
	CHECK(pthread_spin_lock(&c->lock) == 0);
	CHECK(pthread_spin_unlock(&c->lock) == 0);
	/* Once more with the holder reaped before anybody waits. */
	holder = fork();
	CHECK(holder >= 0);
	if (holder == 0) {
		CHECK(pthread_spin_lock(&c->lock) == 0);
		_exit(0); /* exits holding it */
	}
	CHECK(waitpid(holder, &status, 0) == holder);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(pthread_spin_lock(&c->lock) == 0);
	CHECK(pthread_spin_unlock(&c->lock) == 0);
	return 0;
}

/* ---- pshared-stall ---- */

static int test_pshared_stall(void)
{
	struct counted *c = shared_mem(sizeof(*c));
	int ready[2], errs[2], status;
	pid_t holder, waiter;
	char b, buf[1024];
	ssize_t n;

	CHECK(pthread_spin_init(&c->lock, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pipe(ready) == 0 && pipe(errs) == 0);
	holder = fork();
	CHECK(holder >= 0);
	if (holder == 0) {
		CHECK(pthread_spin_lock(&c->lock) == 0);
		CHECK(write(ready[1], "x", 1) == 1);
		for (;;)
			pause();
	}
	CHECK(read(ready[0], &b, 1) == 1);
	waiter = fork();
	CHECK(waiter >= 0);
	if (waiter == 0) {
		CHECK(dup2(errs[1], 2) == 2);
		CHECK(pthread_spin_lock(&c->lock) == 0);
		c->counter = 7;
		CHECK(pthread_spin_unlock(&c->lock) == 0);
		_exit(0);
	}
	close(errs[1]);
	/* Many timeouts (RQSPIN_TIMEOUT_MS=50): still waiting, one report. */
	sleep_ms(1500);
	CHECK(waitpid(waiter, &status, WNOHANG) == 0);
	n = read(errs[0], buf, sizeof(buf) - 1);
	CHECK(n > 0);
	buf[n] = 0;
	dprintf(1, "reports:\n%s", buf);
	CHECK(strstr(buf, "not acquired within four timeouts (process-shared") != NULL);
	CHECK(strstr(buf, "still waiting") != NULL);
	CHECK(strchr(buf, '\n') == buf + n - 1); /* one line */
	CHECK(kill(holder, SIGKILL) == 0);
	CHECK(waitpid(waiter, &status, 0) == waiter);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(waitpid(holder, &status, 0) == holder);
	CHECK(c->counter == 7);
	return 0;
}

/* ---- relock / ABBA under the default policy ---- */

static pthread_spinlock_t la, lb;
static int returned; /* a blocked lock call came back */
static int report_pipe[2];

/* From here on, what the shim writes to stderr goes to report_pipe (and
 * CHECK's failures to the original stderr). */
static void capture_stderr(void)
{
	CHECK(pipe(report_pipe) == 0);
	err_fd = dup(2);
	CHECK(err_fd > 2);
	CHECK(dup2(report_pipe[1], 2) == 2);
}

static void *relocker(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&la) == 0);
	pthread_spin_lock(&la); /* glibc: waits forever */
	__atomic_store_n(&returned, 1, __ATOMIC_RELAXED);
	return NULL;
}

static pthread_barrier_t abba_barrier;

static void *abba(void *arg)
{
	pthread_spinlock_t *first = arg ? &la : &lb, *second = arg ? &lb : &la;

	CHECK(pthread_spin_lock(first) == 0);
	pthread_barrier_wait(&abba_barrier);
	pthread_spin_lock(second); /* both wait forever */
	__atomic_store_n(&returned, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Reads what the shim wrote to stderr so far (stderr is the pipe): one
 * line per lock and kind, at least one of them of this kind. */
static void check_reports(const char *kind, int max_lines)
{
	char buf[4096];
	ssize_t n = read(report_pipe[0], buf, sizeof(buf) - 1);
	int lines = 0;

	CHECK(n > 0);
	buf[n] = 0;
	dprintf(1, "reports:\n%s", buf);
	for (char *line = buf, *end; (end = strchr(line, '\n')); line = end + 1) {
		lines++;
		CHECK(!strncmp(line, "rqspin-pthread: pthread_spin_lock(", 34));
	}
	CHECK(lines >= 1 && lines <= max_lines);
	CHECK(strstr(buf, kind) != NULL);
	CHECK(strstr(buf, "still waiting") != NULL);
	CHECK(strstr(buf, "EDEADLK") == NULL);
}

static int test_still_waiting(bool two)
{
	pthread_t t[2];
	double cpu0;

	capture_stderr();
	CHECK(pthread_spin_init(&la, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_init(&lb, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_barrier_init(&abba_barrier, NULL, 2) == 0);
	if (two) {
		CHECK(pthread_create(&t[0], NULL, abba, (void *)1) == 0);
		CHECK(pthread_create(&t[1], NULL, abba, NULL) == 0);
	} else {
		CHECK(pthread_create(&t[0], NULL, relocker, NULL) == 0);
	}
	/* Several default timeouts (250 ms): the retries have run. */
	sleep_ms(500);
	cpu0 = cpu_seconds();
	sleep_ms(1500);
	CHECK(!__atomic_load_n(&returned, __ATOMIC_RELAXED));
	dprintf(1, "waiters used %.3f s of CPU in 1.5 s\n", cpu_seconds() - cpu0);
	if (two) {
		/* Each thread may see ABBA, or a timeout while the other
		 * backs off: up to two kinds on each of the two locks. */
		check_reports("deadlock (ABBA", 4);
	} else {
		/* A relock fails at once, so the waiter sleeps between
		 * tries: a generous bound (spinning would take ~1.5 s). */
		CHECK(cpu_seconds() - cpu0 < 0.5);
		check_reports("deadlock (AA", 1);
	}
	_exit(0); /* the waiters never return */
}

/* ---- relock under =error and =abort ---- */

static int test_relock_error(void)
{
	pthread_spinlock_t l;

	CHECK(pthread_spin_init(&l, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_lock(&l) == 0);
	CHECK(pthread_spin_lock(&l) == EDEADLK);
	CHECK(pthread_spin_lock(&l) == EDEADLK);
	CHECK(pthread_spin_unlock(&l) == 0);
	CHECK(pthread_spin_lock(&l) == 0);
	CHECK(pthread_spin_unlock(&l) == 0);
	CHECK(pthread_spin_init(&l, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pthread_spin_lock(&l) == 0);
	CHECK(pthread_spin_lock(&l) == EDEADLK);
	CHECK(pthread_spin_unlock(&l) == 0);
	return 0;
}

static int test_relock_abort(void)
{
	struct rlimit no_core = { 0, 0 };
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_spinlock_t l;

		setrlimit(RLIMIT_CORE, &no_core);
		CHECK(pthread_spin_init(&l, PTHREAD_PROCESS_PRIVATE) == 0);
		CHECK(pthread_spin_lock(&l) == 0);
		pthread_spin_lock(&l);
		_exit(3); /* must not get here */
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	return 0;
}

/* ---- cross-thread unlock ---- */

static pthread_spinlock_t lx;
static int phase;

static void wait_phase(int p)
{
	while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) < p)
		sleep_ms(1);
}

static void set_phase(int p)
{
	__atomic_store_n(&phase, p, __ATOMIC_RELEASE);
}

static void *other(void *arg)
{
	(void)arg;
	wait_phase(1);
	CHECK(pthread_spin_unlock(&lx) == 0); /* unlocks the first thread's lock */
	CHECK(pthread_spin_lock(&lx) == 0);
	set_phase(2);
	sleep_ms(50); /* the first thread is waiting now */
	CHECK(pthread_spin_unlock(&lx) == 0);
	return NULL;
}

static int test_cross_unlock(void)
{
	pthread_t t;

	CHECK(pthread_spin_init(&lx, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_create(&t, NULL, other, NULL) == 0);
	CHECK(pthread_spin_lock(&lx) == 0);
	set_phase(1);
	wait_phase(2);
	/* Contended (the other thread holds it): glibc waits, then takes
	 * it. A stale record of our first lock must not turn this into a
	 * deadlock report. */
	CHECK(pthread_spin_lock(&lx) == 0);
	CHECK(pthread_spin_unlock(&lx) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	for (int i = 0; i < 100; i++) {
		CHECK(pthread_spin_lock(&lx) == 0);
		CHECK(pthread_spin_unlock(&lx) == 0);
	}
	return 0;
}

/* Another process cannot post the release to the locker's table: the
 * locker's stale record must give way to the word, which names the
 * holder. */
static int test_pshared_cross_unlock(void)
{
	struct xshm {
		pthread_spinlock_t l;
		volatile int step;
	} *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st;
	pid_t c;

	CHECK(s != MAP_FAILED);
	CHECK(pthread_spin_init(&s->l, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pthread_spin_lock(&s->l) == 0);
	c = fork();
	CHECK(c >= 0);
	if (c == 0) {
		int ok = pthread_spin_unlock(&s->l) == 0; /* the parent's hold */

		s->step = 1;
		while (s->step != 2)
			sleep_ms(1);
		ok &= pthread_spin_lock(&s->l) == 0;
		s->step = 3;
		sleep_ms(100); /* the parent waits meanwhile */
		ok &= pthread_spin_unlock(&s->l) == 0;
		_exit(ok ? 0 : 1);
	}
	while (s->step != 1)
		sleep_ms(1);
	s->step = 2;
	while (s->step != 3)
		sleep_ms(1);
	CHECK(pthread_spin_lock(&s->l) == 0); /* contended: EDEADLK before */
	CHECK(pthread_spin_unlock(&s->l) == 0);
	CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (int i = 0; i < 100; i++) {
		CHECK(pthread_spin_lock(&s->l) == 0);
		CHECK(pthread_spin_unlock(&s->l) == 0);
	}
	CHECK(pthread_spin_destroy(&s->l) == 0);
	return 0;
}

/* ---- a handler that locks the lock its thread waits for ---- */

/* Nothing was written to stderr (the pipe) since capture_stderr(). */
static void check_no_report(void)
{
	char buf[512];
	ssize_t n;

	CHECK(fcntl(report_pipe[0], F_SETFL, O_NONBLOCK) == 0);
	n = read(report_pipe[0], buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		dprintf(err_fd, "unexpected report:\n%s", buf);
	}
	CHECK(n < 0 && errno == EAGAIN);
}

static pthread_spinlock_t lw;
static pthread_t lw_waiter;
static volatile int lw_held, lw_entered, lw_handler_ret = -1;
static long lw_count; /* under lw */

static void lw_handler(int sig)
{
	(void)sig;
	lw_entered = 1;
	lw_handler_ret = pthread_spin_lock(&lw);
	lw_count++;
	pthread_spin_unlock(&lw);
}

/* arg NULL: the handler comes once the waiter has waited long enough to
 * ask for the hand-off (pending bit, marked entry). Non-NULL: while the
 * waiter is still in its watch (no pending bit: the watch sets none; the
 * shim under test marks its entry only after 60 s). */
static void *lw_holder(void *arg)
{
	CHECK(pthread_spin_lock(&lw) == 0);
	lw_held = 1;
	if (arg) {
		sleep_ms(50); /* the waiter is in its watch by now */
		CHECK((__atomic_load_n((volatile int *)&lw, __ATOMIC_RELAXED) & ~0xff) == 0);
	} else {
		while (!(__atomic_load_n((volatile int *)&lw, __ATOMIC_RELAXED) & (1 << 9)))
			sleep_ms(1);
	}
	CHECK(pthread_kill(lw_waiter, SIGUSR1) == 0);
	while (!lw_entered)
		sleep_ms(1);
	sleep_ms(50); /* the handler now waits too */
	lw_count++;
	CHECK(pthread_spin_unlock(&lw) == 0);
	sleep_ms(50);
	CHECK(pthread_spin_lock(&lw) == 0); /* the lock still works for us */
	lw_count++;
	CHECK(pthread_spin_unlock(&lw) == 0);
	return NULL;
}

static int test_handler_own_wait(bool in_watch)
{
	struct sigaction sa;
	pthread_t t;

	capture_stderr();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = lw_handler;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(pthread_spin_init(&lw, PTHREAD_PROCESS_PRIVATE) == 0);
	lw_waiter = pthread_self();
	CHECK(pthread_create(&t, NULL, lw_holder, in_watch ? (void *)1 : NULL) == 0);
	while (!lw_held)
		sleep_ms(1);
	CHECK(pthread_spin_lock(&lw) == 0);
	lw_count++;
	CHECK(pthread_spin_unlock(&lw) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(lw_handler_ret == 0);
	CHECK(lw_count == 4);
	check_no_report();
	return 0;
}

/* The same two handlers deep: the first waits for lw2 (held by a second
 * holder), the second, nested in it, locks lw. */
static pthread_spinlock_t lw2;
static volatile int lw2_held, lw2_entered, lw2_handler_ret = -1;
static long lw2_count; /* under lw2 */

static void lw2_handler(int sig)
{
	(void)sig;
	lw2_entered = 1;
	lw2_handler_ret = pthread_spin_lock(&lw2);
	lw2_count++;
	pthread_spin_unlock(&lw2);
}

static void *lw2_holder(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lw2) == 0);
	lw2_held = 1;
	while (!lw_entered) /* both handlers run */
		sleep_ms(1);
	sleep_ms(200);
	lw2_count++;
	CHECK(pthread_spin_unlock(&lw2) == 0);
	return NULL;
}

static void *lw_holder_nested(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lw) == 0);
	lw_held = 1;
	while (!(__atomic_load_n((volatile int *)&lw, __ATOMIC_RELAXED) & (1 << 9)))
		sleep_ms(1);
	CHECK(pthread_kill(lw_waiter, SIGUSR2) == 0); /* first: waits for lw2 */
	while (!lw2_entered)
		sleep_ms(1);
	sleep_ms(20);
	CHECK(pthread_kill(lw_waiter, SIGUSR1) == 0); /* nested: locks lw */
	while (!lw_entered)
		sleep_ms(1);
	sleep_ms(50);
	lw_count++;
	CHECK(pthread_spin_unlock(&lw) == 0);
	return NULL;
}

static int test_handler_own_wait_nested(void)
{
	struct sigaction sa;
	pthread_t t, t2;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = lw_handler;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	sa.sa_handler = lw2_handler;
	CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
	CHECK(pthread_spin_init(&lw, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_init(&lw2, PTHREAD_PROCESS_PRIVATE) == 0);
	lw_waiter = pthread_self();
	CHECK(pthread_create(&t2, NULL, lw2_holder, NULL) == 0);
	CHECK(pthread_create(&t, NULL, lw_holder_nested, NULL) == 0);
	while (!lw_held || !lw2_held)
		sleep_ms(1);
	CHECK(pthread_spin_lock(&lw) == 0);
	lw_count++;
	CHECK(pthread_spin_unlock(&lw) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	CHECK(pthread_join(t2, NULL) == 0);
	CHECK(lw_handler_ret == 0 && lw2_handler_ret == 0);
	CHECK(lw_count == 3 && lw2_count == 2);
	return 0;
}

/* A handler over a queued wait locks another lock, held for a while. */
static pthread_spinlock_t qa, qb;
static pthread_t q_waiter;
static volatile int qa_released, qb_handler_ret = -1, qb_handler_done, q_pending_locked;

static void qb_handler(int sig)
{
	(void)sig;
	qb_handler_ret = pthread_spin_lock(&qb);
	if (qb_handler_ret == 0)
		pthread_spin_unlock(&qb);
	qb_handler_done = 1;
}

static void *qa_pending(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&qa) == 0); /* as the pending waiter */
	q_pending_locked = 1;
	CHECK(pthread_spin_unlock(&qa) == 0);
	return NULL;
}

static void *qb_holder(void *arg)
{
	(void)arg;
	/* qb is held (by main, for us) until the handler has failed its one
	 * try, then a while longer. */
	sleep_ms(300);
	CHECK(pthread_spin_unlock(&qb) == 0);
	return NULL;
}

static void *qb_pending(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&qb) == 0);
	CHECK(pthread_spin_unlock(&qb) == 0);
	return NULL;
}

static int test_handler_queued_other(void)
{
	struct sigaction sa;
	pthread_t pend, pend_b, hold_b, waiter;
	char buf[1024];
	ssize_t n;

	capture_stderr();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = qb_handler;
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
	CHECK(pthread_spin_init(&qa, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_init(&qb, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_lock(&qa) == 0);
	CHECK(pthread_create(&pend, NULL, qa_pending, NULL) == 0);
	/* Its watch (20 ms) over, it takes the pending bit (bit 8). */
	while (!(__atomic_load_n((volatile int *)&qa, __ATOMIC_RELAXED) & (1 << 8)))
		sleep_ms(1);
	CHECK(pthread_create(&waiter, NULL, qa_pending, NULL) == 0);
	/* The second queues (the tail, bits 16-31). */
	while (!(__atomic_load_n((volatile unsigned *)&qa, __ATOMIC_RELAXED) >> 16))
		sleep_ms(1);
	q_waiter = waiter;
	CHECK(pthread_spin_lock(&qb) == 0);
	/* qb's pending bit taken too: the handler would have to queue. */
	CHECK(pthread_create(&pend_b, NULL, qb_pending, NULL) == 0);
	while (!(__atomic_load_n((volatile int *)&qb, __ATOMIC_RELAXED) & (1 << 8)))
		sleep_ms(1);
	CHECK(pthread_create(&hold_b, NULL, qb_holder, NULL) == 0);
	CHECK(pthread_kill(q_waiter, SIGUSR1) == 0);
	while (!qb_handler_done)
		sleep_ms(1);
	CHECK(pthread_join(hold_b, NULL) == 0);
	CHECK(pthread_join(pend_b, NULL) == 0);
	CHECK(pthread_spin_unlock(&qa) == 0);
	CHECK(pthread_join(pend, NULL) == 0);
	CHECK(pthread_join(waiter, NULL) == 0);
	CHECK(qb_handler_ret == 0);
	CHECK(fcntl(report_pipe[0], F_SETFL, O_NONBLOCK) == 0);
	n = read(report_pipe[0], buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		dprintf(err_fd, "unexpected report:\n%s", buf);
	}
	CHECK(n <= 0);
	return 0;
}

/* ---- bounded barging ---- */

static pthread_spinlock_t lh;
static int next_got; /* the waiter next in line has the lock */

static void *next_in_line(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&lh) == 0);
	__atomic_store_n(&next_got, 1, __ATOMIC_RELEASE);
	wait_phase(1); /* hold it until the main thread has tried */
	CHECK(pthread_spin_unlock(&lh) == 0);
	return NULL;
}

static int test_handoff(void)
{
	pthread_t t;

	CHECK(pthread_spin_init(&lh, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_spin_lock(&lh) == 0);
	CHECK(pthread_create(&t, NULL, next_in_line, NULL) == 0);
	/* Held by us, so the other thread waits; once it has waited its
	 * bound it asks for the hand-off (bounded by alarm()). */
	while (!(__atomic_load_n((volatile int *)&lh, __ATOMIC_RELAXED) & (1 << 9)))
		sleep_ms(1);
	CHECK(pthread_spin_unlock(&lh) == 0);
	/* Free, but promised: a barging trylock or lock would take it now. */
	CHECK(pthread_spin_trylock(&lh) == EBUSY);
	set_phase(1);
	CHECK(pthread_spin_lock(&lh) == 0);
	CHECK(__atomic_load_n(&next_got, __ATOMIC_ACQUIRE) == 1);
	CHECK(pthread_spin_unlock(&lh) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	/* The hand-off left the word clean: uncontended calls work. */
	CHECK(pthread_spin_trylock(&lh) == 0);
	CHECK(pthread_spin_unlock(&lh) == 0);
	CHECK(pthread_spin_destroy(&lh) == 0);
	return 0;
}

/* ---- a holder thread exits ---- */

static pthread_spinlock_t ld;

static void *lock_and_exit(void *arg)
{
	(void)arg;
	CHECK(pthread_spin_lock(&ld) == 0);
	return NULL; /* exits holding it */
}

static void *try_ld(void *arg)
{
	return (void *)(long)pthread_spin_trylock((pthread_spinlock_t *)arg);
}

static int test_exit_holding(void)
{
	char buf[4096];
	ssize_t n;
	pthread_t t;
	void *res;

	capture_stderr();
	CHECK(pthread_spin_init(&ld, PTHREAD_PROCESS_PRIVATE) == 0);
	CHECK(pthread_create(&t, NULL, lock_and_exit, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);
	/* Held by a dead thread: a trylock does not take it over. */
	CHECK(pthread_spin_trylock(&ld) == EBUSY);
	CHECK(pthread_spin_lock(&ld) == 0);
	/* Ours now: the take-over left the lock held. */
	CHECK(pthread_create(&t, NULL, try_ld, (void *)&ld) == 0);
	CHECK(pthread_join(t, &res) == 0);
	CHECK((long)res == EBUSY);
	CHECK(pthread_spin_unlock(&ld) == 0);
	for (int i = 0; i < 100; i++) {
		CHECK(pthread_spin_lock(&ld) == 0);
		CHECK(pthread_spin_unlock(&ld) == 0);
	}
	CHECK(pthread_create(&t, NULL, try_ld, (void *)&ld) == 0);
	CHECK(pthread_join(t, &res) == 0);
	CHECK((long)res == 0); /* and the other thread exits holding it again */
	CHECK(pthread_spin_lock(&ld) == 0);
	CHECK(pthread_spin_unlock(&ld) == 0);
	n = read(report_pipe[0], buf, sizeof(buf) - 1);
	CHECK(n > 0);
	buf[n] = 0;
	dprintf(1, "reports:\n%s", buf);
	CHECK(!strncmp(buf, "rqspin-pthread: pthread_spin_lock(", 34));
	CHECK(strstr(buf, "holder died") != NULL);
	/* One line per lock and kind: the second take-over adds none. */
	CHECK(strchr(buf, '\n') == buf + n - 1);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	alarm(60); /* nothing here may hang a CI run */
	if (!strcmp(m, "posix"))
		return test_posix();
	if (!strcmp(m, "fork"))
		return test_fork(PTHREAD_PROCESS_SHARED);
	if (!strcmp(m, "private-in-shared"))
		return test_fork(PTHREAD_PROCESS_PRIVATE);
	if (!strcmp(m, "killed"))
		return test_killed();
	if (!strcmp(m, "pshared-stall"))
		return test_pshared_stall();
	if (!strcmp(m, "relock-wait"))
		return test_still_waiting(false);
	if (!strcmp(m, "abba-wait"))
		return test_still_waiting(true);
	if (!strcmp(m, "relock-error"))
		return test_relock_error();
	if (!strcmp(m, "relock-abort"))
		return test_relock_abort();
	if (!strcmp(m, "cross-unlock"))
		return test_cross_unlock();
	if (!strcmp(m, "handler-own-wait"))
		return test_handler_own_wait(false);
	if (!strcmp(m, "handler-watch-wait"))
		return test_handler_own_wait(true);
	if (!strcmp(m, "handler-own-wait-nested"))
		return test_handler_own_wait_nested();
	if (!strcmp(m, "handler-queued-other"))
		return test_handler_queued_other();
	if (!strcmp(m, "pshared-cross-unlock"))
		return test_pshared_cross_unlock();
	if (!strcmp(m, "handoff"))
		return test_handoff();
	if (!strcmp(m, "exit-holding"))
		return test_exit_holding();
	dprintf(2, "usage: %s posix|fork|private-in-shared|killed|pshared-stall|relock-wait|abba-wait|relock-error|"
		   "relock-abort|cross-unlock|pshared-cross-unlock|handler-own-wait|"
		   "handler-watch-wait|handler-own-wait-nested|handler-queued-other|handoff|exit-holding\n",
		   argv[0]);
	return 2;
}
