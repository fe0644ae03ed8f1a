/* SPDX-License-Identifier: MIT */
/*
 * The internal assertion (src/common/assert.h): with RQS_ASSERT a false
 * condition writes "file:line: condition" to stderr and aborts; a true one
 * does nothing. A child process takes the failing one; the parent reads
 * its stderr through a pipe.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/assert.h"

int main(void)
{
	volatile int x = 1;
	char buf[512];
	ssize_t n, len = 0;
	int fds[2], st;
	pid_t pid;

	rqs_assert(x == 1);
	if (pipe(fds) != 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		signal(SIGABRT, SIG_DFL);
		rqs_assert(x == 2);
		_exit(0); /* not reached */
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(buf) - 1 &&
	       (n = read(fds[0], buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	buf[len] = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT) {
		fprintf(stderr, "FAIL: the child did not abort (status %#x)\n", st);
		return 1;
	}
	if (!strstr(buf, "internal assertion failed") || !strstr(buf, "common_assert.c:") ||
	    !strstr(buf, "x == 2")) {
		fprintf(stderr, "FAIL: message: %s\n", buf);
		return 1;
	}
	printf("ok: %s", buf);
	return 0;
}
