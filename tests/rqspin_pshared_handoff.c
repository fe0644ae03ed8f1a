/* SPDX-License-Identifier: MIT */
/*
 * A process-shared lock used as a hand-off between processes: this
 * process takes it, a child process releases it, over and over. Nothing
 * can tell this process's table that the lock went, so the next
 * acquisition must drop the old entry (the word, free, is the truth).
 * Before, every round left one entry: after 31 rounds the table
 * overflowed for good, and the thread's relock of a private lock it held
 * ran into the 2 s timeout (-ETIMEDOUT) instead of -EDEADLK at once.
 *
 * Part 1 hands off through rqspin_lock, part 2 through rqspin_trylock.
 * Part 3 (another lock): a thread of this process releases it for us (a posted
 * release), then we take it again while it is free. The post must be
 * consumed with the stale entry: left behind, it would later count
 * against our new hold, and our relock of it would time out instead of
 * -EDEADLK.
 * Part 4 (white-box, a third lock): a signal handler that takes the lock
 * while the code it interrupted is in a lock call between its push and
 * its CAS, or in an unlock between its release store and its pop. The
 * entry that call has pushed looks stale (the word is free) but is not:
 * the clean-up must leave it, or the interrupted call goes on to hold the
 * lock without an entry (its AA detection lost). Simulated with the
 * inline push and a direct release store.
 * Part 5: a thread takes a lock in a shared page, another process
 * releases it, the program unmaps the page (or maps private memory there
 * and stores 1 where the word was), then the thread exits. Thread exit
 * used to follow the stale entry: a crash (SIGSEGV) on the unmapped page,
 * and on the remapped one the 1 read as "held" and overwritten with the
 * owner-dead mark.
 */
#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rqspin/rqspinlock.h>

#include "test_util.h"

#define ROUNDS 60
/* Long enough that a timeout can never pass for the instant -EDEADLK. */
#define AA_TIMEOUT (2ull * 1000 * 1000 * 1000)

static rqspinlock_t *L, *P; /* P: part 3's, untouched by parts 1 and 2 */
static int to_child[2], to_parent[2];

static void byte_write(int fd)
{
	char c = 0;

	CHECK(write(fd, &c, 1) == 1);
}

static void byte_read(int fd)
{
	char c;

	CHECK(read(fd, &c, 1) == 1);
}

/* The child: release L each time the parent says it holds it. */
static void child_releaser(void)
{
	for (int i = 0; i < ROUNDS; i++) {
		byte_read(to_child[0]);
		rqspin_unlock(L);
		byte_write(to_parent[1]);
	}
	_exit(0);
}

static void check_table_and_aa(const char *part)
{
	rqspinlock_t priv = RQSPINLOCK_INIT;
	uint64_t t0;
	int ret;

	/* At most two stale entries are left: one that each acquisition
	 * keeps (it could be an interrupted lock call's), and the last
	 * round's. */
	if (rqspin_held_locks()->cnt > 2) {
		tu_write_str(part);
		tu_write_str(": held-table entries left: ");
		tu_write_u64(rqspin_held_locks()->cnt);
		tu_write_str("\n");
		CHECK(rqspin_held_locks()->cnt <= 2);
	}
	CHECK(rqspin_lock(&priv) == 0);
	t0 = tu_now_ns();
	ret = rqspin_lock_timeout(&priv, AA_TIMEOUT);
	CHECK(ret == -EDEADLK);
	CHECK(tu_now_ns() - t0 < AA_TIMEOUT / 2);
	rqspin_unlock(&priv);
}

