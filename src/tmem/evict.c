/*
 * Eviction: the list of ephemeral pages and the step that frees memory.
 *
 * The list (lru_lock) holds every ephemeral page, newest put at the head.
 * A get marks its page (ref, an atomic byte: no lock on the get path);
 * eviction takes pages from the tail and gives a marked one a second
 * chance (clears the mark, moves it to the head): CLOCK, the page cache's
 * approximation of least recently used.
 *
 * One step evicts the coldest page and, where the backend has units
 * (zm_pool_unit), every object of its unit, since the unit's memory comes
 * back only when all of them are gone.  Objects are named by handle; each
 * ephemeral object starts with its key (zmi_tmem_hdr), which the step reads
 * with obj_lock held exclusively (puts write, and flushes free, ephemeral
 * objects with it held shared), then, with only a shard lock, finds the
 * record, checks that it still holds that very handle (it may have been
 * replaced or flushed since) and removes it.  An object whose record does not match (a put that has allocated
 * but not yet linked it, or one just replaced) is left alone: the unit is
 * then not freed this time, and its pages are not counted.
 *
 * Pages freed: a unit's pages when every object of it was evicted;
 * without units, the pool's pages before and after the step (its stats
 * are a few counters under one lock for those backends).
 */
#include <errno.h>
#include <stdlib.h>

#include "tmem/tmem_internal.h"

void zmi_tmem_lru_add(struct zm_tmem *t, struct zmi_tmem_page *pg)
{
	struct zmi_tmem_page *head = &t->lru;

	zmi_lock(&t->lru_lock);
	pg->lru_prev = head;
	pg->lru_next = head->lru_next;
	head->lru_next->lru_prev = pg;
	head->lru_next = pg;
	t->lru_n++;
	zmi_unlock(&t->lru_lock);
}

static void lru_unlink(struct zmi_tmem_page *pg)
{
	pg->lru_prev->lru_next = pg->lru_next;
	pg->lru_next->lru_prev = pg->lru_prev;
}

static void lru_push(struct zm_tmem *t, struct zmi_tmem_page *pg)
{
	struct zmi_tmem_page *head = &t->lru;

	pg->lru_prev = head;
	pg->lru_next = head->lru_next;
	head->lru_next->lru_prev = pg;
	head->lru_next = pg;
}

void zmi_tmem_lru_del(struct zm_tmem *t, struct zmi_tmem_page *pg)
{
	zmi_lock(&t->lru_lock);
	lru_unlink(pg);
	t->lru_n--;
	zmi_unlock(&t->lru_lock);
}

/* The coldest page's handle, its record moved to the head so that a
 * step that fails on it moves on; 0 if the list is empty. */
static zm_handle_t pick_victim(struct zm_tmem *t)
{
	struct zmi_tmem_page *pg;
	zm_handle_t h = 0;

	zmi_lock(&t->lru_lock);
	/* every marked page passed is cleared: within lru_n + 1 steps an
	 * unmarked one comes */
	for (uint64_t n = 0; n <= t->lru_n && t->lru_n; n++) {
		pg = t->lru.lru_prev;
		lru_unlink(pg);
		lru_push(t, pg);
		if (__atomic_exchange_n(&pg->ref, 0, __ATOMIC_RELAXED))
			continue;
		h = pg->h;
		break;
	}
	zmi_unlock(&t->lru_lock);
	return h;
}

/* Evict the object of handle x, whose key is hdr, if its record still
 * holds it: 1, else 0. */
static long evict_object(struct zm_tmem *t, zm_handle_t x, const struct zmi_tmem_hdr *hdr)
{
	struct zmi_tmem_pool *p = zmi_tmem_pool_of(t, (int)hdr->pool, NULL);
	struct zmi_tmem_shard *sh;
	struct zmi_tmem_obj *o;
	struct zmi_tmem_page *pg;
	long done = 0;

	if (!p || p->kind != ZM_TMEM_EPHEMERAL)
		return 0;
	sh = zmi_tmem_shard_of(p, hdr->oid, hdr->index);
	zmi_lock(&sh->lock);
	o = zmi_tmem_obj_find(sh, hdr->oid);
	pg = o ? zmi_tmem_page_find(o, hdr->index) : NULL;
	if (pg && pg->h == x) {
		zmi_tmem_remove(p, sh, o, pg, TC_EVICTED);
		done = 1;
	}
	zmi_unlock(&sh->lock);
	return done;
}

/* Room in t->ubuf and t->kbuf for n entries; false if none. */
static bool bufs_for(struct zm_tmem *t, size_t n)
{
	zm_handle_t *nb;
	struct zmi_tmem_hdr *nk;

	if (n <= t->ubuf_cap)
		return true;
	nb = realloc(t->ubuf, n * sizeof(*nb));
	if (!nb)
		return false;
	t->ubuf = nb;
	nk = realloc(t->kbuf, n * sizeof(*nk));
	if (!nk)
		return false;
	t->kbuf = nk;
	t->ubuf_cap = n;
	return true;
}

/* Pick the coldest page and put the handles of its unit into t->ubuf,
 * their keys into t->kbuf; returns their number, 0 if there is nothing to
 * evict, or < 0.  All under obj_lock held exclusively: no ephemeral
 * object is being written or freed meanwhile, and a page on the list has
 * its object (a removal takes it off the list before it frees the
 * object, which needs obj_lock), so every handle is live and every key
 * read is one a put wrote in full, or one of an object whose put has not
 * linked it yet, which no record matches. */
static long unit_keys(struct zm_tmem *t, size_t *pages)
{
	zm_handle_t x;
	long n;

	pthread_rwlock_wrlock(&t->obj_lock);
	x = pick_victim(t);
	if (!x) {
		n = 0;
	} else if (t->units) {
		for (;;) {
			n = zm_pool_unit(t->eph, x, t->ubuf, t->ubuf_cap, pages);
			if (n <= (long)t->ubuf_cap)
				break;
			if (!bufs_for(t, (size_t)n)) {
				n = -ENOMEM;
				break;
			}
		}
	} else {
		t->ubuf[0] = x;
		n = 1;
	}
	for (long i = 0; i < n; i++)
		if (zm_pool_read(t->eph, t->ubuf[i], &t->kbuf[i], sizeof(t->kbuf[i])))
			t->kbuf[i].pool = 0;
	pthread_rwlock_unlock(&t->obj_lock);
	return n;
}

static uint64_t eph_pages(struct zm_tmem *t)
{
	struct zm_pool_stats st;

	return zm_pool_stats(t->eph, &st) ? 0 : st.pool_pages;
}

long zmi_tmem_evict(struct zm_tmem *t)
{
	long freed = 0;

	pthread_mutex_lock(&t->evict_lock);
	if (!bufs_for(t, 64))
		goto out;
	/* a few victims, in case the first ones vanish under us */
	for (int tries = 0; tries < 4 && !freed; tries++) {
		size_t pages = 0;
		uint64_t before = 0, after;
		long n;

		if (!t->units)
			before = eph_pages(t);
		n = unit_keys(t, &pages);
		if (n == 0)
			break;
		for (long i = 0; i < n; i++)
			freed += evict_object(t, t->ubuf[i], &t->kbuf[i]);
		if (!freed)
			continue;
		if (t->units) {
			after = freed == n ? pages : 0;
		} else {
			after = eph_pages(t);
			after = before > after ? before - after : 0;
		}
		__atomic_store_n(&t->evictions, t->evictions + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->evicted_pages, t->evicted_pages + after, __ATOMIC_RELAXED);
	}
out:
	pthread_mutex_unlock(&t->evict_lock);
	return freed;
}
