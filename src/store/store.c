/*
 * The store: create and destroy, accessors, compaction.
 *
 * A store owns its codec and its pool; the pool owns its pages, sized from
 * the store's geometry (arena_bytes() below), and the limit, if any, goes
 * to the pages layer (see policy.c).
 *
 * Locks: none here; see store_internal.h for the layer's lock order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/live.h"
#include "store/store_internal.h"

/* Default huge_size: 31/32 of a page.  A compressed page is stored raw
 * only when compression saves less than 1/32 (128 bytes of 4 KiB): there
 * the pool would spend about a page on it anyway (zsmalloc packs objects
 * this large about one to a page), so storing it raw costs no memory and
 * saves the decompression.  zram's threshold (its huge_class_size, about
 * 3/4 of a page) comes from a zsmalloc whose zspages are at most 4 pages
 * long; ours are longer, so objects up to 31/32 of a page still pack
 * densely (docs/store.md, "Huge pages"). */
#define HUGE_SIZE_DEFAULT(ps) ((ps) - (ps) / 32)

/* The smallest arena a store gives its pool: room for the per-thread page
 * caches and the reserve beside a small store's pages. */
#define POOL_ARENA_MIN ((uint64_t)64 << 20)

static int check_config(const struct zm_store_config *c, size_t ps)
{
	if (!c->nr_pages || c->nr_pages > ZM_STORE_MAX_PAGES) {
		zmi_bad_input("zm_store_create: nr_pages %llu is not 1..2^29",
			     (unsigned long long)c->nr_pages);
		return -EINVAL;
	}
	if (ps < ZM_PAGE_SIZE_MIN || ps > ZM_PAGE_SIZE_MAX || (ps & (ps - 1))) {
		zmi_bad_input("zm_store_create: page size %zu is not a power of two "
			     "in 4096..65536", ps);
		return -EINVAL;
	}
	if (c->backing_uri && (c->backing_path || c->backing_fd > 0)) {
		zmi_bad_input("zm_store_create: backing_uri with a backing file");
		return -EINVAL;
	}
	if ((c->writeback_limit || c->backing_readback) && !c->backing_path && c->backing_fd <= 0 &&
	    !c->backing_uri) {
		zmi_bad_input("zm_store_create: writeback_limit or backing_readback without a "
			      "backing file");
		return -EINVAL;
	}
	if (c->unit_pages > ZM_STORE_UNIT_MAX || (c->unit_pages & (c->unit_pages - 1)) ||
	    (size_t)c->unit_pages * ps > ZM_STORE_UNIT_MAX_BYTES || c->unit_min_saving >= 100) {
		zmi_bad_input("zm_store_create: unit_pages %u is not a power of two up to %u "
			      "of at most %zu bytes, or unit_min_saving %u is not a percentage",
			      c->unit_pages, ZM_STORE_UNIT_MAX, ZM_STORE_UNIT_MAX_BYTES,
			      c->unit_min_saving);
		return -EINVAL;
	}
	if (c->huge_size > ps) {
		zmi_bad_input("zm_store_create: huge_size %zu above the page size",
			     c->huge_size);
		return -EINVAL;
	}
	return 0;
}

/* The pages layer numbers pages with 32 bits. */
#define PAGES_MAX_PFNS (((uint64_t)1 << 32) - 1)

/* Address space for the pool's pages: what the store could hold (every
 * page raw), but no more than the limit or the machine's memory could,
 * plus a quarter for the allocator's partly used pages.  Reserving
 * costs nothing, but the pages layer sets up records for its whole arena
 * (a page fault per 4 MiB of arena at creation), so a 1 TiB store on a 16 GiB machine should not reserve
 * 1 TiB, nor a 1 MiB store 4 GiB. */
