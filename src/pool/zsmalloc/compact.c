/*
 * zsmalloc compaction: move live objects so that a class's objects fill as
 * few pages as they can, free the emptied zspages and pages, and so give
 * memory back to the pages layer (and from there, beyond its reserve, to
 * the OS).
 *
 * A pass over a class shard, step by step under the class lock:
 *
 *   keepers  The class needs k = ceil(used / objs) zspages; the fullest
 *            partly used ones, up to k (counting the full ones), are kept.
 *            A keeper whose objects are scattered over more pages than they
 *            need is *packed*: its highest objects move down into its
 *            lowest free slots, and the pages above the last object go
 *            back (zspages take their pages lazily, so a zspage may hold
 *            fewer pages than it could).
 *   sources  Every other partly used zspage, emptiest first, is evacuated:
 *            its objects move into the keepers (fullest first, at their
 *            bump), and the emptied zspage is freed.
 *
 * Each object moves at most once per pass: keepers are marked with the
 * pass number and are never sources; objects moved into them are never
 * moved again.  Before a zspage is touched it is quiesced: marked
 * migrating, the heavy barrier run (membarrier), and skipped if any
 * thread's hazard names it -- a mapped object is never moved, and readers
 * arriving later back off until the move is done, so none sees a torn
 * object.  One barrier serves a batch of up to 16 zspages, of one class or
 * of several classes compacted one after another (zs_compact_run), and
 * lets go the records the batch before emptied.  The lock is dropped
 * between steps, so that each step bounds how long zm_pool_alloc and
 * zm_pool_free of that class wait: a step moves at most ZS_STEP_OBJS
 * objects or copies ZS_STEP_BYTES (below), a zspage of more takes several
 * (it stays marked and valid between them), and pages a step gives back
 * go to the pages layer (whose trimming may call madvise) only once the
 * lock is dropped.
 *
 * Afterwards, sparse classes (less than a page of objects) are swept:
 * their objects move up into larger classes (zs_sweep, below).
 *
 * Lock order: zp->compact_lock (one compactor per pool) -> class lock ->
 * pages lock; the sweep alone holds a second class lock, of a larger
 * class, inside the first.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/os.h"
#include "pool/zsmalloc/zsmalloc.h"

/*
 * Steps (ZS_STEP_OBJS, ZS_STEP_BYTES in zsmalloc/zsmalloc.h).  Under one hold of a
 * class lock the compactor moves at most ZS_STEP_OBJS objects and copies
 * at most ZS_STEP_BYTES (at least one object, whatever its size), then
 * drops the lock.  Each object costs its copy (32 KiB at the few GB/s of
 * a copy from memory that is not in the cache: 5-10 us), two words
 * rewritten, and now and then a destination page taken from the pages
 * layer, whose first write may fault (a few us on a VM): a step stays
 * within tens of microseconds, and pages freed go back (and the pages
 * layer trims) after the lock is dropped.  Smaller steps cost an unlock
 * and a lock each (tens of ns) and a free map made again (a few hundred
 * bytes); docs/results/2026-12-02-latency.md has the figures.
 */
/* The work of the current hold of a class lock, and the pages it freed,
 * given back to the pages layer once the lock is dropped. */
struct hold {
	unsigned objs;
	size_t bytes;
	unsigned nfree;
	zm_pfn_t free[ZS_MAX_PAGES];
	long grown;              /* pages the destinations took (the mixed
				    moves: zs_mixed_compact counts net) */
#if ZM_DEBUG >= 1
	uint64_t cpu0;           /* the compactor's CPU clock at the lock */
	const char *what;        /* the step it worked on: its record's site */
#endif
};

/* What the hold is spent on (debug builds: zm_lock_hold's ZM_LOCK_COMPACT
 * records name it). */
static inline void hold_what(struct hold *h, const char *what)
{
#if ZM_DEBUG >= 1
	h->what = what;
#else
	(void)h, (void)what;
#endif
}

#if ZM_DEBUG >= 1
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

/* The lock taken: a hold begins (debug builds time it by the thread's
 * CPU clock: a system call each, for the compactor's holds only). */
static inline void hold_begin(struct hold *h)
{
#if ZM_DEBUG >= 1
	h->cpu0 = thread_cpu_ns();
#else
	(void)h;
#endif
}
#define hold_lock(c, h, what) (zs_compact_lock((c)), hold_begin(h), hold_what((h), (what)))

/* May this hold move another object of `size` bytes? */
static inline bool hold_room(const struct hold *h, size_t size)
{
	return !h->objs || (h->objs < ZS_STEP_OBJS && h->bytes + size <= ZS_STEP_BYTES);
}

static inline void hold_moved(struct hold *h, size_t size)
{
	h->objs++;
	h->bytes += size;
}

/* The hold ends: its work counted (debug builds), the count reset. */
static void hold_end(struct zs_pool *zp, struct hold *h)
{
#if ZM_DEBUG >= 1
	zmi_hold_note_ns(ZMI_LOCK_COMPACT, h->what, thread_cpu_ns() - h->cpu0);
	if (h->objs > zp->step_objs_max)
		zp->step_objs_max = h->objs;
	if (h->bytes > zp->step_bytes_max)
		zp->step_bytes_max = (uint32_t)h->bytes;
#else
	(void)zp;
#endif
	h->objs = 0;
	h->bytes = 0;
}

/* Give back the pages the hold freed (no class lock held). */
static void hold_free_pages(struct zs_pool *zp, struct hold *h)
{
	for (unsigned i = 0; i < h->nfree; i++)
		zm_pages_free(zp->pages, h->free[i]);
	h->nfree = 0;
}

/* Unlock c at the end of a hold. */
static void hold_unlock(struct zs_pool *zp, struct zs_class *c, struct hold *h)
{
	hold_end(zp, h);
	zs_compact_unlock(c);
	hold_free_pages(zp, h);
}

/* Copy an object between two (one- or two-piece) places; tmp holds a
 * page. */
