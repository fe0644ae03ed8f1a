/* SPDX-License-Identifier: MIT */
#include "verdict.h"

#include <math.h>
#include <string.h>

struct verdict *vl_add(struct verdict_list *l, const char *area, double value, double limit,
		       bool ge)
{
	struct verdict *v;

	if (l->n >= VERDICT_MAX)
		return NULL;
	v = &l->v[l->n++];
	memset(v, 0, sizeof(*v));
	v->area = area;
	v->value = value;
	v->limit = limit;
	if (isnan(value))
		v->status = V_FAIL;
	else
		v->status = (ge ? value >= limit : value <= limit) ? V_PASS : V_FAIL;
	return v;
}

void vl_count(const struct verdict_list *l, size_t *pass, size_t *fail)
{
	for (size_t i = 0; i < l->n; i++) {
		*pass += l->v[i].status == V_PASS;
		*fail += l->v[i].status == V_FAIL;
	}
}

void vl_print(FILE *f, const char *title, const struct verdict_list *l,
	      const struct load_share *load)
{
	size_t pass = 0, fail = 0;

	if (!l->n)
		return;
	fprintf(f, "%s\n", title);
	for (size_t i = 0; i < l->n; i++) {
		const struct verdict *v = &l->v[i];
		char val[24];

		if (isnan(v->value))
			snprintf(val, sizeof(val), "-");
		else if (v->is_count)
			snprintf(val, sizeof(val), "%.0f", v->value);
		else
			snprintf(val, sizeof(val), "%.3f", v->value);
		fprintf(f, "  %-4s  %-7s  %-66s %7s  %s\n",
			v->status == V_PASS ? "PASS" : v->status == V_FAIL ? "FAIL" : "info", v->area,
			v->target, val, v->measured);
	}
	vl_count(l, &pass, &fail);
	fprintf(f, "  %zu passed, %zu failed", pass, fail);
	if (load && load->ok && load->other > VERDICT_BUSY_SHARE)
		fprintf(f, " (on a busy machine: other processes used %.0f%% of the CPU time)",
			100 * load->other);
	fputs("\n\n", f);
}

void vl_json(struct json *j, const char *key, const struct verdict_list *l)
{
	json_begin_array(j, key);
	for (size_t i = 0; i < l->n; i++) {
		const struct verdict *v = &l->v[i];

		json_begin_object(j, NULL);
		json_string(j, "area", v->area);
		json_string(j, "target", v->target);
		json_string(j, "status", v->status == V_PASS ? "pass" : v->status == V_FAIL ? "fail"
											: "info");
		json_double(j, "value", v->value);
		json_double(j, "limit", v->limit);
		json_string(j, "measured", v->measured);
		json_end_object(j);
	}
	json_end_array(j);
}
