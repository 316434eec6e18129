/*
 * zm_pool: allocators for compressed objects, behind one interface.
 *
 * A pool hands out handles, not pointers, so that objects can move
 * (compaction).  Objects are 1 byte .. one page.  The backend is chosen by
 * name when the pool is created:
 *
 *   "zsmalloc"  (default) size classes, zspages of a few pages, objects may
 *               straddle two pages; dense and fast; see docs/zsmalloc.md
 *   "malloc"    every object a malloc() block: the baseline a programmer
 *               would reach for; its memory counted as malloc really uses it
 *   "xvmalloc"  zcache's two-level segregated-fit allocator: objects with
 *               an 8-byte header inside one page, no compaction; see
 *               docs/xvmalloc.md
 *   "xcfmalloc" zcache's scatter-gather allocator: 64-byte blocks, an
 *               object in at most two blocks in any pages, out-of-line
 *               descriptors, no compaction; see docs/xcfmalloc.md
 *   "zbud"      at most two objects per page, one from each end, no
 *               compaction; see docs/zbud.md
 *
 * Backends without compaction answer -EOPNOTSUPP to zm_pool_compact() and
 * zm_pool_shrink(), and accept only ZM_COMPACT_OFF / DEFAULT, at create
 * and in zm_pool_set_compaction() alike (-EOPNOTSUPP for another policy;
 * -EINVAL for a value outside the enum).
 *
 * Reaching an object: zm_pool_write()/zm_pool_read() copy in and out, or
 * zm_pool_map() gives a pointer until zm_pool_unmap().  Rules for maps:
 *
 *   - a thread may hold at most ZM_POOL_MAX_MAPS maps at once (two, so that
 *     one object can be copied into another), and must unmap in reverse
 *     order of mapping, on the same thread;
 *   - while it holds a map, a thread must not free the mapped handle, nor
 *     destroy the pool; every other call is allowed;
 *   - a mapped object does not move: compaction skips it.
 *
 * Errors follow zmem.h.  zm_pool_alloc() returns 0 on failure and sets errno
 * (ENOMEM: the pages ran out or hit their limit; EINVAL: size 0 or larger
 * than a page).  A stale, foreign or double-freed handle is refused with
 * -EINVAL and, in ZM_DEBUG builds, a message naming the handle.  Stale
 * means freed, or of a destroyed pool: a handle carries its pool's id
 * (ids come back after ZM_POOL_MAX_POOLS creations) and a generation of
 * its slot, which a pool that gets the id again starts past the old
 * pool's; a stale handle could pass for a live one only once its slot's,
 * or its id's, generations have come all the way round (2^17 to 2^20 by
 * backend: docs/api.md).  An id goes back to a pool of the backend that
 * last had it while such an id (or one never used) is free; only past
 * that is a handle of a destroyed pool of another backend read in the new
 * one's layout, and refused as a garbage value is, with the probability
 * its fields give.
 * Every call may be made from any thread at any time, except the two that
 * say they want the pool to themselves: zm_pool_check() and
 * zm_pool_min_moves().
 */
#ifndef ZMEM_POOL_H
#define ZMEM_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <zmem/common.h>
#include <zmem/pages.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t zm_handle_t;

#define ZM_POOL_MAX_MAPS 2
/* Pools live at once in one process: each has an id that its handles
 * carry, so that a handle of another pool is always refused. */
#define ZM_POOL_MAX_POOLS 4095

enum zm_map_mode {
	ZM_MAP_RO = 1, /* read only: nothing is copied back on unmap */
	ZM_MAP_WO = 2, /* write only: nothing is copied in on map */
	ZM_MAP_RW = 3,
};

/* Automatic compaction (docs/compaction.md). */
enum zm_compact_policy {
	ZM_COMPACT_DEFAULT = 0,
	ZM_COMPACT_OFF,        /* only when asked: zm_pool_compact/shrink */
	ZM_COMPACT_WATERMARK,  /* a class whose freeable pages reach
				  compact_watermark % of its pages */
	ZM_COMPACT_RATIO,      /* the pool, when used/allocated falls below
				  compact_ratio %, up to compact_target %:
				  round robin from the class last freed,
				  compact_budget zspages a pass */
};

