/*
 * The "malloc" backend: every object one malloc() block.  The baseline a
 * userspace programmer would reach for, kept honest:
 *
 *   - each block carries an 8-byte header (magic + slot size) so that
 *     reads and writes can be bounds-checked and bad handles refused; it
 *     is counted as metadata;
 *   - the object's slot (zm_pool_obj_size, slot_bytes) is all glibc gave
 *     beyond that header (malloc_usable_size(), its rounding included;
 *     at most a page): the object may use every byte of it, as it may of
 *     the other backends' slots;
 *   - pool_bytes is what glibc really spends on each block: its usable size
 *     plus glibc's own 8-byte chunk header (malloc_usable_size() + 8),
 *     minus our header.  Free chunks that glibc keeps but cannot return are
 *     not visible here; the churn benchmark measures them from the process
 *     resident size instead.
 *
 * Handles are not addresses: they index a table of the pool's, whose
 * entries hold the block's address and a generation, as the other
 * backends' handles do, so a garbage, stale or double-freed handle is
 * refused without touching memory it does not name, even after glibc
 * hands the block out again.  An entry is one 64-bit word, changed with
 * compare-and-swap so that two racing frees of one handle free it once:
 *
 *   live   address / 16 << 21 | generation:20   (glibc's blocks are
 *                                                16-aligned, userspace
 *                                                addresses below 2^47)
 *   free   next free index << 21 | 1 << 20 | generation:20
 *   handle index:28 << 21 | generation:20 << 1 | 1
 *
 * A never-used entry (the word 0) starts at the pool's gen_base, and
 * destroy, which walks the entries anyway, says how far they went from
 * it (pool_internal.h).
 *
 * Free entries are kept on MB_SHARDS lists under small locks (a thread's
 * number picks its list; a free pushes onto the freeing thread's list);
 * an empty list takes the next never-used entry.  The table is reserved
 * address space (MB_MAX_OBJECTS entries), touched only as far as used,
 * and counted in meta_bytes.
 *
 * The counters are kept per thread group (MB_SHARDS lines, a thread's
 * number picks one) and summed by stats, so that two threads never add
 * to one shared line at every malloc and free (docs/results/2026-12-02-code-choices.md).  The peak is
 * sampled: every MB_PEAK_EVERY allocations of a thread it sums the lines.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/lock.h"
#include "base/os.h"
#include "pool/pool_internal.h"

#define MB_MAGIC 0x7a6d4d42u /* "zmMB" */
#define GLIBC_CHUNK_HDR 8
#define MB_MAX_OBJECTS (1u << 28)  /* table entries: 2 GiB of address space */
#define MB_GEN_MASK 0xFFFFFull      /* a slot freed 2^20 times before a
				       stale handle to it could match */
#define MB_FREE_BIT (1ull << 20)    /* in a free entry */
#define MB_ADDR_SHIFT 21            /* address / 16 above the generation */
#define MB_NIL 0u                   /* entry 0 is never used: no handle is 0 */
_Static_assert(((uint64_t)MB_MAX_OBJECTS << 21) <= ZMI_HANDLE_LIMIT, "handles below the pool id");

struct mb_hdr {
	uint32_t magic;
	uint32_t size;   /* the slot: usable bytes after the header */
};

#define MB_SHARDS 16
#define MB_PEAK_EVERY 32

struct mb_pool {
	struct mb_shard {          /* atomic; a thread's may go negative */
		int64_t objects, chunk_bytes, slot_bytes;
	} __attribute__((aligned(64))) shard[MB_SHARDS];
	uint64_t fail;             /* atomic */
	uint64_t peak_bytes;       /* atomic: sampled (see above) */
	uint64_t *ent;             /* the table; immutable pointer */
	uint32_t top;              /* atomic: entries ever used, 1.. */
	uint64_t gen0;             /* immutable: a new entry's generation */
	struct mb_list {
		zmi_lock_t lock;
		uint32_t head;     /* lock: first free entry, or MB_NIL */
	} __attribute__((aligned(64))) list[MB_SHARDS];
};

