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

#include <sys/uio.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/os.h"
#include "pages/pages_internal.h"

static unsigned log2_exact(size_t v)
{
	unsigned s = 0;

	while (((size_t)1 << s) < v)
		s++;
	return s;
}

/* How many zones, and their size (2^*shift pages): the fewest equal
 * powers of two that cover the arena, none empty. */
static unsigned pick_zones(size_t npages, unsigned want, unsigned *shift)
{
	unsigned n = 1, min_shift = ZM_PAGES_MAX_ORDER, s;

	if (want == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		want = cpus > 0 ? (unsigned)cpus : 1;
		min_shift = ZM_ZONE_MIN_SHIFT;
	}
	while (n * 2 <= want && n * 2 <= ZM_MAX_ZONES)
		n *= 2;
	for (;; n /= 2) {
		for (s = 0; ((size_t)n << s) < npages; s++)
			;
		if (n == 1 || s >= min_shift)
			break;
	}
	while (n > 1 && ((size_t)(n - 1) << s) >= npages)
		n--;
	*shift = s;
	return n;
}

static void zones_free(struct zm_pages *p)
{
	for (unsigned z = 0; p->zone && z < p->nzones; z++) {
		zmi_pages_bitset_free(&p->zone[z].free0[0]);
		zmi_pages_bitset_free(&p->zone[z].free0[1]);
		free(p->zone[z].bare);
		zmi_lock_destroy(&p->zone[z].lock);
	}
	free(p->zone);
	p->zone = NULL;
}

static int zones_init(struct zm_pages *p, unsigned want)
{
	unsigned n = pick_zones(p->npages, want, &p->zone_shift);

	p->zone = aligned_alloc(64, n * sizeof(struct zmi_pages_zone));
	if (!p->zone)
		return -ENOMEM;
	memset(p->zone, 0, n * sizeof(struct zmi_pages_zone));
	p->nzones = n;
	for (unsigned i = 0; i < n; i++) {
		struct zmi_pages_zone *z = &p->zone[i];
		size_t end = (size_t)(i + 1) << p->zone_shift;

		zmi_lock_init_kind(&z->lock, ZMI_LOCK_ZONE);
		z->start = (zm_pfn_t)((size_t)i << p->zone_shift);
		z->end = (zm_pfn_t)(end < p->npages ? end : p->npages);
		z->bare = calloc(((((size_t)z->end - z->start) >> ZM_PAGES_MAX_ORDER) + 64) / 64,
				 sizeof(uint64_t));
		if (!z->bare || zmi_pages_bitset_alloc(&z->free0[0], z->end - z->start) ||
		    zmi_pages_bitset_alloc(&z->free0[1], z->end - z->start)) {
			zones_free(p);
			return -ENOMEM;
		}
		zmi_pages_buddy_init(p, z);
	}
	return 0;
}

void zmi_pages_zones_lock(struct zm_pages *p)
{
	for (unsigned z = 0; z < p->nzones; z++)
		zmi_lock(&p->zone[z].lock);
}

void zmi_pages_zones_unlock(struct zm_pages *p)
{
	for (unsigned z = p->nzones; z-- > 0;)
		zmi_unlock(&p->zone[z].lock);
}

static size_t default_pages(size_t bytes, size_t page_size)
{
	size_t n = bytes / page_size;

	return n > ZM_MIN_DEFAULT ? n : ZM_MIN_DEFAULT;
}

