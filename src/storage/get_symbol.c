/* SPDX-License-Identifier: MIT */
/*
 * rqspin_storage_get as a real, exported function. C and C++ callers use
 * the inline version in storage.h; this one is for everything that cannot
 * inline a C header: foreign-function interfaces (ctypes, bindgen, ...),
 * dlsym(), and programs built against an earlier header that called it.
 * It is the same code: the header's inline function is compiled here under
 * another name and wrapped.
 */
#define rqspin_storage_get rqspin__storage_get_inline
#include <rqspin/storage.h>
#undef rqspin_storage_get

RQSPIN_API void *rqspin_storage_get(struct rqspin_storage_map *map,
				    struct rqspin_storage_owner *owner, const void *init,
				    unsigned flags, int *err);

void *rqspin_storage_get(struct rqspin_storage_map *map, struct rqspin_storage_owner *owner,
			 const void *init, unsigned flags, int *err)
{
	return rqspin__storage_get_inline(map, owner, init, flags, err);
}
