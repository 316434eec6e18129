/* The contended path of zmi_lock: spin politely, then yield. */
#include <sched.h>

#include "base/lock.h"

#ifndef ZM_LOCK_PTHREAD
/* Spins before yielding: ~100 pause instructions is a few hundred ns, about
 * the length of the longest critical section; beyond that the holder was
 * probably preempted and spinning only burns its CPU. */
#define ZM_SPINS 100

void zmi_lock_slow(zmi_lock_t *l)
{
	for (;;) {
		for (int i = 0; i < ZM_SPINS; i++) {
			if (!__atomic_load_n(&l->held, __ATOMIC_RELAXED) &&
			    !__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE))
				return;
			__builtin_ia32_pause();
		}
		sched_yield();
	}
}
#endif