static __thread unsigned mb_allocs;

static inline struct mb_shard *my_shard(struct mb_pool *m)
{
	return &m->shard[zmi_pool_thread_number() % MB_SHARDS];
}

static int64_t sum(struct mb_pool *m, size_t off)
{
	int64_t n = 0;

	for (unsigned i = 0; i < MB_SHARDS; i++)
		n += __atomic_load_n((int64_t *)((char *)&m->shard[i] + off), __ATOMIC_RELAXED);
	return n;
}

static inline struct mb_pool *mb(struct zm_pool *pool) { return pool->priv; }

static inline uint32_t h_idx(zm_handle_t h) { return (uint32_t)(h >> 21); }
static inline struct mb_hdr *ent_addr(uint64_t e)
{
	return (struct mb_hdr *)(uintptr_t)(e >> MB_ADDR_SHIFT << 4);
}
static inline uint64_t h_gen(zm_handle_t h) { return (h >> 1) & MB_GEN_MASK; }
static inline bool ent_live(uint64_t e) { return e && !(e & MB_FREE_BIT); }

/* The entry word of a live handle h (the block's address in it), or 0. */
static inline uint64_t entry_of(struct mb_pool *m, zm_handle_t h)
{
	uint32_t i = h_idx(h);
	uint64_t e;

	if (zmi_unlikely(!(h & 1) || i == MB_NIL ||
			 i >= __atomic_load_n(&m->top, __ATOMIC_ACQUIRE)))
		return 0;
	e = __atomic_load_n(&m->ent[i], __ATOMIC_ACQUIRE);
	if (zmi_unlikely(!ent_live(e) || (e & MB_GEN_MASK) != h_gen(h)))
		return 0;
	return e;
}

static struct mb_hdr *lookup(struct zm_pool *pool, zm_handle_t h, const char *op)
{
	uint64_t e = entry_of(pool->priv, h);

	if (zmi_unlikely(!e)) {
		zmi_bad_input("malloc pool: %s of bad handle %#llx (stale, freed or garbage)", op,
			      (unsigned long long)h);
		return NULL;
	}
	return ent_addr(e);
}

