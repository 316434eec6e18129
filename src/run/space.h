/*
 * The address-space allocator of the preload library: which parts of the
 * process's one region are free.
 *
 * The region is one big range of address space; both users of it take
 * their memory here: the allocator of malloc (chunks handed to mimalloc
 * as arenas) and the anonymous mmap calls the preload places in the
 * region.  Programs give back any page-granular part of what they got
 * (munmap of the head and tail of an over-sized reservation, of one page
 * in the middle, of several earlier mappings at once), so a free range
 * may be any sub-range, and freeing a range that is partly free already
 * frees only the rest (munmap of memory not mapped succeeds).
 *
 * How: a sorted array of free extents [lo, hi), never overlapping or
 * touching (they are merged when they meet), searched first fit.  The
 * array is mapped straight from the kernel, never from malloc, so that
 * the allocator works while malloc itself is being served from it.
 * Not thread-safe: the caller holds its lock.
 */
#ifndef ZM_RUN_SPACE_H
#define ZM_RUN_SPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct run_extent {
	uintptr_t lo, hi;
};

struct run_space {
	uintptr_t base, end;     /* the range managed */
	size_t page;             /* granule: every address and length */
	size_t free_bytes;
	struct run_extent *ext;  /* free extents, sorted by lo */
	size_t n, cap;           /* extents used, and room for */
};

/* Manage [base, base + size), all free.  0 or -ENOMEM. */
int run_space_init(struct run_space *s, uintptr_t base, size_t size, size_t page);
/* Unmap the extent array (the range itself is the caller's). */
void run_space_fini(struct run_space *s);
/* Take len bytes aligned to align (a power of two, at least the page),
 * the lowest that fit.  The address, or 0 when no free extent fits. */
uintptr_t run_space_alloc(struct run_space *s, size_t len, size_t align);
/* Take exactly [addr, addr + len) if all of it is free (mremap growing in
 * place).  true if taken. */
bool run_space_alloc_at(struct run_space *s, uintptr_t addr, size_t len);
/* Give [addr, addr + len) back, clipped to the managed range; parts of it
 * free already stay free.  Returns the bytes that were in use, or
 * (size_t)-1 when the extent array could not grow (nothing changed). */
size_t run_space_free(struct run_space *s, uintptr_t addr, size_t len);
/* Whole-structure check (sorted, disjoint, apart, inside, free_bytes
 * right): 0, or -EUCLEAN. */
int run_space_check(const struct run_space *s);

#endif
