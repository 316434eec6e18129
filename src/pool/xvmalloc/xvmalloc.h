/*
 * xvmalloc: the TLSF-style allocator zcache stored persistent pages with
 * before xcfmalloc (background §1), kept as a backend so that xcfmalloc's 2011
 * comparison can be rerun.  See docs/xvmalloc.md.
 *
 *   xvmalloc/list.c    size -> free list (two levels), the two-level bitmaps,
 *                free list insert / remove / find in O(1)
 *   xvmalloc/alloc.c   pages (get, return, the pool's page list), malloc/free
 *                with split and merge, create/destroy, the ops table
 *   xvmalloc/access.c  handles: encoding and validation; map/unmap, read/write
 *   xvmalloc/stats.c   statistics and the whole-structure checker
 *
 * Layout.  Objects live inside pages and never span two.  A page is cut
 * into blocks that tile it exactly; each block starts with an 8-byte
 * header (struct xv_hdr) followed by its payload.  Free blocks hold their
 * free-list links in the payload (so a payload is at least XV_MIN_PAYLOAD
 * bytes) and never touch another free block: free merges with free
 * neighbours at once.  A page whose blocks are all free is one free block
 * and goes straight back to the pages layer.  Objects too large for a page
 * with a header in it (size > page_size - XV_HDR) take a whole "raw" page
 * whose header is kept out of line, in the page's zm_page_meta record.
 *
 * Locking.  One pool-wide lock, xv_pool.lock, protects everything in
 * struct xv_pool, every block header and free-list link in the pool's
 * pages, and the zm_page_meta records of the pool's pages.  Lock order:
 *
 *     xv_pool.lock  ->  pages->lock (inside zm_pages calls)
 *
 * Object payloads are not protected by it: map/read/write validate the
 * handle under the lock and touch the payload after releasing it (an
 * object never moves, and its payload belongs to its owner until freed).
 */
#ifndef ZM_XV_H
#define ZM_XV_H

#include <stdbool.h>
#include <stdint.h>

#include "base/lock.h"
#include "pool/pool_internal.h"

_Static_assert(sizeof(uintptr_t) >= 8, "page records pack 64-bit fields");

/* Block header, in the page before each block's payload: 8 bytes, so
 * that payloads stay 8-byte aligned.  word: bit 0 this block free, bit 1
 * the block before it free, bits 2..18 the tag of a live block (0 when
 * free), bits 21..31 a magic that every header carries. */
struct xv_hdr {
	uint16_t size;   /* payload bytes, a multiple of XV_ALIGN */
	uint16_t prev;   /* offset of the previous block's header, or XV_NO_PREV */
	uint32_t word;
};

#define XV_HDR          8u      /* sizeof(struct xv_hdr) */
#define XV_ALIGN        8u      /* payload granularity: header alignment */
#define XV_ALIGN_SHIFT  3
#define XV_MIN_PAYLOAD  16u     /* a free block holds two 8-byte links */
#define XV_NO_PREV      0xFFFFu /* first block of its page */

#define XV_FREE         1u
#define XV_PREV_FREE    2u
#define XV_TAG_SHIFT    2
#define XV_TAG_BITS     17  /* what a handle has room for (below) */
#define XV_TAG_MASK     ((1u << XV_TAG_BITS) - 1)
#define XV_MAGIC_SHIFT  21
#define XV_MAGIC        0x5A7u  /* 11 bits */
#define XV_MAGIC_MASK   (0x7FFu << XV_MAGIC_SHIFT)

/* Two-level segregated fit.  Payload sizes below XV_LINEAR_MAX go to
 * first level 0, one list per XV_ALIGN bytes (32 lists: 0..248, the
 * smallest used is XV_MIN_PAYLOAD); a size s >= XV_LINEAR_MAX with
 * l = floor(log2 s) goes to first level l - 7 and second level the next
 * XV_SL_LOG2 bits of s below its top bit, i.e. 32 lists per power of two
 * spaced 2^(l-5) apart (8 bytes at 256..511, 64 at 2048..4095, 1024 at
 * 32768..65535).  Nine first levels cover payloads up to 65528 (64 KiB
 * pages).  One 32-bit word per first level is its second-level bitmap;
 * one word says which first levels have any non-empty list. */
