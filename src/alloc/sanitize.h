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

#include "common/compiler.h"

#ifdef RQS_ASAN
#define ALLOC_ASAN 1
#endif

#ifdef ALLOC_ASAN
#include <sanitizer/asan_interface.h>
#define ALLOC_FN __attribute__((no_sanitize_address))
#else
#define ALLOC_FN
#endif

/* RQSPIN_VALGRIND: the build found Valgrind's headers (CMakeLists.txt). */
#ifdef RQSPIN_VALGRIND
#include <valgrind/memcheck.h>
#define ALLOC_VALGRIND 1
#endif

/*
 * Whether the calls below do anything: always under ASan; under Valgrind
 * when the process runs on it (checked once at load time, so a normal run
 * pays one predictable branch per operation, not the client requests).
 */
#if defined(ALLOC_ASAN)
#define SAN_ACTIVE 1
#elif defined(ALLOC_VALGRIND)
#define SAN_ACTIVE RQS_UNLIKELY(rqspin__valgrind != 0)
#else
#define SAN_ACTIVE 0
#endif

/*
 * Memcheck redzone: under Valgrind every small object ends in SAN_REDZONE
 * bytes that stay unaddressable while it is allocated, so a write past
 * its end, natively the next object's first bytes, is reported. The
 * request is grown by the redzone before its size class is chosen
 * (san_redzoned), and the user gets the class size less the redzone
 * (rqspin_malloc_usable_size says so too). Large objects need none: their
 * mapping's tail past the requested size is made unaddressable instead.
 */
#define SAN_REDZONE 16u

/* The object [p, p+n) is handed to the user; its slot is [p, p+slot)
 * (the rest is redzone under Valgrind). */
void rqs_san_alloc_slow(void *p, size_t n, size_t slot, int zeroed);
/* The object [p, p+n) is freed; we are about to write its first `keep`
 * bytes (links): call before writing them. It is poisoned, and must be
 * published on a list only after this. */
void rqs_san_free_slow(void *p, size_t n, size_t keep);
/* Fresh, never-allocated objects [p, p+n) (carved from a page). */
void rqs_san_carve_slow(void *p, size_t n);

static inline void san_alloc(void *p, size_t n, size_t slot, int zeroed)
{
	if (SAN_ACTIVE)
		rqs_san_alloc_slow(p, n, slot, zeroed);
}

/* What the user may use of a large object of size bytes in room bytes. */
static inline size_t san_large_usable(size_t size, size_t room)
{
#ifdef ALLOC_VALGRIND
	if (RQS_UNLIKELY(rqspin__valgrind != 0))
		return size;
#endif
	(void)size;
	return room;
}

/* Under Valgrind: what finish_slow first announces of a slot of bs bytes
 * (everything but the redzone), before rqs_san_exact trims it to the request. */
static inline size_t san_slot_usable(size_t bs)
{
#ifdef ALLOC_VALGRIND
	if (RQS_UNLIKELY(rqspin__valgrind != 0))
		return bs - SAN_REDZONE;
#endif
	return bs;
}

/* Under Valgrind: object p (slot of bs bytes) is the user's size bytes
 * only; the size is kept in the slot's last word, inside the redzone. */
void rqs_san_exact(void *p, size_t size, size_t bs);
size_t rqs_san_exact_size(const void *p, size_t bs);

/* What the user may use of the small object p of class size bs: the
 * class size, or under Valgrind exactly the request. */
static inline size_t san_usable(const void *p, size_t bs)
{
#ifdef ALLOC_VALGRIND
	if (RQS_UNLIKELY(rqspin__valgrind != 0))
		return rqs_san_exact_size(p, bs);
#endif
	(void)p;
	return bs;
}

/* Under Valgrind: the 16 bytes free's checks read (the canary) are made
 * readable first; an object smaller than that (exact size 0..15) has them
 * unaddressable. Freed objects are poisoned again by san_free. */
void rqs_san_free_peek(const void *p);

static inline void san_free_peek(const void *p)
{
#ifdef ALLOC_VALGRIND
	if (RQS_UNLIKELY(rqspin__valgrind != 0))
		rqs_san_free_peek(p);
#endif
	(void)p;
}

static inline void san_free(void *p, size_t n, size_t keep)
{
	if (SAN_ACTIVE)
		rqs_san_free_slow(p, n, keep);
}

static inline void san_carve(void *p, size_t n)
{
	if (SAN_ACTIVE)
		rqs_san_carve_slow(p, n);
}

#endif /* RQSPIN_ALLOC_SANITIZE_H */