int zm_pages_create_sized(const struct zm_pages_config *cfg, size_t cfg_size,
			  struct zm_pages **out)
{
	struct zm_pages_config c;
	struct zm_pages *p;
	size_t npages, align;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = zmi_struct_in(&c, sizeof(c), cfg, cfg_size,
			   zmi_size_upto(struct zm_pages_config, zones));
	if (rc)
		return rc;
	if (!c.page_size)
		c.page_size = ZM_PAGE_SIZE_DEFAULT;
	if (!c.arena_bytes)
		c.arena_bytes = ZM_DEFAULT_ARENA;
	if (c.page_size < ZM_PAGE_SIZE_MIN || c.page_size > ZM_PAGE_SIZE_MAX ||
	    (c.page_size & (c.page_size - 1)) || c.page_size < zmi_os_page_size())
		return -EINVAL;
	/* the barrier a cache's steal runs (tcache.c), registered here */
	zmi_os_membarrier_register();
	npages = c.arena_bytes / c.page_size;
	if (npages == 0 || npages >= ZM_PFN_NIL)
		return -EINVAL;
	if (c.cache_pages > ZM_MAX_CACHE)
		return -EINVAL;

	p = aligned_alloc(_Alignof(struct zm_pages), sizeof(*p));
	if (!p)
		return -ENOMEM;
	memset(p, 0, sizeof(*p));
	p->page_size = c.page_size;
	p->page_shift = log2_exact(c.page_size);
	p->npages = (uint32_t)npages;
	p->arena_bytes = npages * c.page_size;
	p->limit = c.limit_pages && c.limit_pages < npages ? c.limit_pages : npages;
	p->limited = p->limit < npages;
	p->reserve = c.reserve_pages ? c.reserve_pages : default_pages(ZM_DEFAULT_RESERVE_BYTES, c.page_size);
	p->reserve_scales = !c.reserve_pages;
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
	p->base = zmi_os_reserve(p->arena_bytes, align);
	p->pg_bytes = npages * sizeof(struct zmi_pages_pg);
	p->meta_bytes = npages * sizeof(struct zm_page_meta);
	p->pg = zmi_os_reserve(p->pg_bytes, zmi_os_page_size());
	p->meta = zmi_os_reserve(p->meta_bytes, zmi_os_page_size());
	if (!p->base || !p->pg || !p->meta || zones_init(p, c.zones)) {
		zmi_os_release(p->base, p->arena_bytes);
		zmi_os_release(p->pg, p->pg_bytes);
		zmi_os_release(p->meta, p->meta_bytes);
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void zm_pages_destroy(struct zm_pages *p)
{
	size_t cached, leaked;

	if (!p)
		return;
	cached = zmi_pages_tcache_total(p);
	zmi_pages_tcache_detach_all(p);   /* returns nothing: the arena goes away */
	zmi_pages_zones_lock(p);
	leaked = zmi_pages_nr_out_locked(p) - cached;
	zmi_pages_zones_unlock(p);
	if (leaked)
		zmi_log("zm_pages_destroy: %zu page(s) still allocated, released with it", leaked);
	zmi_os_release(p->base, p->arena_bytes);
	zmi_os_release(p->pg, p->pg_bytes);
	zmi_os_release(p->meta, p->meta_bytes);
	zones_free(p);
	free(p);
}

void *zm_pages_addr(const struct zm_pages *p, zm_pfn_t pfn)
{
	if (!p)
		return NULL;
	return p->base + ((size_t)pfn << p->page_shift);
}

zm_pfn_t zm_pages_pfn(const struct zm_pages *p, const void *addr)
{
	const char *a = addr;

	if (!p || !addr)
		return ZM_PFN_NIL;

	if (a < p->base || a >= p->base + p->arena_bytes)
		return ZM_PFN_NIL;
	return (zm_pfn_t)((size_t)(a - p->base) >> p->page_shift);
}

struct zm_page_meta *zm_pages_meta(const struct zm_pages *p, zm_pfn_t pfn)
{
	if (!p)
		return NULL;
	return pfn < p->npages ? &p->meta[pfn] : NULL;
}

size_t zm_pages_page_size(const struct zm_pages *p)
{
	if (!p)
		return 0;
	return p->page_size;
}

int zmi_pages_bad_free(struct zm_pages *p, zm_pfn_t pfn, const char *why)
{
	static const char *const names[] = { "free", "free", "allocated",
		"part of a run", "free (in a thread cache)", "free (being trimmed)" };
	const char *st = "out of range";

	if (pfn < p->npages) {
		uint8_t s = zmi_pages_pg_state(zmi_pages_pg_of(p, pfn));

		st = s < sizeof(names) / sizeof(names[0]) ? names[s] : "corrupt";
	}
	__atomic_fetch_add(&p->bad_frees, 1, __ATOMIC_RELAXED);
	zmi_bad_input("zm_pages: bad free of pfn %u: %s (page is %s)", pfn, why, st);
	(void)st;
	return -EINVAL;
}

int zm_pages_alloc_order(struct zm_pages *p, unsigned order, zm_pfn_t *pfn)
{
	zm_pfn_t got;

	if (!p || !pfn)
		return -EINVAL;

	if (order > ZM_PAGES_MAX_ORDER) {
		zmi_bad_input("zm_pages_alloc_order: order %u > %d", order,
			     ZM_PAGES_MAX_ORDER);
		return -EINVAL;
	}
	struct zmi_pages_zone *z;
	bool limited = false;

	got = ZM_PFN_NIL;
	ZM_FOR_EACH_ZONE_FROM(p, zmi_pages_home_zone(p), i, z) {
		zmi_lock(&z->lock);
		got = zmi_pages_buddy_take_block(p, z, order, &limited);
		zmi_unlock(&z->lock);
		if (got != ZM_PFN_NIL || limited)
			break;
	}
	if (got == ZM_PFN_NIL && limited && zmi_pages_tcache_reclaim(p))
		return zm_pages_alloc_order(p, order, pfn);  /* at the limit: once more */
	if (got == ZM_PFN_NIL)
		return -ENOMEM;
	*pfn = got;
	return 0;
}

int zm_pages_alloc_at(struct zm_pages *p, zm_pfn_t pfn)
{
	return zm_pages_alloc_at_run(p, pfn, 1);
}

int zm_pages_alloc_at_run(struct zm_pages *p, zm_pfn_t pfn, unsigned n)
{
	zm_pfn_t got;
	struct zmi_pages_zone *z;
	bool dirty = false, limited = false, resident;

	if (!p)
		return -EINVAL;

	if (pfn >= p->npages || n == 0 || n > ZM_PAGES_RUN_MAX)
		return -EINVAL;
	z = zmi_pages_zone_of(p, pfn);
	/* a page that is not resident, while some zone has resident ones
	 * free (its caller then takes one of those: zm_pages_alloc looks in
	 * every zone): the caller saves a copy (an object crossing two
	 * pages) by having it in place, and pays a fault for it, a hundred
	 * times more; a churning pool growing zspages in place into pages
	 * the trims gave back paid it in most of its slow allocations
	 * (docs/results/2026-12-02-latency.md) */
	resident = p->prefault && zmi_pages_dirty_somewhere(p, p->cache_batch);
	zmi_lock(&z->lock);
	got = zmi_pages_buddy_take_at(p, z, pfn, resident, &dirty, &limited);
	zmi_unlock(&z->lock);
	if (got == ZM_PFN_NIL && limited && zmi_pages_tcache_reclaim(p))
		return zm_pages_alloc_at_run(p, pfn, n);  /* at the limit: once more */
	if (got == ZM_PFN_NIL)
		return limited ? -ENOMEM : -EBUSY;
	if (p->prefault && !dirty)
		zmi_pages_tcache_ahead_at(p, z, got, n);
	return 0;
}

int zm_pages_free_order(struct zm_pages *p, zm_pfn_t pfn, unsigned order)
{
	struct zmi_pages_pg *pg;
	struct zmi_pages_zone *z;

	if (!p)
		return -EINVAL;

	if (order > ZM_PAGES_MAX_ORDER)
		return zmi_pages_bad_free(p, pfn, "order too large");
	if (pfn >= p->npages)
		return zmi_pages_bad_free(p, pfn, "pfn out of range");
	z = zmi_pages_zone_of(p, pfn);
	zmi_lock(&z->lock);
	pg = zmi_pages_pg_of(p, pfn);
	if (pg->state != PG_ALLOC || pg->order != order) {
		zmi_unlock(&z->lock);
		return zmi_pages_bad_free(p, pfn, pg->state == PG_ALLOC ?
					 "order does not match the allocation" :
					 "not the start of an allocated run");
	}
	zmi_pages_buddy_give(p, z, pfn, order, true);
	zmi_pages_zone_returned(p, z, (size_t)1 << order);
	zmi_unlock(&z->lock);
	zmi_pages_zone_maybe_trim(p, z);
	return 0;
}

/* This thread's prefault, off (zm_pages_thread_prefault) where its caller
 * holds a lock others wait for. */
static __thread bool tls_no_prefault __attribute__((tls_model("initial-exec")));

int zm_pages_thread_prefault(int on)
{
	int was = !tls_no_prefault;

	tls_no_prefault = !on;
	return was;
}

void zmi_pages_prefault(struct zm_pages *p, const zm_pfn_t *pfns, size_t n)
{
	/* the pages stay marked resident as where the kernel cannot make
	 * them so (below): the writes that follow fault them in */
	if (zmi_unlikely(tls_no_prefault))
		return;
	/* a shared line written on a path that costs a fault's work a page */
	__atomic_fetch_add(&p->prefaulted, n, __ATOMIC_RELAXED);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && pfns[j] == pfns[j - 1] + 1)
			j++;
		/* descending runs too (a cache pops in reverse) */
		if (j == i + 1)
			while (j < n && pfns[j] + 1 == pfns[j - 1])
				j++;
		zm_pfn_t lo = pfns[i] < pfns[j - 1] ? pfns[i] : pfns[j - 1];

		if (zmi_os_prefault(zm_pages_addr(p, lo), (j - i) << p->page_shift) == -EINVAL)
			return;   /* not supported here: let the faults happen */
		i = j;
	}
}

