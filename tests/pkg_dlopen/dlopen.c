/* SPDX-License-Identifier: MIT */
/*
 * A process that is not linked with librqspin loads it as a plugin would,
 * dlopen("librqspin.so.0"), and uses the lock, the allocator and storage
 * through dlsym. Loading fails when the library (or a library it needs)
 * wants static TLS the process cannot give it after start-up.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The ABI as declared in include/rqspin/ (no header: nothing is linked). */
typedef unsigned int rqspinlock_word;
struct owner {
	void *p;
};

#define SYM(h, name, type) ((type)sym(h, name))

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		fprintf(stderr, "dlopen test: no %s: %s\n", name, dlerror());
	return p;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "librqspin.so.0";
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	rqspinlock_word lock = 0;
	struct owner o = { 0 };
	sigset_t old;
	int err = 0;

	if (!h) {
		fprintf(stderr, "dlopen test: dlopen(%s): %s\n", name, dlerror());
		return 1;
	}
	const char *(*version)(void) = SYM(h, "rqspin_version_string", const char *(*)(void));
	int (*lock_sigsave)(void *, sigset_t *) = SYM(h, "rqspin_lock_sigsave", int (*)(void *, sigset_t *));
	void (*unlock_sigrestore)(void *, const sigset_t *) =
		SYM(h, "rqspin_unlock_sigrestore", void (*)(void *, const sigset_t *));
	void *(*malloc_nolock)(size_t, unsigned) = SYM(h, "rqspin_malloc_nolock", void *(*)(size_t, unsigned));
	void (*free_nolock)(void *) = SYM(h, "rqspin_free_nolock", void (*)(void *));
	void *(*map_create)(size_t, unsigned) = SYM(h, "rqspin_storage_map_create", void *(*)(size_t, unsigned));
	void (*map_destroy)(void *) = SYM(h, "rqspin_storage_map_destroy", void (*)(void *));
	void *(*get)(void *, struct owner *, const void *, unsigned, int *) =
		SYM(h, "rqspin_storage_get", void *(*)(void *, struct owner *, const void *, unsigned, int *));
	void (*owner_destroy)(struct owner *) = SYM(h, "rqspin_storage_owner_destroy", void (*)(struct owner *));

	if (!version || !lock_sigsave || !unlock_sigrestore || !malloc_nolock || !free_nolock ||
	    !map_create || !map_destroy || !get || !owner_destroy)
		return 1;

	if (lock_sigsave(&lock, &old) != 0 || lock_sigsave(&lock, &old) != -EDEADLK) {
		fprintf(stderr, "dlopen test: the lock\n");
		return 1;
	}
	unlock_sigrestore(&lock, &old);

	long *p = malloc_nolock(64, 1);
	if (!p || p[7] != 0) {
		fprintf(stderr, "dlopen test: the allocator\n");
		return 1;
	}
	free_nolock(p);

	void *map = map_create(sizeof(long), 0);
	long *v = map ? get(map, &o, NULL, 1 /* RQSPIN_STORAGE_F_CREATE */, &err) : NULL;
	if (!v || err) {
		fprintf(stderr, "dlopen test: storage (%s, %d)\n", map ? "get" : "map", err);
		return 1;
	}
	*v = 7;
	if (get(map, &o, NULL, 0, &err) != v) {
		fprintf(stderr, "dlopen test: storage lookup\n");
		return 1;
	}
	owner_destroy(&o);
	map_destroy(map);
	printf("dlopen test: librqspin %s loaded at run time; lock, allocator, storage work\n",
	       version());
	/* No dlclose: liburcu's call_rcu worker thread lives on. */
	return 0;
}
