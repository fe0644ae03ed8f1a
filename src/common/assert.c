/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"

/* Built in every flavour (a program may mix a debug and a release build of
 * the sources in tests); only debug builds call it. */
void rqs_assert_fail(const char *file, unsigned line, const char *cond)
{
	char num[12];
	int n = (int)sizeof(num);
	ssize_t w;

	do {
		num[--n] = (char)('0' + line % 10);
		line /= 10;
	} while (line && n > 0);
	w = write(STDERR_FILENO, "rqspin: internal assertion failed: ", 35);
	w = write(STDERR_FILENO, file, strlen(file));
	w = write(STDERR_FILENO, ":", 1);
	w = write(STDERR_FILENO, num + n, sizeof(num) - (size_t)n);
	w = write(STDERR_FILENO, ": ", 2);
	w = write(STDERR_FILENO, cond, strlen(cond));
	w = write(STDERR_FILENO, "\n", 1);
	(void)w;
	abort();
}
