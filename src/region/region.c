/*
 * Regions: create and destroy, the calls on a whole region (reclaim,
 * discard, limit), statistics.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/debug.h"
#include "base/os.h"
#include "region/region_internal.h"


#define CONFIG_MIN zmi_size_upto(struct zm_region_config, store_size)
#define STATS_MIN zmi_size_upto(struct zm_region_stats, pins)
/* the first published store config (store.h) */
#define STORE_CONFIG_MIN zmi_size_upto(struct zm_store_config, max_mean_zsize)

static struct zmi_region *R(struct zm_region *r)
{
	return (struct zmi_region *)r;
}

static bool in_child(const struct zmi_region *r)
{
	return r->pid != getpid();
}

static uint64_t limit_pages(size_t bytes, size_t ps)
{
	uint64_t n = bytes / ps;

	if (bytes && n < ZM_REGION_MIN_RESIDENT)
		n = ZM_REGION_MIN_RESIDENT;
	return n;
}

static void region_free(struct zmi_region *r)
{
	if (r->uffd >= 0)
		close(r->uffd);
	/* a child has no mapping there (MADV_DONTFORK): whatever it mapped
	 * at that address since is not ours */
	if (r->base && !in_child(r))
		munmap(r->base, r->nr_pages << r->page_shift);
	if (r->pages)
		zmi_os_release(r->pages, r->nr_pages * sizeof(*r->pages));
	zmi_region_policy_free(r);
	zm_store_destroy(r->store);
	pthread_mutex_destroy(&r->reclaim_lock);
	pthread_rwlock_destroy(&r->call_lock);
	free(r);
}

int zm_region_create_sized(const struct zm_region_config *ucfg, size_t cfg_size,
			   struct zm_region **out)
{
	struct zm_region_config cfg;
	struct zm_store_config sc;
	struct zmi_region *r;
	size_t sys_ps = zmi_os_page_size(), ps;
	uint64_t nr;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ucfg) {
		zmi_bad_input("zm_region_create: no config (a region needs its size)");
		return -EINVAL;
	}
	rc = zmi_struct_in(&cfg, sizeof(cfg), ucfg, cfg_size, CONFIG_MIN);
	if (rc)
		return rc;
	if (!cfg.size || (cfg.flags & ~(ZM_REGION_WAIT | ZM_REGION_INHERIT | ZM_REGION_AROUND)) || cfg.policy > ZM_REGION_POLICY_FIFO ||
	    (cfg.store && !cfg.store_size)) {
		zmi_bad_input("zm_region_create: size 0, unknown flags or policy, or a store "
			      "config without its size");
		return -EINVAL;
	}
	rc = zmi_struct_in(&sc, sizeof(sc), cfg.store, cfg.store_size, STORE_CONFIG_MIN);
	if (rc)
		return rc;
	ps = sc.page_size ? sc.page_size : sys_ps;
	if (ps < sys_ps || ps > ZM_PAGE_SIZE_MAX || (ps & (ps - 1))) {
		zmi_bad_input("zm_region_create: page size %zu is not a power of two from the "
			      "system's page to %u", ps, (unsigned)ZM_PAGE_SIZE_MAX);
		return -EINVAL;
	}
	if (cfg.size > SIZE_MAX - ps) {
		zmi_bad_input("zm_region_create: size %zu too large", cfg.size);
		return -EINVAL;
	}
	nr = (cfg.size + ps - 1) / ps;
	if (nr > ZM_STORE_MAX_PAGES || nr >= UINT32_MAX || (sc.nr_pages && sc.nr_pages != nr)) {
		zmi_bad_input("zm_region_create: %llu pages: more than a store holds, or the "
			      "store config's nr_pages set", (unsigned long long)nr);
		return -EINVAL;
	}
	sc.nr_pages = nr;
	sc.page_size = ps;

	rc = zmi_region_signals_init();
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->uffd = -1;
	pthread_mutex_init(&r->reclaim_lock, NULL);
	zmi_region_rwlock_init(&r->call_lock);
	r->page_size = ps;
	r->page_shift = (unsigned)__builtin_ctzll(ps);
	r->nr_pages = nr;
	r->size = nr * ps;
	r->flags = cfg.flags;
	r->policy = cfg.policy;
	r->cold_age_ms = cfg.cold_age_ms ? cfg.cold_age_ms : ZM_REGION_COLD_AGE_MS;
	r->pid = getpid();
	r->t0_ns = zmi_region_now_ns();

	rc = -ENOMEM;
	r->base = zmi_os_reserve(r->size, ps);
	if (!r->base)
		goto fail;
	/* no transparent huge pages (a fault fills one page of ours); not
	 * inherited by a child (region.h, fork) unless asked */
	madvise(r->base, r->size, MADV_NOHUGEPAGE);
	if (!(cfg.flags & ZM_REGION_INHERIT) && madvise(r->base, r->size, MADV_DONTFORK)) {
		rc = -errno;
		goto fail;
	}
	r->pages = zmi_os_reserve(nr * sizeof(*r->pages), sys_ps);
	if (!r->pages || zmi_region_policy_init(r))
		goto fail;
	rc = zmi_region_uffd_setup(r->base, r->size, cfg.flags & ZM_REGION_WAIT);
	if (rc < 0)
		goto fail;
	r->uffd = rc;
	rc = zm_store_create(&sc, &r->store);
	if (rc)
		goto fail;
	r->unit_pages = sc.unit_pages;
	zmi_region_set_marks(r, limit_pages(cfg.resident_limit, ps));
	rc = zmi_region_register(r);
	if (rc)
		goto fail;
	*out = (struct zm_region *)r;
	return 0;
