/* Compiled to assembly with -fsanitize=thread by tsan_counter_codegen
 * (tests/tsan_counter.cmake): under ThreadSanitizer the fast-path counter
 * must be an atomic add TSan can see (__tsan_atomic64_fetch_add), not the
 * plain `addq` of release builds. The lock header once tested RQSPIN__TSAN
 * before defining it, and TSan builds got the addq. */
#include <rqspin/static/lock_word.h>

void tsan_counter_probe(struct rqspin__thread_hot *t);

void tsan_counter_probe(struct rqspin__thread_hot *t)
{
	rqspin__count_fast_on(t);
}