#define XV_SL_LOG2      5
#define XV_SL           (1u << XV_SL_LOG2)                       /* 32 */
#define XV_LINEAR_MAX   (1u << (XV_SL_LOG2 + XV_ALIGN_SHIFT))    /* 256 */
#define XV_FL           9
#define XV_NLISTS       (XV_FL * XV_SL)

/* A block's location, in free-list links and heads: pfn << 16 | header
 * offset.  XV_NIL ends a list. */
#define XV_NIL          UINT64_MAX

/* Free-list links, in a free block's payload. */
struct xv_links {
	uint64_t next, prev;
};

/* The free lists and their bitmaps (xvmalloc/list.c).  Protected by the pool
 * lock. */
struct xv_lists {
	uint32_t fl_map;             /* bit f: sl_map[f] != 0 */
	uint32_t sl_map[XV_FL];      /* bit s of [f]: list f * XV_SL + s not empty */
	uint64_t head[XV_NLISTS];    /* first block of each list, or XV_NIL */
};

/* What the pool keeps in each of its pages' zm_page_meta:
 *   owner    the struct zm_pool (foreign handles are refused by it)
 *   priv[0]  kind (XV_PAGE_*) in bits 0..1; a raw page also keeps its
 *            object's tag in bits 8..24 and size in bits 32..
 *   priv[1]  the pool's list of pages: next pfn << 32 | prev pfn */
#define XV_PAGE_BLOCKS  1u      /* cut into blocks with in-page headers */
#define XV_PAGE_RAW     2u      /* one object, header out of line */
#define XV_NO_PFN       UINT32_MAX

struct xv_pool {
	zmi_lock_t lock;
	struct zm_pages *pages;      /* immutable */
	char *base;                  /* immutable: address of pfn 0 */
	uint32_t page_size;          /* immutable */
	unsigned shift;              /* immutable: log2 page_size */
	struct xv_lists lists;       /* lock */
	zm_pfn_t first_page;         /* lock: the pool's pages, linked in meta */
	uint32_t next_tag;           /* lock: tag for the next object */
	uint32_t tag0;               /* immutable: the first: from the pool's
					gen_base (pool_internal.h) */
	uint64_t pages_held;         /* lock: pages in the list */
	uint64_t raw_pages;          /* lock: of them raw (one object each) */
	uint64_t objects;            /* lock: live objects, raw ones included */
	uint64_t blocks;             /* lock: blocks (headers) in block pages */
	uint64_t free_blocks;        /* lock: of them free (all in lists) */
	uint64_t slot_bytes;         /* lock: payloads of live objects */
	uint64_t pages_max;          /* lock */
	uint64_t malloc_fail;        /* lock */
};

static inline struct xv_pool *xv_of(struct zm_pool *pool) { return pool->priv; }

static inline uint64_t xv_loc(zm_pfn_t pfn, unsigned off)
{
	return (uint64_t)pfn << 16 | off;
}

static inline zm_pfn_t xv_loc_pfn(uint64_t loc) { return (zm_pfn_t)(loc >> 16); }
static inline unsigned xv_loc_off(uint64_t loc) { return (unsigned)(loc & 0xFFFF); }

static inline char *xv_page(const struct xv_pool *xp, zm_pfn_t pfn)
{
	return xp->base + ((size_t)pfn << xp->shift);
}

static inline struct xv_hdr *xv_hdr_at(const struct xv_pool *xp, uint64_t loc)
{
	return (struct xv_hdr *)(xv_page(xp, xv_loc_pfn(loc)) + xv_loc_off(loc));
}

static inline struct xv_links *xv_links_of(struct xv_hdr *h)
{
	return (struct xv_links *)(h + 1);
}