static void copy_obj(char *dseg[2], size_t dlen[2], int dn, char *sseg[2], size_t slen[2],
		     int sn, size_t size, char *tmp)
{
	const char *src = sseg[0];

	if (sn == 2) {
		memcpy(tmp, sseg[0], slen[0]);
		memcpy(tmp + slen[0], sseg[1], slen[1]);
		src = tmp;
	}
	if (dn == 1) {
		memcpy(dseg[0], src, size);
	} else {
		memcpy(dseg[0], src, dlen[0]);
		memcpy(dseg[1], src + dlen[0], dlen[1]);
	}
}

/* Emptiest partly used zspage that is not a keeper of this pass, nor
 * already taken into the batch. */
static struct zspage *pick_src(struct zs_class *c, uint8_t pass)
{
	for (unsigned g = 1; g < ZS_GROUPS - 1; g++)
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
			if (zs->pass != pass && !zs->migrating)
				return zs;
	return NULL;
}

/* Fullest partly used zspage other than src, keepers first. */
static struct zspage *pick_dst(struct zs_class *c, struct zspage *src, uint8_t pass)
{
	struct zspage *any = NULL;

	for (unsigned g = ZS_GROUPS - 2; g >= 1; g--)
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next) {
			if (zs == src)
				continue;
			if (zs->pass == pass)
				return zs;
			if (!any)
				any = zs;
		}
	return any;
}

static unsigned keepers(struct zs_class *c, uint8_t pass)
{
	unsigned n = 0;

	for (unsigned g = 1; g < ZS_GROUPS - 1; g++)
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
			n += zs->pass == pass;
	return n;
}

/* Mark which objects of zs are free (below its bump). */
static void free_map(const struct zspage *zs, uint8_t *freemap)
{
	memset(freemap, 0, zs->bump);
	for (unsigned o = zs->free_head; o != ZS_NONE; o = zs->data[o])
		freemap[o] = 1;
}

/* Move object `from` of zs (class a) to object `to` (a free slot taken)
 * of dst (class b: a itself, or a larger class when sweeping): its
 * a->size bytes into the first bytes of the slot, the back reference
 * along, the handle slot (or owner word) rewritten. */
static void move_obj(struct zs_pool *zp, struct zs_class *a, struct zspage *zs, unsigned from,
		     struct zs_class *b, struct zspage *dst, unsigned to, char *tmp)
{
	char *sseg[2] = { NULL, NULL }, *dseg[2] = { NULL, NULL };
	size_t slen[2], dlen[2];
	int sn = zs_obj_segs(zp, zs, from, sseg, slen);
	int dn = zs_obj_segs(zp, dst, to, dseg, dlen);
	uint32_t ref = zs_backref(zs, a)[from];
	uint64_t v = zs_load_ref(zp, ref);

	if (dn == 2 && dlen[0] >= a->size)
		dn = 1;
	else if (dn == 2)
		dlen[1] = a->size - dlen[0];
	copy_obj(dseg, dlen, dn, sseg, slen, sn, a->size, tmp);
	zs_backref(dst, b)[to] = ref;
	zs_store_ref(zp, ref, zs_slot_live(dst->id, to, v & ZS_TAG_MASK));
}

/* Chain the free objects of zs below its bump (freemap), lowest first:
 * a pack that stops for a breath leaves a valid zspage, whose free slots
 * an allocation may take meanwhile. */
static void chain_free(struct zspage *zs, const uint8_t *freemap)
{
	uint16_t head = ZS_NONE;

	for (unsigned o = zs->bump; o-- > 0;)
		if (freemap[o]) {
			zs->data[o] = head;
			head = (uint16_t)o;
		}
	zs->free_head = head;
}

/* Pack a quiesced zspage: its highest objects into its lowest free slots,
 * then give back the pages above the last object.  Returns objects moved;
 * *more when the hold is spent first (call again after a breath: the
 * free map is made again from the zspage as it is then); else *pages
 * gets the pages given back (into h, freed once the lock is dropped). */
static long pack(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
		 uint8_t *freemap, char *tmp, long *pages, struct hold *h, bool *more)
{
	unsigned lo = 0, hi = zs->bump ? zs->bump - 1u : 0, need;
	long moved = 0;

	*more = false;
	hold_what(h, "pack");
	free_map(zs, freemap);
	for (;;) {
		while (lo < hi && !freemap[lo])
			lo++;
		while (hi > lo && freemap[hi])
			hi--;
		if (lo >= hi)
			break;
		if (!hold_room(h, c->size)) {
			chain_free(zs, freemap);
			*more = true;
			return moved;
		}
		move_obj(zp, c, zs, hi, c, zs, lo, tmp);
		zs_poison_obj(zp, zs, hi);
		freemap[lo] = 0;
		freemap[hi] = 1;
		hold_moved(h, c->size);
		moved++;
	}
	/* now objects 0..inuse-1 are live, nothing else */
	zs->free_head = ZS_NONE;
	zs->bump = zs->inuse;
	need = zs_pages_for(zp, c, zs->inuse);
	*pages = zs->npop - need;
	ZM_ASSERT(h->nfree + (zs->npop - need) <= ZS_MAX_PAGES);
	for (unsigned i = need; i < zs->npop; i++)
		h->free[h->nfree++] = zs_pfn(zs, i);
	zs_count(&c->npages, -(int32_t)(zs->npop - need));
	zs->npop = (uint8_t)need;
	return moved;
}

static void set_migrating(struct zspage *zs, uint8_t v)
{
	__atomic_store_n(&zs->migrating, v, v ? __ATOMIC_SEQ_CST : __ATOMIC_RELEASE);
}

/* Move the live objects of src (quiesced) into the keepers.  Returns
 * objects moved, and adds to *taken the pages the keepers populated for
 * them (a packed keeper may take back a page it gave up); stops early if
 * a destination page could not be had (src then keeps the rest), or with
 * *more when the hold is spent (call again after a breath: src is valid
 * meanwhile, its emptied slots chained, and is looked at afresh). */
