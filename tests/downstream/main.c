#include <errno.h>
#include <rqspin/rqspin.h>

int main(void)
{
	rqspinlock_t l = RQSPINLOCK_INIT;
	qspinlock_t q = QSPINLOCK_INIT;

	if (rqspin_lock(&l) != 0 || rqspin_lock(&l) != -EDEADLK)
		return 1;
	rqspin_unlock(&l);
	qspin_lock(&q);
	qspin_unlock(&q);
	return 0;
}