static uint64_t arena_bytes(uint64_t nr_pages, size_t ps, size_t limit)
{
	long ram_pages = sysconf(_SC_PHYS_PAGES), sys_ps = sysconf(_SC_PAGESIZE);
	uint64_t want = nr_pages * ps;

	if (limit && limit < want)
		want = limit;
	if (ram_pages > 0 && sys_ps > 0 && (uint64_t)ram_pages * (uint64_t)sys_ps < want)
		want = (uint64_t)ram_pages * (uint64_t)sys_ps;
	want += want / 4;
	if (want > PAGES_MAX_PFNS * ps)
		want = PAGES_MAX_PFNS * ps;
	return want > POOL_ARENA_MIN ? want : POOL_ARENA_MIN;
}

/* Free every page, stopping as soon as the counters say none is left, so
 * that a large, mostly empty store is not walked (nor its untouched slot
 * array paged in) to the end.  The pool's background compactor may still
 * be moving objects (it stops in zm_pool_destroy, below) and rewrites the
 * pool's part of a word as it does: the word is read atomically. */
static void release_all(struct zm_store *s)
{
	uint64_t left = zmi_store_counter_sum(s, C_PAGES);

	for (uint64_t i = zmi_store_slot_next_touched(s, 0, s->nr_pages); left && i < s->nr_pages;
	     i = zmi_store_slot_next_touched(s, i + 1, s->nr_pages)) {
		if (slot_kind(word_info(__atomic_load_n(&s->slots[i], __ATOMIC_RELAXED))) ==
		    ZM_STORE_SLOT_EMPTY)
			continue;
		(void)zmi_store_slot_clear(s, i); /* a refused object goes with the pool */
		left--;
	}
}

int zm_store_create_sized(const struct zm_store_config *ucfg, size_t cfg_size,
			  struct zm_store **out)
{
	struct zm_pool_config pc = { 0 };
	struct zm_store_config cfg_copy, *cfg = &cfg_copy;
	struct zm_store *s;
	size_t ps;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ucfg)
		return -EINVAL;
	rc = zmi_struct_in(cfg, sizeof(*cfg), ucfg, cfg_size, ZMI_STORE_CONFIG_MIN);
	if (rc)
		return rc;
	ps = cfg->page_size ? cfg->page_size : ZM_PAGE_SIZE_DEFAULT;
	rc = check_config(cfg, ps);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	zmi_live_add(s, ZMI_LIVE_STORE);   /* before any failure destroys it */
	s->nr_pages = cfg->nr_pages;
	s->page_size = ps;
	s->page_shift = (unsigned)__builtin_ctzl(ps);
	s->same_filled = !cfg->no_same_filled;
	s->huge_size = cfg->huge_size ? cfg->huge_size : HUGE_SIZE_DEFAULT(ps);
	s->max_zsize = cfg->max_zsize > ps ? ps : cfg->max_zsize;
	s->max_mean_zsize = cfg->max_mean_zsize;
	s->limit_bytes = s->limit_max = cfg->limit_bytes;
	s->readback = cfg->backing_readback;
	s->unit_pages = cfg->unit_pages ? cfg->unit_pages : 1;
	s->unit_min_saving = cfg->unit_min_saving ? cfg->unit_min_saving
						  : ZM_STORE_UNIT_MIN_SAVING;
	s->bfd = -1;
	pthread_mutex_init(&s->mark_lock, NULL);
	pthread_mutex_init(&s->wb_lock, NULL);
	pthread_mutex_init(&s->recomp_lock, NULL);
	pthread_mutex_init(&s->busy_lock, NULL);
	pthread_cond_init(&s->busy_cond, NULL);

	rc = zm_codec_create(cfg->codec, cfg->codec_level, &s->codec);
	if (rc)
		goto fail;
	rc = zmi_store_recomp_init(s, cfg->recompress_codec, cfg->recompress_level);
	if (rc)
		goto fail;
	pc.allocator = cfg->allocator;
	pc.page_size = ps;
	pc.limit_bytes = cfg->limit_bytes;
	pc.arena_bytes = arena_bytes(cfg->nr_pages, ps, cfg->limit_bytes);
	rc = zmi_store_slots_alloc(s);
	if (rc)
		goto fail;
	/* the slots are the pool's owner words (store_internal.h) */
	pc.words = s->slots;
	pc.nwords = s->nr_pages;
	rc = zm_pool_create(&pc, &s->pool);
	if (rc)
		goto fail;
	rc = zmi_store_idle_init(s);
	if (rc)
		goto fail;
	rc = zmi_store_backing_open(s, cfg->backing_path, cfg->backing_fd, cfg->writeback_limit);
	if (!rc && cfg->backing_uri)
		rc = zmi_store_backing_open_uri(s, cfg->backing_uri);
	if (rc)
		goto fail;
	rc = zmi_store_writer_init(s, cfg->writeback_sync);
	if (rc)
		goto fail;
	if (cfg->idle_after_ms && !s->codec2 && !zmi_store_backing_any(s)) {
		zmi_bad_input("zm_store_create: idle_after_ms without a recompress_codec or "
			      "backing file has nothing to do");
		rc = -EINVAL;
		goto fail;
	}
	rc = zmi_store_tier_start(s, cfg->idle_after_ms, cfg->recompress_rate);
	if (rc)
		goto fail;
	rc = zmi_store_clean_start(s, cfg->file_clean_rate);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	zm_store_destroy(s);
	return rc;
}

