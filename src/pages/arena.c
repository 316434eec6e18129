/*
 * The arena: one reservation of virtual memory, its per-page records, and
 * the calls that are neither the single-page fast path nor bulk: runs of
 * 2^order pages, statistics, and giving free memory back to the OS.
 *
 * Locking: see pages_internal.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/os.h"
#include "pages/pages_internal.h"

static unsigned log2_exact(size_t v)
{
	unsigned s = 0;

	while (((size_t)1 << s) < v)
		s++;
	return s;
}

static size_t default_pages(size_t bytes, size_t page_size)
{
	size_t n = bytes / page_size;

	return n > ZM_MIN_DEFAULT ? n : ZM_MIN_DEFAULT;
}

int zm_pages_create(const struct zm_pages_config *cfg, struct zm_pages **out)
{
	struct zm_pages_config c = { 0 };
	struct zm_pages *p;
	size_t npages, align;

	if (cfg)
		c = *cfg;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!c.page_size)
		c.page_size = 4096;
	if (!c.arena_bytes)
		c.arena_bytes = ZM_DEFAULT_ARENA;
	if (c.page_size < 4096 || c.page_size > 65536 ||
	    (c.page_size & (c.page_size - 1)) || c.page_size < zm_os_page_size())
		return -EINVAL;
	npages = c.arena_bytes / c.page_size;
	if (npages == 0 || npages >= ZM_PFN_NIL)
		return -EINVAL;
	if (c.cache_pages > ZM_MAX_CACHE)
		return -EINVAL;

	p = aligned_alloc(_Alignof(struct zm_pages), sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p, 0, sizeof(*p));
	zm_lock_init(&p->lock);
	p->page_size = c.page_size;
	p->page_shift = log2_exact(c.page_size);
	p->npages = (uint32_t)npages;
	p->arena_bytes = npages * c.page_size;
	p->limit = c.limit_pages && c.limit_pages < npages ? c.limit_pages : npages;
	p->reserve = c.reserve_pages ? c.reserve_pages : default_pages(ZM_DEFAULT_RESERVE_BYTES, c.page_size);
	p->cache_cap = c.cache_pages ? c.cache_pages
				     : (unsigned)default_pages(ZM_DEFAULT_CACHE_BYTES, c.page_size);
	p->prefault = c.prefault != 0;
	p->cache_batch = p->cache_cap / 2;
	if (p->cache_batch > ZM_PAGES_CHUNK)
		p->cache_batch = ZM_PAGES_CHUNK;
	if (p->cache_batch == 0)
		p->cache_batch = 1;
	p->ahead_max = p->cache_cap < ZM_PAGES_AHEAD_MAX ? p->cache_cap : ZM_PAGES_AHEAD_MAX;
	while (p->run_order < ZM_RUN_ORDER && (2u << p->run_order) <= p->cache_cap)
		p->run_order++;

	/* Align the arena to the largest buddy block, so that every block is
	 * naturally aligned in memory too (friendly to huge pages). */
	align = c.page_size << ZM_PAGES_MAX_ORDER;
	p->base = zm_os_reserve(p->arena_bytes, align);
	p->pg_bytes = npages * sizeof(struct zm_pg);
	p->meta_bytes = npages * sizeof(struct zm_page_meta);
	p->pg = zm_os_reserve(p->pg_bytes, zm_os_page_size());
	p->meta = zm_os_reserve(p->meta_bytes, zm_os_page_size());
	if (!p->base || !p->pg || !p->meta || zm_bitset_alloc(&p->free0[0], (uint32_t)npages) ||
	    zm_bitset_alloc(&p->free0[1], (uint32_t)npages)) {
		zm_os_release(p->base, p->arena_bytes);
		zm_os_release(p->pg, p->pg_bytes);
		zm_os_release(p->meta, p->meta_bytes);
		zm_bitset_free(&p->free0[0]);
		zm_bitset_free(&p->free0[1]);
		zm_lock_destroy(&p->lock);
		free(p);
		return -ENOMEM;
	}
	zm_buddy_init(p);
	*out = p;
	return 0;
}

