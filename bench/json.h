/* SPDX-License-Identifier: MIT */
/* A minimal streaming JSON writer (pretty-printed, two-space indent). */
#ifndef BENCH_JSON_H
#define BENCH_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	int depth;
	bool first[JSON_MAX_DEPTH]; /* no member written yet at this depth */
};

void json_init(struct json *j, FILE *f);
/* key is NULL inside arrays (and for the top-level value). */
void json_begin_object(struct json *j, const char *key);
void json_end_object(struct json *j);
void json_begin_array(struct json *j, const char *key);
void json_end_array(struct json *j);
void json_string(struct json *j, const char *key, const char *s); /* NULL: null */
void json_double(struct json *j, const char *key, double v);       /* NaN/inf: null */
void json_uint(struct json *j, const char *key, uint64_t v);
void json_bool(struct json *j, const char *key, bool v);
/* An array of n unsigned integers. */
void json_uint_array(struct json *j, const char *key, const unsigned *v, size_t n);

#endif