static long evacuate(struct zs_pool *zp, struct zs_class *c, struct zspage *src, uint8_t pass,
		     uint8_t *freemap, char *tmp, long *taken, struct hold *h, bool *more)
{
	long moved = 0;

	*more = false;
	hold_what(h, "evacuate");
	free_map(src, freemap);
	for (unsigned o = 0; o < src->bump && src->inuse; o++) {
		struct zspage *dst;
		unsigned to, npop;

		if (freemap[o])
			continue;
		if (!hold_room(h, c->size)) {
			*more = true;
			break;
		}
		dst = pick_dst(c, src, pass);
		if (!dst)
			break;
		npop = dst->npop;
		to = zs_take_obj(zp, c, dst);
		*taken += dst->npop - npop;
		if (to == ZS_NONE)
			break;
		dst->pass = pass;
		move_obj(zp, c, src, o, c, dst, to, tmp);
		zs_group_set(c, dst);
		/* chain the emptied slot, so that src stays valid if we stop
		 * before it is empty */
		zs_put_obj(zp, src, o);
		hold_moved(h, c->size);
		moved++;
	}
	return moved;
}

/* Pauses after unlocking between steps: a thread spinning in
 * zmi_lock_slow looks at the lock once a pause, and must see it free
 * before the compactor takes it again (about a microsecond). */
#define ZS_BREATHE_SPINS 16

/* Drop the lock between steps: the hold's pages go back meanwhile, and
 * whoever spins on the lock gets in. */
static void breathe(struct zs_pool *zp, struct zs_class *c, struct hold *h)
{
	bool freed = h->nfree != 0;

	hold_unlock(zp, c, h);
	if (!freed)
		for (int i = 0; i < ZS_BREATHE_SPINS; i++)
			zmi_cpu_relax();
	zs_compact_lock(c);
	hold_begin(h);
}

/* A batch: zspages quiesced together, with one heavy barrier, of one
 * class or of several (zs_compact_run). */
#ifndef ZS_BATCH
#define ZS_BATCH 16
#endif

struct step {
	struct zspage *zs;
	bool pack;   /* a keeper to pack, else a source to evacuate */
};

/* Plan a batch under the lock: keepers to pack, then sources.  Marks them
 * (keepers with the pass, all migrating).  Returns how many.  The lists
 * are walked once for the counts and once for the keepers, from where the
 * last keeper was found: nothing moves on them while the lock is held
 * (counting afresh for each keeper walked the class's zspages 16 times
 * over, most of a plan's hold in a class of a few hundred). */
static unsigned plan(struct zs_pool *zp, struct zs_class *c, uint8_t pass,
		     struct step *b, unsigned room)
{
	unsigned nb = 0, full = 0, nkeep = keepers(c, pass), k, g = ZS_GROUPS - 2;
	uint64_t pending = 0;   /* objects of the sources planned so far */
	struct zspage *zs = c->group[g];

	for (struct zspage *f = c->group[ZS_GROUPS - 1]; f; f = f->next)
		full++;
	k = (c->used + c->objs - 1) / c->objs;
	/* the fullest partly used zspages that are not keepers yet, in
	 * pick_keeper's order */
	while (nb < room && nkeep + full < k) {
		while (!zs && g > 1)
			zs = c->group[--g];
		while (zs && zs->pass == pass) {
			zs = zs->next;
			while (!zs && g > 1)
				zs = c->group[--g];
		}
		if (!zs)
			break;
		zs->pass = pass;
		nkeep++;
		if (zs->npop > zs_pages_for(zp, c, zs->inuse))
			b[nb++] = (struct step){ zs, true };
		zs = zs->next;
	}
	while (nb < room) {
		struct zspage *src = pick_src(c, pass);
		uint64_t free_slots = (uint64_t)c->zspages * c->objs - c->used;

		if (!src)
			break;
		/* the free slots outside the sources must hold their objects */
		if (free_slots - (c->objs - src->inuse) < src->inuse + pending)
			break;
		pending += src->inuse;
		b[nb++] = (struct step){ src, false };
		set_migrating(src, 1);   /* also keeps pick_src off it */
	}
	for (unsigned i = 0; i < nb; i++)
		set_migrating(b[i].zs, 1);
	return nb;
}

/* The compactor's work space (compact_lock held): a free-object map and
 * a page of copy space, made once and kept.  NULL without memory. */
static char *scratch(struct zs_pool *zp)
{
	if (!zp->scratch)
		zp->scratch = malloc(ZS_NONE + 1 + zp->page_size);
	return zp->scratch;
}

/* Before the 8-bit pass number wraps (compact_lock held, no class lock):
 * every zspage back to pass 0, so that one marked a keeper 255 passes ago
 * is not taken for a keeper of the pass that reuses its number. */
static void clear_passes(struct zs_pool *zp)
{
	ZS_FOR_EACH_CLASS(zp, c) {
		struct hold h = { 0 };

		hold_lock(c, &h, "clear_passes");
		for (unsigned g = 0; g < ZS_GROUPS; g++)
			for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
				zs->pass = 0;
		hold_unlock(zp, c, &h);
	}
}

/* Work out one step of the batch (c's lock held, zs quiesced by the
 * batch's barrier): pack it or evacuate it, breathing as the steps' bound
 * says.  Adds what it frees to *freed; an emptied source is retired and
 * put in gone[*ngone] (freed after the next barrier). */
static void do_step(struct zs_pool *zp, struct zs_class *c, uint8_t pass, const struct step *st,
		    struct hold *h, long *freed, struct zspage **gone, unsigned *ngone)
{
	uint8_t *freemap = (uint8_t *)zp->scratch;
	char *tmp = zp->scratch + ZS_NONE + 1;
	struct zspage *zs = st->zs;
	long pages = 0;
	bool more;

