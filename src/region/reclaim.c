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
 * With the store's unit_pages above 1, the dirty pages of a batch that
 * follow each other (one buffer in the region, protected in one call)
 * are stored with one zm_store_put_range: pages evicted together, which
 * came in together, may be kept as one compressed unit (docs/region.md,
 * "Units").  Everything above holds for each page of the run: each is
 * locked and protected before the store reads it and unmapped after.
 *
 * Which page: the policy's (policy.c).
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/os.h"
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

/* Pages whose content is safe (CLEAN, or DIRTY and stored now) wait in
 * a batch, locked and still mapped, to be unmapped together: one
 * process_madvise, so one TLB flush of the other CPUs for the batch
 * instead of one a page.  A read meanwhile still finds the page; a
 * write faults (a stored page is write-protected) and waits for the
 * page's lock until the batch is done. */
#define BATCH 32

struct batch {
	unsigned n;
	bool prepared;          /* its pages stored already (evict_page) */
	uint32_t pg[BATCH], w[BATCH];
	struct iovec iov[BATCH];
};

/* Prepare page pg (its lock held, resident, *w its word) for the batch:
 * a dirty page is write-protected and stored.  0 or -errno (the page
 * stays as it was). */
static int evict_prepare(struct zmi_region *r, uint64_t pg, uint32_t *w)
{
	void *addr = zmi_region_page_addr(r, pg);
	int rc;

	if (rp_kind(*w) == RP_CLEAN) {
		/* only read since it came back */
		r->pages[pg].flags &= (uint8_t)~RPF_WRITER;
		return 0;
	}
	rc = zmi_region_uffd_protect(r->uffd, addr, r->page_size, true, false);
	if (rc)
		return rc;
	rc = zm_store_put(r->store, pg, addr);
	if (rc) {
		zmi_region_uffd_protect(r->uffd, addr, r->page_size, false, true);
		zmi_region_count(r, RC_EVICT_FAIL, 1);
	}
	return rc;
}

/* Store the run of n dirty pages from pg (locked, write-protected, one
 * buffer in the region) with one zm_store_put_range, when the store
 * keeps units: adjacent pages evicted together are compressed together
 * where that pays.  True if every page of the run is stored; false (the
 * store refused one: no way to tell which) and the caller stores them
 * one by one, as without units.  A put_range that fails leaves each page
 * with its new content or its previous one; a dirty page's slot was
 * empty before (its copy is dropped when it turns dirty), so the
 * page-by-page pass that follows decides what each one holds. */
static bool store_run(struct zmi_region *r, uint64_t pg, unsigned n)
{
	if (r->unit_pages <= 1 || n < 2)
		return false;
	return zm_store_put_range(r->store, pg, n, zmi_region_page_addr(r, pg)) == 0;
}

/* Prepare the batch's pages (locked, resident, unpinned, readable): the
 * dirty ones are write-protected, in one call for each run of pages that
 * follow each other (a TLB flush of the other CPUs a run, not a page:
 * pages come to eviction in the order they came in, so filled memory
 * comes in runs), then stored; the clean ones need nothing.  A page the
 * store refuses gets its protection back, is unlocked and listed again,
 * and leaves the batch.  Returns how many left. */
static unsigned batch_prepare(struct zmi_region *r, struct batch *b, uint64_t *fails)
{
	unsigned dirty[BATCH], nd = 0, left = 0, k = 0;

	for (unsigned i = 0; i < b->n; i++) {
		if (rp_kind(b->w[i]) == RP_CLEAN) {
			/* only read since it came back */
			r->pages[b->pg[i]].flags &= (uint8_t)~RPF_WRITER;
			continue;
		}
		/* by page number (insertion: a batch is short) */
		unsigned j = nd++;
		while (j && b->pg[dirty[j - 1]] > b->pg[i]) {
			dirty[j] = dirty[j - 1];
			j--;
		}
		dirty[j] = i;
	}
	for (unsigned i = 0; i < nd;) {
		unsigned e = i + 1;
		int rc;

		while (e < nd && b->pg[dirty[e]] == b->pg[dirty[e - 1]] + 1)
			e++;
		rc = zmi_region_uffd_protect(r->uffd, zmi_region_page_addr(r, b->pg[dirty[i]]),
					     (size_t)(e - i) << r->page_shift, true, false);
		/* the run in one call: units where the store finds they pay */
		bool whole = !rc && store_run(r, b->pg[dirty[i]], e - i);
		for (; i < e; i++) {
			unsigned x = dirty[i];
			uint32_t pg = b->pg[x];
			void *addr = zmi_region_page_addr(r, pg);

			if (whole || (!rc && !zm_store_put(r->store, pg, addr)))
				continue;
			if (!rc) {
				/* a failed put_range may have left the new
				 * content: a dirty page keeps no copy */
				if (r->unit_pages > 1)
					zm_store_discard(r->store, pg, 1);
				zmi_region_uffd_protect(r->uffd, addr, r->page_size, false, true);
			}
			zmi_region_count(r, RC_EVICT_FAIL, 1);
			(*fails)++;
			zmi_region_page_unlock(r, pg, b->w[x]);
			zmi_region_policy_putback(r, pg);
			b->pg[x] = UINT32_MAX; /* left */
			left++;
		}
	}
	if (left) {
		for (unsigned i = 0; i < b->n; i++)
			if (b->pg[i] != UINT32_MAX) {
				b->pg[k] = b->pg[i];
				b->w[k] = b->w[i];
				b->iov[k++] = b->iov[i];
			}
		b->n = k;
	}
	return left;
}

