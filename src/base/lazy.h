/*
 * A lazy array: a table indexed like a store's pages (or a pool's keys),
 * in reserved address space that costs memory only where written, with a
 * bitmap of its OS pages ever written and their count.
 *
 * Writers call zmi_lazy_mark(a, i) before writing element i (atomic, once
 * per OS page: a load when already marked); zmi_lazy_bytes() is the memory
 * the array costs; zmi_lazy_next() lets walks (discard, destroy, checkers)
 * skip the pages never written without paging them in.  Three tables use
 * it: the store's slots and same-filled words, the pool's key table.
 */
#ifndef ZM_BASE_LAZY_H
#define ZM_BASE_LAZY_H

#include <stddef.h>
#include <stdint.h>

struct zmi_lazy {
	void *base;             /* the elements; immutable */
	size_t bytes;           /* reserved for them; immutable */
	uint64_t *map;          /* atomic bits: OS pages written */
	size_t map_bytes;       /* immutable */
	unsigned page_shift;    /* log2 of the elements an OS page holds; immutable */
	uint64_t pages;         /* atomic: bits set in map */
};

/* Reserve n elements of elem bytes (a power of two, at most a page).
 * 0 or -ENOMEM (nothing reserved then). */
int zmi_lazy_init(struct zmi_lazy *a, uint64_t n, size_t elem);
/* Release; a zeroed struct (never initialised) is fine. */
void zmi_lazy_fini(struct zmi_lazy *a);
/* The first index in [i, end) on a written page, or end. */
uint64_t zmi_lazy_next(const struct zmi_lazy *a, uint64_t i, uint64_t end);

/* Mark the page of element i written (before writing it). */
static inline void zmi_lazy_mark(struct zmi_lazy *a, uint64_t i)
{
	uint64_t page = i >> a->page_shift, bit = 1ull << (page % 64);
	uint64_t *w = &a->map[page / 64];

	if (__builtin_expect(__atomic_load_n(w, __ATOMIC_RELAXED) & bit, 1))
		return;
	if (!(__atomic_fetch_or(w, bit, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_add(&a->pages, 1, __ATOMIC_RELAXED);
}

/* Memory the array costs: its written pages and its bitmap's. */
uint64_t zmi_lazy_bytes(const struct zmi_lazy *a);

#endif
