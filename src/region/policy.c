/*
 * Cold selection: which resident page to evict.
 *
 * Without privileges a process cannot read its pages' accessed bits, so
 * a resident page's use is invisible: what the region sees is a page
 * coming back (a refault) and how long it stayed away.  The default
 * policy ranks pages by an estimate of their refault rate and keeps the
 * highest-ranked resident (docs/region.md, "Cold selection", has the
 * reasoning and the simulations behind every constant):
 *
 *   - the refault clock R ticks once per refault (first touches say
 *     nothing about reuse, and a burst of them would stretch every
 *     distance measured across it);
 *   - each page keeps k, its refaults, and s, the clock ticks it spent
 *     evicted before them, both decayed so that they cover about the
 *     last KMAX refaults; its score is (k + 1) / (s + B), B = pages the
 *     region holds beyond its limit: the mean refault rate of an evicted
 *     page, the prior that keeps one lucky quick refault of a cold page
 *     from looking hot;
 *   - two lists: probation, a FIFO of pages that came in without enough
 *     evidence, and protected, stacks by score bucket (Q buckets an
 *     octave), at most CAP of the limit.  A refault enters protected while
 *     it has room, or when its bucket is HYST above the weakest protected
 *     one (which goes back to probation, newest first: in a steady state
 *     the newest promotions are the likeliest chance refaults);
 *   - the victim is probation's oldest page (protected's weakest when
 *     probation is empty);
 *   - every AGE_LIMITS limits of evictions, every page's k and s are
 *     halved, so that a change of working set is learnt.
 *
 * ZM_REGION_POLICY_FIFO (and any region without a limit) uses probation
 * alone: pages go in the order they came.
 *
 * Locks: the policy lock (a leaf, taken inside a page's lock) guards the
 * lists, lst and link; pick takes no page lock.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "base/os.h"
#include "region/region_internal.h"

#define KMAX 2.0f       /* refaults of evidence a page's rate covers */
#define Q 4             /* score buckets an octave */
#define HYST 2          /* buckets a refault must beat the weakest by */
#define AGE_LIMITS 16   /* aging every this many limits of evictions */
#define NONE UINT32_MAX

/* ---- the probation ring ---- */

static int ring_init(struct zmi_region_queue *q, uint64_t nr_pages)
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

/* A page has one entry at most, so a ring of more entries than pages
 * never fills. */
static void ring_push(struct zmi_region_queue *q, uint32_t pg)
{
	q->ring[q->tail++ & (q->cap - 1)] = pg;
}

static bool ring_pop(struct zmi_region_queue *q, uint32_t *pg)
{
	if (q->head == q->tail)
		return false;
	*pg = q->ring[q->head++ & (q->cap - 1)];
	return true;
}

int zmi_region_policy_init(struct zmi_region *r)
{
	struct zmi_region_policy *p = &r->pol;

	zmi_lock_init(&p->lock);
	for (int i = 0; i < PROT_BUCKETS; i++)
		p->top[i] = NONE;
	return ring_init(&p->prob, r->nr_pages);
}

void zmi_region_policy_free(struct zmi_region *r)
{
	struct zmi_region_queue *q = &r->pol.prob;

	if (q->ring)
		zmi_os_release(q->ring, q->cap * sizeof(uint32_t));
	q->ring = NULL;
}

/* ---- the protected stacks (policy lock held) ---- */

static uint64_t limit_of(const struct zmi_region *r)
{
	return __atomic_load_n(&r->limit, __ATOMIC_RELAXED);
}

static bool ranked(const struct zmi_region *r)
{
	return r->policy == ZM_REGION_POLICY_AUTO && limit_of(r);
}

/* Protected's share: 31/32 of the pages the region thread keeps (its
 * low watermark), so that probation always holds a few pages to evict
 * before a protected one. */
static uint64_t cap_of(const struct zmi_region *r)
{
	uint64_t low = __atomic_load_n(&r->low, __ATOMIC_RELAXED);
	return low - low / 32;
}

static int bucket_of(const struct zmi_region *r, const struct zmi_region_page *rp)
{
	uint64_t lim = limit_of(r);
	float b = lim < r->nr_pages ? (float)(r->nr_pages - lim) : 1.0f;
	float score = (rp->k + 1.0f) * b / (rp->s + b); /* score * B */
	int q = 128 + (int)floorf((float)Q * log2f(score));

	return q < 0 ? 0 : q >= PROT_BUCKETS ? PROT_BUCKETS - 1 : q;
}

static int min_bucket(const struct zmi_region_policy *p)
{
	for (int i = 0; i < PROT_BUCKETS / 64; i++)
		if (p->bits[i])
			return i * 64 + __builtin_ctzll(p->bits[i]);
	return -1;
}

static void prot_push(struct zmi_region *r, uint32_t pg, int b)
{
	struct zmi_region_policy *p = &r->pol;

	r->pages[pg].link = p->top[b];
	p->top[b] = pg;
	p->bits[b / 64] |= (uint64_t)1 << (b % 64);
	p->nprot++;
	r->pages[pg].lst = LST_PROTECTED;
}