/* How zsmalloc reaches an object that straddles two pages. */
enum zm_span_method {
	ZM_SPAN_DEFAULT = 0,
	ZM_SPAN_COPY,       /* copy the two halves through a per-thread buffer */
	ZM_SPAN_CONTIG,     /* build zspages from one contiguous run of pages
			       (a buddy block), so no object is ever split;
			       falls back to COPY for a zspage when no run is free */
};

struct zm_pool_config {
	const char *allocator;       /* backend name; NULL = "zsmalloc" */
	struct zm_pages *pages;      /* page source (shared, not owned); NULL =
					the pool makes its own from the fields below */
	size_t page_size;            /* own pages only; 0 = 4096 */
	size_t limit_bytes;          /* own pages only; 0 = no limit */
	size_t arena_bytes;          /* own pages only; 0 = 4 GiB of address space */
	/* zsmalloc tuning; 0 = the measured defaults (docs/zsmalloc.md) */
	unsigned class_spacing;      /* bytes between size classes: 8, 16, 32, ... */
	unsigned max_zspage_pages;   /* most pages in one zspage, 1..64 */
	enum zm_span_method span;
	int class_borrow;            /* how many classes up an object may take a
					free slot from instead of opening a new
					page; -1 = never */
	enum zm_compact_policy compact;  /* background compaction policy */
	unsigned compact_watermark;  /* percent; 0 = default (40) */
	unsigned compact_ratio;      /* percent: start below; 0 = default (75) */
	unsigned compact_target;     /* percent: compact up to; 0 = default (99) */
	unsigned compact_budget;     /* zspages per pass; 0 = default */
	/* Owner words (below): the caller's array of nwords 64-bit words,
	 * one per key; NULL = none.  It must outlive the pool. */
	uint64_t *words;
	uint64_t nwords;             /* at most ZM_POOL_MAX_KEYS */
	/* zsmalloc: objects whose class has no zspage with room go to a
	 * mixed zspage, objects of any size packed back to back
	 * (docs/zsmalloc.md).  Their frees leave holes that only compaction
	 * gives back, so by default (0) only while the pool compacts by
	 * itself (compact not OFF), and not when its pages have a limit
	 * (where a free must make room at once); 1 = also then (the caller
	 * calls zm_pool_compact); -1 = never */
	int mixed_zspages;
};

struct zm_pool_stats {
	const char *allocator;
	size_t page_size;
	uint64_t objects;        /* live objects */
	uint64_t slot_bytes;     /* bytes of the slots they occupy (>= the
				    sizes asked for; the store knows those) */
	uint64_t pool_pages;     /* pages the pool holds (malloc: bytes / page) */
	uint64_t pool_bytes;     /* memory holding objects: pages, or malloc
				    chunks with their headers */
	uint64_t meta_bytes;     /* everything else: handles, back references,
				    zspage records, per-page records, class table */
	uint64_t pages_max;      /* high-water mark of pool_pages */
	uint64_t zspages;
	uint64_t huge_objects;   /* objects in the huge class (one per page) */
	uint64_t malloc_fail;
	uint64_t compactions, pages_compacted, objects_moved;
	uint64_t compact_ns;     /* time spent compacting */
	uint64_t descriptors;    /* out-of-line block descriptors, for the
				    allocators that have them (xcfmalloc);
				    0 otherwise */
	/* Parts of meta_bytes (zmem density -v); what they leave out is
	 * the backend's fixed structures (classes, lists, the pool itself). */
	uint64_t handle_bytes;   /* handle and key table entries in use */
	uint64_t record_bytes;   /* per-object and per-zspage (per-block)
				    records: headers, back references and
				    their allocator's overhead */
	uint64_t pages_meta_bytes; /* the pages layer's records of the pages
				      the pool holds */
};