fail:
	region_free(r);
	return rc;
}

int zmi_region_adopt(struct zmi_region *r)
{
	uint64_t hw = __atomic_load_n(&r->hw_pages, __ATOMIC_RELAXED), pg = 0;
	int fd = zmi_region_uffd_setup(r->base, r->size, r->flags & ZM_REGION_WAIT);

	if (fd < 0)
		return fd;
	/* the parent's userfaultfd acts on the parent's memory: this copy
	 * of its descriptor only goes */
	close(r->uffd);
	r->uffd = fd;
	r->pid = getpid();
	r->room_waiters = 0;
	/* The child's mapping lost the write-protection with the
	 * registration: a clean page would take a write unseen and be
	 * evicted as clean, the write lost.  Protected again, run by run. */
	while (pg < hw) {
		uint64_t e;
		if (rp_kind(r->pages[pg].word) != RP_CLEAN) {
			pg++;
			continue;
		}
		for (e = pg + 1; e < hw && rp_kind(r->pages[e].word) == RP_CLEAN; e++)
			;
		zmi_region_uffd_protect(fd, zmi_region_page_addr(r, pg), (e - pg) << r->page_shift,
					true, false);
		pg = e;
	}
	return 0;
}

void zm_region_destroy(struct zm_region *ur)
{
	struct zmi_region *r = R(ur);

	if (!r)
		return;
	zmi_region_unregister(r);
	region_free(r);
}

void *zm_region_base(const struct zm_region *r)
{
	return r ? ((const struct zmi_region *)r)->base : NULL;
}

size_t zm_region_size(const struct zm_region *r)
{
	return r ? ((const struct zmi_region *)r)->size : 0;
}

size_t zm_region_page_size(const struct zm_region *r)
{
	return r ? ((const struct zmi_region *)r)->page_size : 0;
}

struct zm_store *zm_region_store(struct zm_region *r)
{
	return r ? R(r)->store : NULL;
}

long zm_region_reclaim(struct zm_region *ur, size_t bytes)
{
	struct zmi_region *r = R(ur);
	uint64_t n, done, fails0;

	if (!r)
		return -EINVAL;
	if (in_child(r))
		return -ECHILD;
	/* rounded up to pages without wrapping: SIZE_MAX asks for all */
	n = (bytes >> r->page_shift) + ((bytes & (r->page_size - 1)) != 0);
	fails0 = __atomic_load_n(&r->count[RC_EVICT_FAIL], __ATOMIC_RELAXED);
	pthread_rwlock_rdlock(&r->call_lock);
	done = zmi_region_evict(r, n);
	pthread_rwlock_unlock(&r->call_lock);
	if (!done && n && __atomic_load_n(&r->count[RC_EVICT_FAIL], __ATOMIC_RELAXED) != fails0)
		return -ENOSPC;
	return (long)(done << r->page_shift);
}

static bool zeros(const void *p, size_t len)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i])
			return false;
	return true;
}

