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
 * Which page: the queues.  Every resident page has one entry in one of
 * two FIFO rings (RP_QUEUED says it has), in the order it came in.
 * ZM_REGION_POLICY_FIFO uses one ring: the oldest page goes first.  The
 * default policy (docs/region.md, "Cold selection") cannot see a
 * resident page being used (no accessed bits without privileges); what
 * it sees is refaults, and how soon each came after the page's eviction,
 * counted in evictions (refault distance, as Linux's workingset does).
 */
#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/os.h"
#include "region/region_internal.h"

/* ---- the rings ---- */

int zmi_rqueue_init(struct zmi_rqueue *q, uint64_t nr_pages)
{
	uint64_t cap = 64;

	while (cap <= nr_pages)
		cap <<= 1;
	q->ring = zmi_os_reserve(cap * sizeof(uint32_t), zmi_os_page_size());
	if (!q->ring)
		return -ENOMEM;
	q->cap = cap;
	q->head = q->tail = 0;
	return 0;
}

void zmi_rqueue_free(struct zmi_rqueue *q)
{
	if (q->ring)
		zmi_os_release(q->ring, q->cap * sizeof(uint32_t));
	q->ring = NULL;
}

/* qlock held.  A page has one entry at most, so a ring of more entries
 * than pages never fills. */
static void q_push(struct zmi_rqueue *q, uint32_t pg)
{
	q->ring[q->tail++ & (q->cap - 1)] = pg;
}

static bool q_pop(struct zmi_rqueue *q, uint32_t *pg)
{
	if (q->head == q->tail)
		return false;
	*pg = q->ring[q->head++ & (q->cap - 1)];
	return true;
}

static uint64_t q_len(const struct zmi_rqueue *q)
{
	return q->tail - q->head;
}

/* ---- the policy ---- */

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

/* The page's lock is held, *word its new state: queue it. */
void zmi_policy_admit(struct zmi_region *r, uint64_t pg, uint32_t *word, bool refault,
		      bool young)
{
	int which = 0;

	(void)young;
	if (r->policy == ZM_REGION_POLICY_AUTO && refault) {
		uint64_t lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED);
		uint32_t dist = (uint32_t)__atomic_load_n(&r->evict_seq, __ATOMIC_RELAXED) -
				r->pages[pg].evict_seq;
		if (lim && dist <= lim)
			which = 1;
	}
	zmi_lock(&r->qlock);
	if (!(*word & RP_QUEUED)) {
		q_push(&r->q[which], (uint32_t)pg);
		*word |= RP_QUEUED;
		if (which) {
			*word |= RP_PROTECTED;
			r->protected_pages++;
		}
	}
	zmi_unlock(&r->qlock);
}

/* The next page to try, taken off its ring (its RP_QUEUED stays set: the
 * caller clears it under the page's lock, or puts it back).  false: no
 * page queued. */
static bool pick(struct zmi_region *r, uint32_t *pg, bool *prot)
{
	uint64_t lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED);
	bool ok;

	zmi_lock(&r->qlock);
	/* the protected ring may hold up to 3/4 of the limit: beyond it,
	 * or when probation is empty, its oldest page is the victim */
	if (q_len(&r->q[1]) && (!q_len(&r->q[0]) || r->protected_pages > lim / 4 * 3)) {
		ok = q_pop(&r->q[1], pg);
		*prot = true;
	} else {
		ok = q_pop(&r->q[0], pg);
		*prot = false;
	}
	zmi_unlock(&r->qlock);
	return ok;
}

/* Put a page that could not be evicted back at its ring's tail. */
static void requeue(struct zmi_region *r, uint32_t pg, bool prot)
{
	zmi_lock(&r->qlock);
	q_push(&r->q[prot], pg);
	zmi_unlock(&r->qlock);
}

/* Its entry is gone: clear the page's queue bits (page lock held). */
static void dequeued(struct zmi_region *r, uint32_t *w, bool prot)
{
	if (prot) {
		zmi_lock(&r->qlock);
		r->protected_pages--;
		zmi_unlock(&r->qlock);
	}
	*w &= ~(RP_QUEUED | RP_PROTECTED);
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
	r->pages[pg].evict_seq = (uint32_t)__atomic_add_fetch(&r->evict_seq, 1, __ATOMIC_RELAXED);
	r->pages[pg].evict_ms = zmi_region_ms(r);
	__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
	zmi_rcount(r, RC_EVICT, 1);
	return 0;
}

uint64_t zmi_region_evict(struct zmi_region *r, uint64_t n)
{
	uint64_t done = 0, tries = 0, fails = 0, max_tries;
	uint32_t pg = 0, w;
	bool prot = false;

	pthread_mutex_lock(&r->reclaim_lock);
	/* every queued page once, and a little more for the busy ones */
	max_tries = r->q[0].tail - r->q[0].head + r->q[1].tail - r->q[1].head + 64;
	while (done < n && tries++ < max_tries && pick(r, &pg, &prot)) {
		if (!zmi_rpage_trylock(r, pg, &w)) {
			requeue(r, pg, prot); /* being faulted or pinned now */
			continue;
		}
		if (!rp_resident(w) || !(w & RP_QUEUED)) {
			/* left (discarded) after it was queued */
			dequeued(r, &w, prot);
			zmi_rpage_unlock(r, pg, w);
			continue;
		}
		if (rp_pins(w)) {
			requeue(r, pg, prot);
			zmi_rpage_unlock(r, pg, w);
			continue;
		}
		if (prot && r->policy == ZM_REGION_POLICY_AUTO &&
		    __atomic_load_n(&r->protected_pages, __ATOMIC_RELAXED) >
			    __atomic_load_n(&r->limit, __ATOMIC_RELAXED) / 4 * 3) {
			/* demoted, not evicted: a second chance on probation */
			zmi_lock(&r->qlock);
			r->protected_pages--;
			q_push(&r->q[0], pg);
			zmi_unlock(&r->qlock);
			w &= ~RP_PROTECTED;
			zmi_rpage_unlock(r, pg, w);
			continue;
		}
		if (evict_one(r, pg, &w)) {
			requeue(r, pg, prot);
			zmi_rpage_unlock(r, pg, w);
			if (++fails >= 8)
				break; /* the store is full */
			continue;
		}
		dequeued(r, &w, prot);
		zmi_rpage_unlock(r, pg, w);
		done++;
		if ((done & 7) == 0)
			room_made(r);
	}
	pthread_mutex_unlock(&r->reclaim_lock);
	if (done)
		room_made(r);
	__atomic_store_n(&r->stuck, done == 0 && n > 0 && fails > 0, __ATOMIC_RELAXED);
	return done;
}