/* One row of the per-class table (the columns of the kernel zsmalloc's
 * debugfs classes file). */
struct zm_pool_class_stats {
	unsigned size;             /* slot size */
	unsigned pages_per_zspage;
	unsigned objs_per_zspage;
	uint64_t fullness[11];     /* zspages by use: [0] empty .. [10] full,
				      in steps of 10% */
	uint64_t obj_allocated;    /* slots in this class's zspages */
	uint64_t obj_used;
	uint64_t pages_used;
	uint64_t freeable;         /* pages compaction could free */
};

struct zm_pool;

/* Create a pool.  Returns 0 and sets *out; -EINVAL for an unknown backend,
 * bad tuning or a NULL out, -E2BIG for a config with fields this library
 * does not know set (zmem.h: structures), -EMFILE when ZM_POOL_MAX_POOLS
 * pools are live already, -ENOMEM.  cfg NULL means all defaults.
 * Compaction settings are checked as zm_pool_set_compaction() checks the
 * policy (-EINVAL outside the enum, -EOPNOTSUPP for a policy the backend
 * lacks), and percentages above 100 or mixed_zspages outside -1..1 are
 * -EINVAL, whatever the backend and whether or not the policy uses them.
 *
 * Cost: address space is reserved, not used: the pages' arena
 * (arena_bytes, 4 GiB by default) and its per-page records (32 bytes a
 * page), and for zsmalloc a handle table (2 GiB) and a zspage table (512
 * MiB); the malloc backend has no arena, only its handle table (2 GiB);
 * memory is used only where written.  An empty default pool is
 * about 10 KiB resident (at most 64 KiB); one holding a 100-byte object
 * about 28 KiB (a page, a line of records, a page of each table, a
 * thread's page cache).  Threads: none of its own; automatic compaction
 * runs on the process's one background worker, started with the first
 * pool that compacts by itself and ended when the last one goes.
 *
 * fork: a child may use, compact and destroy every pool it inherited
 * that no other thread of the parent was inside at the moment of fork
 * (a call in progress in another thread may have held a lock of that
 * pool, which nothing in the child will release: leave such a pool
 * alone).  Automatic compaction resumes in the child on its own. */
ZM_API int zm_pool_create_sized(const struct zm_pool_config *cfg, size_t cfg_size,
				struct zm_pool **out);
#define zm_pool_create(cfg, out) \
	zm_pool_create_sized((cfg), sizeof(struct zm_pool_config), (out))

/* Destroy; live objects are released with the pool (and said so in the
 * log).  Accepts NULL.  Destroying a pool twice, or anything that is not
 * a live pool, is undefined behaviour; ZM_DEBUG builds name the call and
 * the pointer in a message and return without touching it. */
ZM_API void zm_pool_destroy(struct zm_pool *pool);

/* Allocate an object of size bytes (1 .. page size).  Returns a handle, or
 * 0 with errno set (ENOMEM, EINVAL).  The contents are undefined. */
ZM_API zm_handle_t zm_pool_alloc(struct zm_pool *pool, size_t size);

/* Free an object.  Returns 0, or -EINVAL for a bad handle (0, stale,
 * foreign, already free). */
ZM_API int zm_pool_free(struct zm_pool *pool, zm_handle_t handle);

/* Copy len bytes into / out of the object, straight to and from its
 * page(s); len up to zm_pool_obj_size(), which is at least the size
 * allocated.  0, or -EINVAL (a bad handle, or len beyond the slot). */
ZM_API int zm_pool_write(struct zm_pool *pool, zm_handle_t handle, const void *buf, size_t len);
ZM_API int zm_pool_read(struct zm_pool *pool, zm_handle_t handle, void *buf, size_t len);

/* A pointer to the object, valid until zm_pool_unmap(); see the rules
 * above.  NULL for a bad handle or mode (errno EINVAL), when the thread
 * holds ZM_POOL_MAX_MAPS maps already (EBUSY), or when an object in two
 * pieces finds no memory for the thread's copy of it (ENOMEM). */