/* Drop page pg (its lock held, *w its word). */
static void discard_page(struct zmi_region *r, uint64_t pg, uint32_t *w)
{
	void *addr = zmi_region_page_addr(r, pg);
	unsigned k = rp_kind(*w);

	if (rp_resident(*w) && rp_pins(*w)) {
		/* the kernel may be using it: zero it in place */
		if (k == RP_CLEAN)
			zmi_region_uffd_protect(r->uffd, addr, r->page_size, false, true);
		if (k == RP_CLEAN || k == RP_DIRTY)
			zm_store_discard(r->store, pg, 1);
		/* a ZERO page too: a write since (the kernel's, through the
		 * pin, or the program's) made it a private page we were not
		 * told of; zeroed only if so, so that the zero page stays */
		if (k != RP_ZERO || !zeros(addr, r->page_size))
			memset(addr, 0, r->page_size);
		*w = (*w & ~RP_KIND_MASK) | (k == RP_ZERO ? RP_ZERO : RP_DIRTY);
		return;
	}
	if (rp_resident(*w)) {
		madvise(addr, r->page_size, MADV_DONTNEED);
		__atomic_sub_fetch(&r->resident, 1, __ATOMIC_ACQ_REL);
	}
	if (k == RP_STORED || k == RP_CLEAN || k == RP_DIRTY)
		zm_store_discard(r->store, pg, 1);
	*w = (*w & ~RP_KIND_MASK) | RP_EMPTY;
	zmi_region_policy_forget(r, pg);
}

/* Discard pages [first, end).  Resident pages that follow each other are
 * unmapped together, one madvise for up to DISCARD_RUN of them (one TLB
 * flush, not one a page: an allocator giving back a large block, as
 * mimalloc does through zmem run's madvise, drops many at once); the
 * later pages of a run are taken with a trylock, as the lock order asks,
 * and a run ends at the first that is busy. */
#define DISCARD_RUN 64

static void discard_flush(struct zmi_region *r, uint64_t from, unsigned n, uint32_t *w)
{
	if (!n)
		return;
	madvise(zmi_region_page_addr(r, from), (size_t)n << r->page_shift, MADV_DONTNEED);
	__atomic_sub_fetch(&r->resident, n, __ATOMIC_ACQ_REL);
	for (unsigned i = 0; i < n; i++) {
		unsigned k = rp_kind(w[i]);
		if (k == RP_CLEAN || k == RP_DIRTY)
			zm_store_discard(r->store, from + i, 1);
		zmi_region_policy_forget(r, from + i);
		zmi_region_page_unlock(r, from + i, (w[i] & ~RP_KIND_MASK) | RP_EMPTY);
	}
}

static void discard_range(struct zmi_region *r, uint64_t first, uint64_t end)
{
	uint32_t w[DISCARD_RUN];
	uint64_t from = 0;
	unsigned n = 0;

	for (uint64_t pg = first; pg < end; pg++) {
		uint32_t x = __atomic_load_n(&r->pages[pg].word, __ATOMIC_RELAXED);
		if (rp_kind(x) == RP_EMPTY && !(x & RP_LOCKED)) {
			/* nothing there (a fault in flight takes the lock) */
			discard_flush(r, from, n, w);
			n = 0;
			continue;
		}
		if (n && (n == DISCARD_RUN || !zmi_region_page_trylock(r, pg, &x))) {
			discard_flush(r, from, n, w);
			n = 0;
		} else if (n) {
			goto got;
		}
		x = zmi_region_page_lock(r, pg, NULL);
got:
		if (rp_resident(x) && !rp_pins(x)) {
			if (!n)
				from = pg;
			w[n++] = x;
			continue;
		}
		/* stored, empty, or pinned: one at a time, after the run */
		discard_flush(r, from, n, w);
		n = 0;
		discard_page(r, pg, &x);
		zmi_region_page_unlock(r, pg, x);
	}
	discard_flush(r, from, n, w);
}

/* The checks of a call on [offset, offset + length) of a region: 0, or
 * -EINVAL (said on the log sink, naming the call), -ECHILD.  The pages
 * into *first and *end. */
static int range_of(const struct zmi_region *r, const char *call, size_t offset, size_t length,
		    uint64_t *first, uint64_t *end)
{
	if (!r || offset > r->size || length > r->size - offset ||
	    ((offset | length) & (r->page_size - 1))) {
		zmi_bad_input("%s: no region, or a range out of it or not aligned to its pages",
			      call);
		return -EINVAL;
	}
	if (in_child(r))
		return -ECHILD;
	*first = offset >> r->page_shift;
	*end = (offset + length) >> r->page_shift;
	return 0;
}

