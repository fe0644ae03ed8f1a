/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the allocator tests: address-keyed fill patterns, statm
 * reading, stats shortcuts. Header-only; the pattern functions are
 * async-signal-safe.
 */
#ifndef RQSPIN_ALLOC_COMMON_H
#define RQSPIN_ALLOC_COMMON_H

#include <fcntl.h>
#include <rqspin/alloc.h>

#include "test_util.h"

/* Byte j of an object at p filled for `gen`: depends on the address, so an
 * object that is handed out twice, or overlaps another, shows up. */
static inline uint8_t ac_byte(const void *p, size_t j, uint32_t gen)
{
	uint64_t x = ((uint64_t)(uintptr_t)p >> 3) * 0x9e3779b97f4a7c15ull + gen;

	return (uint8_t)((x >> 29) + j * 131u + (j >> 8));
}

/* Fill n bytes (the whole usable size is fine too). Async-signal-safe. */
static inline void ac_fill(void *p, size_t n, uint32_t gen)
{
	uint8_t *b = p;

	for (size_t j = 0; j < n; j++)
		b[j] = ac_byte(p, j, gen);
}

/* True when the n bytes still hold the pattern. Async-signal-safe. */
static inline bool ac_ok(const void *p, size_t n, uint32_t gen)
{
	const uint8_t *b = p;

	for (size_t j = 0; j < n; j++)
		if (b[j] != ac_byte(p, j, gen))
			return false;
	return true;
}

#define AC_CHECK(p, n, gen) CHECK(ac_ok((p), (n), (gen)))

/* The size class of a request (mirror of the documented classes). */
static inline size_t ac_class_size(size_t s)
{
	static const uint32_t cls[RQSPIN_ALLOC_NCLASSES] = {
		8,     16,    32,    48,    64,    80,    96,    112,   128,  160,
		192,   224,   256,   320,   384,   448,   512,   640,   768,  896,
		1024,  1280,  1536,  1792,  2048,  2560,  3072,  3584,  4096, 5120,
		6144,  7168,  8192,  10240, 12288, 14336, 16384,
	};

	for (int i = 0; i < RQSPIN_ALLOC_NCLASSES; i++)
		if (s <= cls[i])
			return cls[i];
	return 0;
}

/* Documented alignment of a request of s bytes. */
static inline size_t ac_align(size_t s)
{
	size_t c = ac_class_size(s);

	if (s <= 8)
		return 8;
	if (c == 0)
		return 64;
	if ((c & (c - 1)) == 0)
		return c;
	return 16;
}

static inline struct rqspin_alloc_stats ac_stats(void)
{
	struct rqspin_alloc_stats st;

	rqspin_alloc_stats_get(&st);
	return st;
}

/* Resident set in bytes from /proc/self/statm (0 if unreadable). */
static inline uint64_t ac_rss(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t n;
	uint64_t v = 0;
	const char *p;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strchr(buf, ' ');
	if (!p)
		return 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v * (uint64_t)sysconf(_SC_PAGESIZE);
}

#endif /* RQSPIN_ALLOC_COMMON_H */
