/* SPDX-License-Identifier: MIT */
/* Bad pointers and heap corruption: messages with write(2), no stdio. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"

static void say(const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		ssize_t w = write(STDERR_FILENO, s, n);

		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		s += w;
		n -= (size_t)w;
	}
}

static __attribute__((noreturn)) void die(const char *what, const void *p)
{
	static const char hex[] = "0123456789abcdef";
	char addr[2 + 16 + 3];
	uintptr_t v = (uintptr_t)p;
	int i;

	addr[0] = '0';
	addr[1] = 'x';
	for (i = 0; i < 16; i++)
		addr[2 + i] = hex[(v >> (60 - 4 * i)) & 0xf];
	addr[18] = ')';
	addr[19] = '\n';
	addr[20] = '\0';
	say("rqspin alloc: ");
	say(what);
	say(" (pointer ");
	say(addr);
	abort();
}

#ifdef RQSPIN_ALLOC_TEST_HOOKS
void (*rqspin__alloc_test_hook)(unsigned where, unsigned cls);
#endif

void rqs_alloc_bad_pointer(const char *what, const void *p)
{
#if RQSPIN_ALLOC_DEBUG
	die(what, p);
#else
	(void)what;
	(void)p;
	count_shared(&rqs_alloc_gstats.bad_frees, 1);
#endif
}

void rqs_alloc_corrupt(const char *what, const void *p)
{
	die(what, p);
}
