/* SPDX-License-Identifier: MIT */
/*
 * qspinlock basics: initialisation (QSPINLOCK_INIT, zeroed memory,
 * qspin_lock_init), size, qspin_trylock / qspin_is_locked semantics from the
 * same and from other threads and from a signal handler, and the debug
 * misuse checks (unlock of a free lock, NULL lock). Unlock by a thread other
 * than the locker is in qspin_cross_unlock.c.
 */
/* Debug checks in the inline functions follow the caller's build: force
 * them on here so the misuse tests see them even in NDEBUG builds. */
#define RQSPIN_DEBUG 1
#include <rqspin/qspinlock.h>

#include <sys/wait.h>

#include "test_util.h"

_Static_assert(sizeof(qspinlock_t) == 4, "qspinlock_t is 4 bytes");
_Static_assert(sizeof(qspinlock_t) == sizeof(pthread_spinlock_t),
	       "qspinlock_t has the size of pthread_spinlock_t");
_Static_assert(_Alignof(qspinlock_t) == 4, "qspinlock_t is 4-byte aligned");

static qspinlock_t g_static = QSPINLOCK_INIT; /* static initialiser */
static qspinlock_t g_bss;                     /* zero-initialised */

static void check_free(qspinlock_t *l)
{
	CHECK(!qspin_is_locked(l));
	CHECK(qspin_trylock(l));
	CHECK(qspin_is_locked(l));
	CHECK(!qspin_trylock(l)); /* held: fails, and does not deadlock */
	CHECK(qspin_is_locked(l));
	qspin_unlock(l);
	CHECK(!qspin_is_locked(l));
	qspin_lock(l);
	CHECK(qspin_is_locked(l));
	CHECK(!qspin_trylock(l));
	qspin_unlock(l);
	CHECK(!qspin_is_locked(l));
	CHECK_EQ_U64(l->w.val, 0);
}

static void test_init(void)
{
	qspinlock_t auto_init = QSPINLOCK_INIT;
	qspinlock_t *heap = calloc(4, sizeof(qspinlock_t));
	unsigned char raw[64] __attribute__((aligned(8)));

	check_free(&g_static);
	check_free(&g_bss);
	check_free(&auto_init);
	CHECK(heap);
	for (int i = 0; i < 4; i++)
		check_free(&heap[i]);
	free(heap);

	/* qspin_lock_init on garbage, and re-initialisation of a lock that
	 * was left locked (allowed: nobody else uses it). */
	memset(raw, 0xa5, sizeof(raw));
	qspinlock_t *l = (qspinlock_t *)(raw + 8);
	qspin_lock_init(l);
	check_free(l);
	qspin_lock(l);
	qspin_lock_init(l);
	check_free(l);
	CHECK(raw[7] == 0xa5 && raw[12] == 0xa5); /* wrote exactly 4 bytes */

	/* A zeroed struct with locks inside. */
	struct {
		int x;
		qspinlock_t a, b;
		int y;
	} s;
	memset(&s, 0, sizeof(s));
	check_free(&s.a);
	check_free(&s.b);
}

/* ---- cross-thread trylock / unlock -------------------------------------- */

static qspinlock_t g_l = QSPINLOCK_INIT;

static void *try_expect_fail(void *p)
{
	(void)p;
	CHECK(qspin_is_locked(&g_l));
	for (int i = 0; i < 1000; i++)
		CHECK(!qspin_trylock(&g_l));
	return NULL;
}

/* Becomes a waiter on g_l (held by main), then gets it. */
static atomic_int g_waiter_got;
static void *lock_wait(void *p)
{
	(void)p;
	qspin_lock(&g_l);
	atomic_store(&g_waiter_got, 1);
	qspin_unlock(&g_l);
	return NULL;
}

static void test_other_threads(void)
{
	pthread_t t;

	/* Held by main: other threads' trylock fails. */
	qspin_lock(&g_l);
	tu_thread_join(tu_thread_start(try_expect_fail, NULL));
	qspin_unlock(&g_l);

	/* A waiter: trylock fails while the lock is held with a waiter
	 * pending; once released the waiter gets it. */
	atomic_store(&g_waiter_got, 0);
	qspin_lock(&g_l);
	t = tu_thread_start(lock_wait, NULL);
	TU_WAIT_UNTIL(__atomic_load_n(&g_l.w.val, __ATOMIC_RELAXED) & ~RQSPIN__LOCKED_MASK);
	CHECK(!qspin_trylock(&g_l));
	CHECK(atomic_load(&g_waiter_got) == 0);
	qspin_unlock(&g_l);
	tu_thread_join(t);
	CHECK(atomic_load(&g_waiter_got) == 1);
	CHECK(!qspin_is_locked(&g_l));
	CHECK_EQ_U64(g_l.w.val, 0);
}

/* ---- trylock from a signal handler --------------------------------------- */

static qspinlock_t g_sig_held = QSPINLOCK_INIT;
static qspinlock_t g_sig_free = QSPINLOCK_INIT;
static volatile sig_atomic_t g_handler_ok;

static void try_handler(int sig)
{
	int e = errno;

	(void)sig;
	/* The interrupted code holds g_sig_held: trylock fails, no deadlock. */
	CHECK(qspin_is_locked(&g_sig_held));
	CHECK(!qspin_trylock(&g_sig_held));
	/* Other locks work normally. */
	CHECK(qspin_trylock(&g_sig_free));
	qspin_unlock(&g_sig_free);
	qspin_lock(&g_sig_free);
	qspin_unlock(&g_sig_free);
	g_handler_ok = 1;
	errno = e;
}

static void test_signal_trylock(void)
{
	tu_set_handler(SIGUSR1, try_handler, SA_RESTART, NULL);
	qspin_lock(&g_sig_held);
	g_handler_ok = 0;
	CHECK(raise(SIGUSR1) == 0);
	CHECK(g_handler_ok == 1);
	qspin_unlock(&g_sig_held);
	tu_reset_handler(SIGUSR1);
}

/* ---- misuse (debug checks abort with a message) -------------------------- */

/* Run fn in a child with stderr to a pipe; it must die of SIGABRT and say
 * something. Runs before any thread exists (fork is then TSan-safe). */
static void expect_abort(void (*fn)(void), const char *name)
{
	int fds[2];
	char buf[512];
	size_t got = 0;
	int status;
	pid_t pid;

	CHECK(pipe(fds) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		signal(SIGABRT, SIG_DFL);
		fn();
		_exit(0); /* not reached when the check works */
	}
	close(fds[1]);
	for (;;) {
		ssize_t n = read(fds[0], buf + got, sizeof(buf) - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(buf) - 1)
			break;
	}
	buf[got] = '\0';
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) {
		fprintf(stderr, "%s: child status 0x%x, expected SIGABRT; stderr: %s\n", name,
			status, buf);
		CHECK(!"misuse check did not abort");
	}
	if (got == 0) {
		fprintf(stderr, "%s: aborted without a message\n", name);
		CHECK(!"misuse abort without a message");
	}
}

static void misuse_unlock_free(void)
{
	qspinlock_t l = QSPINLOCK_INIT;

	qspin_unlock(&l);
}

static void misuse_lock_null(void)
{
	qspinlock_t *volatile l = NULL;

	qspin_lock(l);
}

int main(void)
{
	tu_watchdog(120);
	setvbuf(stdout, NULL, _IONBF, 0);

	expect_abort(misuse_unlock_free, "unlock of a free lock");
	expect_abort(misuse_lock_null, "qspin_lock(NULL)");
	test_init();
	test_signal_trylock();
	test_other_threads();
	puts("qspin_trylock ok");
	return 0;
}
