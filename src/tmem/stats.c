/*
 * Statistics and the checker.
 *
 * Counters live in the shards (written under their locks) and are summed
 * here with relaxed loads: a snapshot taken while others work is a sum
 * of moments, each counter exact.  The histogram walks the records, one
 * shard lock at a time.
 */
#include <errno.h>
#include <string.h>

#include "base/abi.h"
#include "tmem/tmem_internal.h"

#define TMI_STATS_MIN zmi_size_upto(struct zm_tmem_stats, evicts)

/* Counters c (a pool's, or the destroyed pools') into st. */
static void add_counters(struct zm_tmem_stats *st, const uint64_t *c, uint64_t flush_objects,
			 enum zm_tmem_kind kind)
{
	st->puts += c[TC_PUTS];
	st->puts_stored += c[TC_STORED];
	st->gets += c[TC_GETS];
	st->hits += c[TC_HITS];
	st->flush_pages += c[TC_FLUSH_PAGES];
	st->flush_objects += flush_objects;
	st->flushed_pages += c[TC_FLUSHED];
	st->evicted_objects += c[TC_EVICTED];
	st->refused_zsize += c[TC_REF_ZSIZE];
	st->refused_mean += c[TC_REF_MEAN];
	st->refused_share += c[TC_REF_SHARE];
	st->refused_full += c[TC_REF_FULL];
	st->dropped += c[TC_DROPPED];
	if (kind == ZM_TMEM_EPHEMERAL)
		st->ephemeral_pages += c[TC_PAGES];
	else
		st->persistent_pages += c[TC_PAGES];
	st->orig_bytes += c[TC_ORIG];
	st->compr_bytes += c[TC_COMPR];
}

static void add_pool(struct zmi_tmem_pool *p, struct zm_tmem_stats *st, uint64_t *records,
		     uint64_t *objs)
{
	uint64_t c[TC_NR] = { 0 };

	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		struct zmi_tmem_shard *sh = &p->shard[i];

		for (unsigned k = 0; k < TC_NR; k++)
			c[k] += __atomic_load_n(&sh->ctr[k], __ATOMIC_RELAXED);
		zmi_lock(&sh->lock);
		*objs += sh->nobjs;
		for (uint32_t b = 0; b < sh->nbuckets; b++)
			for (struct zmi_tmem_obj *o = sh->tab[b]; o; o = o->next) {
				*records += o->nbuckets;
				for (uint32_t j = 0; j < o->nbuckets; j++)
					for (struct zmi_tmem_page *pg = o->tab[j]; pg; pg = pg->next) {
						size_t z = pg->zlen ? pg->zlen - 1u : 0;

						st->hist[z * ZM_TMEM_HIST_BUCKETS / p->page_size]++;
					}
			}
		*records += sh->nbuckets;
		zmi_unlock(&sh->lock);
	}
	add_counters(st, c, __atomic_load_n(&p->flush_objects, __ATOMIC_RELAXED), p->kind);
}

int zm_tmem_stats_sized(struct zm_tmem *t, int pool, struct zm_tmem_stats *out, size_t size)
{
	struct zm_tmem_stats st, all;
	struct zm_pool_stats ps[2];
	uint64_t records = 0, objs = 0, npools = 0;
	struct zmi_tmem_pool *want = NULL;

	if (!t || !out)
		return -EINVAL;
	if (pool && !(want = zmi_tmem_pool_of(t, pool, "zm_tmem_stats")))
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	memset(&all, 0, sizeof(all));
	/* every pool's records count in meta_bytes, whichever was asked */
	pthread_mutex_lock(&t->pools_lock);
	for (unsigned i = 0; i < ZM_TMEM_MAX_POOLS; i++) {
		struct zmi_tmem_pool *p = t->pool[i];

		if (!p)
			continue;
		npools++;
		add_pool(p, !want || p == want ? &st : &all, &records, &objs);
	}
	if (!want)  /* the instance's totals keep what destroyed pools did */
		add_counters(&st, t->gone, t->gone_flush_objects, ZM_TMEM_EPHEMERAL);
	pthread_mutex_unlock(&t->pools_lock);
	all.ephemeral_pages += st.ephemeral_pages;
	all.persistent_pages += st.persistent_pages;
	st.misses = st.gets - st.hits;
	zm_pool_stats(t->eph, &ps[0]);
	zm_pool_stats(t->pers, &ps[1]);
	st.pool_pages = ps[0].pool_pages + ps[1].pool_pages;
	st.pool_bytes = ps[0].pool_bytes + ps[1].pool_bytes;
	st.meta_bytes = ps[0].meta_bytes + ps[1].meta_bytes + sizeof(*t) +
			npools * sizeof(struct zmi_tmem_pool) + objs * sizeof(struct zmi_tmem_obj) +
			(all.ephemeral_pages + all.persistent_pages) *
			sizeof(struct zmi_tmem_page) + records * sizeof(void *);
	st.evictions = __atomic_load_n(&t->evictions, __ATOMIC_RELAXED);
	st.evicted_pages = __atomic_load_n(&t->evicted_pages, __ATOMIC_RELAXED);
	st.budget_bytes = t->budget;
	st.allocator = zm_pool_backend(t->eph);
	st.evicts = t->evicts;
	return zmi_struct_out(out, size, TMI_STATS_MIN, &st, sizeof(st));
}