void zm_pages_destroy(struct zm_pages *p)
{
	size_t cached, leaked;

	if (!p)
		return;
	zm_tcache_detach_all(p);   /* returns nothing: the arena goes away */
	cached = zm_tcache_total(p);
	zm_lock(&p->lock);
	leaked = p->nr_out - cached;
	zm_unlock(&p->lock);
	if (leaked)
		zm_log("zm_pages_destroy: %zu page(s) still allocated", leaked);
	zm_os_release(p->base, p->arena_bytes);
	zm_os_release(p->pg, p->pg_bytes);
	zm_os_release(p->meta, p->meta_bytes);
	zm_bitset_free(&p->free0[0]);
	zm_bitset_free(&p->free0[1]);
	zm_lock_destroy(&p->lock);
	free(p);
}

void *zm_pages_addr(const struct zm_pages *p, zm_pfn_t pfn)
{
	return p->base + ((size_t)pfn << p->page_shift);
}

zm_pfn_t zm_pages_pfn(const struct zm_pages *p, const void *addr)
{
	const char *a = addr;

	if (a < p->base || a >= p->base + p->arena_bytes)
		return ZM_PFN_NIL;
	return (zm_pfn_t)((size_t)(a - p->base) >> p->page_shift);
}

struct zm_page_meta *zm_pages_meta(const struct zm_pages *p, zm_pfn_t pfn)
{
	return pfn < p->npages ? &p->meta[pfn] : NULL;
}

size_t zm_pages_page_size(const struct zm_pages *p)
{
	return p->page_size;
}

int zm_pages_bad_free(struct zm_pages *p, zm_pfn_t pfn, const char *why)
{
	static const char *const names[] = { "free", "free", "allocated",
		"part of a run", "free (in a thread cache)", "free (being trimmed)" };
	const char *st = "out of range";

	if (pfn < p->npages) {
		uint8_t s = zm_pg_state(zm_pg_of(p, pfn));

		st = s < sizeof(names) / sizeof(names[0]) ? names[s] : "corrupt";
	}
	__atomic_fetch_add(&p->bad_frees, 1, __ATOMIC_RELAXED);
	zm_bad_input("zm_pages: bad free of pfn %u: %s (page is %s)", pfn, why, st);
	(void)st;
	return -EINVAL;
}

int zm_pages_alloc_order(struct zm_pages *p, unsigned order, zm_pfn_t *pfn)
{
	zm_pfn_t got;
	size_t fails;

	if (order > ZM_PAGES_MAX_ORDER) {
		zm_bad_input("zm_pages_alloc_order: order %u > %d", order,
			     ZM_PAGES_MAX_ORDER);
		return -EINVAL;
	}
	zm_lock(&p->lock);
	fails = p->limit_failures;
	got = zm_buddy_take_block(p, order);
	fails = p->limit_failures - fails;
	zm_unlock(&p->lock);
	if (got == ZM_PFN_NIL && fails && zm_tcache_reclaim(p))
		return zm_pages_alloc_order(p, order, pfn);  /* at the limit: once more */
	if (got == ZM_PFN_NIL)
		return -ENOMEM;
	*pfn = got;
	return 0;
}

int zm_pages_alloc_at(struct zm_pages *p, zm_pfn_t pfn)
{
	zm_pfn_t got;
	size_t fails;
	bool dirty = false;

	if (pfn >= p->npages)
		return -EINVAL;
	zm_lock(&p->lock);
	fails = p->limit_failures;
	got = zm_buddy_take_at(p, pfn, &dirty);
	fails = p->limit_failures - fails;
	zm_unlock(&p->lock);
	if (got == ZM_PFN_NIL && fails && zm_tcache_reclaim(p))
		return zm_pages_alloc_at(p, pfn);  /* at the limit: once more */
	if (got == ZM_PFN_NIL)
		return fails ? -ENOMEM : -EBUSY;
	if (p->prefault && !dirty)
		zm_pages_prefault(p, &got, 1);
	return 0;
}

