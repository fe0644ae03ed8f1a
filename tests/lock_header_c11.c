/* Compiled with -std=c11 -Wpedantic -Werror and no feature-test macros:
 * the public headers must be clean strict C11. */
#include <rqspin/rqspin.h>

int lock_header_c11_probe(rqspinlock_t *r, qspinlock_t *q);

int lock_header_c11_probe(rqspinlock_t *r, qspinlock_t *q)
{
	int err = rqspin_lock(r);

	if (!err)
		rqspin_unlock(r);
	qspin_lock(q);
	qspin_unlock(q);
	return err;
}