	if (zmi_pool_hazard_find(zs)) {
		/* someone is inside (a map): leave it alone */
		set_migrating(zs, 0);
		zs->pass = pass;
		return;
	}
	/* in steps, breathing between them: the zspage stays marked
	 * (readers of its objects back off, frees of them wait), and valid
	 * for allocations */
	if (st->pack) {
		for (;;) {
			zs_stat_add(&zp->objects_moved,
				    (uint64_t)pack(zp, c, zs, freemap, tmp, &pages, h, &more));
			if (!more)
				break;
			breathe(zp, c, h);
		}
		set_migrating(zs, 0);
		*freed += pages;
		return;
	}
	for (;;) {
		zs_stat_add(&zp->objects_moved, (uint64_t)evacuate(zp, c, zs, pass, freemap, tmp,
								   &pages, h, &more));
		if (!more)
			break;
		zs_group_set(c, zs);
		breathe(zp, c, h);
	}
	*freed -= pages;
	if (zs->inuse == 0) {
		*freed += zs->npop;
		zs_group_del(c, zs);
		c->zspages--;
		zs_zspage_retire(zp, c, zs);
		gone[(*ngone)++] = zs;
	} else {
		/* no page for a destination (the pool at its limit): it
		 * stays, and is not picked again this pass, which would plan
		 * it again without end */
		set_migrating(zs, 0);
		zs->pass = pass;
		zs_group_set(c, zs);
	}
}

/* The records retired in the last batch go, after a barrier (the next
 * batch's, or one of their own): a reader may still be looking at a
 * record it found before its object moved; after the barrier, such
 * hazards go at once (the slots have changed), and then the record can
 * be reused or freed. */
static void free_gone(struct zs_pool *zp, struct zs_class **gc, struct zspage **gone,
		      unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		while (zmi_pool_hazard_find(gone[i]))
			sched_yield();
		zs_zspage_free(zp, gc[i], gone[i]);
	}
}

/*
 * Classes compacted one after another, each as zs_compact_class would
 * (plan a batch, quiesce it, work it out, plan again until nothing is
 * left), but their batches shared: a batch takes up to ZS_BATCH zspages
 * from the classes at work, in order, and then from the next classes, and
 * one barrier quiesces them all and lets the records the last batch
 * emptied go, rather than two barriers a class (each barrier interrupts
 * every other CPU running the process;
 * docs/results/2026-12-02-latency.md).  Each class keeps its own pass number; one that
 * plans nothing more leaves the run.
 */
long zs_compact_run(struct zs_pool *zp, struct zs_class *(*next)(void *arg), void *arg,
		    unsigned *budget)
{
	struct {
		struct zs_class *c;
		uint8_t pass;
	} act[ZS_BATCH];                     /* the classes at work, in order */
	struct zs_class *bc[ZS_BATCH], *gc[ZS_BATCH];
	struct zspage *gone[ZS_BATCH];
	uint8_t bpass[ZS_BATCH];
	struct step b[ZS_BATCH];
	unsigned nact = 0, ngone = 0, done = 0, limit = budget ? *budget : UINT_MAX;
	bool more_classes = true;
	struct hold h = { 0 };
	long freed = 0;

	if (!scratch(zp))
		return 0;
	for (;;) {
		unsigned nb = 0, keep = 0;

		/* the classes at work first, each planning what the last
		 * batch left it; one the batch has no room for stays */
		for (unsigned i = 0; i < nact; i++) {
			unsigned room = ZS_BATCH - nb, got = 0;

			if (limit - done - nb < room)
				room = limit - done - nb;
			if (room) {
				hold_lock(act[i].c, &h, "plan");
				got = plan(zp, act[i].c, act[i].pass, b + nb, room);
				hold_unlock(zp, act[i].c, &h);
			}
			if (got || !room)
				act[keep++] = act[i];
			for (unsigned k = nb; k < nb + got; k++)
				bc[k] = act[i].c, bpass[k] = act[i].pass;
			nb += got;
		}
		nact = keep;
		/* then the next classes, while there is room */
		while (more_classes && nb < ZS_BATCH && done + nb < limit && nact < ZS_BATCH) {
			struct zs_class *c;
			unsigned room = ZS_BATCH - nb, got;
			uint8_t pass;

			/* before the 8-bit pass number wraps, with no class
			 * at work (clear_passes unmarks their keepers) */
			if (zp->pass == UINT8_MAX) {
				if (nb || nact || ngone)
					break;
				clear_passes(zp);
			}
			if (!(c = next(arg))) {
				more_classes = false;
				break;
			}
			if (c->huge || c->mixed || c->objs < 2)
				continue;
			if (limit - done - nb < room)
				room = limit - done - nb;
			hold_lock(c, &h, "plan");
			pass = ++zp->pass ? zp->pass : ++zp->pass; /* never 0: new zspages have 0 */
			got = plan(zp, c, pass, b + nb, room);
			hold_unlock(zp, c, &h);
			if (!got)
				continue;
			act[nact].c = c;
			act[nact++].pass = pass;
			for (unsigned k = nb; k < nb + got; k++)
				bc[k] = c, bpass[k] = pass;
			nb += got;
		}
		if (!nb) {
			/* nothing planned: the run is over, or a pass number
			 * waits to be cleared until the records the last batch
			 * emptied are gone */
			if (!ngone)
				break;
			zmi_pool_heavy_barrier();
			free_gone(zp, gc, gone, ngone);
			ngone = 0;
			if (more_classes && done < limit)
				continue;
			break;
		}
		/* one barrier for the batch, without a lock: after it, any
		 * reader inside one of them has its hazard where we can see
		 * it, and any later reader sees the mark and backs off */
		zmi_pool_heavy_barrier();
		free_gone(zp, gc, gone, ngone);
		ngone = 0;
		/* class by class: a class's steps are together in the batch */
		for (unsigned i = 0; i < nb;) {
			struct zs_class *c = bc[i];

			hold_lock(c, &h, "step");
			for (;;) {
				unsigned g0 = ngone;

				do_step(zp, c, bpass[i], &b[i], &h, &freed, gone, &ngone);
				for (unsigned k = g0; k < ngone; k++)
					gc[k] = c;
				done++;
				if (++i == nb || bc[i] != c)
					break;
				breathe(zp, c, &h);
			}
			hold_unlock(zp, c, &h);
		}
	}
	if (budget)
		*budget = done < limit ? limit - done : 0;
	return freed;
}