/* ---- giving memory back to the OS ----------------------------------- */

/* Give back the OS pages of [a, a + len) that lie wholly inside it;
 * true if a's own went back. */
static bool decommit_inside(const void *a, size_t len)
{
	uintptr_t os = zmi_os_page_size(), lo = ((uintptr_t)a + os - 1) & ~(os - 1),
		  hi = ((uintptr_t)a + len) & ~(os - 1);

	if (hi <= lo)
		return false;
	zmi_os_decommit((void *)lo, hi - lo);
	return lo == (uintptr_t)a;
}

/* The clean largest-order blocks of zone z (lock held on entry and exit,
 * dropped while memory goes back) come off the lists, and their page
 * records (and the owners' records) go back to the OS: after every page
 * of a pool was freed and trimmed, the records of the high-water mark
 * would stay resident (8 bytes a page). */
static void bare_blocks(struct zm_pages *p, struct zmi_pages_zone *z)
{
	const size_t n = (size_t)1 << ZM_PAGES_MAX_ORDER;
	zm_pfn_t blk[16];
	bool zeroed[16];
	size_t got;

	while ((got = zmi_pages_buddy_bare_take(p, z, blk, 16)) != 0) {
		zmi_unlock(&z->lock);
		for (size_t i = 0; i < got; i++) {
			zeroed[i] = decommit_inside(zmi_pages_pg_of(p, blk[i]), n * sizeof(struct zmi_pages_pg));
			decommit_inside(&p->meta[blk[i]], n * sizeof(struct zm_page_meta));
		}
		zmi_lock(&z->lock);
		for (size_t i = 0; i < got; i++)
			zmi_pages_buddy_bare_set(p, z, blk[i], zeroed[i]);
	}
}

