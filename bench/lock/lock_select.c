/* SPDX-License-Identifier: MIT */
/* --locks of the lock and torture suites (lock_peers.h). */
#include "lock_peers.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

bool lock_peers_parse(const char *s, const struct lock_peer ***locks, size_t *nlocks)
{
	const struct lock_peer **l;
	char **names;
	size_t n;

	free(*locks);
	*locks = NULL;
	*nlocks = 0;
	if (strcmp(s, "all") == 0) {
		l = malloc(lock_peers_count * sizeof(*l));
		if (!l)
			return false;
		*locks = l;
		for (size_t i = 0; i < lock_peers_count; i++)
			if (!(lock_peers[i]->flags & LP_NOT_DEFAULT))
				l[(*nlocks)++] = lock_peers[i];
		return true;
	}
	if (!cli_split("--locks", s, &names, &n))
		return false;
	l = malloc(n * sizeof(*l));
	if (!l) {
		free(names);
		return false;
	}
	*locks = l;
	for (size_t i = 0; i < n; i++) {
		const struct lock_peer *p = lock_peer_find(names[i]);
		bool dup = false;

		if (!p) {
			cli_error("--locks: unknown lock '%s' (see --help for the list)", names[i]);
			free(names);
			return false;
		}
		for (size_t k = 0; k < *nlocks; k++)
			dup |= l[k] == p;
		if (!dup)
			l[(*nlocks)++] = p;
	}
	free(names);
	return true;
}

bool lock_peers_parse_opt(const char *value, void *dest)
{
	struct lock_selection *sel = dest;

	return lock_peers_parse(value, sel->locks, sel->n);
}

void lock_peers_json(struct json *j, const char *key, const struct lock_peer *const *locks,
		     size_t n)
{
	json_begin_array(j, key);
	for (size_t i = 0; i < n; i++)
		json_string(j, NULL, locks[i]->name);
	json_end_array(j);
}