static void handoffs(bool use_trylock, const char *part)
{
	pid_t pid;
	int status;

	rqspin_lock_init_pshared(L);
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child_releaser();
	for (int i = 0; i < ROUNDS; i++) {
		if (use_trylock)
			CHECK(rqspin_trylock(L));
		else
			CHECK(rqspin_lock(L) == 0);
		byte_write(to_child[1]);
		byte_read(to_parent[0]);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	check_table_and_aa(part);
}

static void *release_for_main(void *arg)
{
	(void)arg;
	rqspin_unlock(P); /* main's lock: posted to main's record */
	return NULL;
}

static void posted_then_retaken(void)
{
	uint64_t t0;

	rqspin_lock_init_pshared(P);
	CHECK(rqspin_lock(P) == 0);
	tu_thread_join(tu_thread_start(release_for_main, NULL));
	CHECK(rqspin_lock(P) == 0); /* free: the old entry and the post go */
	t0 = tu_now_ns();
	CHECK(rqspin_lock_timeout(P, AA_TIMEOUT) == -EDEADLK);
	CHECK(tu_now_ns() - t0 < AA_TIMEOUT / 2);
	rqspin_unlock(P);
	/* The consumed post may leave a released mark (trimmed later), but
	 * no entry that names P. */
	for (uint32_t i = 0; i < rqspin_held_locks()->cnt && i < RQSPIN_NR_HELD; i++)
		CHECK(rqspin_held_locks()->locks[i] != P);
	CHECK(!rqspin_is_locked(P));
}

/* What a handler does with the lock: lock, unlock, trylock, unlock. */
static void handler_takes(rqspinlock_t *q)
{
	CHECK(rqspin_lock(q) == 0);
	rqspin_unlock(q);
	CHECK(rqspin_trylock(q));
	rqspin_unlock(q);
}

static void interrupted_calls(void)
{
	struct rqspin__thread_hot *self = rqspin__self();
	rqspinlock_t *Q = L + 2;
	uint32_t cnt0;

	rqspin_lock_init_pshared(Q);
	cnt0 = rqspin_held_locks()->cnt;
	/* A lock call, pushed, before its CAS. */
	rqspin__held_push(self, Q);
	handler_takes(Q);
	CHECK(rqspin_held_locks()->cnt == cnt0 + 1);
	CHECK(rqspin_held_locks()->locks[cnt0] == Q);
	CHECK(rqspin__held_pop_top(self, Q));
	/* An unlock, after its release store, before its pop. */
	CHECK(rqspin_lock(Q) == 0);
	__atomic_store_n(&Q->w.b.locked, 0, __ATOMIC_RELEASE);
	handler_takes(Q);
	CHECK(rqspin_held_locks()->cnt == cnt0 + 1);
	CHECK(rqspin_held_locks()->locks[cnt0] == Q);
	CHECK(rqspin__held_pop_top(self, Q));
}

static int ready[2], go[2];

static void *hold_then_exit(void *arg)
{
	rqspinlock_t *x = arg;

	CHECK(rqspin_lock(x) == 0);
	byte_write(to_child[1]); /* the child releases x */
	byte_read(to_parent[0]);
	byte_write(ready[1]);    /* main unmaps (and remaps) x's page */
	byte_read(go[0]);
	return NULL;             /* thread exit: x's entry is stale */
}

static void stale_entry_at_exit(bool remap)
{
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_t t;
	pid_t pid;
	int status;

	CHECK(page != MAP_FAILED);
	rqspin_lock_init_pshared(page);
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0 && pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		byte_read(to_child[0]);
		rqspin_unlock(page);
		byte_write(to_parent[1]);
		_exit(0);
	}
	t = tu_thread_start(hold_then_exit, page);
	byte_read(ready[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(munmap(page, 4096) == 0);
	if (remap) {
		CHECK(mmap(page, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			   -1, 0) == page);
		*(volatile uint32_t *)page = 1; /* the program's data */
	}
	byte_write(go[1]);
	tu_thread_join(t);
	if (remap) {
		CHECK_EQ_U64(*(volatile uint32_t *)page, 1);
		CHECK(munmap(page, 4096) == 0);
	}
	for (int i = 0; i < 2; i++) {
		close(to_child[i]);
		close(to_parent[i]);
		close(ready[i]);
		close(go[i]);
	}
}

int main(void)
{
	L = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(L != MAP_FAILED);
	P = L + 1;
	handoffs(false, "rqspin_lock");
	handoffs(true, "rqspin_trylock");
	posted_then_retaken();
	interrupted_calls();
	stale_entry_at_exit(false);
	stale_entry_at_exit(true);
	tu_write_str("rqspin_pshared_handoff: ok\n");
	return 0;
}