ZM_API void *zm_pool_map(struct zm_pool *pool, zm_handle_t handle, enum zm_map_mode mode);
ZM_API void zm_pool_unmap(struct zm_pool *pool, zm_handle_t handle);

/* The size of the object's slot: the bytes it can hold, the same thing
 * on every backend.  At least the size asked for and at most the page
 * size.  zm_pool_write() and zm_pool_read() accept any len up to it
 * (-EINVAL beyond), and zm_pool_map() points to that many bytes; those
 * past the size asked for are the caller's too, undefined until written.
 * It is the slot that slot_bytes (zm_pool_stats) counts for the object,
 * less what the backend keeps inside its slots (xcfmalloc's block
 * headers; in a zsmalloc mixed zspage, the object's header and rounding).
 * Per backend (docs/api.md): zsmalloc its class's slot size (of the
 * class it borrowed a slot from, class_borrow; the page for the huge
 * class), or in a mixed zspage the size asked for; zbud the size rounded
 * up to a chunk; xvmalloc its block's payload (the size rounded up to 8,
 * at least 16, the page for a raw page); xcfmalloc its blocks less their
 * headers, up to a page; malloc what malloc() gave beyond the backend's
 * header (malloc_usable_size()), up to a page.  The object keeps its slot
 * until freed, except that compaction may move it to a larger one
 * (zsmalloc: out of a mixed zspage into its class), never to a smaller
 * one, keeping every byte of the old.  0 for a bad handle. */
ZM_API size_t zm_pool_obj_size(struct zm_pool *pool, zm_handle_t handle);

#ifdef ZMEM_ADVANCED
/* ---- advanced: owner words ---- */

/*
 * Owner words: handles the caller keeps.  A caller that keeps a record per
 * object anyway (the store: one per page) can have the pool keep each
 * object's location in a 64-bit word of the caller's own array, so that
 * the object needs no handle slot of the pool's: 8 bytes less per object
 * with zsmalloc.  The array comes with the config (words, nwords); word
 * k belongs to key k.
 *
 * Of each word the pool owns the bits in ZM_POOL_WORD_MASK and may rewrite
 * them at any time (its compactor moves objects), always with an atomic
 * compare-and-swap that leaves the others alone; bit 0 is set while the key
 * holds an object.  The 20 bits of ZM_POOL_OWNER_MASK are the caller's: the
 * pool never changes them, and the caller changes them only with atomic
 * read-modify-write operations (fetch_or/and/xor, compare-and-swap), never
 * with a plain store, so that neither side loses the other's update.  A
 * zeroed word is an empty key.
 *
 * An object is made with zm_pool_alloc (an ordinary handle), written, and
 * given to a key with zm_pool_bind; from then on it is reached through
 * zm_pool_key_handle(pool, key), which stays valid while the key holds it,
 * and freed with zm_pool_free_key.  Calls for one key must not race each
 * other (the caller serialises them, e.g. with a lock in its own bits);
 * different keys are independent.  Backends that cannot use the word for
 * the location (all but zsmalloc) keep the handle in a table of the
 * pool's, counted in its meta_bytes, and set only bit 0 of the word.
 */
#define ZM_POOL_OWNER_MASK 0x3FFFFCull   /* bits 2..21: the caller's */
#define ZM_POOL_WORD_MASK  (~ZM_POOL_OWNER_MASK)
#define ZM_POOL_MAX_KEYS   ((uint64_t)1 << 29)

/* Give the object of handle h to key (which must hold nothing); h must be
 * a live handle from zm_pool_alloc, not bound before, and is no longer valid
 * afterwards.  0, or -EINVAL: no owner words, key out of range or in use,
 * or a bad handle.  Every backend refuses the bad handles its other calls
 * do: one of another pool (every handle carries its pool's id), and a
 * stale, freed or garbage one (each backend checks a generation or tag
 * kept with the slot; the malloc backend's handles index a table of
 * entries with generations, not blocks).  Only zsmalloc refuses a handle
 * bound before (binding frees its handle slot); the other backends, which
 * keep a key table, bind it again, and two keys then name one object. */
