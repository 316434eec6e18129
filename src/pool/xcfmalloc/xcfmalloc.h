/*
 * xcfmalloc: the scatter-gather allocator zcache used for compressed pages
 * (background §1), as a pool backend.  What its files share.
 *
 *   xcfmalloc/block.c   descriptors, free lists, pages, split and merge
 *   xcfmalloc/alloc.c   create/destroy, malloc/free, the ops table
 *   xcfmalloc/access.c  handle lookup, read/write, map/unmap
 *   xcfmalloc/stats.c   statistics, the per-size table, the checker
 *
 * Memory is cut into blocks of XCF_BLOCK bytes.  Every page the pool holds
 * is tiled by blocks, free or used, each starting with an in-page header
 * (struct xcf_hdr) and described by an out-of-line descriptor (struct
 * xcf_desc) in a table.  Free blocks sit in one list per size in blocks
 * (list i holds blocks of i + 1 blocks); the last list holds whole unused
 * pages, at most XCF_RESERVE_PAGES of them.  An object occupies one block,
 * or two (possibly in different pages); its handle names the first block's
 * descriptor and that descriptor's generation.
 *
 * Locking: one pool-wide lock (xcf_pool.lock) protects every descriptor,
 * header, free list and counter.  Lock order: xcf_pool.lock, then the
 * pages layer's locks.  Object data is copied outside the lock: an
 * allocated block never moves, and the bytes a copy touches are disjoint
 * from every header.
 */
#ifndef ZM_POOL_XCF_H
#define ZM_POOL_XCF_H

#include "base/lock.h"
#include "pool/pool_internal.h"

/* Block granularity: the 2011 xcfmalloc's 64 bytes.  64 lists at 4 KiB pages; a
 * larger page has page/64 lists (so the lists always step by 64 bytes). */
#define XCF_BLOCK_SHIFT 6
#define XCF_BLOCK (1u << XCF_BLOCK_SHIFT)
/* Whole free pages kept in the last list before pages go back to the
 * pages layer (the 2011 xcfmalloc's 32).  A pool with no live objects keeps none. */
#define XCF_RESERVE_PAGES 32
/* Most descriptors one malloc may need: two pieces, each possibly a new
 * page (one descriptor) split in two (another). */
#define XCF_DESC_PER_MALLOC 4
/* Upper bound of the descriptor table (address space, touched as used). */
#define XCF_MAX_DESC ((uint32_t)1 << 28)

/* The in-page header at the start of every block, free or used. */
struct xcf_hdr {
	uint32_t desc;      /* index of the block's descriptor */
	uint16_t prev;      /* offset in blocks of the previous block in the
			       page, XCF_NO_PREV for the first */
	uint16_t sentinel;  /* XCF_SENTINEL: caught if anything overwrites it */
};
#define XCF_HDR ((unsigned)sizeof(struct xcf_hdr))
#define XCF_NO_PREV 0xFFFFu
#define XCF_SENTINEL 0x5846u /* "XF" */

/* An out-of-line block descriptor: 20 bytes (the 2011 xcfmalloc's 24 on 32-bit
 * with pointers; indices here). */
struct xcf_desc {
	uint32_t pfn;        /* the page the block lies in */
	uint32_t next;       /* free block: next in its list; an object's first
			        block: its second block (0: none); unused
			        entry: next unused entry */
	uint32_t prev;       /* free block: previous in its list (0: head) */
	uint32_t gen;        /* generation, 19 bits: bumped when an object
			        whose first block this was is freed */
	uint16_t off_flags;  /* offset in blocks (XCF_OFF_MASK) + flags */
	uint16_t nblk;       /* size in blocks */
};

#define XCF_OFF_MASK 0x07FFu
#define XCF_FREE     0x0800u  /* on a free list */
#define XCF_USED     0x1000u  /* holds (part of) an object */
#define XCF_HEAD     0x2000u  /* an object's first block: handles name it */
#define XCF_GEN_MASK 0x7FFFFu    /* 19 bits: all a handle has room for */
#define XCF_H_IDX_SHIFT 20       /* below the pool's id (pool_internal.h) */
_Static_assert(XCF_H_IDX_SHIFT + 32 <= ZMI_POOL_ID_SHIFT, "indexes below the pool's id");

