/*
 * Eviction and cold selection.
 *
 * Evicting a page (its lock held):
 *   CLEAN         the store has its content: unmap it (MADV_DONTNEED)
 *   ZERO, DIRTY   write-protect it, store it (zm_store_put reads it), then
 *                 unmap it.  From the protection on, a write to the page
 *                 faults and its handler waits for the page's lock, so the
 *                 content stored is the page's last; after the unmap the
 *                 writer finds it STORED and brings it back with the write
 *                 still to do.  If the store refuses the page, the
 *                 protection is lifted and the page stays.
 *
 * Which page: the policy's (policy.c).
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "region/region_internal.h"

void zmi_region_set_marks(struct zmi_region *r, uint64_t limit)
{
	uint64_t margin = limit / 32;

	if (margin < 8)
		margin = 8;
	if (margin > 1024)
		margin = 1024;
	__atomic_store_n(&r->slack, limit ? margin : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->high, limit > margin ? limit - margin : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->low, limit > 2 * margin ? limit - 2 * margin : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&r->limit, limit, __ATOMIC_RELEASE);
	__atomic_store_n(&r->stuck, 0, __ATOMIC_RELAXED);
}

/* ---- eviction ---- */

static void room_made(struct zmi_region *r)
{
	__atomic_add_fetch(&r->room_seq, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&r->room_waiters, __ATOMIC_ACQUIRE))
		syscall(SYS_futex, &r->room_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Evict page pg, its lock held and resident, *w its word.  0 or -errno. */
static int evict_one(struct zmi_region *r, uint64_t pg, uint32_t *w)
{
	void *addr = zmi_page_addr(r, pg);
	int rc;

	if (rp_kind(*w) == RP_CLEAN) {
		zmi_rcount(r, RC_EVICT_CLEAN, 1);
	} else {
		rc = zmi_uffd_protect(r->uffd, addr, r->page_size, true, false);
		if (rc)
			return rc;
		rc = zm_store_put(r->store, pg, addr);
		if (rc) {
			zmi_uffd_protect(r->uffd, addr, r->page_size, false, true);
			zmi_rcount(r, RC_EVICT_FAIL, 1);
			return rc;
		}
	}
	if (madvise(addr, r->page_size, MADV_DONTNEED))
		return -errno; /* cannot happen on our own mapping */
	*w = (*w & ~RP_KIND_MASK) | RP_STORED;
	__atomic_add_fetch(&r->evict_seq, 1, __ATOMIC_RELAXED);
	r->pages[pg].evict_t = (uint16_t)(zmi_region_ms(r) / 16);
	__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
	zmi_rcount(r, RC_EVICT, 1);
	return 0;
}

/* Pages a round could not evict (busy, pinned) are set aside and put
 * back when it ends, so that it goes on to others (protected ones
 * included) instead of meeting them again. */
#define ASIDE 256

uint64_t zmi_region_evict(struct zmi_region *r, uint64_t n)
{
	uint64_t done = 0, tries = 0, fails = 0, pinned = 0, max_tries;
	uint32_t pg, w, aside[ASIDE];
	unsigned naside = 0;

	pthread_mutex_lock(&r->reclaim_lock);
	zmi_policy_tick(r);
	/* every resident page once, and a little more */
	max_tries = __atomic_load_n(&r->resident, __ATOMIC_RELAXED) + 64;
	while (done < n && tries++ < max_tries && zmi_policy_pick(r, &pg)) {
		if (!zmi_rpage_trylock(r, pg, &w)) {
			/* being faulted or pinned now */
			if (naside < ASIDE)
				aside[naside++] = pg;
			else
				zmi_policy_putback(r, pg);
			continue;
		}
		if (!rp_resident(w)) {
			/* discarded after it was listed: off the lists now */
			zmi_rpage_unlock(r, pg, w);
			continue;
		}
		if (rp_pins(w)) {
			pinned++;
			zmi_rpage_unlock(r, pg, w);
			if (naside < ASIDE)
				aside[naside++] = pg;
			else
				zmi_policy_putback(r, pg);
			continue;
		}
		if (evict_one(r, pg, &w)) {
			zmi_policy_putback(r, pg);
			zmi_rpage_unlock(r, pg, w);
			if (++fails >= 8)
				break; /* the store is full */
			continue;
		}
		zmi_policy_evicted(r, pg);
		zmi_rpage_unlock(r, pg, w);
		done++;
		if ((done & 7) == 0)
			room_made(r);
	}
	for (unsigned i = 0; i < naside; i++)
		zmi_policy_putback(r, aside[i]);
	pthread_mutex_unlock(&r->reclaim_lock);
	if (done)
		room_made(r);
	/* nothing could go: the store refuses pages (stuck: the faults
	 * waiting for room go on over the limit rather than wait for ever),
	 * or pins hold the whole limit (the faults wait a while for a pin to
	 * end before they go on: PINS_FULL_MS in fault.c) */
	if (done == 0 && n > 0 && pinned >= __atomic_load_n(&r->limit, __ATOMIC_RELAXED)) {
		uint32_t none = 0;
		/* since when (0: not full; the clock's 0 counts as 1) */
		__atomic_compare_exchange_n(&r->pins_full_ms, &none, zmi_region_ms(r) | 1, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&r->pins_full_ms, 0, __ATOMIC_RELAXED);
	}
	if (done == 0 && n > 0 && fails) {
		__atomic_store_n(&r->stuck, 1, __ATOMIC_RELAXED);
		room_made(r); /* wake the waiters */
	} else {
		__atomic_store_n(&r->stuck, 0, __ATOMIC_RELAXED);
	}
	return done;
}