/* Trim zone z down to target dirty free pages (z's lock held on entry
 * and exit; dropped while the memory goes back); bare: then its clean
 * largest-order blocks' records go back too (bare_blocks: on demand, not
 * on every free's trim, whose blocks are taken again soon and would fault
 * their records back in).  Returns pages given back. */
static size_t trim_zone(struct zm_pages *p, struct zmi_pages_zone *z, size_t target, bool bare)
{
	zm_pfn_t blk[16];
	struct iovec iov[16];
	size_t total = 0;

	if (z->trimming)
		return 0;
	z->trimming = true;
	while (z->nr_dirty_free > target) {
		size_t n, cleaned, want = z->nr_dirty_free - target;

		if (want > ZM_PAGES_CHUNK * 16)
			want = ZM_PAGES_CHUNK * 16;
		n = zmi_pages_buddy_isolate_dirty(p, z, want, blk, 16, &cleaned);
		if (n == 0)
			break;
		zmi_unlock(&z->lock);
		/* Outside the lock: the isolated blocks belong to us. */
		for (size_t i = 0; i < n; i++)
			iov[i] = (struct iovec){
				zm_pages_addr(p, blk[i]),
				p->page_size << zmi_pages_pg_of(p, blk[i])->order };
		zmi_os_decommit_many(iov, n);
		zmi_lock(&z->lock);
		for (size_t i = 0; i < n; i++) {
			unsigned order = zmi_pages_pg_of(p, blk[i])->order;

			zmi_pages_buddy_give(p, z, blk[i], order, false);
			z->nr_isolated -= (size_t)1 << order;
		}
		/* what this pass cleaned (others may free dirty pages into
		 * the zone while the lock is dropped) */
		total += cleaned;
		if (!cleaned)
			break;  /* no progress (dirty pages elsewhere): stop */
	}
	if (bare)
		bare_blocks(p, z);
	z->trimmed_pages += total;
	z->trimming = false;
	return total;
}

