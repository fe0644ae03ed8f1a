/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "lock/stall.h"

/* "/proc/" + decimal tid + "/stat", without snprintf (not
 * async-signal-safe). /proc/<tid> exists for every thread of the PID
 * namespace, ours and other processes' alike. */
static void stat_path(char *buf, pid_t tid)
{
	static const char head[] = "/proc/";
	static const char tail[] = "/stat";
	char digits[12];
	unsigned n = 0, i, len = 0;
	unsigned long v = (unsigned long)tid;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; head[i]; i++)
		buf[len++] = head[i];
	while (n)
		buf[len++] = digits[--n];
	for (i = 0; i <= sizeof(tail) - 1; i++)
		buf[len++] = tail[i];
}

char rqs_stall_thread_state(pid_t tid)
{
	char path[48], buf[512];
	int e = errno, fd;
	ssize_t len;
	char state = 0;

	if (tid <= 0)
		return 0;
	stat_path(path, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto out;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len > 0) {
		/* "tid (comm) S ...": comm may hold ')' and spaces, so the
		 * state follows the last ')'. */
		ssize_t i = len;

		while (i-- > 0) {
			if (buf[i] == ')') {
				if (i + 2 < len)
					state = buf[i + 2];
				break;
			}
		}
	}
out:
	errno = e;
	return state;
}

uint64_t rqs_stall_thread_cpu_ns(pid_t tid)
{
	/* The kernel's per-thread CPU clock id (what pthread_getcpuclockid
	 * returns): ~tid << 3, CPUCLOCK_PERTHREAD (4) | CPUCLOCK_SCHED (2). */
	clockid_t id = (clockid_t)(((unsigned)~tid << 3) | 6u);
	struct timespec ts;
	int e = errno;
	uint64_t ns = UINT64_MAX;

	if (tid > 0 && clock_gettime(id, &ts) == 0)
		ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	errno = e;
	return ns;
}
