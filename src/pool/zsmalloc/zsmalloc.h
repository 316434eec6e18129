/*
 * zsmalloc: the dense allocator for compressed objects (background §1, §3).
 *
 * Read this header first (the types, the constants and the lock rules),
 * then zsmalloc_inline.h (the inline accessors over them), then a file:
 *
 *   zsmalloc/zsmalloc.h         types, lock order, cross-file calls
 *   zsmalloc/zsmalloc_inline.h  inline accessors: classes, slots and
 *                       back references, object addresses, fullness
 *                       groups, mixed zspages (included at the end of
 *                       this header)
 *   zsmalloc/class.c    size classes: which slot size, how many pages per
 *                       zspage; pool create/destroy
 *   zsmalloc/handle.c   the handle table: one 8-byte slot per object, the
 *                       only reference to an object's location (one level
 *                       of indirection, so that objects can move)
 *   zsmalloc/zspage.c   zspages: a few pages holding objects of one class;
 *                       object addressing; fullness groups
 *   zsmalloc/record.c   zspage records in pages of the pool's own, given
 *                       back to the OS when zspages go
 *   zsmalloc/alloc.c    zm_pool_alloc / zm_pool_free
 *   zsmalloc/huge.c     the huge class: a page per object, named by the
 *                       handle slot itself, no zspage record
 *   zsmalloc/access.c   map / unmap / read / write; handle lookup and
 *                       pinning
 *   zsmalloc/compact.c  compaction: live objects moved to fill as few
 *                       pages as they can; mixed zspages packed
 *   zsmalloc/auto.c     automatic compaction on the background worker
 *                       (the WATERMARK and RATIO policies)
 *   zsmalloc/stats.c    statistics, the per-class table, the checker
 *
 * Layout.  A class of slot size S keeps zspages of N pages (N chosen so
 * that N * page_size wastes least at the end, N <= max_zspage_pages).
 * Objects sit back to back across the zspage's pages, so one may straddle
 * two pages; such an object is reached by copying its halves through a
 * per-thread buffer, unless (CONTIG method) the two pages happen to be
 * adjacent in memory, which bulk allocation makes the common case.  Free
 * objects are chained through their back references in the zspage
 * record (a free object has none), never through their memory; objects never
 * used since the zspage was made lie beyond a bump index, and the pages
 * beyond it are not even allocated yet: a zspage takes its pages as the
 * bump reaches them, so a class's newest zspage holds at most one partly
 * used page (docs/zsmalloc.md: this halves the waste of the "one partly
 * filled zspage per class" at 30 MB).
 *
 * Per-object metadata: the 8-byte handle slot and a 4-byte back reference
 * (object -> handle slot) in the zspage record, used when an object moves.
 * Handles name the zspage by id (a table of records), so the pages'
 * owner records are never touched.
 *
 * Locking.  Lock order (outer first):
 *
 *     class->lock  ->  pages->lock (inside zm_pages calls)
 *     class->lock  ->  span->lock (a shard's span of a table: a leaf)
 *     compact_lock -> class->lock (a sparse class) -> class->lock (a larger
 *                     class: the sweep in zsmalloc/compact.c, the only place that
 *                     holds two)
 *     compact_lock -> mixed->lock -> class->lock (a mixed zspage's objects
 *                     moving into their classes, zsmalloc/compact.c;
 *                     packed into other mixed zspages, the mixed lock
 *                     alone;
 *                     allocation never holds a class lock while it takes
 *                     a mixed one)
 *
 * class->lock protects the class's fullness lists and counters, every
 * field of its zspages except `migrating`, the free chains inside them,
 * and the handle slots of the class's objects (writers).  Handle slots are
 * read without a lock (atomic 64-bit loads); a reader publishes a hazard
 * pointer to the zspage, re-reads the slot to be sure the object did not
 * move, and backs off if the zspage is migrating; a compactor marks a
 * zspage migrating, runs the heavy barrier and moves nothing out of it
 * while any thread's hazard names it (pool_internal.h).  Outside the
 * sweep, no class lock is held while taking another, so the sweep (one
 * per pool, under compact_lock) cannot close a cycle.  There is no
 * pool-wide lock on
 * malloc/free: handle slots come from the class's own free list, refilled
 * in chunks from its shard's span of the table (zs_span_take).
 */
#ifndef ZM_ZSMALLOC_H
#define ZM_ZSMALLOC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/lock.h"
#include "base/worker.h"
#include "pool/pool_internal.h"

#define ZS_MIN_SIZE   32      /* smallest slot: one cache line half; smaller
				 objects are rare (compressed pages) */
#define ZS_DEF_SPACING 32     /* measured: docs/zsmalloc.md */
/* Larger pages: spacing page_size / ZS_DEF_CLASSES, i.e. 128 classes per
 * page: the same 32 bytes at 4 KiB, 128 / 256 bytes at 16 / 32 KiB, so
 * that the classes' partly used zspages do not multiply with the page
 * size (docs/zsmalloc.md, "Class spacing for larger pages"). */