/* Unmap the batch's pages and let them go. */
static void batch_unmap(struct zmi_region *r, struct batch *b)
{
	uint16_t now = (uint16_t)(zmi_region_ms(r) / 16);
	unsigned clean = 0;

	if (!b->n)
		return;
	zmi_os_decommit_many(b->iov, b->n); /* cannot fail on our own mapping */
	for (unsigned i = 0; i < b->n; i++) {
		uint32_t pg = b->pg[i], w = b->w[i];
		clean += rp_kind(w) == RP_CLEAN;
		w = (w & ~RP_KIND_MASK) | RP_STORED;
		r->pages[pg].evict_t = now;
		zmi_region_policy_evicted(r, pg);
		zmi_region_page_unlock(r, pg, w);
	}
	__atomic_add_fetch(&r->evict_seq, b->n, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&r->resident, b->n, __ATOMIC_ACQ_REL);
	zmi_region_count(r, RC_EVICT, b->n);
	zmi_region_count(r, RC_EVICT_CLEAN, clean);
	b->n = 0;
	room_made(r);
}

/* Prepare (unless prepared) and unmap the batch: the pages that could
 * not go, counted into *fails, are returned. */
static unsigned batch_flush(struct zmi_region *r, struct batch *b, uint64_t *fails)
{
	unsigned left = b->prepared || !b->n ? 0 : batch_prepare(r, b, fails);

	batch_unmap(r, b);
	return left;
}

int zmi_region_evict_page(struct zmi_region *r, uint64_t pg, uint32_t *w)
{
	struct batch b;
	int rc = evict_prepare(r, pg, w);

	if (rc)
		return rc;
	b.n = 1;
	b.prepared = true;
	b.pg[0] = (uint32_t)pg;
	b.w[0] = *w;
	b.iov[0].iov_base = zmi_region_page_addr(r, pg);
	b.iov[0].iov_len = r->page_size;
	/* batch_unmap unlocks the page: take the lock again for the caller
	 * (no other page's lock is held, region_internal.h) */
	batch_unmap(r, &b);
	*w = zmi_region_page_lock(r, pg, NULL);
	return 0;
}

/* Pages a round could not evict (busy, pinned) are set aside and put
 * back when it ends, so that it goes on to others (protected ones
 * included) instead of meeting them again. */
#define ASIDE 256
#define BUSY (1u << 31) /* in aside[]: its lock was taken (page numbers are
			   below 2^31: ZM_STORE_MAX_PAGES) */

/* Page pg is locked (w its word): into the batch if it can go (0), or
 * unlocked and left (1: not resident any more, pinned, or refused). */
static int try_page(struct zmi_region *r, uint32_t pg, uint32_t w, struct batch *b,
		    uint64_t *pinned, uint64_t *fails)
{
	if (!rp_resident(w)) {
		/* discarded after it was listed: off the lists now */
		zmi_region_page_unlock(r, pg, w);
		return -1;
	}
	if (w & RP_NOREAD) {
		/* unreadable (zm_region_protect): storing it would fault */
		zmi_region_page_unlock(r, pg, w);
		return 1;
	}
	if (rp_pins(w)) {
		(*pinned)++;
		zmi_region_page_unlock(r, pg, w);
		return 1;
	}
	(void)fails; /* a refusal of the store is met when the batch goes */
	b->pg[b->n] = pg;
	b->w[b->n] = w;
	b->iov[b->n].iov_base = zmi_region_page_addr(r, pg);
	b->iov[b->n++].iov_len = r->page_size;
	return 0;
}

uint64_t zmi_region_evict(struct zmi_region *r, uint64_t n)
{
	uint64_t done = 0, tries = 0, fails = 0, pinned = 0, max_tries;
	uint32_t pg, w, aside[ASIDE];
	unsigned naside = 0;
	struct batch b;

	b.n = 0;
	b.prepared = false;
	pthread_mutex_lock(&r->reclaim_lock);
	zmi_region_policy_tick(r);
	/* every resident page once, and a little more */
	max_tries = __atomic_load_n(&r->resident, __ATOMIC_RELAXED) + 64;
	while (done < n && tries++ < max_tries && zmi_region_policy_pick(r, &pg)) {
		if (!zmi_region_page_trylock(r, pg, &w)) {
			/* being faulted or pinned now: a second look at the
			 * end, if the round is short (busy bit set) */
			if (naside < ASIDE)
				aside[naside++] = pg | BUSY;
			else
				zmi_region_policy_putback(r, pg);
			continue;
		}
		int rc = try_page(r, pg, w, &b, &pinned, &fails);
		if (rc < 0)
			continue; /* not resident: off the lists */
		if (rc) {
			if (naside < ASIDE)
				aside[naside++] = pg;
			else
				zmi_region_policy_putback(r, pg);
			continue;
		}
		done++;
		if (b.n == BATCH) {
			done -= batch_flush(r, &b, &fails);
			if (fails >= 8)
				break; /* the store is full */
		}
	}
	done -= batch_flush(r, &b, &fails);
	/* the pages that were busy: a fault or a pin was bringing them in, a
	 * moment ago; waited for now (no page lock is held), as the round
	 * fell short */
	for (unsigned i = 0; i < naside; i++) {
		pg = aside[i] & ~BUSY;
		if (done < n && (aside[i] & BUSY)) {
			int rc;
			/* a blocking lock: with no other page's held (the
			 * lock order, region_internal.h) */
			done -= batch_flush(r, &b, &fails);
			w = zmi_region_page_lock(r, pg, NULL);
			rc = try_page(r, pg, w, &b, &pinned, &fails);
			done += rc == 0;
			if (rc <= 0)
				continue;
		}
		zmi_region_policy_putback(r, pg);
	}
	done -= batch_flush(r, &b, &fails);
	pthread_mutex_unlock(&r->reclaim_lock);
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