/* zs_compact_class: a run of one class. */
static struct zs_class *one_class(void *arg)
{
	struct zs_class **c = arg, *r = *c;

	*c = NULL;
	return r;
}

long zs_compact_class(struct zs_pool *zp, struct zs_class *c, unsigned *budget)
{
	return zs_compact_run(zp, one_class, &c, budget);
}

/*
 * Sweeping sparse classes.  After a mass free, a class may keep a few
 * objects, less than a page's worth, in a page or more of its own: packing
 * within the class cannot give that page back, and with ~50 classes in use
 * such pages are a percent or more of a small pool.  The sweep moves those
 * objects up into free slots of larger classes -- at most ZS_SWEEP_UP
 * classes up, and only slots in pages already populated -- for a little
 * rounding each, and frees the pages.  It holds two class locks at once,
 * the lower class's, then the higher's: the only place that does.  Only
 * one compactor runs per pool, and every other path holds one class lock
 * and never waits for another while holding it, so no cycle can form.
 */
#define ZS_SWEEP_UP 16  /* classes up: at most 16 * spacing bytes of rounding an object */

/* Move object `from` of src (class a, quiesced) into a free slot of some
 * class above; both locks taken and dropped here but a's.  false if no
 * class within reach has room. */
static bool move_up(struct zs_pool *zp, struct zs_class *a, struct zspage *src,
		    unsigned from, char *tmp)
{
	unsigned k = a->idx & ((1u << zp->cshift) - 1);

	/* the classes above, not the huge one, each shard made */
	for (unsigned i = 0; i < ZS_SWEEP_UP * zp->nshards; i++) {
		unsigned up = k + 1 + i / zp->nshards, sh = i % zp->nshards;
		struct zs_class *b;
		struct zspage *dst;

		if (up >= zp->nclasses - 1)
			break;
		if (!(b = zs_class_at(zp, (sh << zp->cshift) + up)))
			continue;
		zs_compact_lock(b);
		dst = zs_room_in(zp, b);
		if (dst) {
			/* in place: takes no page */
			move_obj(zp, a, src, from, b, dst, zs_take_obj(zp, b, dst), tmp);
			zs_count(&b->used, 1);
			zs_group_set(b, dst);
		}
		zs_compact_unlock(b);
		if (dst)
			return true;
	}
	return false;
}

/* Sweep class shard a if it is sparse; returns pages freed. */
static long sweep_class(struct zs_pool *zp, struct zs_class *a, uint8_t *freemap, char *tmp)
{
	struct zspage *src = NULL;
	struct hold h = { 0 };
	long freed;

	/* most classes are not sparse: tell from the counters published
	 * for lock-free readers, without taking (and contending) their
	 * locks on every period; then again under the lock */
	if (a->huge || (uint64_t)__atomic_load_n(&a->used, __ATOMIC_RELAXED) * a->size >=
		       zp->page_size)
		return 0;
	hold_lock(a, &h, "sweep");
	if (a->zspages != 1 || (uint64_t)a->used * a->size >= zp->page_size)
		goto out;
	for (unsigned g = 1; g < ZS_GROUPS - 1 && !src; g++)
		src = a->group[g];
	if (!src)
		goto out;
	set_migrating(src, 1);
	hold_unlock(zp, a, &h);
	zmi_pool_heavy_barrier();
	hold_lock(a, &h, "sweep");
	if (zmi_pool_hazard_find(src)) {  /* mapped: leave it */
		set_migrating(src, 0);
		goto out;
	}
	free_map(src, freemap);
	for (unsigned o = 0; o < src->bump && src->inuse; o++) {
		if (freemap[o])
			continue;
		if (!hold_room(&h, a->size)) {
			/* a breath, in steps as zs_compact_class: src stays
			 * valid, and is looked at afresh (an allocation may
			 * have taken a slot meanwhile) */
			zs_group_set(a, src);
			breathe(zp, a, &h);
			free_map(src, freemap);
			o = UINT_MAX;   /* from object 0 again */
			continue;
		}
		if (!move_up(zp, a, src, o, tmp))
			break;
		zs_stat_add(&zp->objects_moved, 1);
		zs_put_obj(zp, src, o);
		zs_count(&a->used, -1);
		hold_moved(&h, a->size);
	}
	if (src->inuse) {
		set_migrating(src, 0);
		zs_group_set(a, src);
		goto out;
	}
	freed = src->npop;
	zs_group_del(a, src);
	a->zspages--;
	zs_zspage_retire(zp, a, src);
	hold_unlock(zp, a, &h);
	/* as in zs_compact_class: no reader may still hold the record */
	zmi_pool_heavy_barrier();
	while (zmi_pool_hazard_find(src))
		sched_yield();
	zs_zspage_free(zp, a, src);
	return freed;
out:
	hold_unlock(zp, a, &h);
	return 0;
}

long zs_sweep(struct zs_pool *zp)
{
	long freed = 0;

	if (!scratch(zp))
		return 0;
	ZS_FOR_EACH_CLASS(zp, c)
		freed += sweep_class(zp, c, (uint8_t *)zp->scratch, zp->scratch + ZS_NONE + 1);
	return freed;
}

