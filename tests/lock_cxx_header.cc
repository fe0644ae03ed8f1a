// The public headers compile as C++ (no _Atomic visible) and the inline
// lock functions work from C++ code.
#include <rqspin/rqspin.h>

#include <cstdio>
#include <thread>
#include <vector>

static qspinlock_t q = QSPINLOCK_INIT;
static rqspinlock_t r = RQSPINLOCK_INIT;
static long qcount, rcount, failures;

int main()
{
	static_assert(sizeof(qspinlock_t) == 4, "lock word is 4 bytes");
	static_assert(sizeof(rqspinlock_t) == 4, "lock word is 4 bytes");
	const int threads = 4, iters = 20000;
	std::vector<std::thread> ts;
	for (int t = 0; t < threads; t++)
		ts.emplace_back([] {
			for (int i = 0; i < iters; i++) {
				qspin_lock(&q);
				qcount++;
				qspin_unlock(&q);
				if (rqspin_lock(&r) != 0) {
					__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
					continue;
				}
				rcount++;
				rqspin_unlock(&r);
			}
		});
	for (auto &t : ts)
		t.join();
	if (qcount != threads * iters || rcount != threads * iters || failures) {
		std::fprintf(stderr, "qcount %ld rcount %ld failures %ld\n", qcount, rcount, failures);
		return 1;
	}
	return 0;
}