/* Make zone z's clean free pages resident until it has target dirty free
 * pages (z's lock held on entry and exit; dropped while the kernel does
 * it): the pages its takers will want soon, made resident here, by a
 * pool's worker, rather than in the allocation that takes each.  Blocks
 * of a run block's size at least (zm_pages_alloc_run cuts runs from
 * resident blocks first, zspages grow into their next pages in place).
 * Returns the pages made resident. */
#ifndef ZM_REFILL_SHIFT
#define ZM_REFILL_SHIFT 5
#endif
static size_t refill_zone(struct zm_pages *p, struct zmi_pages_zone *z, size_t target)
{
	zm_pfn_t blk[16];
	size_t total = 0;
	bool failed = false;

	if (z->trimming)
		return 0;
	z->trimming = true;  /* a trim and a refill would undo each other */
	while (!failed && z->nr_dirty_free < target) {
		size_t n, want = target - z->nr_dirty_free, resident;

		if (want > ZM_PAGES_CHUNK * 16)
			want = ZM_PAGES_CHUNK * 16;
		n = zmi_pages_buddy_isolate_clean(p, z, want, p->run_order, blk, 16);
		if (n == 0)
			break;
		zmi_unlock(&z->lock);
		/* Outside the lock: the isolated blocks belong to us; a
		 * kernel without MADV_POPULATE_WRITE leaves them clean */
		for (size_t i = 0; i < n && !failed; i++) {
			unsigned order = zmi_pages_pg_of(p, blk[i])->order;

			failed = zmi_os_prefault(zm_pages_addr(p, blk[i]),
						 p->page_size << order) != 0;
		}
		zmi_lock(&z->lock);
		for (size_t i = 0; i < n; i++) {
			unsigned order = zmi_pages_pg_of(p, blk[i])->order;

			zmi_pages_buddy_give(p, z, blk[i], order, !failed);
			z->nr_isolated -= (size_t)1 << order;
			if (!failed)
				total += (size_t)1 << order;
		}
		resident = z->out + z->nr_dirty_free;
		if (resident > z->resident_max)
			__atomic_store_n(&z->resident_max, resident, __ATOMIC_RELAXED);
	}
	z->refilled_pages += total;
	z->trimming = false;
	return total;
}