/*
 * Mixed zspages.  One whose live granules fall below 3/4 (not one of the
 * two open for allocation) is evacuated: quiesced as a class's zspages
 * are, in batches of up to ZS_BATCH under one barrier, skipped while a
 * hazard names it, then each live object moves into a slot of its own
 * class (the fullest zspage with room, else a new one), its back
 * reference along and its handle slot (or owner word) rewritten, in steps
 * of ZS_STEP_OBJS / ZS_STEP_BYTES under the mixed lock.  The class lock
 * is taken inside the mixed lock (the only place that nests them:
 * allocation drops a class lock before it takes the mixed one).  The
 * emptied zspage is freed after the next barrier.
 */

/* The zspage of class c an object moves into: the fullest with room, not
 * marked, else NULL (c's lock held). */
static struct zspage *class_dst(struct zs_class *c)
{
	for (unsigned g = ZS_GROUPS - 2; g >= 1; g--)
		for (struct zspage *zs = c->group[g]; zs; zs = zs->next)
			if (!__atomic_load_n(&zs->migrating, __ATOMIC_RELAXED))
				return zs;
	return NULL;
}

/* Copy object g of mixed zspage src (len bytes) to object `to` of dst. */
static void copy_from_mixed(struct zs_pool *zp, struct zspage *src, unsigned g, unsigned len,
			    struct zspage *dst, unsigned to, char *tmp)
{
	char *sseg[2] = { NULL, NULL }, *dseg[2] = { NULL, NULL };
	size_t slen[2], dlen[2];
	int sn, dn;

	sn = zs_obj_segs(zp, src, g, sseg, slen);
	dn = zs_obj_segs(zp, dst, to, dseg, dlen);
	if (dn == 2 && dlen[0] >= len)
		dn = 1;
	else if (dn == 2)
		dlen[1] = len - dlen[0];
	copy_obj(dseg, dlen, dn, sseg, slen, sn, len, tmp);
}

/* Move one live object of quiesced mixed zspage src of m (header hd at
 * granule g) to the tail of one of m's open zspages, packed with the
 * rest (m's lock held, through h: dropped for a moment if a zspage made
 * for it must go); false if no room could be had. */
static bool mixed_repack(struct zs_pool *zp, struct zs_class *m, struct zspage *src,
			 unsigned g, struct zs_mhdr *hd, char *tmp, struct hold *h)
{
	unsigned len = hd->len, to;
	uint32_t ref = hd->ref;
	struct zspage *dst, *dead;
	uint64_t v;
	uint32_t np = m->npages;

	to = zs_mixed_place(zp, m, len, ref, ZS_PLACE_TAIL, &dst, &dead);
	h->grown += (int32_t)(m->npages - np);
	if (to == ZS_NONE) {
		if (dead) {
			hold_unlock(zp, m, h);
			zs_zspage_free(zp, m, dead);
			zs_compact_lock(m);
			hold_begin(h);
		}
		return false;
	}
	copy_from_mixed(zp, src, g, len, dst, to, tmp);
	v = zs_load_ref(zp, ref);
	zs_store_ref(zp, ref, zs_slot_live(dst->id, to, v & ZS_TAG_MASK));
	/* the source's object is free now, poisoned as a free would; m
	 * counted the object again where it went */
	zs_poison_obj(zp, src, g);
	zs_mrec_of(src)->live -= zs_mgran(len);
	src->inuse--;
	zs_count(&m->used, -1);
	zs_stat_add(&zp->objects_repacked, 1);
	return true;
}

/* Move one live object of quiesced mixed zspage src of m (header hd at
 * granule g) into its class, or, when the pass packs (repack_shard: a
 * mass free left the shard's sparse zspages below ZS_MIXED_REPACK_*
 * live) and the class has no zspage of its own, into m's open zspages
 * (mixed_repack); false if no slot could be had. */
static bool mixed_move(struct zs_pool *zp, struct zs_class *m, struct zspage *src,
		       unsigned g, struct zs_mhdr *hd, char *tmp, bool repack, struct hold *h)
{
	unsigned len = hd->len, to;
	uint32_t ref = hd->ref;
	struct zs_class *c = zs_class_get(zp, m->idx >> zp->cshift, zs_class_for(zp, len));
	struct zspage *dst;
	uint64_t v;
	uint32_t np;

	if (!c || c->huge)
		return false;
	if (repack && !__atomic_load_n(&c->npages, __ATOMIC_RELAXED) && zs_mixed_for(zp, c, len))
		return mixed_repack(zp, m, src, g, hd, tmp, h);
	zs_compact_lock(c);
	np = c->npages;
	dst = class_dst(c);
	if (!dst) {
		dst = zs_zspage_new(zp, c);
		if (!dst) {
			zs_compact_unlock(c);
			return false;
		}
		zs_group_set(c, dst);
		c->zspages++;
	}
	to = zs_take_obj(zp, c, dst);
	h->grown += (int32_t)(c->npages - np);
	if (to == ZS_NONE) {
		zs_compact_unlock(c);
		return false;
	}
	copy_from_mixed(zp, src, g, len, dst, to, tmp);
	zs_backref(dst, c)[to] = ref;
	v = zs_load_ref(zp, ref);
	zs_store_ref(zp, ref, zs_slot_live(dst->id, to, v & ZS_TAG_MASK));
	zs_count(&c->used, 1);
	zs_group_set(c, dst);
	zs_compact_unlock(c);
	/* the source's object is free now (its word names the new place),
	 * poisoned as a free would */
	zs_poison_obj(zp, src, g);
	zs_mrec_of(src)->live -= zs_mgran(len);
	src->inuse--;
	zs_count(&m->used, -1);
	return true;
}

/* Evacuate quiesced src of m from granule *at on; returns objects moved.
 * *more when the hold is spent (call again after a breath, from *at: no
 * object of src is freed or allocated meanwhile, it is marked); *stuck
 * when no slot could be had. */
