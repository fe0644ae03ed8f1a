/* SPDX-License-Identifier: MIT */
/*
 * Telling AddressSanitizer and Valgrind which of our memory is allocated.
 *
 * ASan: free objects are poisoned, so a use after free of an object from
 * this allocator is reported. Our own code reads and writes the links of
 * free objects, so every allocator function that may touch object memory
 * carries ALLOC_FN (no_sanitize_address); user code stays instrumented.
 *
 * Valgrind (memcheck): objects are announced with MALLOCLIKE/FREELIKE
 * client requests; the words we keep in a free object are made
 * addressable again before we write them. The marking code is in
 * sanitize.c.
 */
#ifndef RQSPIN_ALLOC_SANITIZE_H
#define RQSPIN_ALLOC_SANITIZE_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOC_ASAN 1
#endif
#endif

#ifdef ALLOC_ASAN
#include <sanitizer/asan_interface.h>
#define ALLOC_FN __attribute__((no_sanitize_address))
#else
#define ALLOC_FN
#endif

#if !defined(RQSPIN_ALLOC_NO_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define ALLOC_VALGRIND 1
#endif
#endif

/*
 * Whether the calls below do anything: always under ASan; under Valgrind
 * when the process runs on it (checked once at load time, so a normal run
 * pays one predictable branch per operation, not the client requests).
 */
#if defined(ALLOC_ASAN)
#define SAN_ACTIVE 1
#elif defined(ALLOC_VALGRIND)
extern int alloc_on_valgrind;
#define SAN_ACTIVE __builtin_expect(alloc_on_valgrind, 0)
#else
#define SAN_ACTIVE 0
#endif

/* The object [p, p+n) is handed to the user. */
void san_alloc_slow(void *p, size_t n, int zeroed);
/* The object [p, p+n) is freed; we are about to write its first `keep`
 * bytes (links): call before writing them. It is poisoned, and must be
 * published on a list only after this. */
void san_free_slow(void *p, size_t n, size_t keep);
/* Fresh, never-allocated objects [p, p+n) (carved from a page). */
void san_carve_slow(void *p, size_t n);

static inline void san_alloc(void *p, size_t n, int zeroed)
{
	if (SAN_ACTIVE)
		san_alloc_slow(p, n, zeroed);
}

static inline void san_free(void *p, size_t n, size_t keep)
{
	if (SAN_ACTIVE)
		san_free_slow(p, n, keep);
}

static inline void san_carve(void *p, size_t n)
{
	if (SAN_ACTIVE)
		san_carve_slow(p, n);
}

#endif /* RQSPIN_ALLOC_SANITIZE_H */