struct xcf_pool {
	zmi_lock_t lock;
	/* immutable after create */
	struct zm_pages *pages;
	char *base;               /* address of pfn 0 */
	size_t page_size;
	unsigned maxblk;          /* blocks per page, also the number of lists */
	unsigned nwords;          /* words of the list bitmap */
	struct xcf_desc *desc;    /* the table; entry 0 is never used */
	uint32_t cap;             /* entries reserved */
	uint32_t gen0;            /* a new entry's generation: the pool's
				     gen_base (pool_internal.h) */
	/* protected by lock */
	uint32_t top;             /* entries [1, top) have been handed out */
	uint32_t unused;          /* chain of unused entries (via next) */
	uint32_t nunused;
	uint32_t *head;           /* [maxblk] list heads, 0 = empty */
	uint64_t *bitmap;         /* bit i set: list i is not empty */
	uint64_t *nfree;          /* [maxblk] blocks on list i */
	uint64_t *nused;          /* [maxblk] used blocks of i + 1 blocks */
	uint64_t objects;
	uint64_t spanning;        /* objects in two blocks */
	uint64_t slot_bytes;      /* bytes of the blocks objects occupy */
	uint64_t npages, pages_max;
	uint64_t live_desc;       /* descriptors of blocks (free or used) */
	uint64_t malloc_fail;
};

static inline struct xcf_pool *xcf_of(struct zm_pool *pool) { return pool->priv; }

static inline unsigned xcf_off(const struct xcf_desc *d) { return d->off_flags & XCF_OFF_MASK; }

static inline struct xcf_desc *xcf_desc(struct xcf_pool *x, uint32_t i) { return &x->desc[i]; }

/* Address of a block at offset off (in blocks) of page pfn. */
static inline char *xcf_addr(const struct xcf_pool *x, uint32_t pfn, unsigned off)
{
	return x->base + (size_t)pfn * x->page_size + ((size_t)off << XCF_BLOCK_SHIFT);
}

static inline struct xcf_hdr *xcf_hdr_at(const struct xcf_pool *x, uint32_t pfn, unsigned off)
{
	return (struct xcf_hdr *)xcf_addr(x, pfn, off);
}

static inline struct xcf_hdr *xcf_hdr(const struct xcf_pool *x, const struct xcf_desc *d)
{
	return xcf_hdr_at(x, d->pfn, xcf_off(d));
}

/* Bytes of data a block holds: all of it but its header. */
static inline size_t xcf_cap(const struct xcf_desc *d)
{
	return ((size_t)d->nblk << XCF_BLOCK_SHIFT) - XCF_HDR;
}

/* Blocks needed to hold bytes of data in one block. */
static inline unsigned xcf_blocks_for(size_t bytes)
{
	return (unsigned)((bytes + XCF_HDR + XCF_BLOCK - 1) >> XCF_BLOCK_SHIFT);
}

static inline zm_handle_t xcf_handle(uint32_t idx, uint32_t gen)
{
	return ((uint64_t)idx << XCF_H_IDX_SHIFT) | ((uint64_t)(gen & XCF_GEN_MASK) << 1) | 1;
}

/* ---- xcfmalloc/block.c (all under the lock) ---- */
int xcf_blocks_init(struct xcf_pool *x);
/* Releases the pool's pages and table; returns its generations' span
 * from gen0 (pool_internal.h: gen_span). */
uint64_t xcf_blocks_fini(struct xcf_pool *x);
/* A block for one piece of need blocks, detached from any list (see the
 * choice order there); 0 when a new page was needed and none came. */
uint32_t xcf_pick(struct xcf_pool *x, unsigned need, bool last);
/* Mark a detached block used, splitting off what lies beyond k blocks. */
void xcf_carve(struct xcf_pool *x, uint32_t i, unsigned k);
/* Mark a detached or used block used as a whole. */
void xcf_use(struct xcf_pool *x, uint32_t i);
/* Free a used block: merge with free neighbours in its page, reinsert. */
void xcf_free_block(struct xcf_pool *x, uint32_t i);
/* Give whole free pages beyond the reserve back to the pages layer. */
void xcf_trim(struct xcf_pool *x);

/* ---- xcfmalloc/access.c ---- */
/* The object's first descriptor, or NULL (message in debug) for a bad
 * handle.  Under the lock. */
struct xcf_desc *xcf_lookup(struct xcf_pool *x, zm_handle_t h, const char *op);
void *xcf_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode);
void xcf_unmap(struct zm_pool *pool, zm_handle_t h);
int xcf_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len);
int xcf_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len);
size_t xcf_obj_size(struct zm_pool *pool, zm_handle_t h);

/* ---- xcfmalloc/stats.c ---- */
void xcf_stats(struct zm_pool *pool, struct zm_pool_stats *st);
unsigned xcf_nr_classes(struct zm_pool *pool);
int xcf_class_stats(struct zm_pool *pool, unsigned idx, struct zm_pool_class_stats *cs);
int xcf_check(struct zm_pool *pool);

/* For tests: where piece (0 or 1) of an object lies.  0, or -EINVAL for a
 * bad handle or a piece the object does not have. */
int xcf_piece(struct zm_pool *pool, zm_handle_t h, unsigned piece, uint32_t *pfn,
	      unsigned *off, unsigned *nblk, uint32_t *desc);

#endif