static inline bool xv_is_free(const struct xv_hdr *h) { return h->word & XV_FREE; }
static inline unsigned xv_tag(const struct xv_hdr *h)
{
	return (h->word >> XV_TAG_SHIFT) & XV_TAG_MASK;
}
static inline bool xv_magic_ok(const struct xv_hdr *h)
{
	return (h->word & XV_MAGIC_MASK) == (XV_MAGIC << XV_MAGIC_SHIFT);
}
static inline uint32_t xv_word(unsigned flags, unsigned tag)
{
	return (XV_MAGIC << XV_MAGIC_SHIFT) | (tag << XV_TAG_SHIFT) | flags;
}

/* Offset just past a block: where the next header is, or page_size. */
static inline unsigned xv_end(unsigned off, const struct xv_hdr *h)
{
	return off + XV_HDR + h->size;
}

/* Handles: pfn << 30 | tag << 13 | payload offset / 8, or for a raw page
 * pfn << 30 | tag << 13 (offset field 0: no block payload starts at 0).
 * The tag is never 0, so no handle is 0.  A handle stays below the pool
 * id's bits (pool_internal.h), so pfns are below 2^XV_H_PFN_BITS: the
 * pool refuses a larger page arena. */
#define XV_H_OFF_BITS   13
#define XV_H_OFF_MASK   ((1u << XV_H_OFF_BITS) - 1)
#define XV_H_PFN_SHIFT  (XV_H_OFF_BITS + XV_TAG_BITS)
#define XV_H_PFN_BITS   (ZMI_POOL_ID_SHIFT - XV_H_PFN_SHIFT)

static inline zm_handle_t xv_handle(zm_pfn_t pfn, unsigned tag, unsigned payload_off)
{
	return (zm_handle_t)pfn << XV_H_PFN_SHIFT | (zm_handle_t)tag << XV_H_OFF_BITS |
	       (payload_off >> XV_ALIGN_SHIFT);
}

/* ---- xvmalloc/list.c ---- */
/* The list a free block of payload size belongs to. */
unsigned xv_list_of(unsigned size);
/* The first list all of whose blocks are >= size (XV_NLISTS if none). */
unsigned xv_list_search(unsigned size);
/* The lowest non-empty list >= idx, from the bitmaps; -1 if none. */
int xv_lists_find(const struct xv_lists *l, unsigned idx);
void xv_lists_init(struct xv_lists *l);
void xv_list_insert(struct xv_pool *xp, uint64_t loc);
void xv_list_remove(struct xv_pool *xp, uint64_t loc);
/* A free block with payload >= size, or XV_NIL: O(1). */
uint64_t xv_find(struct xv_pool *xp, unsigned size);

/* ---- xvmalloc/access.c ---- */
/* Validate h (pool lock held).  Returns its page's record and sets *loc
 * (the block's header location, or the raw page's pfn << 16 with *raw
 * true); NULL for a bad handle, after a message naming it and op. */
struct zm_page_meta *xv_lookup(struct zm_pool *pool, zm_handle_t h, const char *op,
			       uint64_t *loc, bool *raw);
void *xv_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode);
void xv_unmap(struct zm_pool *pool, zm_handle_t h);
int xv_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len);
int xv_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len);
size_t xv_obj_size(struct zm_pool *pool, zm_handle_t h);

/* ---- xvmalloc/alloc.c ---- */
void xv_page_unlink(struct xv_pool *xp, zm_pfn_t pfn);

/* ---- xvmalloc/stats.c ---- */
void xv_stats(struct zm_pool *pool, struct zm_pool_stats *st);
int xv_check(struct zm_pool *pool);

/* A handle's page and payload offset (0 for a raw page), for tests. */
static inline zm_pfn_t xv_handle_pfn(zm_handle_t h)
{
	return (zm_pfn_t)((h >> XV_H_PFN_SHIFT) & ((1u << XV_H_PFN_BITS) - 1));
}
static inline unsigned xv_handle_off(zm_handle_t h)
{
	return (unsigned)(h & XV_H_OFF_MASK) << XV_ALIGN_SHIFT;
}

#endif