ZM_API int zm_pool_bind(struct zm_pool *pool, zm_handle_t h, uint64_t key);

/* The handle of key's object, for map/unmap/read/write/obj_size; 0 when
 * the key holds nothing (or is out of range). */
ZM_API zm_handle_t zm_pool_key_handle(struct zm_pool *pool, uint64_t key);

/* Free key's object; the key is empty afterwards.  0 or -EINVAL. */
ZM_API int zm_pool_free_key(struct zm_pool *pool, uint64_t key);

/*
 * One call a put, one a get: what a caller that keeps an object per key
 * (the store: a page per key) does on its hot paths, with the key and
 * the handle checked once, instead of alloc, write, free_key and bind
 * (four calls, each checking its handle again) and key_handle with
 * map/unmap.  The same rules as the calls above: calls for one key must
 * not race each other.
 */

/* Put size bytes (1 .. page size) of buf as key's object: allocate,
 * write, free the object key held (if any) and give the new one to key,
 * in one call; or, where a backend can (zsmalloc), write them over the
 * key's object when they fit it, which needs no room.  0: key holds the
 * new bytes, and no object of the old ones is left.
 * -EINVAL (nothing changed): no owner words, key out of range, buf NULL
 * or size outside 1 .. page size.  -ENOMEM (nothing changed: key keeps
 * its object, untouched): no room, the pages ran out or hit their limit.
 * -EIO: the pool refused the key's old object or the new one's binding
 * (a pool corrupted, or an object freed behind the caller's back); the
 * new object is dropped, and key holds the old one or, when it went
 * first, nothing: zm_pool_key_handle() tells. */
ZM_API int zm_pool_put_key(struct zm_pool *pool, uint64_t key, const void *buf, size_t size);

/* What zm_pool_get_key() calls with key's object: obj points to len
 * bytes, its slot (zm_pool_obj_size()), read-only, valid during the
 * call only.  Its return value is zm_pool_get_key()'s.  It may map
 * other objects (the thread holds this one as one of its maps) but must
 * not free key's object nor destroy the pool. */
typedef int (*zm_pool_get_fn)(void *arg, const void *obj, size_t len);

/* Call fn(arg, obj, len) with key's object mapped read-only (decode it
 * straight from the pool, or copy it out), as one call.  Returns what
 * fn returns, or: -EINVAL (fn not called) when key holds nothing, is
 * out of range or the pool has no owner words; -EBUSY when the thread
 * holds ZM_POOL_MAX_MAPS maps already; -ENOMEM when an object in two
 * pieces finds no memory for the thread's copy of it. */
ZM_API int zm_pool_get_key(struct zm_pool *pool, uint64_t key, zm_pool_get_fn fn, void *arg);

/* A hint: key's object will soon be written over (a put).  Asks the
 * memory for the object's lines without waiting; changes nothing, and
 * does nothing for a key that holds nothing or a backend that cannot
 * write over its objects.  Calls for one key must not race the calls
 * above for it. */
ZM_API void zm_pool_prefetch_key(struct zm_pool *pool, uint64_t key);
#endif /* ZMEM_ADVANCED */

/* Move objects to free whole pages: per class, out of the emptiest zspages
 * into the fullest, each object at most once, mapped objects never.
 * Returns pages freed, or -EOPNOTSUPP for a backend that cannot compact.
 * Safe while other threads use the pool; one compactor runs at a time. */
ZM_API long zm_pool_compact(struct zm_pool *pool);

/* Compact, classes with the most slack first, until about bytes are freed
 * (for a caller under memory pressure); first, the pages the calling
 * thread's cache holds go back to the pool's pages, where any thread's
 * allocation finds them (bytes 0: only that).  Returns bytes freed or
 * -EOPNOTSUPP. */
