/*
 * zsmalloc size classes, and the pool's create/destroy.
 *
 * Candidate slot sizes run from ZS_MIN_SIZE in steps of `spacing` up to
 * page_size - spacing; larger objects go to the huge class (one page
 * each).  For each size, the pages per zspage N (1..max_pages) is the one
 * that leaves the least unused space at the end of the zspage (ties: the
 * smaller N).  Neighbouring sizes that end up with the same N and the same
 * objects per zspage are merged into the larger one: a zspage then holds
 * exactly as many objects either way, so nothing is lost, and fewer
 * classes means fewer partly filled zspages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/zsmalloc/zsmalloc.h"

unsigned zs_class_for(struct zs_pool *zp, size_t size)
{
	size_t i = size <= ZS_MIN_SIZE ? 0 :
		   (size - ZS_MIN_SIZE + zp->spacing - 1) >> zp->spacing_shift;

	return i < zp->nidx ? zp->idx_to_class[i] : zp->nclasses - 1; /* or huge */
}

struct zs_class *zs_class_make(struct zs_pool *zp, unsigned sh, unsigned k)
{
	struct zs_class **s, *c = NULL;

	pthread_mutex_lock(&zp->shard_lock);
	s = zp->shard[sh];
	if (!s && (s = calloc(zp->nclasses + 1, sizeof(*s))))
		__atomic_store_n(&zp->shard[sh], s, __ATOMIC_RELEASE);
	if (s && !(c = s[k]) && (c = aligned_alloc(64, sizeof(*c)))) {
		const struct zs_proto *src = &zp->proto[k];

		memset(c, 0, sizeof(*c));
		c->size = src->size;
		c->pages = src->pages;
		c->objs = src->objs;
		c->huge = src->huge;
		c->mixed = k == zp->nclasses;
		c->gmul = (uint32_t)(((uint64_t)9 << 20) / c->objs);
		c->idx = (uint16_t)(sh << zp->cshift | k);
		zmi_lock_init_kind(&c->lock, ZMI_LOCK_CLASS);
		__atomic_store_n(&s[k], c, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&zp->shard_lock);
	return c;
}

static void free_classes(struct zs_pool *zp)
{
	for (unsigned sh = 0; sh < zp->nshards; sh++) {
		if (!zp->shard[sh])
			continue;
		for (unsigned k = 0; k <= zp->nclasses; k++)
			free(zp->shard[sh][k]);
		free(zp->shard[sh]);
	}
}

static void best_fit(size_t size, size_t page, unsigned max_pages,
		     unsigned *pages, unsigned *objs)
{
	double best = -1;

	for (unsigned n = 1; n <= max_pages; n++) {
		size_t o = n * page / size;
		double use = (double)(o * size) / (double)(n * page);

		if (o > 0 && o < ZS_NONE && use > best + 1e-9) {
			best = use;
			*pages = n;
			*objs = (unsigned)o;
		}
	}
}

static int build_classes(struct zs_pool *zp)
{
	size_t P = zp->page_size, n = 0;
	unsigned *pg, *ob, *cls_of;
	struct zs_class *cls;

	while (ZS_MIN_SIZE + n * zp->spacing <= P - zp->spacing)
		n++;
	zp->nidx = (unsigned)n;
	pg = calloc(n + 1, sizeof(*pg));
	ob = calloc(n + 1, sizeof(*ob));
	cls_of = calloc(n + 1, sizeof(*cls_of));
	zp->idx_to_class = calloc(n + 1, sizeof(*zp->idx_to_class));
	cls = calloc(n + 1, sizeof(*cls));
	if (!pg || !ob || !cls_of || !zp->idx_to_class || !cls) {
		free(pg), free(ob), free(cls_of), free(cls);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		best_fit(ZS_MIN_SIZE + i * zp->spacing, P, zp->max_pages, &pg[i], &ob[i]);
	/* From the top down: a size joins the class above when it would
	 * pack exactly like it. */
	unsigned ncls = 0;
	for (size_t k = n; k-- > 0;) {
		if (zp->merge && k + 1 < n && pg[k] == pg[k + 1] && ob[k] == ob[k + 1]) {
			cls_of[k] = cls_of[k + 1];
			continue;
		}
		cls_of[k] = ncls++;
	}
	/* class numbers ascending by size; the huge class last */
	for (size_t k = 0; k < n; k++) {
		unsigned id = ncls - 1 - cls_of[k];
		struct zs_class *c = &cls[id];

		zp->idx_to_class[k] = (uint16_t)id;
		if (!c->size || ZS_MIN_SIZE + k * zp->spacing > c->size) {
			c->size = (uint32_t)(ZS_MIN_SIZE + k * zp->spacing);
			c->pages = (uint16_t)pg[k];
			c->objs = (uint16_t)ob[k];
		}
	}
	cls[ncls] = (struct zs_class){ .size = (uint32_t)P, .pages = 1, .objs = 1,
				       .huge = true };
	zp->nclasses = ncls + 1;
	/* room for the mixed class after the huge one */
	while ((1u << zp->cshift) < zp->nclasses + 1)
		zp->cshift++;
	zp->total = zp->nshards << zp->cshift;
	zp->proto = calloc(zp->nclasses + 1, sizeof(*zp->proto));
	for (unsigned k = 0; zp->proto && k < zp->nclasses; k++)
		zp->proto[k] = (struct zs_proto){ .size = cls[k].size, .pages = cls[k].pages,
						  .objs = cls[k].objs, .huge = cls[k].huge };
	if (zp->proto) {
		/* the mixed class: zspages of max_pages pages, at most as many
		 * granules as a 16-bit bump counts (the last granule of 64
		 * pages of 4 KiB is not used) */
		size_t mp = ((size_t)ZS_MIXED_MAX_GRANULES + 1) * ZS_GRANULE / P, objs;

		if (mp > zp->mixed_pages)
			mp = zp->mixed_pages;
		if (!mp)
			zp->mixed = false;
		objs = (mp ? mp : 1) * P / ZS_GRANULE;
		zp->proto[zp->nclasses] = (struct zs_proto){
			.size = ZS_GRANULE, .pages = (uint16_t)(mp ? mp : 1),
			.objs = (uint16_t)(objs < ZS_MIXED_MAX_GRANULES ? objs
							    : ZS_MIXED_MAX_GRANULES) };
	}
	free(pg), free(ob), free(cls_of), free(cls);
	return zp->proto ? 0 : -ENOMEM;
}

int zs_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	/* its written fields sit on lines of their own: aligned */
	struct zs_pool *zp = aligned_alloc(_Alignof(struct zs_pool), sizeof(*zp));
	int rc;

	if (!zp)
		return -ENOMEM;
	memset(zp, 0, sizeof(*zp));
	zp->pages = pool->pages;
	zp->owner = pool->words;
	zp->nowner = pool->nwords;
	zp->base = zm_pages_addr(pool->pages, 0);
	zp->page_size = pool->page_size;
	while (((size_t)1 << zp->shift) < zp->page_size)
		zp->shift++;
	zp->spacing = cfg->class_spacing ? cfg->class_spacing : ZS_DEF_SPACING;
	if (!cfg->class_spacing && zp->page_size / ZS_DEF_CLASSES > zp->spacing)
		zp->spacing = (unsigned)(zp->page_size / ZS_DEF_CLASSES);
	zp->max_pages = cfg->max_zspage_pages ? cfg->max_zspage_pages : ZS_DEF_MAX_PAGES;
	zp->span = cfg->span ? cfg->span : ZM_SPAN_CONTIG;
	zp->borrow = cfg->class_borrow < 0 ? 0 :
		     cfg->class_borrow > 0 ? (unsigned)cfg->class_borrow : ZS_DEF_BORROW;
	/* by default none under a limit on the pages: there a free must make
	 * room at once, and a mixed zspage's holes wait for the compactor */
	zp->mixed = cfg->mixed_zspages ? cfg->mixed_zspages > 0 :
		    ZS_DEF_MIXED && !zm_pages_limited(zp->pages);
	zp->mixed_always = cfg->mixed_zspages > 0;
	/* a mixed zspage's tail is left unused when the next object does
	 * not fit: the larger the zspage, the less of it (measured:
	 * docs/zsmalloc.md); max_zspage_pages bounds it when given */
	zp->mixed_pages = cfg->max_zspage_pages ? zp->max_pages : ZS_MIXED_PAGES;
	if (zp->spacing < 8 || (zp->spacing & (zp->spacing - 1)) ||
	    zp->spacing > zp->page_size / 8 || zp->borrow > 64 ||
	    zp->max_pages > ZS_MAX_PAGES || zp->span > ZM_SPAN_CONTIG) {
		zmi_bad_input("zsmalloc: bad tuning (spacing %u, max pages %u)",
			     zp->spacing, zp->max_pages);
		free(zp);
		return -EINVAL;
	}
	zp->nshards = 1;
	while (zp->page_size < ZS_SHARD_PAGE_MAX && zp->nshards < ZS_MAX_SHARDS &&
	       zp->nshards < (unsigned)sysconf(_SC_NPROCESSORS_ONLN))
		zp->nshards <<= 1;
	while ((1u << zp->spacing_shift) < zp->spacing)
		zp->spacing_shift++;
	pthread_mutex_init(&zp->shard_lock, NULL);
	rc = build_classes(zp);
	if (!rc)
		rc = zs_handles_init(zp, pool->gen_base);
	if (!rc && (rc = zs_records_init(zp)))
		zs_handles_fini(zp);
	if (rc) {
		free_classes(zp);
		free(zp->proto);
		free(zp->idx_to_class);
		pthread_mutex_destroy(&zp->shard_lock);
		free(zp);
		return rc;
	}
	pthread_mutex_init(&zp->compact_lock, NULL);
	pool->priv = zp;
	rc = zs_auto_start(zp, cfg);
	if (rc) {
		pool->priv = NULL;
		zs_records_fini(zp);
		zs_handles_fini(zp);
		free_classes(zp);
		free(zp->proto);
		free(zp->idx_to_class);
		pthread_mutex_destroy(&zp->shard_lock);
		free(zp);
	}
	return rc;
}

void zs_destroy(struct zm_pool *pool)
{
	struct zs_pool *zp = zs_of(pool);

	zs_auto_stop(zp);
	zs_huge_release(zp);
	ZS_FOR_EACH_CLASS_ALL(zp, c) {
		zs_record_forget(zp, c, c->spare);
		for (unsigned g = 0; g < ZS_GROUPS; g++)
			while (c->group[g]) {
				struct zspage *zs = c->group[g];

				zs_group_del(c, zs);
				zs_zspage_retire(zp, c, zs);
				zs_zspage_free(zp, NULL, zs);
			}
	}
	zs_records_fini(zp);
	for (unsigned sh = 0; sh < ZS_MAX_SHARDS; sh++)
		free(zp->mhint[sh]);
	pool->gen_span = zs_handles_span(zp);
	zs_handles_fini(zp);
	pthread_mutex_destroy(&zp->compact_lock);
	free(zp->scratch);
	free_classes(zp);
	pthread_mutex_destroy(&zp->shard_lock);
	free(zp->proto);
	free(zp->idx_to_class);
	free(zp);
}

unsigned zs_nr_classes(struct zm_pool *pool)
{
	struct zs_pool *zp = zs_of(pool);

	/* the mixed zspages a row after the huge class */
	return zp->nclasses + zp->mixed;
}

const struct zmi_pool_ops zmi_pool_zsmalloc_ops = {
	.name = "zsmalloc",
	.uses_pages = true,
	.create = zs_create,
	.destroy = zs_destroy,
	.malloc = zs_malloc,
	.free = zs_free,
	.map = zs_map,
	.unmap = zs_unmap,
	.read = zs_read,
	.write = zs_write,
	.obj_size = zs_obj_size,
	.compact = zs_compact,
	.stats = zs_stats,
	.nr_classes = zs_nr_classes,
	.class_stats = zs_class_stats,
	.check = zs_check,
	.shrink = zs_shrink,
	.min_moves = zs_min_moves,
	.set_compaction = zs_auto_set,
	.bind = zs_bind,
	.key_handle = zs_key_handle_of,
	.free_key = zs_free_key,
	.unit = zs_unit,
	.put_key = zs_put_key,
	.get_key = zs_get_key,
	.prefetch_key = zs_prefetch_key,
};