int zm_pages_free_order(struct zm_pages *p, zm_pfn_t pfn, unsigned order)
{
	struct zm_pg *pg;
	bool trim;

	if (order > ZM_PAGES_MAX_ORDER)
		return zm_pages_bad_free(p, pfn, "order too large");
	if (pfn >= p->npages)
		return zm_pages_bad_free(p, pfn, "pfn out of range");
	zm_lock(&p->lock);
	pg = zm_pg_of(p, pfn);
	if (pg->state != PG_ALLOC || pg->order != order) {
		zm_unlock(&p->lock);
		return zm_pages_bad_free(p, pfn, pg->state == PG_ALLOC ?
					 "order does not match the allocation" :
					 "not the start of an allocated run");
	}
	zm_buddy_give(p, pfn, order, true);
	p->nr_out -= (size_t)1 << order;
	trim = zm_pages_trim_due(p);
	zm_unlock(&p->lock);
	if (trim)
		zm_pages_trim_to(p, p->reserve);
	return 0;
}

void zm_pages_prefault(struct zm_pages *p, const zm_pfn_t *pfns, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && pfns[j] == pfns[j - 1] + 1)
			j++;
		/* descending runs too (a cache pops in reverse) */
		if (j == i + 1)
			while (j < n && pfns[j] + 1 == pfns[j - 1])
				j++;
		zm_pfn_t lo = pfns[i] < pfns[j - 1] ? pfns[i] : pfns[j - 1];

		if (zm_os_prefault(zm_pages_addr(p, lo), (j - i) << p->page_shift) == -EINVAL)
			return;   /* not supported here: let the faults happen */
		i = j;
	}
}

/* ---- giving memory back to the OS ----------------------------------- */

size_t zm_pages_trim_to(struct zm_pages *p, size_t target)
{
	zm_pfn_t blk[16];
	size_t total = 0;

	zm_lock(&p->lock);
	if (p->trimming) {
		zm_unlock(&p->lock);
		return 0;
	}
	p->trimming = true;
	while (p->nr_dirty_free > target) {
		size_t want = p->nr_dirty_free - target, n, before = p->nr_dirty_free;

		if (want > ZM_PAGES_CHUNK * 16)
			want = ZM_PAGES_CHUNK * 16;
		n = zm_buddy_isolate_dirty(p, want, blk, 16);
		if (n == 0)
			break;
		zm_unlock(&p->lock);
		/* Outside the lock: the isolated blocks belong to us. */
		for (size_t i = 0; i < n; i++) {
			unsigned order = zm_pg_of(p, blk[i])->order;

			zm_os_decommit(zm_pages_addr(p, blk[i]),
				       p->page_size << order);
		}
		zm_lock(&p->lock);
		for (size_t i = 0; i < n; i++) {
			unsigned order = zm_pg_of(p, blk[i])->order;

			zm_buddy_give(p, blk[i], order, false);
			p->nr_isolated -= (size_t)1 << order;
		}
		total += before - p->nr_dirty_free;
		if (p->nr_dirty_free >= before)
			break;  /* no progress (dirty pages elsewhere): stop */
	}
	p->trimmed_pages += total;
	p->trimming = false;
	zm_unlock(&p->lock);
	return total;
}

bool zm_pages_trim_due(const struct zm_pages *p)
{
	return p->reserve != SIZE_MAX && !p->trimming &&
	       p->nr_dirty_free > p->reserve + ZM_TRIM_BATCH;
}

size_t zm_pages_trim(struct zm_pages *p)
{
	return p->reserve == SIZE_MAX ? 0 : zm_pages_trim_to(p, p->reserve);
}

void zm_pages_stats(struct zm_pages *p, struct zm_pages_stats *st)
{
	size_t cached = zm_tcache_total(p);

	memset(st, 0, sizeof(*st));
	zm_lock(&p->lock);
	st->page_size = p->page_size;
	st->total_pages = p->npages;
	st->cached = cached <= p->nr_out ? cached : p->nr_out;
	st->in_use = p->nr_out - st->cached;
	st->free = p->nr_free + p->nr_isolated;
	st->reserve = p->nr_dirty_free;
	st->resident = p->nr_out + p->nr_dirty_free;
	st->resident_max = p->resident_max;
	st->limit_pages = p->limit;
	st->bulk_calls = p->bulk_calls;
	st->bulk_pages = p->bulk_pages;
	st->refills = p->refills;
	st->drains = p->drains;
	st->limit_failures = p->limit_failures;
	st->trimmed_pages = p->trimmed_pages;
	st->bad_frees = __atomic_load_n(&p->bad_frees, __ATOMIC_RELAXED);
	zm_unlock(&p->lock);
}