static long mixed_evacuate(struct zs_pool *zp, struct zs_class *m, struct zspage *src,
			   unsigned *at, char *tmp, bool repack, struct hold *h, bool *more,
			   bool *stuck)
{
	long moved = 0;

	*more = false;
	hold_what(h, "mixed");
	while (*at < src->bump && src->inuse) {
		struct zs_mhdr *hd = zs_mhdr(zp, src, *at);
		unsigned len = hd->len;

		if (zs_mhdr_live(zp, src, hd, *at)) {
			if (!hold_room(h, len)) {
				*more = true;
				break;
			}
			if (!mixed_move(zp, m, src, *at, hd, tmp, repack, h)) {
				*stuck = true;
				break;
			}
			hold_moved(h, len);
			moved++;
		}
		*at = zs_mnext(zp, *at, len);
	}
	return moved;
}

/* Are the objects of m's sparse zspages packed into its open ones rather
 * than moved into their classes (m's lock held)?  One answer for all of
 * them, from their live objects against those placed: per zspage, those
 * on either side of the line would go their two ways and leave both the
 * classes' last zspages and the mixed ones partly used. */
static bool repack_shard(const struct zs_class *m)
{
	uint64_t inuse = 0, placed = 0;

	for (unsigned g = 0; g < ZS_GROUPS; g++)
		for (const struct zspage *zs = m->group[g]; zs; zs = zs->next)
			if (zs_mixed_sparse(zs)) {
				inuse += zs->inuse;
				placed += zs->placed;
			}
	return inuse * ZS_MIXED_REPACK_DEN < placed * ZS_MIXED_REPACK_NUM;
}

/* One shard's mixed class: batches planned, quiesced and evacuated until
 * none is left sparse or the budget is spent. */
static long mixed_compact_shard(struct zs_pool *zp, struct zs_class *m, uint8_t pass,
				unsigned *done, unsigned limit, long *emptied)
{
	struct zspage *b[ZS_BATCH], *gone[ZS_BATCH];
	struct zs_class *gc[ZS_BATCH];
	char *tmp = zp->scratch + ZS_NONE + 1;
	unsigned ngone = 0;
	struct hold h = { 0 };
	bool stuck = false, repack;
	long freed = 0;

	/* packing: from now on the shard's new objects go to their classes
	 * (the bit goes again once the shard holds no page at all) */
	hold_lock(m, &h, "mixed plan");
	repack = repack_shard(m);
	if (repack)
		zs_mixed_settle(zp, m->idx >> zp->cshift);
	hold_unlock(zp, m, &h);
	while (!stuck) {
		unsigned nb = 0;

		hold_lock(m, &h, "mixed plan");
		/* emptiest first */
		for (unsigned g = 1; g < ZS_GROUPS && nb < ZS_BATCH && *done + nb < limit; g++)
			for (struct zspage *zs = m->group[g];
			     zs && nb < ZS_BATCH && *done + nb < limit; zs = zs->next)
				if (zs->pass != pass && !zs->migrating && zs_mixed_sparse(zs)) {
					/* an open one is closed: nothing more
					 * goes into it */
					zs_mixed_close(m, zs);
					zs->pass = pass;
					set_migrating(zs, 1);
					b[nb++] = zs;
				}
		hold_unlock(zp, m, &h);
		if (!nb)
			break;
		/* readers inside them are seen now, later ones back off */
		zmi_pool_heavy_barrier();
		free_gone(zp, gc, gone, ngone);
		ngone = 0;
		hold_lock(m, &h, "mixed");
		for (unsigned i = 0; i < nb; i++) {
			struct zspage *zs = b[i];
			unsigned at = 0;
			bool more;

			if (stuck) {   /* no memory for the rest: another time */
				set_migrating(zs, 0);
				continue;
			}
			if (i)
				breathe(zp, m, &h);
			(*done)++;
			if (zmi_pool_hazard_find(zs)) {   /* mapped: leave it */
				set_migrating(zs, 0);
				continue;
			}
			for (;;) {
				zs_stat_add(&zp->objects_moved, (uint64_t)mixed_evacuate(
					zp, m, zs, &at, tmp, repack, &h, &more, &stuck));
				if (!more)
					break;
				zs_mixed_group_set(m, zs);
				breathe(zp, m, &h);
			}
			if (zs->inuse == 0) {
				freed += zs->npop;
				zs_count(&m->mgran, -(int32_t)zs->bump);
				zs_count(&m->mplaced, -(int32_t)zs->placed);
				zs_group_del(m, zs);
				m->zspages--;
				zs_zspage_retire(zp, m, zs);
				gc[ngone] = m;
				gone[ngone++] = zs;
			} else {
				set_migrating(zs, 0);
				zs_mixed_group_set(m, zs);
			}
		}
		hold_unlock(zp, m, &h);
	}
	if (ngone) {
		zmi_pool_heavy_barrier();
		free_gone(zp, gc, gone, ngone);
	}
	*emptied += freed;
	return freed - h.grown;
}

long zs_mixed_compact(struct zs_pool *zp, unsigned *budget, long *emptied)
{
	unsigned done = 0, limit = budget ? *budget : UINT_MAX;
	long freed = 0, gross = 0;
	uint8_t pass;

	if (emptied)   /* also when there is nothing to do: callers add it */
		*emptied = 0;
	if (!zp->mixed || !scratch(zp))
		return 0;
	pass = ++zp->mpass ? zp->mpass : ++zp->mpass;   /* new zspages have 0 */
	ZS_FOR_EACH_MIXED(zp, m) {
		if (done < limit)
			freed += mixed_compact_shard(zp, m, pass, &done, limit, &gross);
		zs_mixed_unsettle(zp, m->idx >> zp->cshift);
	}
	if (budget)
		*budget = done < limit ? limit - done : 0;
	if (emptied)
		*emptied = gross;
	return freed;
}

/* Every class made so far, shard by shard, by size (ZS_FOR_EACH_CLASS's
 * order), for zs_compact_run. */
static struct zs_class *every_class(void *arg)
{
	struct { struct zs_pool *zp; unsigned i; } *it = arg;

