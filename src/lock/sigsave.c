/* SPDX-License-Identifier: MIT */
/* The userspace counterpart of raw_res_spin_lock_irqsave: signals stand in
 * for interrupts, so holding a lock with them blocked means no handler of
 * this thread can interrupt the critical section. */
#include <pthread.h>
#include <signal.h>

#include <rqspin/rqspinlock.h>

int rqspin_lock_sigsave_timeout(rqspinlock_t *lock, sigset_t *oldset, uint64_t timeout_ns)
{
	sigset_t all;
	int ret;

	if (!lock || !oldset)
		return -EINVAL;
	sigfillset(&all);
	/* pthread_sigmask is async-signal-safe (POSIX). */
	ret = pthread_sigmask(SIG_BLOCK, &all, oldset);
	if (ret)
		return -ret;
	ret = rqspin_lock_timeout(lock, timeout_ns);
	if (ret != 0 && ret != -EOWNERDEAD)
		pthread_sigmask(SIG_SETMASK, oldset, NULL);
	return ret;
}

int rqspin_lock_sigsave(rqspinlock_t *lock, sigset_t *oldset)
{
	return rqspin_lock_sigsave_timeout(lock, oldset, RQSPIN_TIMEOUT_DEFAULT);
}

void rqspin_unlock_sigrestore(rqspinlock_t *lock, const sigset_t *oldset)
{
	rqspin_unlock(lock);
	if (oldset)
		pthread_sigmask(SIG_SETMASK, oldset, NULL);
}