uint64_t (*zmi_pages_clock)(void);

/* Is the decay on?  Only with the default reserve, and while someone
 * calls zm_pages_trim_due (a pool's worker, every 50 ms): that is what
 * gives the decaying pages back when no free comes to do it, as for the
 * demand (zmi_pages_zone_demand).  Without it, the frees trim to what the
 * zone keeps at once, as they always did. */
static bool decay_on(const struct zm_pages *p, uint64_t now)
{
	return p->reserve_scales &&
	       now - __atomic_load_n(&p->due_seen_ns, __ATOMIC_RELAXED) <=
		       2 * ZM_DEMAND_MS * 1000000ull;
}

/* The share (of 256) of the pages gained i epochs before the last that
 * may stay resident: 1 - smoothstep(i / ZM_DECAY_EPOCHS).  Flat at
 * first, so that the pages a mass free leaves are there for the
 * allocations of the next 100-200 ms, which take most of what they take
 * after it (allocbench --latency); linear, the first epochs gave back a
 * share the churn then faulted in again
 * (docs/results/2026-12-05-trim-decay.md). */
static const uint16_t decay_weight[ZM_DECAY_EPOCHS] = {
	256, 245, 216, 175, 128, 81, 40, 11
};

/* Zone z's pages the decay lets stay resident at now (lock held), the
 * epochs turned first if due: the pages gained since the last turn go
 * in as the newest epoch's, each older one ages (one step an epoch
 * passed), and what they allow is summed. */
static size_t decay_allows(struct zmi_pages_zone *z, uint64_t now)
{
	const uint64_t e = ZM_DECAY_EPOCH_MS * 1000000ull;
	uint64_t n = now - z->decay_epoch_ns;
	size_t gained = z->nr_dirty_free > z->decay_mark ? z->nr_dirty_free - z->decay_mark : 0;

	if (n < e && z->decay_epoch_ns)
		return z->decay_limit + gained;
	n = z->decay_epoch_ns && n / e < ZM_DECAY_EPOCHS ? n / e : ZM_DECAY_EPOCHS;
	for (size_t i = ZM_DECAY_EPOCHS; i-- > 0;)
		z->decay_added[i] = i >= n ? z->decay_added[i - n] : 0;
	z->decay_added[0] = gained;
	size_t limit = 0;

	for (size_t i = 0; i < ZM_DECAY_EPOCHS; i++)
		limit += z->decay_added[i] * decay_weight[i] / 256;
	__atomic_store_n(&z->decay_limit, limit, __ATOMIC_RELAXED);
	/* a late turn (no call for a while) starts the epoch now */
	__atomic_store_n(&z->decay_epoch_ns, n < ZM_DECAY_EPOCHS ? z->decay_epoch_ns + n * e : now,
			 __ATOMIC_RELAXED);
	z->decay_mark = z->nr_dirty_free;
	return limit;
}

/* Trim zone z (lock held) down to keep or what the decay allows, if
 * more: the pages above keep go as the decay says.  Returns pages given
 * back. */
static size_t decay_trim(struct zm_pages *p, struct zmi_pages_zone *z, size_t keep, size_t batch,
			 uint64_t now)
{
	size_t allow = decay_allows(z, now), got;

	if (allow > keep)
		keep = allow;
	if (z->nr_dirty_free <= keep + batch)
		return 0;
	got = trim_zone(p, z, keep, false);
	/* what the turn's trim left is not a gain */
	if (z->decay_mark > z->nr_dirty_free)
		z->decay_mark = z->nr_dirty_free;
	return got;
}