void zm_store_destroy(struct zm_store *s)
{
	if (!s || !zmi_live_take(s, ZMI_LIVE_STORE, "zm_store_destroy"))
		return;   /* destroyed twice: a message in ZM_DEBUG builds */
	zmi_store_tier_stop(s);     /* first: it walks the slots */
	zmi_store_clean_stop(s);    /* so does the cleaner */
	zmi_store_writer_stop(s);   /* it writes back: before the pages go */
	s->destroying = true;       /* the file is emptied whole below */
	if (s->pool && s->slots)
		release_all(s);
	zm_pool_destroy(s->pool);   /* before the words it was given */
	zmi_store_slots_free(s);
	zmi_store_idle_fini(s);
	zmi_store_backing_close(s);
	zmi_store_recomp_fini(s);
	zm_codec_destroy(s->codec);
	pthread_mutex_destroy(&s->mark_lock);
	pthread_mutex_destroy(&s->wb_lock);
	pthread_mutex_destroy(&s->recomp_lock);
	pthread_mutex_destroy(&s->busy_lock);
	pthread_cond_destroy(&s->busy_cond);
	zmi_live_free(s, sizeof(*s));
}

long zm_store_compact(struct zm_store *s)
{
	if (!s)
		return -EINVAL;
	return s ? zm_pool_compact(s->pool) : -EINVAL;
}

int zm_store_set_limit(struct zm_store *s, size_t bytes)
{
	if (!s || (s->limit_max && (!bytes || bytes > s->limit_max))) {
		zmi_bad_input("zm_store_set_limit: no store, or a limit beyond the one at create");
		return -EINVAL;
	}
	__atomic_store_n(&s->limit_bytes, bytes, __ATOMIC_RELAXED);
	return 0;
}

int zm_store_reset_max(struct zm_store *s)
{
	struct zm_pool_stats ps;

	if (!s)
		return -EINVAL;
	zm_pool_stats(s->pool, &ps);
	__atomic_store_n(&s->used_max, ps.pool_bytes, __ATOMIC_RELAXED);
	return 0;
}

struct zm_pool *zm_store_pool(struct zm_store *s)
{
	if (!s)
		return NULL;
	return s ? s->pool : NULL;
}

struct zm_codec *zm_store_codec(struct zm_store *s)
{
	if (!s)
		return NULL;
	return s ? s->codec : NULL;
}

size_t zm_store_page_size(const struct zm_store *s)
{
	if (!s)
		return 0;
	return s ? s->page_size : 0;
}

uint64_t zm_store_nr_pages(const struct zm_store *s)
{
	if (!s)
		return 0;
	return s ? s->nr_pages : 0;
}