/* A free entry for a new object, or MB_NIL when the table is full. */
static uint32_t entry_take(struct mb_pool *m)
{
	unsigned home = zmi_pool_thread_number() % MB_SHARDS;
	uint32_t i = MB_NIL;

	/* this thread's list first, then the others': an entry freed by
	 * another thread (one allocates, another frees) must be found again,
	 * or the table grows without bound */
	for (unsigned k = 0; k < MB_SHARDS && i == MB_NIL; k++) {
		struct mb_list *l = &m->list[(home + k) % MB_SHARDS];

		if (k && __atomic_load_n(&l->head, __ATOMIC_RELAXED) == MB_NIL)
			continue;
		zmi_lock(&l->lock);
		i = l->head;
		if (i != MB_NIL)   /* atomic: peeked at without the lock above */
			__atomic_store_n(&l->head, (uint32_t)(m->ent[i] >> MB_ADDR_SHIFT),
					 __ATOMIC_RELAXED);
		zmi_unlock(&l->lock);
	}
	if (i != MB_NIL)
		return i;
	i = __atomic_load_n(&m->top, __ATOMIC_RELAXED);
	do {
		if (i >= MB_MAX_OBJECTS)
			return MB_NIL;
	} while (!__atomic_compare_exchange_n(&m->top, &i, i + 1, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return i;
}

/* Put entry i, whose word is now free, on this thread's list. */
static void entry_give(struct mb_pool *m, uint32_t i, uint64_t gen)
{
	struct mb_list *l = &m->list[zmi_pool_thread_number() % MB_SHARDS];

	zmi_lock(&l->lock);
	__atomic_store_n(&m->ent[i], (uint64_t)l->head << MB_ADDR_SHIFT | MB_FREE_BIT | gen,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&l->head, i, __ATOMIC_RELAXED);
	zmi_unlock(&l->lock);
}

static int mb_create(struct zm_pool *pool, const struct zm_pool_config *cfg)
{
	struct mb_pool *m = aligned_alloc(64, sizeof(struct mb_pool));

	if (!m)
		return -ENOMEM;
	memset(m, 0, sizeof(*m));
	m->ent = zmi_os_reserve((size_t)MB_MAX_OBJECTS * sizeof(uint64_t), zmi_os_page_size());
	if (!m->ent) {
		free(m);
		return -ENOMEM;
	}
	m->top = 1;
	m->gen0 = pool->gen_base & MB_GEN_MASK;
	for (unsigned i = 0; i < MB_SHARDS; i++)
		zmi_lock_init(&m->list[i].lock);
	pool->priv = m;
	return 0;
}

static void mb_destroy(struct zm_pool *pool)
{
	struct mb_pool *m = mb(pool);
	uint32_t top = __atomic_load_n(&m->top, __ATOMIC_ACQUIRE);
	uint64_t span = 0;

	/* objects still live go with the pool; every entry's generation
	 * (the next its handle gets) counts for the span */
	for (uint32_t i = 1; i < top; i++) {
		uint64_t e = m->ent[i], d = ((e & MB_GEN_MASK) - m->gen0) & MB_GEN_MASK;

		if (ent_live(e))
			free(ent_addr(e));
		if (e && d >= span)
			span = d + 1;
	}
	pool->gen_span = span;
	zmi_os_release(m->ent, (size_t)MB_MAX_OBJECTS * sizeof(uint64_t));
	free(m);
}

static zm_handle_t mb_malloc(struct zm_pool *pool, size_t size)
{
	struct mb_hdr *hd = malloc(sizeof(*hd) + size);
	struct mb_pool *m = mb(pool);
	struct mb_shard *sh;
	size_t usable;
	uint64_t gen;
	uint32_t i;

	/* an address the entry cannot hold is refused like a failed malloc */
	i = hd && ((uintptr_t)hd & 15) == 0 && (uint64_t)(uintptr_t)hd < (1ull << 47)
		    ? entry_take(m) : MB_NIL;
	if (i == MB_NIL) {
		free(hd);
		__atomic_fetch_add(&m->fail, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return 0;
	}
	gen = m->ent[i] ? m->ent[i] & MB_GEN_MASK : m->gen0;   /* a free entry is never 0 */
	__atomic_store_n(&m->ent[i], (uint64_t)(uintptr_t)hd >> 4 << MB_ADDR_SHIFT | gen,
			 __ATOMIC_RELEASE);
	usable = malloc_usable_size(hd);
	hd->magic = MB_MAGIC;
	/* the slot: what glibc gave beyond the header, rounding included,
	 * up to a page (the largest object) */
	hd->size = (uint32_t)(usable - sizeof(*hd) < pool->page_size ? usable - sizeof(*hd)
								   : pool->page_size);
	sh = my_shard(m);
	__atomic_fetch_add(&sh->objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->slot_bytes, (int64_t)hd->size, __ATOMIC_RELAXED);
	__atomic_fetch_add(&sh->chunk_bytes, (int64_t)(usable + GLIBC_CHUNK_HDR),
			   __ATOMIC_RELAXED);
	if (zmi_unlikely(++mb_allocs % MB_PEAK_EVERY == 0)) {
		uint64_t bytes = (uint64_t)sum(m, offsetof(struct mb_shard, chunk_bytes));
		uint64_t peak = __atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED);

		while (bytes > peak &&
		       !__atomic_compare_exchange_n(&m->peak_bytes, &peak, bytes, true,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	return (zm_handle_t)i << 21 | gen << 1 | 1;
}

static int mb_free(struct zm_pool *pool, zm_handle_t h)
{
	struct mb_pool *m = mb(pool);
	uint64_t e = entry_of(m, h), gen = (e + 1) & MB_GEN_MASK;
	struct mb_hdr *hd = ent_addr(e);
	struct mb_shard *sh;
	size_t usable;

	/* the entry leaves "live" once, whoever else frees h at the same time */
	if (zmi_unlikely(!e || !__atomic_compare_exchange_n(&m->ent[h_idx(h)], &e,
							    MB_FREE_BIT | gen, false,
							    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))) {
		zmi_bad_input("malloc pool: free of bad handle %#llx (stale, freed or garbage)",
			      (unsigned long long)h);
		return -EINVAL;
	}
	ZM_ASSERT(hd->magic == MB_MAGIC);
	entry_give(m, h_idx(h), gen);
	usable = malloc_usable_size(hd);
	sh = my_shard(mb(pool));
	__atomic_fetch_sub(&sh->objects, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&sh->slot_bytes, (int64_t)hd->size, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&sh->chunk_bytes, (int64_t)(usable + GLIBC_CHUNK_HDR),
			   __ATOMIC_RELAXED);
	free(hd);
	return 0;
}

static void *mb_map(struct zm_pool *pool, zm_handle_t h, enum zm_map_mode mode)
{
	struct mb_hdr *hd = lookup(pool, h, "map");

	if (!hd) {
		errno = EINVAL;
		return NULL;
	}
	return zmi_pool_map_in_place(pool, h, hd + 1);
}

static void mb_unmap(struct zm_pool *pool, zm_handle_t h)
{
	zmi_pool_unmap_slot(pool, h);
}

static int mb_read(struct zm_pool *pool, zm_handle_t h, void *buf, size_t len)
{
	struct mb_hdr *hd = lookup(pool, h, "read");

	if (!hd || len > hd->size)
		return -EINVAL;
	memcpy(buf, hd + 1, len);
	return 0;
}

static int mb_write(struct zm_pool *pool, zm_handle_t h, const void *buf, size_t len)
{
	struct mb_hdr *hd = lookup(pool, h, "write");

	if (!hd || len > hd->size)
		return -EINVAL;
	memcpy(hd + 1, buf, len);
	return 0;
}

static size_t mb_obj_size(struct zm_pool *pool, zm_handle_t h)
{
	struct mb_hdr *hd = lookup(pool, h, "size");

	return hd ? hd->size : 0;
}

static void mb_stats(struct zm_pool *pool, struct zm_pool_stats *st)
{
	struct mb_pool *m = mb(pool);
	uint64_t n = (uint64_t)sum(m, offsetof(struct mb_shard, objects));
	uint64_t chunks = (uint64_t)sum(m, offsetof(struct mb_shard, chunk_bytes));
	uint64_t peak = __atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED);

	if (chunks > peak)  /* the samples may have missed the top */
		__atomic_compare_exchange_n(&m->peak_bytes, &peak, chunks, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	st->objects = n;
	st->slot_bytes = (uint64_t)sum(m, offsetof(struct mb_shard, slot_bytes));
	st->record_bytes = n * sizeof(struct mb_hdr);
	st->handle_bytes = __atomic_load_n(&m->top, __ATOMIC_RELAXED) * sizeof(uint64_t);
	st->meta_bytes = st->record_bytes + st->handle_bytes + sizeof(*m);
	st->pool_bytes = chunks - n * sizeof(struct mb_hdr);
	st->pool_pages = (st->pool_bytes + pool->page_size - 1) / pool->page_size;
	st->pages_max = (__atomic_load_n(&m->peak_bytes, __ATOMIC_RELAXED) +
			 pool->page_size - 1) / pool->page_size;
	st->malloc_fail = __atomic_load_n(&m->fail, __ATOMIC_RELAXED);
}

const struct zmi_pool_ops zmi_pool_malloc_ops = {
	.name = "malloc",
	.uses_pages = false,
	.create = mb_create,
	.destroy = mb_destroy,
	.malloc = mb_malloc,
	.free = mb_free,
	.map = mb_map,
	.unmap = mb_unmap,
	.read = mb_read,
	.write = mb_write,
	.obj_size = mb_obj_size,
	.compact = NULL,
	.stats = mb_stats,
};