#define ZS_DEF_CLASSES 128
#define ZS_DEF_MAX_PAGES 32
/* a default zspage is one run of the pages layer (zsmalloc/zspage.c) */
_Static_assert(ZS_DEF_MAX_PAGES == ZM_PAGES_RUN_MAX, "a default zspage is a page run");
#define ZS_DEF_BORROW 0     /* measured: no gain at spacing 32 */
#ifndef ZS_DEF_MIXED
#define ZS_DEF_MIXED 1      /* mixed zspages (below); measured: docs/zsmalloc.md */
#endif
#ifndef ZS_MIXED_PAGES
#define ZS_MIXED_PAGES ZS_MAX_PAGES
#endif
#ifndef ZS_MIXED_SMALL
#define ZS_MIXED_SMALL 64
#endif
#define ZS_MIXED_MAX_GRANULES 0xFFFFu /* granules of a mixed zspage: its bump,
					 and a slot's object index, are 16-bit */
#define ZS_DEF_POLICY ZM_COMPACT_RATIO /* measured: docs/compaction.md */
#define ZS_MAX_SHARDS 8   /* class copies, at most; as many as CPUs */
/* Pages this large or larger get one copy of each class: objects are few
 * and large there, so each copy's partly used zspage costs more memory
 * than its lock saves in time (docs/results/2026-12-01-nbd-vs-nbdkit.md) */