	while (it->i < it->zp->total) {
		unsigned i = it->i++, sh = i >> it->zp->cshift, k = i & ((1u << it->zp->cshift) - 1);
		struct zs_class *c;

		if (sh >= it->zp->nshards)
			break;
		if (k < it->zp->nclasses && (c = zs_class_at(it->zp, i)))
			return c;
	}
	return NULL;
}

static long compact_all(struct zs_pool *zp)
{
	uint64_t t0 = zmi_os_now_ns();
	struct { struct zs_pool *zp; unsigned i; } it = { zp, 0 };
	long freed;
	int pf;

	pthread_mutex_lock(&zp->compact_lock);
	pf = zm_pages_thread_prefault(0);   /* zs_compactor_prefault */
	/* sparse mixed zspages into the classes first, which then pack */
	freed = zs_mixed_compact(zp, NULL, NULL);
	freed += zs_compact_run(zp, every_class, &it, NULL);
	freed += zs_sweep(zp);
	zs_meta_compact(zp);   /* records and tables the freed zspages left sparse */
	zs_stat_add(&zp->compactions, 1);
	zs_stat_add(&zp->pages_compacted, (uint64_t)zs_net_freed(freed));
	zs_stat_add(&zp->compact_ns, zmi_os_now_ns() - t0);
	zm_pages_thread_prefault(pf);
	pthread_mutex_unlock(&zp->compact_lock);
	return zs_net_freed(freed);
}

long zs_compact(struct zm_pool *pool)
{
	return compact_all(zs_of(pool));
}

long zs_shrink(struct zm_pool *pool, size_t bytes)
{
	struct zs_pool *zp = zs_of(pool);
	size_t want = (bytes + zp->page_size - 1) >> zp->shift;
	uint64_t t0 = zmi_os_now_ns();
	long freed = 0;
	int pf;

	/* the pages this thread freed (a store's writer thread, freeing
	 * what it wrote back) are any thread's to take again: at a limit
	 * the pages layer takes back only the allocating thread's cache */
	zm_pages_flush_thread(zp->pages);
	if (!want)
		return 0;
	pthread_mutex_lock(&zp->compact_lock);
	pf = zm_pages_thread_prefault(0);   /* zs_compactor_prefault */
	freed = zs_mixed_compact(zp, NULL, NULL);
	/* classes with the most slack first: a few passes over the table */
	for (int round = 0; round < 8 && freed < (long)want; round++) {
		struct zs_class *best = NULL;
		uint64_t most = 0;

		ZS_FOR_EACH_CLASS(zp, c) {
			uint64_t slack;

			zs_compact_lock(c);
			slack = c->huge ? 0 : zs_slack_pages(zp, c);
			zs_compact_unlock(c);
			if (slack > most) {
				most = slack;
				best = c;
			}
		}
		if (!best || most < best->pages)
			break;
		freed += zs_compact_class(zp, best, NULL);
	}
	if (freed < (long)want)
		freed += zs_sweep(zp);
	zs_stat_add(&zp->compactions, 1);
	zs_stat_add(&zp->pages_compacted, (uint64_t)zs_net_freed(freed));
	zs_stat_add(&zp->compact_ns, zmi_os_now_ns() - t0);
	zm_pages_thread_prefault(pf);
	pthread_mutex_unlock(&zp->compact_lock);
	return zs_net_freed(freed) << zp->shift;
}

/* The work lower bound (zm_pool_min_moves): a histogram of pages by the
 * number of live objects starting on them, over every populated page of
 * every class, then the `pages` pages with the fewest. */
long zs_min_moves(struct zm_pool *pool, size_t pages)
{
	struct zs_pool *zp = zs_of(pool);
	size_t nh = zp->page_size / ZS_MIN_SIZE + 2, left = pages;
	size_t *hist = calloc(nh, sizeof(*hist));
	uint8_t *freemap;
	long moves = 0;

	if (!hist)
		return -ENOMEM;
	pthread_mutex_lock(&zp->compact_lock);  /* nothing moves meanwhile */
	if (!(freemap = (uint8_t *)scratch(zp))) {
		pthread_mutex_unlock(&zp->compact_lock);
		free(hist);
		return -ENOMEM;
	}
	ZS_FOR_EACH_CLASS(zp, c) {
		if (c->huge)
			continue;
		zs_compact_lock(c);
		for (unsigned g = 0; g < ZS_GROUPS; g++)
			for (struct zspage *zs = c->group[g]; zs; zs = zs->next) {
				uint32_t starts[ZS_MAX_PAGES] = { 0 };

				free_map(zs, freemap);
				for (unsigned o = 0; o < zs->bump; o++)
					if (!freemap[o])
						starts[((size_t)o * c->size) >> zp->shift]++;
				for (unsigned p = 0; p < zs->npop; p++)
					hist[starts[p] < nh ? starts[p] : nh - 1]++;
			}
		zs_compact_unlock(c);
	}
	/* mixed zspages: a live object starts where its header is */
	ZS_FOR_EACH_MIXED(zp, m) {
		zs_compact_lock(m);
		for (unsigned g = 0; g < ZS_GROUPS; g++)
			for (struct zspage *zs = m->group[g]; zs; zs = zs->next) {
				uint32_t starts[ZS_MAX_PAGES] = { 0 };

				for (unsigned at = 0; at < zs->bump;) {
					const struct zs_mhdr *hd = zs_mhdr(zp, zs, at);

					if (zs_mhdr_live(zp, zs, hd, at))
						starts[((size_t)at * ZS_GRANULE) >> zp->shift]++;
					at = zs_mnext(zp, at, hd->len);
				}
				for (unsigned p = 0; p < zs->npop; p++)
					hist[starts[p] < nh ? starts[p] : nh - 1]++;
			}
		zs_compact_unlock(m);
	}
	pthread_mutex_unlock(&zp->compact_lock);
	for (size_t k = 0; k < nh && left; k++) {
		size_t take = hist[k] < left ? hist[k] : left;

		moves += (long)(take * k);
		left -= take;
	}
	free(hist);
	return moves;
}