/* ---- the checker ------------------------------------------------------ */

#define FAIL(...) do { zmi_log_error(__VA_ARGS__); bad++; } while (0)

static long check_pool(struct zm_tmem *t, struct zmi_tmem_pool *p, uint64_t *eph,
		       uint64_t *pers_bytes)
{
	long bad = 0;

	for (unsigned i = 0; i < ZM_TMEM_SHARDS; i++) {
		struct zmi_tmem_shard *sh = &p->shard[i];
		uint64_t pages = 0, orig = 0, compr = 0, nobjs = 0;

		for (uint32_t b = 0; b < sh->nbuckets; b++)
			for (struct zmi_tmem_obj *o = sh->tab[b]; o; o = o->next) {
				uint32_t n = 0;

				nobjs++;
				for (uint32_t j = 0; j < o->nbuckets; j++)
					for (struct zmi_tmem_page *pg = o->tab[j]; pg; pg = pg->next) {
						size_t hl = p->kind == ZM_TMEM_EPHEMERAL ? TM_HDR : 0;
						struct zmi_tmem_hdr hdr;

						n++;
						pages++;
						orig += pg->len;
						compr += pg->zlen;
						if (zmi_tmem_shard_of(p, o->oid, pg->index) != sh)
							FAIL("tmem check: pool %d: page %llu/%u in the wrong shard",
							     p->id, (unsigned long long)o->oid, pg->index);
						if (zm_pool_obj_size(p->zp, pg->h) < hl + pg->zlen)
							FAIL("tmem check: pool %d: page %llu/%u: object %#llx "
							     "bad or short", p->id, (unsigned long long)o->oid,
							     pg->index, (unsigned long long)pg->h);
						if (!hl) {
							*pers_bytes += pg->zlen;
							continue;
						}
						(*eph)++;
						if (zm_pool_read(p->zp, pg->h, &hdr, sizeof(hdr)) ||
						    hdr.oid != o->oid || hdr.index != pg->index ||
						    hdr.pool != (uint32_t)p->id)
							FAIL("tmem check: pool %d: page %llu/%u: key header wrong",
							     p->id, (unsigned long long)o->oid, pg->index);
					}
				if (n != o->npages || !n)
					FAIL("tmem check: pool %d: object %llu counts %u pages, has %u",
					     p->id, (unsigned long long)o->oid, o->npages, n);
			}
		if (nobjs != sh->nobjs || pages != sh->ctr[TC_PAGES] || orig != sh->ctr[TC_ORIG] ||
		    compr != sh->ctr[TC_COMPR])
			FAIL("tmem check: pool %d shard %u: counters disagree with the records",
			     p->id, i);
	}
	return bad;
}

int zm_tmem_check(struct zm_tmem *t)
{
	uint64_t eph = 0, pers_bytes = 0, on_list = 0;
	long bad = 0;

	if (!t)
		return -EINVAL;
	for (unsigned i = 0; i < ZM_TMEM_MAX_POOLS; i++)
		if (t->pool[i])
			bad += check_pool(t, t->pool[i], &eph, &pers_bytes);
	for (struct zmi_tmem_page *pg = t->lru.lru_next; pg != &t->lru; pg = pg->lru_next) {
		if (pg->lru_next->lru_prev != pg) {
			FAIL("tmem check: the list of ephemeral pages is broken");
			break;
		}
		on_list++;
	}
	if (on_list != eph || on_list != t->lru_n)
		FAIL("tmem check: %llu ephemeral pages, %llu on the list, which counts %llu",
		     (unsigned long long)eph, (unsigned long long)on_list,
		     (unsigned long long)t->lru_n);
	if (pers_bytes != t->pers_bytes)
		FAIL("tmem check: persistent bytes %llu, counted %llu",
		     (unsigned long long)pers_bytes, (unsigned long long)t->pers_bytes);
	if (zm_pool_check(t->eph) || zm_pool_check(t->pers))
		bad++;
	return bad ? -EUCLEAN : 0;
}
