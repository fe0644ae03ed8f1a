// SPDX-License-Identifier: MIT
// The C++ side of gbench.h: forwards to Google Benchmark.
#include "gbench.h"

#include <benchmark/benchmark.h>

namespace {

benchmark::State &S(const gbench_state *st)
{
	return *static_cast<benchmark::State *>(st->impl_);
}

benchmark::internal::Benchmark *B(gbench_bm *b)
{
	return reinterpret_cast<benchmark::internal::Benchmark *>(b);
}

gbench_bm *C(benchmark::internal::Benchmark *b)
{
	return reinterpret_cast<gbench_bm *>(b);
}

}  // namespace

extern "C" {

uint64_t gbench__begin(gbench_state *st)
{
	benchmark::State &s = S(st);

	// All iterations in one batch: starts the timer (after the threads'
	// start barrier) and hands the count to the C loop.
	if (st->phase_ != 0)
		return 0;
	st->phase_ = 1;
	if (s.KeepRunningBatch(s.max_iterations))
		return static_cast<uint64_t>(s.max_iterations);
	st->phase_ = 2;
	return 0;
}

void gbench__end(gbench_state *st)
{
	benchmark::State &s = S(st);

	if (st->phase_ != 1)
		return;
	// The batch is used up: this call stops the timer.
	st->phase_ = 2;
	st->left_ = 0;
	while (s.KeepRunningBatch(1)) {
	}
}

bool gbench__next_batch(gbench_state *st)
{
	if (st->phase_ == 0) {
		uint64_t n = gbench__begin(st);

		if (n) {
			st->left_ = n - 1;
			return true;
		}
		return false;
	}
	gbench__end(st);
	return false;
}

int64_t gbench_range(const gbench_state *st, unsigned idx)
{
	return S(st).range(idx);
}

int gbench_thread_index(const gbench_state *st)
{
	return S(st).thread_index();
}

int gbench_num_threads(const gbench_state *st)
{
	return S(st).threads();
}

int64_t gbench_iterations(const gbench_state *st)
{
	return static_cast<int64_t>(S(st).iterations());
}

void gbench_pause_timing(gbench_state *st)
{
	S(st).PauseTiming();
}

void gbench_resume_timing(gbench_state *st)
{
	S(st).ResumeTiming();
}

void gbench_skip_with_error(gbench_state *st, const char *msg)
{
	S(st).SkipWithError(msg);
}

void gbench_set_label(gbench_state *st, const char *label)
{
	S(st).SetLabel(label);
}

void gbench_set_items_processed(gbench_state *st, int64_t items)
{
	S(st).SetItemsProcessed(items);
}

void gbench_set_bytes_processed(gbench_state *st, int64_t bytes)
{
	S(st).SetBytesProcessed(bytes);
}

void gbench_counter(gbench_state *st, const char *name, double value, int flags)
{
	S(st).counters[name] =
		benchmark::Counter(value, static_cast<benchmark::Counter::Flags>(flags));
}

gbench_bm *gbench_register(const char *name, gbench_fn fn)
{
	return C(benchmark::RegisterBenchmark(name, [fn](benchmark::State &s) {
		gbench_state st;

		st.impl_ = &s;
		st.left_ = 0;
		st.phase_ = 0;
		fn(&st);
		// A function that returned without finishing its loop.
		gbench__end(&st);
	}));
}

gbench_bm *gbench_bm_arg(gbench_bm *b, int64_t x)
{
	return C(B(b)->Arg(x));
}

gbench_bm *gbench_bm_range(gbench_bm *b, int64_t lo, int64_t hi)
{
	return C(B(b)->Range(lo, hi));
}

gbench_bm *gbench_bm_dense_range(gbench_bm *b, int64_t lo, int64_t hi, int step)
{
	return C(B(b)->DenseRange(lo, hi, step));
}

gbench_bm *gbench_bm_arg_name(gbench_bm *b, const char *name)
{
	return C(B(b)->ArgName(name));
}

gbench_bm *gbench_bm_threads(gbench_bm *b, int n)
{
	return C(B(b)->Threads(n));
}

gbench_bm *gbench_bm_thread_range(gbench_bm *b, int lo, int hi)
{
	return C(B(b)->ThreadRange(lo, hi));
}

gbench_bm *gbench_bm_dense_thread_range(gbench_bm *b, int lo, int hi, int step)
{
	return C(B(b)->DenseThreadRange(lo, hi, step));
}

gbench_bm *gbench_bm_use_real_time(gbench_bm *b)
{
	return C(B(b)->UseRealTime());
}

gbench_bm *gbench_bm_min_time(gbench_bm *b, double seconds)
{
	return C(B(b)->MinTime(seconds));
}

gbench_bm *gbench_bm_iterations(gbench_bm *b, int64_t n)
{
	return C(B(b)->Iterations(n));
}

gbench_bm *gbench_bm_repetitions(gbench_bm *b, int n)
{
	return C(B(b)->Repetitions(n));
}

gbench_bm *gbench_bm_unit(gbench_bm *b, enum gbench_unit u)
{
	static const benchmark::TimeUnit units[] = { benchmark::kNanosecond,
						     benchmark::kMicrosecond,
						     benchmark::kMillisecond, benchmark::kSecond };

	return C(B(b)->Unit(units[u]));
}

int gbench_main(int argc, char **argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}

}  // extern "C"
