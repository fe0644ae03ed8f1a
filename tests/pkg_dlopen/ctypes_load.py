# SPDX-License-Identifier: MIT
# Python loads librqspin with ctypes (a process not linked with it) and
# uses the allocator and storage. Usage: python3 ctypes_load.py [library]
import ctypes
import sys

name = sys.argv[1] if len(sys.argv) > 1 else "librqspin.so.0"
lib = ctypes.CDLL(name)

lib.rqspin_version_string.restype = ctypes.c_char_p
lib.rqspin_malloc_nolock.restype = ctypes.c_void_p
lib.rqspin_malloc_nolock.argtypes = [ctypes.c_size_t, ctypes.c_uint]
lib.rqspin_free_nolock.argtypes = [ctypes.c_void_p]
lib.rqspin_storage_map_create.restype = ctypes.c_void_p
lib.rqspin_storage_map_create.argtypes = [ctypes.c_size_t, ctypes.c_uint]
lib.rqspin_storage_map_destroy.argtypes = [ctypes.c_void_p]
lib.rqspin_storage_get.restype = ctypes.POINTER(ctypes.c_long)
lib.rqspin_storage_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_uint, ctypes.POINTER(ctypes.c_int)]
lib.rqspin_storage_owner_destroy.argtypes = [ctypes.c_void_p]

p = lib.rqspin_malloc_nolock(64, 1)  # RQSPIN_ALLOC_ZERO
assert p, "rqspin_malloc_nolock"
assert ctypes.cast(p, ctypes.POINTER(ctypes.c_long))[7] == 0
lib.rqspin_free_nolock(p)

owner = ctypes.c_void_p(None)  # struct rqspin_storage_owner: one pointer
err = ctypes.c_int(0)
m = lib.rqspin_storage_map_create(ctypes.sizeof(ctypes.c_long), 0)
assert m, "rqspin_storage_map_create"
v = lib.rqspin_storage_get(m, ctypes.byref(owner), None, 1, ctypes.byref(err))  # F_CREATE
assert v and err.value == 0, "rqspin_storage_get: %d" % err.value
v[0] = 7
lib.rqspin_storage_owner_destroy(ctypes.byref(owner))
lib.rqspin_storage_map_destroy(m)
print("ctypes: librqspin %s loaded; allocator and storage work"
      % lib.rqspin_version_string().decode())