ZM_API long zm_pool_shrink(struct zm_pool *pool, size_t bytes);

#ifdef ZMEM_ADVANCED
/* ---- advanced: a bound for benchmarks ---- */

/* A lower bound on the objects any compaction must move to free `pages`
 * pages of the pool as it is now: an object must move before the page it
 * starts on can be freed, so at least the objects starting on the `pages`
 * pages where the fewest start (where they could go is not asked: a
 * bound, not a plan; huge objects never move).  Returns that count, or
 * -EOPNOTSUPP for a backend that cannot compact.  Call while no other
 * thread uses the pool (compaction off, or idle). */
ZM_API long zm_pool_min_moves(struct zm_pool *pool, size_t pages);

/* ---- advanced: units, for callers that evict ---- */

/*
 * The unit of memory an object shares with others: the objects that must
 * all be freed before the pages under them go back (zbud: the page and
 * its two buddies; zsmalloc: the zspage; a huge object: its page).  A
 * cache that evicts to free memory (tmem.h) evicts a whole unit, since
 * evicting one object of it frees nothing.
 *
 * Writes the handles of the unit's live objects, h among them, to out
 * (at most max of them) and the unit's pages to *pages; returns how many
 * objects the unit holds (more than max: call again with a larger out).
 * The answer is true at the moment of the call only: the objects may be
 * freed and others allocated into the unit right after.  (A zsmalloc
 * zspage of more than 8192 objects, possible only with pages larger than
 * 4 KiB, is answered with h alone and *pages 0.)  -EINVAL for a
 * bad handle or arguments, -EOPNOTSUPP for backends without units
 * (xvmalloc, xcfmalloc and malloc, whose objects share pages with no
 * bound on how many). */
ZM_API long zm_pool_unit(struct zm_pool *pool, zm_handle_t h, zm_handle_t *out, size_t max,
			 size_t *pages);
#endif /* ZMEM_ADVANCED */

/* Change the automatic compaction policy at run time (ZM_COMPACT_OFF
 * switches it off).  0, -EOPNOTSUPP, -EINVAL or -ENOMEM. */
ZM_API int zm_pool_set_compaction(struct zm_pool *pool, enum zm_compact_policy policy);

/* Fill *st.  0, or -EINVAL (NULL pool or st). */
ZM_API int zm_pool_stats_sized(struct zm_pool *pool, struct zm_pool_stats *st, size_t st_size);
#define zm_pool_stats(pool, st) \
	zm_pool_stats_sized((pool), (st), sizeof(struct zm_pool_stats))

/* Number of size classes (0 for backends without them) and one row. */
ZM_API unsigned zm_pool_nr_classes(struct zm_pool *pool);
ZM_API int zm_pool_class_stats_sized(struct zm_pool *pool, unsigned idx,
				     struct zm_pool_class_stats *cs, size_t cs_size);
#define zm_pool_class_stats(pool, idx, cs) \
	zm_pool_class_stats_sized((pool), (idx), (cs), sizeof(struct zm_pool_class_stats))

/* Print the per-class table (classes in use only) to f, in 80 columns:
 * the kernel's columns but its 91-99% one; zsmalloc's mixed zspages as
 * the row "mixed".  _wide: the kernel's layout whole (about 100
 * columns), its 91-99% column "-". */
ZM_API void zm_pool_print_classes(struct zm_pool *pool, FILE *f);
ZM_API void zm_pool_print_classes_wide(struct zm_pool *pool, FILE *f);

/* Whole-structure checker: every class, zspage, free chain and handle.
 * 0, or -EUCLEAN after printing what is wrong.  Call while no other thread
 * uses the pool. */
ZM_API int zm_pool_check(struct zm_pool *pool);

/* Backend names, NULL-terminated. */
ZM_API const char *const *zm_pool_backends(void);
ZM_API const char *zm_pool_backend(const struct zm_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
