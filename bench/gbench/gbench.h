/* SPDX-License-Identifier: MIT */
/*
 * gbench: Google Benchmark from C. Google Benchmark has no C API (its
 * header is C++ only); this header plus gbench.cc (a small C++ file) let a
 * C file register benchmark functions and use the state loop, arguments,
 * threads and counters:
 *
 *   static void bm_thing(gbench_state *st)
 *   {
 *       setup();                         // every thread runs this...
 *       while (gbench_keep_running(st))  // ...then they start together
 *           thing();
 *       gbench_counter(st, "things", 1, GBENCH_COUNTER_RATE);
 *   }
 *
 *   GBENCH_INIT(register_things)         // runs before main()
 *   {
 *       gbench_bm *b = gbench_register("thing", bm_thing);
 *       gbench_bm_thread_range(b, 1, 4);
 *       gbench_bm_use_real_time(b);
 *   }
 *
 * and main() calls gbench_main(argc, argv) (the usual --benchmark_* flags).
 *
 * The loop test is inline: the wrapper asks Google Benchmark for all the
 * iterations of a run in one batch (KeepRunningBatch) and counts them
 * down in C, so an iteration does not call into C++. For loops of a few
 * nanoseconds use GBENCH_FOR(st) instead of the while loop: it counts in a
 * local variable (a register), whereas gbench_keep_running() counts in
 * *st, which the compiler must reload and store around every atomic
 * operation or call in the body (a loop-carried dependency through memory,
 * about a nanosecond per iteration):
 *
 *   GBENCH_FOR(st) {
 *       lock(); unlock();
 *   }
 */
#ifndef BENCH_GBENCH_H
#define BENCH_GBENCH_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One thread's view of a running benchmark. Treat as opaque. */
typedef struct gbench_state {
	void *impl_;     /* benchmark::State */
	uint64_t left_;  /* iterations left in the current batch */
	int phase_;      /* 0 not started, 1 running, 2 finished */
} gbench_state;

typedef void (*gbench_fn)(gbench_state *st);
/* A registered benchmark (benchmark::internal::Benchmark). */
typedef struct gbench_bm gbench_bm;

/* Out of line: start the timed loop, or end it. */
bool gbench__next_batch(gbench_state *st);
/* Start timing; returns the number of iterations to run (0: skip). */
uint64_t gbench__begin(gbench_state *st);
/* Stop timing (no-op unless running). */
void gbench__end(gbench_state *st);

/* True while the benchmark should run another iteration. The first call
 * starts timing (after all threads of the run are ready), the last one
 * (returning false) stops it. */
static inline bool gbench_keep_running(gbench_state *st)
{
	if (__builtin_expect(st->left_ != 0, 1)) {
		st->left_--;
		return true;
	}
	return gbench__next_batch(st);
}

/* A for loop over the iterations of a run; its counter is a local. Do not
 * break out of it (the timing stops only when it ends). */
#define GBENCH_FOR(st)                                                            \
	for (uint64_t gbench_left_ = gbench__begin(st);                           \
	     gbench_left_ != 0 ? 1 : (gbench__end(st), 0); gbench_left_--)

/* Keep the compiler from deleting a computation, or from caching memory
 * across this point (benchmark::DoNotOptimize / ClobberMemory). */
#define gbench_do_not_optimize(x) __asm__ __volatile__("" : : "g"(x) : "memory")
static inline void gbench_clobber_memory(void)
{
	__asm__ __volatile__("" ::: "memory");
}

/* ---- inside a benchmark ---- */
int64_t gbench_range(const gbench_state *st, unsigned idx); /* idx-th argument */
int gbench_thread_index(const gbench_state *st);
int gbench_num_threads(const gbench_state *st);
int64_t gbench_iterations(const gbench_state *st);
void gbench_pause_timing(gbench_state *st);
void gbench_resume_timing(gbench_state *st);
void gbench_skip_with_error(gbench_state *st, const char *msg);
void gbench_set_label(gbench_state *st, const char *label);
void gbench_set_items_processed(gbench_state *st, int64_t items);
void gbench_set_bytes_processed(gbench_state *st, int64_t bytes);

/* benchmark::Counter::Flags */
enum gbench_counter_flags {
	GBENCH_COUNTER_DEFAULT = 0,
	GBENCH_COUNTER_RATE = 1 << 0,                /* divided by the run time */
	GBENCH_COUNTER_AVG_THREADS = 1 << 1,         /* divided by the thread count */
	GBENCH_COUNTER_ITERATION_INVARIANT = 1 << 2, /* multiplied by the iterations */
	GBENCH_COUNTER_AVG_ITERATIONS = 1 << 3,      /* divided by the iterations */
	GBENCH_COUNTER_INVERT = -0x7fffffff - 1,       /* 1/x, applied last (bit 31) */
};
/* Set a user counter of this thread (summed over the threads of a run,
 * then transformed as flags say). */
void gbench_counter(gbench_state *st, const char *name, double value, int flags);

/* ---- registration ---- */
gbench_bm *gbench_register(const char *name, gbench_fn fn);
gbench_bm *gbench_bm_arg(gbench_bm *b, int64_t x);
gbench_bm *gbench_bm_range(gbench_bm *b, int64_t lo, int64_t hi);       /* lo, powers of 8, hi */
gbench_bm *gbench_bm_dense_range(gbench_bm *b, int64_t lo, int64_t hi, int step);
gbench_bm *gbench_bm_arg_name(gbench_bm *b, const char *name);
gbench_bm *gbench_bm_threads(gbench_bm *b, int n);
gbench_bm *gbench_bm_thread_range(gbench_bm *b, int lo, int hi);        /* lo, 2lo, 4lo.., hi */
gbench_bm *gbench_bm_dense_thread_range(gbench_bm *b, int lo, int hi, int step);
gbench_bm *gbench_bm_use_real_time(gbench_bm *b);
gbench_bm *gbench_bm_min_time(gbench_bm *b, double seconds);
gbench_bm *gbench_bm_iterations(gbench_bm *b, int64_t n);
gbench_bm *gbench_bm_repetitions(gbench_bm *b, int n);
enum gbench_unit { GBENCH_NS, GBENCH_US, GBENCH_MS, GBENCH_S };
gbench_bm *gbench_bm_unit(gbench_bm *b, enum gbench_unit u);

/* Initialize Google Benchmark with the command line, run the selected
 * benchmarks, shut down. Returns the exit status (1 for unknown flags). */
int gbench_main(int argc, char **argv);

/* A function run before main() (a constructor), for registrations. */
#define GBENCH_INIT(fn)                                      \
	static void fn(void) __attribute__((constructor));   \
	static void fn(void)

#ifdef __cplusplus
}
#endif
#endif /* BENCH_GBENCH_H */
