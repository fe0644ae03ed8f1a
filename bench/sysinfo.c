/* SPDX-License-Identifier: MIT */
#include "sysinfo.h"

#include <sched.h>
#include <stdio.h> /* defines __GLIBC__ on glibc */
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <rqspin/rqspin.h>
#ifdef RQSPIN_BENCH_HAVE_CK
#include <ck_md.h>
#endif

#ifndef RQSPIN_BENCH_BUILD_TYPE
#define RQSPIN_BENCH_BUILD_TYPE "unknown"
#endif


static void trim(char *s)
{
	size_t n = strlen(s);
	char *p = s;

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	memmove(s, p, strlen(p) + 1);
}

/* Value of the first "key : value" line of /proc/cpuinfo with that key. */
static int cpuinfo_field(const char *key, char *out, size_t outsz)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	size_t klen = strlen(key);
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon || strncmp(line, key, klen) != 0)
			continue;
		if (line[klen] != ' ' && line[klen] != '\t' && line[klen] != ':')
			continue;
		snprintf(out, outsz, "%s", colon + 1);
		trim(out);
		found = out[0] != 0;
		break;
	}
	fclose(f);
	return found;
}

static double timer_cost_ns(void)
{
	struct timespec a, b;
	double best = 1e9;

	/* The fastest of a few batches: what one sample adds to a latency. */
	for (int rep = 0; rep < 5; rep++) {
		struct timespec t;
		const int n = 2000;
		double ns;

		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < n; i++)
			clock_gettime(CLOCK_MONOTONIC, &t);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n;
		if (ns < best)
			best = ns;
	}
	return best;
}

void sysinfo_collect(struct sysinfo_rec *s)
{
	struct utsname u;
	cpu_set_t set;
	long n;
	time_t now = time(NULL);
	struct tm tm;

	memset(s, 0, sizeof(*s));
	if (!cpuinfo_field("model name", s->cpu, sizeof(s->cpu))) {
		/* aarch64 kernels have no model name: implementer + part. */
		char impl[32] = "", part[32] = "";

		if (cpuinfo_field("CPU implementer", impl, sizeof(impl)) &&
		    cpuinfo_field("CPU part", part, sizeof(part)))
			snprintf(s->cpu, sizeof(s->cpu), "implementer %s part %s", impl, part);
		else
			snprintf(s->cpu, sizeof(s->cpu), "unknown");
	}
	n = sysconf(_SC_NPROCESSORS_ONLN);
	s->cores = n > 0 ? (unsigned)n : 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		s->cores_usable = (unsigned)CPU_COUNT(&set);
	else
		s->cores_usable = s->cores;
	if (uname(&u) == 0)
		snprintf(s->kernel, sizeof(s->kernel), "%s %s %s", u.sysname, u.release, u.machine);
	else
		snprintf(s->kernel, sizeof(s->kernel), "unknown");
#if defined(__clang__)
	snprintf(s->compiler, sizeof(s->compiler), "%s", __VERSION__);
#elif defined(__GNUC__)
	snprintf(s->compiler, sizeof(s->compiler), "gcc %s", __VERSION__);
#else
	snprintf(s->compiler, sizeof(s->compiler), "unknown");
#endif
	snprintf(s->build_type, sizeof(s->build_type), "%s",
		 RQSPIN_BENCH_BUILD_TYPE[0] ? RQSPIN_BENCH_BUILD_TYPE : "none");
#ifdef __GLIBC__
	snprintf(s->libc, sizeof(s->libc), "glibc %s", gnu_get_libc_version());
#else
	snprintf(s->libc, sizeof(s->libc), "libc unknown");
#endif
#ifdef RQSPIN_BENCH_HAVE_CK
	snprintf(s->ck, sizeof(s->ck), "%s", CK_VERSION);
#else
	snprintf(s->ck, sizeof(s->ck), "none");
#endif
	snprintf(s->librqspin, sizeof(s->librqspin), "%d.%d.%d", RQSPIN_VERSION_MAJOR,
		 RQSPIN_VERSION_MINOR, RQSPIN_VERSION_PATCH);
	gmtime_r(&now, &tm);
	strftime(s->date, sizeof(s->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	s->timer_ns = timer_cost_ns();
}

void sysinfo_print(FILE *f, const struct sysinfo_rec *s, const char *prefix)
{
	fprintf(f, "%smachine:  %s, %u cores online (%u usable), %s\n", prefix, s->cpu, s->cores,
		s->cores_usable, s->kernel);
	fprintf(f, "%sbuild:    %s, %s, %s, librqspin %s, ck %s\n", prefix, s->build_type,
		s->compiler, s->libc, s->librqspin, s->ck);
	fprintf(f, "%sdate:     %s; clock_gettime costs %.0f ns (included in latencies)\n", prefix,
		s->date, s->timer_ns);
}

void load_snapshot(struct load_snap *s)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[10] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	struct rusage ru, rc;
	int n;

	memset(s, 0, sizeof(*s));
	if (!f)
		return;
	/* cpu  user nice system idle iowait irq softirq steal guest guest_nice */
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	fclose(f);
	/* Ours: this process and its waited-for children (the suites that
	 * run workers or allocator peers as child processes, and the
	 * background hogs), so that only foreign load counts as "other". */
	if (n < 8 || hz <= 0 || getrusage(RUSAGE_SELF, &ru) != 0 ||
	    getrusage(RUSAGE_CHILDREN, &rc) != 0)
		return;
	/* guest time is already counted in user. */
	s->busy_s = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
	s->steal_s = (double)v[7] / (double)hz;
	s->total_s = (double)(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]) / (double)hz;
	s->self_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6 +
		    (double)rc.ru_utime.tv_sec + (double)rc.ru_utime.tv_usec / 1e6 +
		    (double)rc.ru_stime.tv_sec + (double)rc.ru_stime.tv_usec / 1e6;
	s->ok = true;
}

struct load_share load_between(const struct load_snap *a, const struct load_snap *b)
{
	struct load_share r = { 0 };
	double total = b->total_s - a->total_s;
	double other = (b->busy_s - a->busy_s) - (b->self_s - a->self_s);

	if (!a->ok || !b->ok || total <= 0)
		return r;
	r.ok = true;
	r.other = other > 0 ? other / total : 0;
	if (r.other > 1)
		r.other = 1;
	r.steal = (b->steal_s - a->steal_s) / total;
	return r;
}