int zm_region_discard(struct zm_region *ur, size_t offset, size_t length)
{
	struct zmi_region *r = R(ur);
	uint64_t first, end;
	int rc = range_of(r, "zm_region_discard", offset, length, &first, &end);

	if (rc)
		return rc;
	pthread_rwlock_rdlock(&r->call_lock);
	discard_range(r, first, end);
	pthread_rwlock_unlock(&r->call_lock);
	return 0;
}

static int protect_range(struct zmi_region *r, uint64_t first, uint64_t end, size_t offset,
			 size_t length, int prot);

int zm_region_protect(struct zm_region *ur, size_t offset, size_t length, int prot)
{
	struct zmi_region *r = R(ur);
	uint64_t first, end;
	int rc = range_of(r, "zm_region_protect", offset, length, &first, &end);

	if (rc)
		return rc;
	pthread_rwlock_rdlock(&r->call_lock);
	rc = protect_range(r, first, end, offset, length, prot);
	pthread_rwlock_unlock(&r->call_lock);
	return rc;
}

static int protect_range(struct zmi_region *r, uint64_t first, uint64_t end, size_t offset,
			 size_t length, int prot)
{
	bool readable = prot & PROT_READ;

	if (readable) {
		/* readable first, then evictable: between the two the
		 * evictor only passes the pages by */
		if (mprotect(r->base + offset, length, prot))
			return -errno;
		for (uint64_t pg = first; pg < end; pg++) {
			uint32_t w = __atomic_load_n(&r->pages[pg].word, __ATOMIC_RELAXED);
			if (!(w & RP_NOREAD))
				continue;
			w = zmi_region_page_lock(r, pg, NULL);
			zmi_region_page_unlock(r, pg, w & ~RP_NOREAD);
		}
		return 0;
	}
	/* Unreadable: marked first (the evictor leaves the page alone from
	 * then on), its content stored and unmapped while it can still be
	 * read, then protected.  A page the program brings back in between
	 * (its own race) stays resident, marked, never read by us. */
	for (uint64_t pg = first; pg < end; pg++) {
		uint32_t w = zmi_region_page_lock(r, pg, NULL);

		if (rp_resident(w) && !rp_pins(w))
			zmi_region_evict_page(r, pg, &w); /* refused: stays */
		zmi_region_page_unlock(r, pg, w | RP_NOREAD);
	}
	if (mprotect(r->base + offset, length, prot))
		return -errno;
	return 0;
}

int zm_region_set_limit(struct zm_region *ur, size_t bytes)
{
	struct zmi_region *r = R(ur);

	if (!r)
		return -EINVAL;
	if (in_child(r))
		return -ECHILD;
	zmi_region_set_marks(r, limit_pages(bytes, r->page_size));
	zmi_region_kick(r);
	return 0;
}