#define ZS_SHARD_PAGE_MAX 16384
#define ZS_MAX_PAGES  64
#define ZS_GROUPS     11      /* fullness: 0 empty, 1..9 partial, 10 full */
#define ZS_NONE       0xFFFFu /* end of a free chain */
#define ZS_MAGIC      0x5a53504du /* "ZSPM" */
#define ZS_HANDLE_CHUNK 8     /* handle slots a class takes at once: a
				 cache line, so that fresh chunks of two
				 classes never share a line (freed slots
				 join the freeing class's list) */
#define ZS_SPAN 512           /* slots (or zspage ids) a shard takes from
				 its table at once, for its classes' chunks:
				 4 KiB, so two shards' chunks are neighbours
				 only at a span's ends, and a thread freeing
				 at random writes no line beside another's
				 (lines are fetched in pairs; figures:
				 docs/results/2026-12-02-code-choices.md) */
#define ZS_AUTO_MIN_CLASS_SLACK 8 /* pages of slack, for a class to call for
				     compaction (zsmalloc/auto.c) */
#define ZS_AUTO_GROUP 7   /* RATIO: a free tells the compactor where to start
			     when it moves a zspage down into this fullness
			     group or below (7 of 9: under 78% used): fuller
			     ones are not what it moves objects out of */
#define ZS_MAX_HANDLES ((uint32_t)1 << 28) /* 2 GiB of address space, lazily used */
#define ZS_MAX_ZSPAGES ((uint32_t)1 << 26) /* 512 MiB of address space, lazily used */
#define ZS_ID_CHUNK   8       /* zspage ids taken at once: a cache line of
				 the zspage table, which every lookup reads,
				 so that two threads making zspages fast do
				 not write each other's lines */

/* A zspage record: 48 bytes + 4 per object (56 + 4 per object with
 * ZM_DEBUG, which adds a magic number); records take whole cache lines
 * (zs_record_alloc_size), so a zspage of 4 objects fits in one.  Its pages
 * are usually one run (zsmalloc/zspage.c), first, first + 1, ...: then `first`
 * says where they all are.  When a page comes that is not the next one,
 * the pfns go to an array of their own, pfnx (never freed while the
 * zspage lives; published with a release store, read with an acquire
 * load, and the same pfns either way for the pages already there). */
struct zspage {
#if ZM_DEBUG >= 1
	uint32_t magic;          /* ZS_MAGIC while live (zs_set_magic) */
#endif
	uint32_t id;             /* index in the zspage table */
	uint16_t cls;
	uint16_t inuse;
	union {
		uint16_t free_head;  /* first freed object; the chain runs through
					the free objects' back references */
		uint16_t placed;     /* mixed: objects placed (headers written) */
	};
	uint16_t bump;           /* objects (mixed: granules) from here on
				    were never used */
	uint8_t group;
	uint8_t npop;            /* pages populated so far (lazily, see zsmalloc/zspage.c) */
	uint8_t migrating;       /* atomic: a compactor is moving objects out */
	uint8_t pass;            /* compaction: received objects in this pass */
	uint32_t size;           /* the class's slot size, for the map path;
				    ZS_GRANULE for a mixed zspage */
	zm_pfn_t first;          /* the first page (in what would be padding) */
	struct zspage *next, *prev;
	zm_pfn_t *pfnx;          /* atomic: the pfns, if not one run; or NULL */
	uint32_t data[];         /* the handle slot (or owner key) of each
				    live object, its back reference; of a
				    free one, the next in the free chain
				    (none in a mixed zspage's record) */
};

/*
 * Mixed zspages.  When an object's class has no zspage with room, the
 * object goes to its shard's mixed zspage instead (zsmalloc/alloc.c), if
 * the pool has them: objects of any size back to back, each a 6-byte
 * header and its bytes, the two rounded up to 4 (granules), so there is
 * no rounding to a class and one partly used page per shard instead of
 * one per class.  The mixed class is a class like the others to the
 * handle table, the zspage table, the records and the locks, at index
 * nclasses of each shard (after the huge one: ZS_FOR_EACH_CLASS never
 * sees it), its slot size ZS_GRANULE, its "objects" granules.  An object
 * at granule g has its header there and its data right after it (from
 * byte g * 4 + 6, zs_obj_segs); its handle slot names g.  A header
 * never straddles a page: the granule where one would (the page's last)
 * is skipped (zs_mfirst, zs_mnext).  The header gives the length.  An
 * object is live while the word its header's back reference names (slot
 * or owner word) names it; a free reads the header for the length and
 * puts the object's granules on the zspage's hole index (below), which
 * allocations take before any tail.  A mixed zspage whose live objects'
 * granules fall below 3/4 of those below its bump is evacuated by the
 * compactor, its objects moving into their own classes, or, after a mass
 * free, packed into the shard's open mixed zspages (mixed_repack;
 * zsmalloc/compact.c).  Two zspages of a shard are open for allocation
 * at their tails (front[]); an object goes to the one with the least
 * room that holds it.  Records have no back references: the headers hold
 * them.
 */
#define ZS_GRANULE 4
#define ZS_MHDR_BYTES 6
#ifndef ZS_MIXED_OPEN
#define ZS_MIXED_OPEN 2           /* zspages of a shard open for allocation */
#endif
struct __attribute__((packed)) zs_mhdr {
	uint32_t ref;            /* back reference */
	uint16_t len;            /* the object's bytes (below a page: a mixed
				    object is of a class below the huge one) */
};
_Static_assert(sizeof(struct zs_mhdr) == ZS_MHDR_BYTES, "the header as laid out");
struct zspage;
struct zs_class;

/*
 * The holes of a mixed zspage (zsmalloc/alloc.c).  A free gives the
 * object's granules to an index of the zspage's holes (struct zs_mholes,
 * 68 bytes from malloc, made with the zspage's first free and freed with
 * the zspage, so that a fresh fill pays nothing for it and the record
 * keeps to one cache line: struct zs_mrec): segregated lists by the
 * hole's extent in granules (header included, to the next header),
 * ZS_MHOLE_BINS of them, two to each power of two above 16 granules, one
 * to each two granules below, with a bitmap of the lists that are not
 * empty.  A list runs through the holes'
 * headers: a hole keeps its header, with its length (so every walk of the
 * headers steps over it as before) and, in place of its back reference,
 * the granule of the next hole of its list (ZS_NONE: the last); no word
 * names a hole's granule, so it reads as free whatever its reference.
 * An object placed in a hole takes its start; the rest, if two granules
 * or more, is a hole again with a header of its own (a length that steps
 * to the next header), on the list of its extent; a hole is taken only
 * where the rest is none or two granules at least.  Neighbouring holes
 * are not merged: a free reads the object's header, not its neighbours'.
 */
#define ZS_MHOLE_BINS 32
struct zs_mholes {
	uint32_t mask;                    /* bit b set: head[b] is a hole */
	uint16_t head[ZS_MHOLE_BINS];     /* each list's first hole, or ZS_NONE */
};
/* What a mixed zspage's record has after the 48 bytes (in place of the
 * back references, which its headers hold). */
struct zs_mrec {
	uint32_t live;                    /* the live objects' granules
					     (zs_mgran of their lengths) */
	struct zs_mholes *ix;             /* its holes, or NULL */
};

/* One shard of a size class: 192 bytes, three cache lines, aligned so
 * that two classes' locks never share a line. */
struct zs_class {
	zmi_lock_t lock;
	uint32_t size;           /* slot size; immutable */
	uint16_t pages;          /* per zspage; immutable */
	uint16_t objs;           /* per zspage; immutable */
	bool huge;               /* one object per page; immutable */
	uint8_t compacting;      /* atomic: set while compaction holds the
				    lock (zs_compact_lock) */
	uint16_t gmask;          /* lock: bit g set when group[g] is not empty */
	uint32_t gmul;           /* immutable: 9 * 2^20 / objs, for zs_group_of */
	uint16_t idx;            /* immutable: shard << cshift | class number */
	bool mixed;              /* the shard's mixed class; immutable */
	struct zspage *spare;    /* lock: a retired record (with its id) to reuse */
	uint32_t reuse_pfn;      /* lock: 1 + the first page of the zspage last
				    retired here, which may still sit in the
				    page cache of the thread that freed it (the
				    compactor's, if it did); 0 = none */
	uint32_t alloc_by;       /* atomic: the number
				    (zmi_pool_thread_number) of the thread
				    that allocated here last, written under
				    the lock: who it is that an allocation
				    finding the lock taken collided with
				    (zsmalloc/alloc.c) */
	struct zspage *group[ZS_GROUPS];  /* lock: lists by fullness */
	uint32_t zspages, used, npages;   /* lock: zspages, objects, pages;
					     used and npages also read without
					     it (zsmalloc/auto.c), so written with
					     zs_count() */
	uint32_t free_slots;              /* lock: handle free list */
	uint32_t nfree_slots;             /* lock */
	uint32_t free_ids;                /* lock: zspage id free list */
	uint32_t nfree_ids;               /* lock */
	uint32_t nsplit;                  /* lock: zspages with a pfn array
					     (struct zspage's pfnx) */
	uint32_t mgran, mplaced;          /* mixed, lock (read without it,
					     zs_count): granules of its zspages
					     below their bumps, objects placed
					     there (live and freed) */
	struct zspage *front[ZS_MIXED_OPEN]; /* mixed, lock: the zspages
						open for allocation, or NULL */
	struct zspage *hole;              /* mixed, lock: the zspage whose holes
					     allocations take first, or NULL */
} __attribute__((aligned(64)));

/* Compaction (of objects, of records, of the handle table) takes and
 * drops class locks through these, so that an allocation that finds a
 * lock taken can tell a compactor's step from another thread allocating
 * beside it: only the second is a reason to move to another shard
 * (zsmalloc/alloc.c). */
#define zs_compact_lock(c) /* a macro: debug builds name the caller's hold */ \
	(zmi_lock(&(c)->lock), __atomic_store_n(&(c)->compacting, 1, __ATOMIC_RELAXED))

/* glibc's aligned chunk around it: its 8-byte header, rounded to 16 (the
 * gap before the aligned start goes back to malloc's free lists). */
#define ZS_ALIGNED_ALLOC_COST 16

/* Record pages (zsmalloc/record.c).  Zspage records of up to `max` bytes live
 * in pages of their own, of the system's page size, one record size to a
 * page (a bucket a size, every 64 bytes), cut from one reservation of
 * address space, so that the compactor can move records out of sparse
 * pages and give those back (zs_records_compact).  A pool's first few
 * pages' worth of records, larger records (pages over 64 KiB, or many
 * objects to a zspage) and records beyond the reservation are malloc'd
 * as before. */
#define ZS_REC_BUCKETS 32         /* record sizes 64 .. 2048 bytes */
struct zs_rpage;
struct zs_rbucket {
	zmi_lock_t lock;          /* a leaf, inside class locks */
	struct zs_rpage *avail;   /* lock: pages with free slots, not draining */
	uint32_t npages;          /* lock (read without it: written with
				     zs_count): its pages */
	uint32_t used;            /* lock: records in them */
	uint32_t nmalloc;         /* lock (like npages): its records from
				     malloc */
} __attribute__((aligned(64)));
struct zs_records {
	size_t page;              /* immutable: a record page's bytes */
	unsigned hdr;             /* immutable: its header's bytes (64-aligned) */
	unsigned max;             /* immutable: largest record kept in pages */
	size_t bytes;             /* immutable: the reservation's size */
	char *base;               /* atomic: the reservation, made with the
				     first record page (NULL until then) */
	zmi_lock_t lock;          /* the reservation and free pages below (a
				     leaf, inside bucket locks) */
	char *next;               /* lock: the first page never used */
	char **freep;             /* lock: free pages given back to the OS */
	char **dirty;             /* lock: free pages still resident, kept
				     for the next records (zs_record_release) */
	size_t nfree, ndirty, free_cap;
	size_t inuse;             /* lock: pages holding records */
	bool keep;                /* immutable: the pages instance never gives
				     memory back (reserve_pages SIZE_MAX) */
	size_t mallocd;           /* atomic: bytes of records malloc'd before
				     `paged` (counted as malloc charges them) */
	bool paged;               /* atomic: records go to pages from now on */
	/* Buckets by shard and size (a shard's classes' records apart from
	 * another's, so that two threads making zspages of one size in two
	 * shards share no bucket lock or page).  Atomic: each shard's
	 * array and each bucket made with its first record (lock), so that
	 * a pool of a few objects pays for none but its own. */
	struct zs_rbucket **b[ZS_MAX_SHARDS];
};

struct zs_pool {
	struct zm_pages *pages;  /* immutable */
	char *base;              /* immutable: address of pfn 0 */
	size_t page_size;        /* immutable */
	unsigned shift;          /* immutable */
	unsigned spacing, max_pages;
	unsigned spacing_shift;  /* spacing is a power of two */
	bool merge;              /* merge classes that pack alike */
	unsigned borrow;         /* classes up an object may borrow a slot from */
	enum zm_span_method span;
	uint8_t auto_pol;        /* atomic: the background compactor's policy
				    (zsmalloc/auto.c), 0 without one; zm_pool_free reads
				    it to know what to note */
	unsigned nclasses;       /* distinct classes, huge last (the mixed
				    class of a shard, if any, after them) */
	bool mixed;              /* immutable: mixed zspages (above) */
	unsigned mixed_pages;    /* immutable: most pages of a mixed zspage */
	bool mixed_always;       /* immutable: even with no background
				    compactor (else only with one: their
				    holes come back only by compaction) */
	uint8_t mpass;           /* compact_lock: mixed compaction's pass */
	uint32_t mixed_settled;  /* atomic: bit sh set while shard sh keeps
				    objects the compactor packed into its
				    mixed zspages (zs_mixed_settle) */
	unsigned nshards;        /* copies of each class (power of two) */
	unsigned cshift;         /* 1 << cshift > nclasses */
	unsigned total;          /* nshards << cshift: the class index space */
	unsigned nidx;           /* entries of idx_to_class */
	uint16_t *idx_to_class;  /* size index -> class (merged classes) */
	struct zs_proto {        /* the classes' immutable fields, and the
				    mixed class's (nclasses + 1 of them) */
		uint32_t size;
		uint16_t pages, objs;
		bool huge;
	} *proto;
	/* Each shard's classes, each made the first time an object of its
	 * size comes to that shard: a process using one thread never pays
	 * for the other shards' classes, nor anyone for sizes it never
	 * allocates (192 bytes a class; 24 KiB a shard at 4 KiB pages if
	 * all were made).  shard[sh] is an array of nclasses + 1 pointers
	 * (the last the mixed class), made
	 * with the shard's first class.  Atomic; shard_lock serialises
	 * making them. */
	struct zs_class **shard[ZS_MAX_SHARDS];
	pthread_mutex_t shard_lock;
	uint64_t *slot;          /* handle table; immutable pointer */
	uint64_t *owner;         /* owner words (pool.h), or NULL; immutable */
	uint64_t key_tag;        /* immutable: an owner key's handle's tag */
	uint64_t nowner;         /* immutable */
	uintptr_t *ztab;         /* zspage table: id -> record; free entries
				    chain ids; immutable pointer */
	/* Written by allocating threads: kept off the read-mostly line
	 * above, which every map and free reads. */
	uint32_t slots_used __attribute__((aligned(64))); /* atomic: slots handed out */
	uint32_t ids_used;       /* atomic */
	uint64_t malloc_fail;    /* atomic */
	/* Each shard's current span of the handle table and of the zspage
	 * table (ZS_SPAN), each on a line of its own. */
	struct zs_span {
		zmi_lock_t lock;
		uint32_t next, end;  /* lock: the span's part not yet handed out */
		bool fresh;          /* lock: never used before (not a page of
					the table given back and taken again) */
		struct zs_tfree *tf; /* immutable: its table's pages given back */
	} __attribute__((aligned(64))) slot_span[ZS_MAX_SHARDS], id_span[ZS_MAX_SHARDS];
	/* The tables' pages whose entries were all free, given back to the
	 * OS (zs_tables_trim); a span takes one before new entries. */
	struct zs_tfree {
		zmi_lock_t lock;     /* a leaf, inside span locks */
		uint64_t *table;     /* immutable: the table, as words */
		uint32_t *pgen;      /* immutable: the handle table's: the
					generation a page's slots start at when
					it comes back (reserved, touched for pages
					given back); NULL for the zspage table */
		uint64_t gen0;       /* immutable: the handle table's: the
					generation a new slot starts at, the
					pool's gen_base (pool_internal.h) */
		uint32_t *page;      /* lock: pages given back */
		uint32_t n, cap;     /* lock (n read by stats without: atomic) */
	} slot_free, id_free;
	/* Where the RATIO compactor starts (zsmalloc/auto.c): per shard, the class
	 * of that shard last freed from while it had slack; atomic, each on
	 * a line of its own, so that threads freeing in different classes do
	 * not bounce one word between them. */
	struct zs_hint {
		uint32_t idx;
	} __attribute__((aligned(64))) hint[ZS_MAX_SHARDS];
	/* Per shard, per list of the hole indexes (struct zs_mholes): the
	 * mixed zspage that last had a hole put on that list, or NULL (the
	 * shard's mixed class's lock; cleared when the zspage retires,
	 * renamed when its record moves).  Where an allocation looks when
	 * the fullest zspages have no hole that fits: the frees of a churn
	 * put holes of every extent somewhere all the time, so the latest
	 * one of a list is usually still there, found in constant time
	 * (docs/zsmalloc.md).  Made with the shard's first hole (malloc,
	 * counted with the hole indexes), so that a pool that never frees
	 * pays nothing for it: a small pool's metadata is part of its
	 * density (test_density's zero pages). */
	struct zs_mhint {
		struct zspage *zs[ZS_MHOLE_BINS];
	} *mhint[ZS_MAX_SHARDS];
	/* compaction (zsmalloc/compact.c, zsmalloc/auto.c) */
	pthread_mutex_t compact_lock;     /* one compactor at a time */
	uint64_t compactions, pages_compacted, objects_moved, compact_ns; /* compact_lock;
					     written with zs_stat_add, read
					     by stats without the lock */
	uint64_t records_moved;           /* likewise (zsmalloc/record.c; tests) */
	uint64_t objects_repacked;        /* likewise: moves into mixed zspages
					     (mixed_repack; tests) */
	uint64_t mholes_bytes;            /* atomic: the mixed zspages' hole
					     indexes and the shards' hints
					     (mhint), as malloc charges them */
	uint8_t pass;                     /* compact_lock: pass number */
	char *scratch;                    /* compact_lock: work space */
	struct zs_auto *autoc;            /* background compactor, or NULL */
#if ZM_DEBUG >= 1
	/* compact_lock: the most objects the compactor moved, and bytes it
	 * copied, under one hold of a class lock (zsmalloc/compact.c: ZS_STEP_*);
	 * tests read and reset them */
	uint32_t step_objs_max;
	uint32_t step_bytes_max;
#endif
	struct zs_records rec;            /* zspage records (zsmalloc/record.c) */
};

/* zsmalloc/class.c: the class number for a size; class k of shard sh, made if
 * it is not yet (NULL if that fails). */
unsigned zs_class_for(struct zs_pool *zp, size_t size);
struct zs_class *zs_class_make(struct zs_pool *zp, unsigned sh, unsigned k);
/* Each mixed class made so far. */
#define ZS_FOR_EACH_MIXED(zp, c)                                                \
	for (unsigned msh_ = 0; msh_ < (zp)->nshards; msh_++)                   \
		for (struct zs_class *c = zs_mixed_at((zp), msh_); c; c = NULL)
/* Every class and mixed class made so far (the mixed ones after). */
#define ZS_FOR_EACH_CLASS_ALL(zp, c)                                            \
	for (unsigned a_ = 0; a_ < 2; a_++)                                     \
		for (unsigned sh_ = 0; sh_ < (zp)->nshards; sh_++)              \
			for (unsigned k_ = a_ ? (zp)->nclasses : 0;             \
			     k_ < (a_ ? (zp)->nclasses + 1 : (zp)->nclasses); k_++) \
				for (struct zs_class *c = a_ ? zs_mixed_at((zp), sh_) : \
				     zs_class_at((zp), sh_ << (zp)->cshift | k_); c; c = NULL)
/* Each class made so far, shard by shard, by size.  (`break` in the body
 * leaves only the innermost loop: use a flag.) */
#define ZS_FOR_EACH_CLASS(zp, c)                                                \
	for (unsigned sh_ = 0; sh_ < (zp)->nshards; sh_++)                      \
		for (unsigned k_ = 0; k_ < (zp)->nclasses; k_++)                 \
			for (struct zs_class *c = zs_class_at((zp), sh_ << (zp)->cshift | k_); \
			     c; c = NULL)

/* zsmalloc/handle.c; with the class lock held */
uint32_t zs_slot_alloc(struct zs_pool *zp, struct zs_class *c);
void zs_slot_free(struct zs_pool *zp, struct zs_class *c, uint32_t idx);
/* The first of `chunk` entries of a table (*used entries handed out of
 * max) for a class of the shard whose span sp is: from the span, which
 * takes ZS_SPAN more from the table when it runs out.  0 when the table
 * is full.  Takes sp->lock (a leaf). */
uint32_t zs_span_take(struct zs_span *sp, uint32_t *used, uint32_t max, uint32_t chunk);
/* Entries of the shards' spans not yet handed out (stats: not metadata). */
uint64_t zs_span_unused(struct zs_pool *zp, struct zs_span *spans);
/* Give back the tables' pages whose entries are all free (compact_lock
 * held, no class lock): the free entries of every class are taken off
 * their lists, those of pages wholly free dropped, the pages given back
 * to the OS for spans to take again, the rest put back.  Returns pages
 * given back. */
long zs_tables_trim(struct zs_pool *zp);
int zs_handles_init(struct zs_pool *zp, uint64_t gen_base);
void zs_handles_fini(struct zs_pool *zp);
/* At destroy: the generations the pool's handles took from gen_base
 * (pool_internal.h: gen_span). */
uint64_t zs_handles_span(struct zs_pool *zp);

/* zspage ids; with the class lock held */
uint32_t zs_id_alloc(struct zs_pool *zp, struct zs_class *c);
void zs_id_free(struct zs_pool *zp, struct zs_class *c, uint32_t id);

/* slot encoding (bits 63..0):
 *   live        zspage id:26 | obj:16 | gen:20 | 0 | 1
 *   live, huge  pfn:32       | shard:10         | gen:20 | 1 | 1  (zsmalloc/huge.c)
 *   free        next:32      | 0               | gen:20 | 0 | 0
 * handle:       slot index:28 | gen:20 | huge | 1   (never 0)
 * The low 22 bits are the tag, which a handle carries and its slot must
 * match: the generation (a slot must be reused 2^20 times before a stale
 * handle to it could pass for live again), whether the object is huge,
 * and whether it is live.  A new slot's generation is the pool's
 * gen_base, and destroy says how far the slots' went from it
 * (pool_internal.h), so that a handle of a destroyed pool whose id comes
 * back names a slot of another generation.
 *
 * Owner words (pool.h) hold the same encodings with the generation's 20
 * bits left to their owner (ZM_POOL_OWNER_MASK is exactly ZS_GEN_MASK):
 * read through zs_load_ref, those bits are 0.  An owner key's handle is
 *   ZS_H_OWNER | key:29 | gen_base:20 | 0 | 1   (zp->key_tag below the key)
 * and carries no object's generation nor huge bit: its word says which;
 * the pool's gen_base refuses a key's handle of a destroyed pool.
 *
 * Back references (the zspage record's, and what zs_load_ref takes) are
 * a slot index, or an owner key with ZS_REF_OWNER set. */
#define ZS_TAG_BITS 22
#define ZS_TAG_MASK ((1ull << ZS_TAG_BITS) - 1)
#define ZS_TAG_HUGE 2ull
#define ZS_GEN_ONE  4ull                          /* generation step */
#define ZS_GEN_MASK (ZS_TAG_MASK & ~(ZS_GEN_ONE - 1))
#define ZS_H_OWNER  (1ull << 51)   /* below the pool's id (pool_internal.h) */
#define ZS_REF_OWNER (1u << 31)
_Static_assert(ZS_GEN_MASK == ZM_POOL_OWNER_MASK, "owner bits are the generation's");
_Static_assert(ZS_MAX_HANDLES <= ZS_REF_OWNER, "a slot index never looks like an owner key");
_Static_assert(((uint64_t)ZS_MAX_HANDLES << ZS_TAG_BITS) <= ZS_H_OWNER &&
	       (ZM_POOL_MAX_KEYS << ZS_TAG_BITS) <= ZS_H_OWNER &&
	       ZS_H_OWNER < ZMI_HANDLE_LIMIT, "handles leave the pool's id bits free");

/* zsmalloc/record.c: zspage records.  get and put with c's lock held; put
 * returns a record page left empty, to give back with zs_record_release
 * once no lock is held (NULL if none).  forget: a record of a pool being
 * destroyed (only malloc'd ones need freeing).  compact: with
 * compact_lock held, no class lock: records move out of sparse pages,
 * which go back to the OS; returns the pages given back. */
int zs_records_init(struct zs_pool *zp);
void zs_records_fini(struct zs_pool *zp);
struct zspage *zs_record_get(struct zs_pool *zp, struct zs_class *c);
void *zs_record_put(struct zs_pool *zp, struct zs_class *c, struct zspage *zs);
void zs_record_release(struct zs_pool *zp, void *page);
void zs_record_forget(struct zs_pool *zp, struct zs_class *c, struct zspage *zs);
long zs_records_compact(struct zs_pool *zp);
/* After compaction (compact_lock held, no class lock): the spare records
 * of classes left empty dropped, the records compacted, the tables'
 * free pages given back. */
void zs_meta_compact(struct zs_pool *zp);
/* The bytes of records outside the classes that malloc theirs (record
 * pages, and the few malloc'd while their bucket fills half a page). */
uint64_t zs_record_bytes(struct zs_pool *zp);

/* zsmalloc/zspage.c.  new and retire (gives up the id) with the class lock
 * held; free (gives back the pages and the record) after it is dropped. */
struct zspage *zs_zspage_new(struct zs_pool *zp, struct zs_class *c);
void zs_zspage_retire(struct zs_pool *zp, struct zs_class *c, struct zspage *zs);
void zs_zspage_free(struct zs_pool *zp, struct zs_class *c, struct zspage *zs);
/* Make sure the pages under objects 0..obj are there; 0 or -ENOMEM. */
int zs_populate_slow(struct zs_pool *zp, struct zs_class *c, struct zspage *zs,
		     unsigned obj);
/* The length of object obj of a mixed zspage, from its header (out of
 * line: on the class zspages' map path, inlined, it cost 6.6
 * instructions a map, out of line 3.5, callgrind). */
size_t zs_mixed_len(const struct zs_pool *zp, const struct zspage *zs, unsigned obj);
void zs_group_del(struct zs_class *c, struct zspage *zs);   /* lock held */

/* Put zs in the group its use calls for (zsmalloc/zspage.c does the moving);
 * true if it moved. */
void zs_group_move(struct zs_class *c, struct zspage *zs, unsigned g);

/* zsmalloc/alloc.c: a free object of zs (lock held, zs not full), from its free
 * chain or its bump (populating pages); ZS_NONE if no page could be had.
 * put: object obj of zs is free again (chained; poisoned in debug). */
unsigned zs_take_obj(struct zs_pool *zp, struct zs_class *c, struct zspage *zs);
void zs_put_obj(struct zs_pool *zp, struct zspage *zs, unsigned obj);

/* zsmalloc/zspage.c: a zspage of c with a free slot in its pages already
 * populated, fullest first, not one being migrated; NULL if none.  c's
 * lock held. */
struct zspage *zs_room_in(const struct zs_pool *zp, struct zs_class *c);

/* zsmalloc/compact.c.  The most work the compactor does under one hold of a
 * class lock: objects moved, bytes copied (at least one object); why
 * these, in zsmalloc/compact.c. */
#ifndef ZS_STEP_OBJS
#define ZS_STEP_OBJS 32
#endif
#ifndef ZS_STEP_BYTES
#define ZS_STEP_BYTES (32u << 10)
#endif
/* zs_compactor_prefault: the compactor's passes (compact_all, zs_shrink,
 * the background passes) turn the pages layer's prefault off for their
 * thread (zm_pages_thread_prefault): the pages a destination takes under
 * a class lock fault in as the step writes them, a few, where making a
 * run of 32 resident in the take held the lock over 100 us
 * (docs/results/2026-12-04-repack.md). */
long zs_compact(struct zm_pool *pool);
long zs_shrink(struct zm_pool *pool, size_t bytes);
long zs_min_moves(struct zm_pool *pool, size_t pages);
/* Compact one class shard in at most *budget steps (one zspage packed or
 * evacuated each; NULL: no bound), taking what it used off *budget;
 * returns pages freed.  Caller holds zp->compact_lock. */
long zs_compact_class(struct zs_pool *zp, struct zs_class *c, unsigned *budget);
/* The same for the classes next() gives, one after another until it
 * gives NULL, their zspages quiesced together, up to a batch of them
 * under one barrier whatever their classes (zsmalloc/compact.c).  Caller holds
 * zp->compact_lock. */
long zs_compact_run(struct zs_pool *zp, struct zs_class *(*next)(void *arg), void *arg,
		    unsigned *budget);
/* Move the objects of sparse classes (less than a page of objects in a
 * page or more) up into free slots of larger classes; returns pages
 * freed.  Caller holds zp->compact_lock. */
long zs_sweep(struct zs_pool *zp);
/* Evacuate the mixed zspages whose live granules are below 3/4 (an open
 * one is closed first): their objects move into their classes, or are
 * packed into the open mixed zspages (mixed_repack, when repack_shard
 * says so); at most *budget zspages (NULL: no bound), taking what it used
 * off.  Returns the pages freed net: those of the zspages it emptied
 * less those the moved objects took where they went; *emptied (if not
 * NULL) gets the first alone.  Caller holds zp->compact_lock. */
long zs_mixed_compact(struct zs_pool *zp, unsigned *budget, long *emptied);
/* Is mixed zspage zs one the compactor evacuates: its live objects'
 * granules below 3/4 of those below its bump?  (An open one too: it is
 * closed first.)  By granules, not objects: a hole split by a smaller
 * object adds a header that is not live, and counted by objects the
 * zspages whose holes allocations take would look sparser with each one
 * (test_policy's steady churn moved 267-1,894 objects in 600 ms). */
#define ZS_MIXED_KEEP_NUM 3
#define ZS_MIXED_KEEP_DEN 4

/* Place an object of size bytes whose word (slot or owner word) is ref
 * in a hole of one of m's zspages (zsmalloc/alloc.c: the one it took
 * holes from last, else the fullest), else at the tail of one of m's
 * open zspages, the one with the least room that holds it, or of a new
 * one opened in place of the fullest (m's lock held): writes its header,
 * counts it, and returns its granule, *where its zspage; the caller
 * writes the object and then its word.  ZS_NONE if no zspage or page
 * could be had; *dead is then a zspage made for it and retired, for
 * zs_zspage_free once m's lock is dropped.  How:
 *   ANY    a hole, else a tail (allocation);
 *   TAIL   a tail only (the compactor packing, mixed_repack: the
 *          zspages whose holes it would fill are those frees thin out
 *          again, and their objects would move twice). */
enum zs_place { ZS_PLACE_ANY, ZS_PLACE_TAIL };
unsigned zs_mixed_place(struct zs_pool *zp, struct zs_class *m, size_t size, uint32_t ref,
			enum zs_place how, struct zspage **where, struct zspage **dead);
/* Does the compactor pack the objects of a shard's sparse mixed zspages
 * into its open mixed zspages rather than into their classes (those
 * with no zspage of their own; the others keep theirs)?  When they hold
 * fewer than a third of the objects placed in them (compact.c,
 * repack_shard).  Zspages that frees thin out bit by bit are evacuated at
 * 3/4 and their objects go to their classes, where frees then make room
 * that allocations take; those a mass free left below a third are packed
 * with
 * the rest, so that no class is left a partly used zspage of its own and
 * no object is rounded up to a slot (at 30 MiB of zmem churn those two
 * were most of the pool's slack after the frees;
 * docs/results/2026-12-04-repack.md). */
#ifndef ZS_MIXED_REPACK_NUM
#define ZS_MIXED_REPACK_NUM 1
#define ZS_MIXED_REPACK_DEN 3
#endif

/* zsmalloc/auto.c: automatic compaction */
int zs_auto_start(struct zs_pool *zp, const struct zm_pool_config *cfg);
void zs_auto_stop(struct zs_pool *zp);
int zs_auto_set(struct zm_pool *pool, enum zm_compact_policy policy);
/* From zs_free, class lock held, after a free left a zspage of c in
 * fullness group g (moved: from another group): what the compactor's policy needs to know of frees.
 * RATIO: the class of its shard to start at, noted only when the free
 * moved the zspage down into group ZS_AUTO_GROUP or below and the class
 * has slack (a store only when it changes, to keep it off the free path;
 * docs/compaction.md).
 * WATERMARK: on every free, wake the thread if c crosses the line (a
 * free that crosses it need not change a group). */
void zs_auto_note_free(struct zs_pool *zp, struct zs_class *c);

/* zsmalloc/huge.c: the huge class, one page per object and no record.  alloc
 * with c's lock held (dropped; 0 on failure), free and release (at
 * destroy: the pages of every live huge object) without; check with c's
 * lock held, marking pfns in `seen` (a bitmap of the arena). */
zm_handle_t zs_huge_alloc(struct zs_pool *zp, struct zs_class *c);
int zs_huge_free(struct zs_pool *zp, zm_handle_t h);
int zs_huge_bind(struct zs_pool *zp, zm_handle_t h, uint32_t kref);
void zs_huge_release(struct zs_pool *zp);
int zs_huge_check(struct zs_pool *zp, struct zs_class *c, uint64_t *seen,
		  size_t total_pages);
/* What the access paths see of a huge object: a one-page zspage of the
 * calling thread, valid until its next lookup. */
extern __thread struct zspage zs_hview;

/* zsmalloc/access.c: find the object of a handle and hold hazard `hz` on its
 * zspage (drop it with zmi_pool_hazard_clear(hz)); NULL if the handle is
 * bad. */
struct zspage *zs_lookup(struct zs_pool *zp, zm_handle_t h, unsigned *obj, unsigned hz);

/* the backend operations, by file */
int zs_create(struct zm_pool *pool, const struct zm_pool_config *cfg);
void zs_destroy(struct zm_pool *pool);
zm_handle_t zs_malloc(struct zm_pool *pool, size_t size);
int zs_free(struct zm_pool *pool, zm_handle_t h);
int zs_bind(struct zm_pool *pool, zm_handle_t h, uint64_t key);
zm_handle_t zs_key_handle_of(struct zm_pool *pool, uint64_t key);
int zs_free_key(struct zm_pool *pool, uint64_t key);
int zs_put_key(struct zm_pool *pool, uint64_t key, const void *buf, size_t size);
int zs_get_key(struct zm_pool *pool, uint64_t key, zm_pool_get_fn fn, void *arg);
void zs_prefetch_key(struct zm_pool *pool, uint64_t key);
long zs_unit(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
	     size_t *pages);
void *zs_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode);
void zs_unmap(struct zm_pool *pool, zm_handle_t h);
int zs_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len);
int zs_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len);
size_t zs_obj_size(struct zm_pool *pool, zm_handle_t h);
void zs_stats(struct zm_pool *pool, struct zm_pool_stats *st);
unsigned zs_nr_classes(struct zm_pool *pool);
int zs_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs);
int zs_check(struct zm_pool *pool);

/* the inline accessors over these types */
#include "pool/zsmalloc/zsmalloc_inline.h"

#endif
