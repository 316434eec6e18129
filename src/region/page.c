/*
 * A page's lock: the LOCKED bit of its word, with a futex on the word for
 * the waiters.  Taken by the faulting thread inside its SIGBUS handler, so
 * everything here is async-signal-safe (atomics and the futex system
 * call).  Holds are short: one page decoded or encoded, a few system
 * calls; a waiter spins a little and then sleeps.
 */
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/cpu.h"
#include "region/region_internal.h"

static void futex_wait(uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

uint64_t zmi_region_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool zmi_region_page_trylock(struct zmi_region *r, uint64_t pg, uint32_t *word)
{
	uint32_t *w = &r->pages[pg].word;
	uint32_t old = __atomic_load_n(w, __ATOMIC_RELAXED);

	do {
		if (old & RP_LOCKED)
			return false;
	} while (!__atomic_compare_exchange_n(w, &old, old | RP_LOCKED, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	*word = old;
	return true;
}

uint32_t zmi_region_page_lock(struct zmi_region *r, uint64_t pg, bool *waited)
{
	uint32_t *w = &r->pages[pg].word;
	uint32_t old;
	int spins = 0;

	for (;;) {
		old = __atomic_load_n(w, __ATOMIC_RELAXED);
		if (!(old & RP_LOCKED)) {
			if (__atomic_compare_exchange_n(w, &old, old | RP_LOCKED, true,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				return old & ~RP_WAITERS;
			continue;
		}
		if (waited)
			*waited = true;
		if (spins++ < 64) {
			zmi_cpu_relax();
			continue;
		}
		/* sleep: mark the word so the holder wakes us */
		if (!(old & RP_WAITERS) &&
		    !__atomic_compare_exchange_n(w, &old, old | RP_WAITERS, false,
						 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		futex_wait(w, old | RP_WAITERS);
		/* a waiter that wins the lock keeps WAITERS set (others may
		 * sleep still): the unlock wakes them all */
		for (;;) {
			old = __atomic_load_n(w, __ATOMIC_RELAXED);
			if (old & RP_LOCKED)
				break;
			if (__atomic_compare_exchange_n(w, &old, old | RP_LOCKED | RP_WAITERS,
							true, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return old & ~RP_WAITERS;
		}
	}
}

void zmi_region_page_unlock(struct zmi_region *r, uint64_t pg, uint32_t nw)
{
	uint32_t *w = &r->pages[pg].word;
	uint32_t old = __atomic_exchange_n(w, nw & ~(RP_LOCKED | RP_WAITERS), __ATOMIC_RELEASE);

	if (old & RP_WAITERS)
		futex_wake(w);
}