void zmi_pages_zone_maybe_trim(struct zm_pages *p, struct zmi_pages_zone *z)
{
	size_t r;
	uint64_t now;

	/* relaxed reads of the zone's own counters: the line its freer just
	 * had under the lock */
	if (p->reserve == SIZE_MAX)
		return;
	r = zmi_pages_zone_reserve(p, z);
	if (__atomic_load_n(&z->nr_dirty_free, __ATOMIC_RELAXED) <= r + zmi_pages_trim_batch(p, r))
		return;
	now = zmi_pages_now();
	if (decay_on(p, now)) {
		/* the pages above r go at an epoch's turn, as the decay says
		 * (the current epoch's gains all stay till then) */
		if (now - __atomic_load_n(&z->decay_epoch_ns, __ATOMIC_RELAXED) <
		    ZM_DECAY_EPOCH_MS * 1000000ull)
			return;
		zmi_lock(&z->lock);
		r = zmi_pages_zone_reserve(p, z);
		decay_trim(p, z, r, zmi_pages_trim_batch(p, r), now);
		zmi_unlock(&z->lock);
		return;
	}
	zmi_lock(&z->lock);
	trim_zone(p, z, zmi_pages_zone_reserve(p, z), false);
	zmi_unlock(&z->lock);
}

/* Every zone down to keep(zone) dirty free pages, after taking back the
 * caches of threads not in a call (tcache.c): a thread that freed and
 * went quiet would otherwise keep its cache resident for good. */
static size_t trim_all(struct zm_pages *p, bool idle)
{
	size_t total = 0;
	uint64_t now = zmi_pages_now();
	bool decay = idle && decay_on(p, now);

	if (p->reserve == SIZE_MAX)
		return 0;
	zmi_pages_tcache_steal(p);
	for (unsigned i = 0; i < p->nzones; i++) {
		struct zmi_pages_zone *z = &p->zone[i];
		/* idle: what the zone was asked for lately (a pool that
		 * churns takes those pages again, and each given back would
		 * come back as a fault); zm_pages_trim_due takes it down
		 * when the asking stops.  With the decay on, its pages stay
		 * too: the compactor's frees, given back over the next
		 * epochs (what the churn after a mass free takes) */
		size_t keep = idle && p->reserve_scales ? zmi_pages_zone_demand(p, z, now)
						       : zmi_pages_zone_reserve(p, z);

		zmi_lock(&z->lock);
		if (decay) {
			size_t allow = decay_allows(z, now);

			keep = allow > keep ? allow : keep;
		}
		total += trim_zone(p, z, keep, true);
		if (!idle) {
			/* asked for the memory now: what the decay kept
			 * is gone, and it keeps nothing of it */
			memset(z->decay_added, 0, sizeof(z->decay_added));
			__atomic_store_n(&z->decay_limit, 0, __ATOMIC_RELAXED);
		}
		if (!idle || z->decay_mark > z->nr_dirty_free)
			z->decay_mark = z->nr_dirty_free;
		zmi_unlock(&z->lock);
	}
	return total;
}

size_t zm_pages_trim(struct zm_pages *p)
{
	return p ? trim_all(p, false) : 0;
}

size_t zm_pages_trim_idle(struct zm_pages *p)
{
	return trim_all(p, true);
}

bool zm_pages_limited(const struct zm_pages *p)
{
	return p->limited;
}

bool zm_pages_keeps_memory(const struct zm_pages *p)
{
	return p->reserve == SIZE_MAX;
}

