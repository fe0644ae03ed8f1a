/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rqspin/static/lock_word.h>

void rqspin__misuse(const char *what, const void *lock)
{
	static const char hex[] = "0123456789abcdef";
	char addr[2 + 16 + 2];
	uintptr_t v = (uintptr_t)lock;
	int i;
	ssize_t w;

	addr[0] = '0';
	addr[1] = 'x';
	for (i = 0; i < 16; i++)
		addr[2 + i] = hex[(v >> (60 - 4 * i)) & 0xf];
	addr[18] = ')';
	addr[19] = '\n';
	w = write(STDERR_FILENO, "rqspin: misuse: ", 16);
	w = write(STDERR_FILENO, what, strlen(what));
	w = write(STDERR_FILENO, " (lock ", 7);
	w = write(STDERR_FILENO, addr, sizeof(addr));
	(void)w;
	abort();
}
