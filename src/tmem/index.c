/*
 * A pool's index: per shard, a chained hash of objects by id, and per
 * object a chained hash of its pages by index (tmem kept a tree of
 * objects, each with a radix tree of pages; hashes do the same lookups in
 * one step and cost a pointer per record).  Both tables double when they
 * hold twice as many entries as buckets, and an object's table starts at
 * TM_OBJ_BUCKETS, so that a one-page object (a small file) stays small.
 *
 * Every function here is called with the shard's lock held.
 */
#include <errno.h>
#include <stdlib.h>

#include "tmem/tmem_internal.h"

#define TM_SHARD_BUCKETS 16
#define TM_OBJ_BUCKETS 2

static inline uint32_t obj_bucket(const struct zmi_tmem_shard *sh, uint64_t oid)
{
	return (uint32_t)(zmi_tmem_mix(oid) & (sh->nbuckets - 1));
}

static inline uint32_t page_bucket(const struct zmi_tmem_obj *o, uint32_t index)
{
	/* indexes of one run are consecutive: spread them with a multiply */
	return (uint32_t)(((uint64_t)index * 0x9E3779B97F4A7C15ull) >> 32) & (o->nbuckets - 1);
}

struct zmi_tmem_obj *zmi_tmem_obj_find(struct zmi_tmem_shard *sh, uint64_t oid)
{
	struct zmi_tmem_obj *o;

	if (!sh->tab)
		return NULL;
	for (o = sh->tab[obj_bucket(sh, oid)]; o; o = o->next)
		if (o->oid == oid)
			return o;
	return NULL;
}

struct zmi_tmem_page *zmi_tmem_page_find(struct zmi_tmem_obj *o, uint32_t index)
{
	struct zmi_tmem_page *pg;

	for (pg = o->tab[page_bucket(o, index)]; pg; pg = pg->next)
		if (pg->index == index)
			return pg;
	return NULL;
}

/* Double the shard's object table, or an object's page table; false if
 * there is no memory (the old table stays: only the chains are longer). */
static bool grow_shard(struct zmi_tmem_shard *sh)
{
	uint32_t n = sh->nbuckets * 2;
	struct zmi_tmem_obj **tab = calloc(n, sizeof(*tab));

	if (!tab)
		return false;
	for (uint32_t b = 0; b < sh->nbuckets; b++) {
		struct zmi_tmem_obj *o = sh->tab[b], *next;

		for (; o; o = next) {
			uint32_t nb = (uint32_t)(zmi_tmem_mix(o->oid) & (n - 1));

			next = o->next;
			o->next = tab[nb];
			tab[nb] = o;
		}
	}
	free(sh->tab);
	sh->tab = tab;
	sh->nbuckets = n;
	return true;
}

static bool grow_obj(struct zmi_tmem_obj *o)
{
	struct zmi_tmem_obj big = { .nbuckets = o->nbuckets * 2 };
	struct zmi_tmem_page **tab = calloc(big.nbuckets, sizeof(*tab));

	if (!tab)
		return false;
	big.tab = tab;
	for (uint32_t b = 0; b < o->nbuckets; b++) {
		struct zmi_tmem_page *pg = o->tab[b], *next;

		for (; pg; pg = next) {
			uint32_t nb = page_bucket(&big, pg->index);

			next = pg->next;
			pg->next = tab[nb];
			tab[nb] = pg;
		}
	}
	free(o->tab);
	o->tab = tab;
	o->nbuckets = big.nbuckets;
	return true;
}

static struct zmi_tmem_obj *obj_make(struct zmi_tmem_shard *sh, uint64_t oid)
{
	struct zmi_tmem_obj *o;
	uint32_t b;

	if (!sh->tab) {
		sh->tab = calloc(TM_SHARD_BUCKETS, sizeof(*sh->tab));
		if (!sh->tab)
			return NULL;
		sh->nbuckets = TM_SHARD_BUCKETS;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->tab = calloc(TM_OBJ_BUCKETS, sizeof(*o->tab));
	if (!o->tab) {
		free(o);
		return NULL;
	}
	o->oid = oid;
	o->nbuckets = TM_OBJ_BUCKETS;
	if (sh->nobjs >= 2 * sh->nbuckets)
		(void)grow_shard(sh);
	b = obj_bucket(sh, oid);
	o->next = sh->tab[b];
	sh->tab[b] = o;
	sh->nobjs++;
	return o;
}

int zmi_tmem_page_link(struct zmi_tmem_shard *sh, uint64_t oid, struct zmi_tmem_page *pg)
{
	struct zmi_tmem_obj *o = zmi_tmem_obj_find(sh, oid);
	uint32_t b;

	if (!o) {
		o = obj_make(sh, oid);
		if (!o)
			return -ENOMEM;
	}
	if (o->npages >= 2 * o->nbuckets)
		(void)grow_obj(o);
	b = page_bucket(o, pg->index);
	pg->next = o->tab[b];
	o->tab[b] = pg;
	o->npages++;
	return 0;
}

void zmi_tmem_page_unlink(struct zmi_tmem_shard *sh, struct zmi_tmem_obj *o,
			  struct zmi_tmem_page *pg)
{
	struct zmi_tmem_page **pp = &o->tab[page_bucket(o, pg->index)];
	struct zmi_tmem_obj **op;

	while (*pp != pg)
		pp = &(*pp)->next;
	*pp = pg->next;
	if (--o->npages)
		return;
	for (op = &sh->tab[obj_bucket(sh, o->oid)]; *op != o; op = &(*op)->next)
		;
	*op = o->next;
	sh->nobjs--;
	free(o->tab);
	free(o);
}

void zmi_tmem_shard_free(struct zmi_tmem_shard *sh)
{
	free(sh->tab);
	sh->tab = NULL;
	sh->nbuckets = sh->nobjs = 0;
}