size_t zm_pages_trim_due(struct zm_pages *p)
{
	size_t total = 0;
	uint64_t now = zmi_pages_now();

	if (!p || p->reserve == SIZE_MAX || !p->reserve_scales)
		return 0;
	__atomic_store_n(&p->due_seen_ns, now, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < p->nzones; i++) {
		struct zmi_pages_zone *z = &p->zone[i];
		size_t keep = zmi_pages_zone_demand(p, z, now) ? zmi_pages_zone_reserve(p, z) : 0;
		size_t dirty = __atomic_load_n(&z->nr_dirty_free, __ATOMIC_RELAXED);

		/* below half of what the demand asks: made resident here,
		 * off the takers' threads, if they want it (prefault), up
		 * to 1/2^ZM_REFILL_SHIFT of the pages out: a fill's own
		 * pages held resident ahead of it are memory it does not
		 * use yet (an eighth read 6% more resident memory at the
		 * end of a 400 MiB fill) */
		size_t ahead = __atomic_load_n(&z->out, __ATOMIC_RELAXED) >> ZM_REFILL_SHIFT;

		if (ahead > keep)
			ahead = keep;
		if (p->prefault && dirty < ahead / 2) {
			zmi_lock(&z->lock);
			/* made resident here: not a gain for the decay */
			z->decay_mark += refill_zone(p, z, ahead);
			zmi_unlock(&z->lock);
			continue;
		}
		/* with no demand every free page goes (as trim_idle's),
		 * as the decay lets them: its epochs turn here when no
		 * free comes to turn them */
		if (dirty <= keep + (keep ? zmi_pages_trim_batch(p, keep) : 0) &&
		    now - __atomic_load_n(&z->decay_epoch_ns, __ATOMIC_RELAXED) <
			    ZM_DECAY_EPOCH_MS * 1000000ull)
			continue;
		zmi_lock(&z->lock);
		total += decay_trim(p, z, keep, keep ? zmi_pages_trim_batch(p, keep) : 0, now);
		zmi_unlock(&z->lock);
	}
	return total;
}

static void fill_stats(struct zm_pages *p, struct zm_pages_stats *st);

int zm_pages_stats_sized(struct zm_pages *p, struct zm_pages_stats *out, size_t size)
{
	struct zm_pages_stats st;

	if (!p)
		return -EINVAL;
	fill_stats(p, &st);
	return zmi_struct_out(out, size, zmi_size_upto(struct zm_pages_stats, zones), &st,
			      sizeof(st));
}

static void fill_stats(struct zm_pages *p, struct zm_pages_stats *st)
{
	size_t cached = zmi_pages_tcache_total(p), nfree = 0, dirty = 0, out, rmax = 0;
	uint64_t tc_calls, tc_pages, stolen;

	/* the caches' registry lock comes before the zones' (tcache.c) */
	zmi_pages_tcache_bulk_counts(p, &tc_calls, &tc_pages, &stolen);
	memset(st, 0, sizeof(*st));
	st->stolen_pages = stolen;
	st->prefaulted_pages = __atomic_load_n(&p->prefaulted, __ATOMIC_RELAXED);
	zmi_pages_zones_lock(p);
	for (unsigned i = 0; i < p->nzones; i++) {
		struct zmi_pages_zone *z = &p->zone[i];

		nfree += z->nr_free + z->nr_isolated;
		dirty += z->nr_dirty_free;
		st->bulk_calls += z->bulk_calls;
		st->bulk_pages += z->bulk_pages;
		st->refills += z->refills;
		st->drains += z->drains;
		st->limit_failures += z->limit_failures;
		st->trimmed_pages += z->trimmed_pages;
		st->refilled_pages += z->refilled_pages;
		rmax += z->resident_max;
	}
	st->bulk_calls += tc_calls;
	st->bulk_pages += tc_pages;
	out = zmi_pages_nr_out_locked(p);
	st->page_size = p->page_size;
	st->total_pages = p->npages;
	st->cached = cached <= out ? cached : out;
	st->in_use = out - st->cached;
	st->free = nfree;
	st->reserve = dirty;
	st->resident = out + dirty;
	/* the zones' own marks, summed: exact with one zone, an upper bound
	 * with more (their peaks need not have come at once) */
	st->resident_max = rmax > st->resident ? rmax : st->resident;
	st->limit_pages = p->limit;
	st->bad_frees = __atomic_load_n(&p->bad_frees, __ATOMIC_RELAXED);
	st->zones = p->nzones;
	zmi_pages_zones_unlock(p);
}
