/* An ordinary pthread_spinlock program: it includes no librqspin header.
 * tests/shim.cmake runs it with and without librqspin-pthread.so
 * preloaded; SHIM_EXPECTED=1 says the shim should be in effect. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define ITERS 100000

static pthread_spinlock_t lock;
static long counter;
static long shadow; /* must always equal counter inside the lock */

#define CHECK(c)                                                           \
	do {                                                               \
		if (!(c)) {                                                \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                           \
		}                                                          \
	} while (0)

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < ITERS; i++) {
		CHECK(pthread_spin_lock(&lock) == 0);
		CHECK(counter == shadow);
		counter++;
		shadow++;
		CHECK(pthread_spin_unlock(&lock) == 0);
	}
	return NULL;
}

int main(void)
{
	int shim = getenv("SHIM_EXPECTED") && atoi(getenv("SHIM_EXPECTED"));
	pthread_t t[THREADS];
	int status;
	pid_t pid;

	/* The shim pulls librqspin in; without it the symbol is absent. */
	CHECK((dlsym(RTLD_DEFAULT, "rqspin_lock_stats_get") != NULL) == shim);

	CHECK(pthread_spin_init(&lock, PTHREAD_PROCESS_PRIVATE) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(counter == (long)THREADS * ITERS);

	CHECK(pthread_spin_trylock(&lock) == 0);
	CHECK(pthread_spin_trylock(&lock) == EBUSY);
	if (shim) {
		/* Relocking: glibc would spin forever; POSIX allows EDEADLK,
		 * which RQSPIN_PTHREAD_DEADLOCK=error (set by shim.cmake)
		 * asks for. */
		CHECK(pthread_spin_lock(&lock) == EDEADLK);
		CHECK(pthread_spin_destroy(&lock) == EBUSY);
	}
	CHECK(pthread_spin_unlock(&lock) == 0);

	/* fork: the child uses the lock, with threads of its own. */
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		counter = shadow = 0;
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0);
		for (int i = 0; i < THREADS; i++)
			CHECK(pthread_join(t[i], NULL) == 0);
		_exit(counter == (long)THREADS * ITERS ? 0 : 1);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(pthread_spin_destroy(&lock) == 0);
	return 0;
}