int zm_region_stats_sized(struct zm_region *ur, struct zm_region_stats *ust, size_t st_size)
{
	struct zmi_region *r = R(ur);
	struct zm_region_stats st;
	struct zm_store_stats ss;
	uint64_t clean = 0, stored = 0, hw;

	if (!r || !ust || st_size < STATS_MIN)
		return -EINVAL;
	if (in_child(r))
		return -ECHILD;
	memset(&st, 0, sizeof(st));
	zm_store_stats(r->store, &ss);
	/* the page table's words: one pass over the pages in use (none
	 * above the highest ever brought in: a large region mostly unused
	 * costs nothing here) */
	hw = __atomic_load_n(&r->hw_pages, __ATOMIC_RELAXED);
	for (uint64_t pg = 0; pg < hw; pg++) {
		uint32_t w;
		uint64_t next;
		if ((pg & 1023) == 0 && zm_store_next_used(r->store, pg, hw, &next) == 0 &&
		    next > pg + 1024) {
			/* no stored page in this stretch: clean ones need one */
			pg += 1023;
			continue;
		}
		w = __atomic_load_n(&r->pages[pg].word, __ATOMIC_RELAXED);
		clean += rp_kind(w) == RP_CLEAN;
		stored += rp_kind(w) == RP_STORED;
	}
	st.size = r->size;
	st.page_size = r->page_size;
	st.resident_limit = __atomic_load_n(&r->limit, __ATOMIC_RELAXED) << r->page_shift;
	st.slack = __atomic_load_n(&r->slack, __ATOMIC_RELAXED) << r->page_shift;
	st.resident_bytes = __atomic_load_n(&r->resident, __ATOMIC_RELAXED) << r->page_shift;
	st.resident_max = __atomic_load_n(&r->resident_max, __ATOMIC_RELAXED) << r->page_shift;
	st.pages_clean = clean;
	st.pages_stored = stored;
	st.stored_bytes = ss.compr_data_size;
	st.pool_bytes = ss.mem_used_total;
	st.meta_bytes = ss.pool_meta_bytes + ss.store_meta_bytes + sizeof(*r) +
			(__atomic_load_n(&r->resident_max, __ATOMIC_RELAXED) +
			 ss.pages_stored) * (sizeof(struct zmi_region_page) + sizeof(uint32_t));
	st.faults_first = __atomic_load_n(&r->count[RC_FIRST], __ATOMIC_RELAXED);
	st.faults_refault = __atomic_load_n(&r->count[RC_REFAULT], __ATOMIC_RELAXED);
	st.faults_wp = __atomic_load_n(&r->count[RC_WP], __ATOMIC_RELAXED);
	st.refaults_young = __atomic_load_n(&r->count[RC_YOUNG], __ATOMIC_RELAXED);
	st.fault_waits = __atomic_load_n(&r->count[RC_WAITS], __ATOMIC_RELAXED);
	st.fault_ns = __atomic_load_n(&r->count[RC_FAULT_NS], __ATOMIC_RELAXED);
	for (int i = 0; i < ZM_REGION_HIST_BUCKETS; i++)
		st.fault_hist[i] = __atomic_load_n(&r->hist[i], __ATOMIC_RELAXED);
	st.evictions = __atomic_load_n(&r->count[RC_EVICT], __ATOMIC_RELAXED);
	st.evictions_clean = __atomic_load_n(&r->count[RC_EVICT_CLEAN], __ATOMIC_RELAXED);
	st.pages_around = __atomic_load_n(&r->count[RC_AROUND], __ATOMIC_RELAXED);
	st.evict_failures = __atomic_load_n(&r->count[RC_EVICT_FAIL], __ATOMIC_RELAXED);
	st.pins = __atomic_load_n(&r->count[RC_PINS], __ATOMIC_RELAXED);
	return zmi_struct_out(ust, st_size, STATS_MIN, &st, sizeof(st));
}

static double pct_of(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

void zm_region_print_stats_sized(const struct zm_region_stats *ust, size_t st_size, FILE *f)
{
	struct zm_region_stats st;
	uint64_t faults;

	if (!ust || !f || zmi_struct_in(&st, sizeof(st), ust, st_size, STATS_MIN))
		return;
	faults = st.faults_first + st.faults_refault + st.faults_wp;
	fprintf(f, "region        %" PRIu64 " bytes, pages of %" PRIu64 "\n", st.size,
		st.page_size);
	fprintf(f, "resident      %" PRIu64 " bytes (most %" PRIu64 "), limit %" PRIu64
		   " + slack %" PRIu64 "\n", st.resident_bytes, st.resident_max,
		st.resident_limit, st.slack);
	fprintf(f, "stored        %" PRIu64 " pages, %" PRIu64 " compressed bytes in a pool of %"
		   PRIu64 "; %" PRIu64 " clean resident pages keep their copy\n",
		st.pages_stored, st.stored_bytes, st.pool_bytes, st.pages_clean);
	fprintf(f, "metadata      %" PRIu64 " bytes\n", st.meta_bytes);
	fprintf(f, "faults        %" PRIu64 ": first touch %" PRIu64 ", refault %" PRIu64
		   " (%.1f%% within the cold age), write-protect %" PRIu64 ", waited %" PRIu64
		   "; %" PRIu64 " pages mapped ahead\n", faults, st.faults_first, st.faults_refault,
		pct_of(st.refaults_young, st.faults_refault), st.faults_wp, st.fault_waits,
		st_size >= offsetof(struct zm_region_stats, pages_around) + sizeof(uint64_t)
			? st.pages_around : 0);
	fprintf(f, "fault time    %.2f us a fault on average\n",
		faults ? (double)st.fault_ns / 1e3 / (double)faults : 0.0);
	fprintf(f, "evictions     %" PRIu64 " (%" PRIu64 " clean), %" PRIu64 " refused by the "
		   "store; pins %" PRIu64 "\n", st.evictions, st.evictions_clean,
		st.evict_failures, st.pins);
}