static uint32_t prot_pop(struct zmi_region *r, int b)
{
	struct zmi_region_policy *p = &r->pol;
	uint32_t pg = p->top[b];

	p->top[b] = r->pages[pg].link;
	if (p->top[b] == NONE)
		p->bits[b / 64] &= ~((uint64_t)1 << (b % 64));
	p->nprot--;
	r->pages[pg].lst = LST_NONE;
	return pg;
}

static void prob_push(struct zmi_region *r, uint32_t pg)
{
	ring_push(&r->pol.prob, pg);
	r->pages[pg].lst = LST_PROBATION;
}

/* ---- events ---- */

void zmi_region_policy_admit(struct zmi_region *r, uint64_t pg, bool refault)
{
	struct zmi_region_policy *p = &r->pol;
	struct zmi_region_page *rp = &r->pages[pg];
	int b = -1;

	if (refault) {
		uint32_t now = __atomic_fetch_add(&p->rclock, 1, __ATOMIC_RELAXED);
		float d = (float)(uint32_t)(now - rp->stamp);
		if (rp->k + 1.0f > KMAX) {
			rp->k *= 1.0f - 1.0f / KMAX;
			rp->s *= 1.0f - 1.0f / KMAX;
		}
		rp->k += 1.0f;
		rp->s += d;
		if (ranked(r))
			b = bucket_of(r, rp);
	}
	zmi_lock(&p->lock);
	if (rp->lst == LST_NONE) {
		int weakest = b >= 0 ? min_bucket(p) : -1;
		if (b >= 0 && (p->nprot < cap_of(r) || (weakest >= 0 && b >= weakest + HYST)))
			prot_push(r, (uint32_t)pg, b);
		else
			prob_push(r, (uint32_t)pg);
	}
	zmi_unlock(&p->lock);
}

bool zmi_region_policy_pick(struct zmi_region *r, uint32_t *pg)
{
	struct zmi_region_policy *p = &r->pol;
	uint64_t cap = cap_of(r);
	bool ok;
	int b;

	zmi_lock(&p->lock);
	/* protected beyond its share: its weakest, newest pages go back to
	 * probation, their clock restarted */
	while (p->nprot > cap && (b = min_bucket(p)) >= 0) {
		uint32_t q = prot_pop(r, b);
		r->pages[q].stamp = __atomic_load_n(&p->rclock, __ATOMIC_RELAXED);
		prob_push(r, q);
	}
	ok = ring_pop(&p->prob, pg);
	if (!ok && (b = min_bucket(p)) >= 0) {
		*pg = prot_pop(r, b);
		ok = true;
	}
	if (ok)
		r->pages[*pg].lst = LST_NONE;
	zmi_unlock(&p->lock);
	return ok;
}

void zmi_region_policy_putback(struct zmi_region *r, uint32_t pg)
{
	zmi_lock(&r->pol.lock);
	if (r->pages[pg].lst == LST_NONE)
		prob_push(r, pg);
	zmi_unlock(&r->pol.lock);
}

void zmi_region_policy_evicted(struct zmi_region *r, uint64_t pg)
{
	r->pages[pg].stamp = __atomic_load_n(&r->pol.rclock, __ATOMIC_RELAXED);
}

void zmi_region_policy_forget(struct zmi_region *r, uint64_t pg)
{
	r->pages[pg].k = 0;
	r->pages[pg].s = 0;
}

/* Aging: halve every page's evidence, and file the protected pages again
 * by their new scores.  O(pages) every AGE_LIMITS limits of evictions. */
static void age(struct zmi_region *r)
{
	struct zmi_region_policy *p = &r->pol;
	uint32_t top[PROT_BUCKETS];

	for (uint64_t pg = 0; pg < r->nr_pages; pg++) {
		struct zmi_region_page *rp = &r->pages[pg];
		if (rp->k != 0.0f || rp->s != 0.0f) {
			rp->k *= 0.5f;
			rp->s *= 0.5f;
		}
	}
	zmi_lock(&p->lock);
	memcpy(top, p->top, sizeof(top));
	for (int i = 0; i < PROT_BUCKETS; i++)
		p->top[i] = NONE;
	memset(p->bits, 0, sizeof(p->bits));
	p->nprot = 0;
	for (int i = 0; i < PROT_BUCKETS; i++)
		for (uint32_t pg = top[i], next; pg != NONE; pg = next) {
			next = r->pages[pg].link;
			prot_push(r, pg, bucket_of(r, &r->pages[pg]));
		}
	zmi_unlock(&p->lock);
}

void zmi_region_policy_tick(struct zmi_region *r)
{
	uint64_t e = __atomic_load_n(&r->evict_seq, __ATOMIC_RELAXED);
	uint64_t lim = limit_of(r);

	if (!ranked(r))
		return;
	if (!r->pol.next_age)
		r->pol.next_age = e + AGE_LIMITS * lim;
	if (e >= r->pol.next_age) {
		age(r);
		r->pol.next_age = e + AGE_LIMITS * lim;
	}
}
