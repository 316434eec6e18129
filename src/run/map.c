/*
 * mmap and its kind over region memory.
 *
 * Anonymous private mappings of at least ZMEM_RUN_MMAP_MIN bytes (the
 * arenas of Python, V8's heap, jemalloc's extents), readable and
 * writable or reserved (PROT_NONE), are placed in the region, from its
 * address-space allocator (space.h); the rest goes to the kernel.  The
 * calls on region memory are kept consistent with the region's store:
 *   munmap           drop (discard, then no access: a use after unmap
 *                    still faults) and give the range back;
 *   madvise          DONTNEED, FREE, REMOVE: discard (the pages read as
 *                    zeros after, as the kernel's do); any other advice: 0;
 *   mprotect         the region's protect (content kept);
 *   mmap(MAP_FIXED)  over region memory (mimalloc's decommit, V8's
 *                    commit): drop and protect as asked;
 *   mremap           grow in place when the space after is free, else
 *                    move (copy, the old range dropped); shrink in place.
 * Any page-aligned part of earlier mappings may be given, several at once.
 * The parts of a call outside the region go to the kernel, and so does
 * every call made with zmi_in_lib raised: libzmem's own (the region's
 * discard and protect call madvise and mprotect, and find this file's).
 *
 * Invariant: free space reads as zeros (a range is dropped before it is
 * given back), so a new mapping needs only its protection set.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "run/preload.h"

#define EXPORT __attribute__((visibility("default")))

#define RW (PROT_READ | PROT_WRITE)
/* Flags that keep a mapping out of the region (besides MAP_SHARED):
 * a stack (grows down, or must stay as the kernel maps stacks), huge
 * pages, or placed low for 32-bit code. */
#ifdef MAP_32BIT /* x86-64 only */
#define NOT_REGION_FLAGS (MAP_STACK | MAP_GROWSDOWN | MAP_HUGETLB | MAP_32BIT)
#else
#define NOT_REGION_FLAGS (MAP_STACK | MAP_GROWSDOWN | MAP_HUGETLB)
#endif

void *run_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int run_sys_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

int run_sys_mprotect(void *addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

static size_t page_up(size_t len)
{
	return (len + run.page - 1) & ~(run.page - 1);
}

/* [lo, hi) clipped to the region; false if they do not meet. */
static bool clip(uintptr_t lo, uintptr_t hi, uintptr_t *a, uintptr_t *b)
{
	uintptr_t end = run.base + run.size;

	if (run.size == 0 || hi <= run.base || lo >= end)
		return false;
	*a = lo > run.base ? lo : run.base;
	*b = hi < end ? hi : end;
	return true;
}

/* Give [lo, hi) back to the space but for mimalloc's chunks (a mapping
 * never lies in one; a program's stray munmap there only drops pages).
 * Returns the bytes that were in use.  Caller holds run.lock. */
static size_t release(uintptr_t lo, uintptr_t hi)
{
	size_t n;

	for (unsigned i = 0; i < run.nchunks; i++) {
		const struct run_extent *c = &run.chunk[i];

		if (c->lo < hi && lo < c->hi)
			return (lo < c->lo ? release(lo, c->lo) : 0) +
			       (c->hi < hi ? release(c->hi, hi) : 0);
	}
	n = run_space_free(&run.space, lo, hi - lo);
	return n == (size_t)-1 ? 0 : n;
}

static void unmap_region(uintptr_t lo, uintptr_t hi)
{
	size_t n;

	run_drop(lo, hi - lo, PROT_NONE);
	run_lock();
	n = release(lo, hi);
	run_unlock();
	__atomic_fetch_sub(&run.mmap_bytes, n, __ATOMIC_RELAXED);
}

static void *map_region(size_t len, int prot)
{
	uintptr_t a;

	run_lock();
	a = run_space_alloc(&run.space, len, run.page);
	run_unlock();
	if (!a)
		return NULL;
	if (run_protect(a, len, prot)) {
		unmap_region(a, a + len);
		return NULL;
	}
	__atomic_fetch_add(&run.mmap_bytes, len, __ATOMIC_RELAXED);
	return (void *)a;
}

/* Whether [lo, hi) meets one of mimalloc's chunks.  Caller holds
 * run.lock. */
static bool in_chunk(uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < run.nchunks; i++)
		if (run.chunk[i].lo < hi && lo < run.chunk[i].hi)
			return true;
	return false;
}

/* mmap(MAP_FIXED) over region memory: the range is the program's from
 * now on whatever it was, its content dropped.  In mimalloc's chunks (its
 * decommit) the range stays the chunk's. */
static void *map_fixed(uintptr_t lo, size_t len, int prot)
{
	size_t was;

	if (run_drop(lo, len, prot)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	run_lock();
	if (!in_chunk(lo, lo + len)) {
		was = run_space_free(&run.space, lo, len);
		if (was != (size_t)-1 && run_space_alloc_at(&run.space, lo, len))
			__atomic_fetch_add(&run.mmap_bytes, len - was, __ATOMIC_RELAXED);
	}
	run_unlock();
	return (void *)lo;
}

/* ---- foreign ranges (preload.h) ---- */

/* The first foreign range meeting [lo, hi), or NULL.  Caller holds
 * run.lock, or reads a count of 0 without it. */
static const struct run_extent *foreign_meeting(uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < run.nforeign; i++)
		if (run.foreign[i].lo < hi && lo < run.foreign[i].hi)
			return &run.foreign[i];
	return NULL;
}

static bool any_foreign(void)
{
	return __atomic_load_n(&run.nforeign, __ATOMIC_ACQUIRE) != 0;
}

/* Whether [lo, hi) meets a foreign range (takes run.lock). */
static bool foreign_in(uintptr_t lo, uintptr_t hi)
{
	bool yes;

	if (!any_foreign())
		return false;
	run_lock();
	yes = foreign_meeting(lo, hi) != NULL;
	run_unlock();
	return yes;
}

/* The part of [lo, hi) from lo that is all foreign or all not: its end,
 * and whether foreign. */
static uintptr_t piece(uintptr_t lo, uintptr_t hi, bool *foreign)
{
	uintptr_t end = hi;

	run_lock();
	*foreign = false;
	for (unsigned i = 0; i < run.nforeign; i++) {
		const struct run_extent *f = &run.foreign[i];
		if (f->lo <= lo && lo < f->hi) {
			*foreign = true;
			end = f->hi < hi ? f->hi : hi;
			break;
		}
		if (f->lo > lo && f->lo < end)
			end = f->lo;
	}
	run_unlock();
	return end;
}

/* mmap(MAP_FIXED) of what the region cannot hold (a file, shared memory,
 * executable memory) over region memory. */
static void *map_foreign(uintptr_t lo, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	run_lock();
	if (run.nforeign == RUN_FOREIGN_MAX && !foreign_meeting(lo, lo + len)) {
		run_unlock();
		errno = ENOMEM;
		return MAP_FAILED;
	}
	run_unlock();
	/* the region's pages there dropped first: none stays resident
	 * where the region's userfaultfd no longer reaches */
	if (run_drop(lo, len, PROT_NONE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	p = run_sys_mmap((void *)lo, len, prot, flags, fd, off);
	if (p == MAP_FAILED)
		return p;
	run_lock();
	if (!foreign_meeting(lo, lo + len) || run.nforeign < RUN_FOREIGN_MAX) {
		/* merged with one it meets, else a new entry */
		struct run_extent *f = (struct run_extent *)foreign_meeting(lo, lo + len);
		if (f) {
			f->lo = f->lo < lo ? f->lo : lo;
			f->hi = f->hi > lo + len ? f->hi : lo + len;
		} else {
			run.foreign[run.nforeign] = (struct run_extent){ lo, lo + len };
			__atomic_store_n(&run.nforeign, run.nforeign + 1, __ATOMIC_RELEASE);
		}
	}
	/* kept out of the space: never handed out again */
	if (run_space_alloc_at(&run.space, lo, len))
		__atomic_fetch_add(&run.mmap_bytes, len, __ATOMIC_RELAXED);
	run_unlock();
	return p;
}

/* munmap of a foreign piece: unmapped, then reserved again so that the
 * kernel places nothing there (the region's range stays ours). */
static int unmap_foreign(uintptr_t lo, uintptr_t hi)
{
	void *p = run_sys_mmap((void *)lo, hi - lo, PROT_NONE,
			       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? -1 : 0;
}

static bool wanted(size_t len, int prot, int flags, int fd)
{
	return run_active() && len >= run.cfg.mmap_min && (flags & MAP_ANONYMOUS) &&
	       (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & NOT_REGION_FLAGS) && fd == -1 &&
	       (prot == RW || prot == PROT_NONE);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	uintptr_t lo = (uintptr_t)addr, a, b;
	void *p;

	if (zmi_in_lib || __atomic_load_n(&run.state, __ATOMIC_ACQUIRE) != RUN_READY)
		return run_sys_mmap(addr, len, prot, flags, fd, off);
	if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && len &&
	    clip(lo, lo + page_up(len), &a, &b)) {
		/* a fixed mapping over region memory: only what the region
		 * can be (anonymous, private), and only inside it */
		if ((flags & MAP_FIXED_NOREPLACE) && !(flags & MAP_FIXED)) {
			errno = EEXIST;
			return MAP_FAILED;
		}
		if (lo % run.page || a != lo || b != lo + page_up(len)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		if (!(flags & MAP_ANONYMOUS) || (flags & MAP_TYPE) != MAP_PRIVATE ||
		    (flags & NOT_REGION_FLAGS) || fd != -1 || (prot & PROT_EXEC) ||
		    foreign_in(lo, lo + page_up(len)))
			return map_foreign(lo, page_up(len), prot, flags, fd, off);
		return map_fixed(lo, page_up(len), prot);
	}
	if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && wanted(len, prot, flags, fd)) {
		p = map_region(page_up(len), prot);
		if (p)
			return p;
		__atomic_fetch_add(&run.outside_bytes, len, __ATOMIC_RELAXED);
	}
	return run_sys_mmap(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr, hi, a, b;

	if (zmi_in_lib || !run.size || !len || !clip(lo, lo + len, &a, &b))
		return run_sys_munmap(addr, len);
	if (lo % run.page || lo + len < lo) {
		errno = EINVAL;
		return -1;
	}
	hi = lo + page_up(len);
	b = b > hi ? b : page_up(b - run.base) + run.base;
	if (a > lo && run_sys_munmap(addr, a - lo))
		return -1;
	if (hi > b && run_sys_munmap((void *)b, hi - b))
		return -1;
	while (any_foreign() && a < b) {
		bool f;
		uintptr_t e = piece(a, b, &f);
		if (f ? unmap_foreign(a, e) : (unmap_region(a, e), 0))
			return -1;
		a = e;
	}
	if (a < b)
		unmap_region(a, b);
	return 0;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	uintptr_t lo = (uintptr_t)addr, a, b;

	if (zmi_in_lib || !run.size || !len || !clip(lo, lo + page_up(len), &a, &b))
		return (int)syscall(SYS_madvise, addr, len, advice);
	if (lo % run.page) {
		errno = EINVAL;
		return -1;
	}
	if ((a > lo && syscall(SYS_madvise, addr, a - lo, advice)) ||
	    (lo + page_up(len) > b && syscall(SYS_madvise, (void *)b, lo + page_up(len) - b, advice)))
		return -1;
	while (a < b) {
		bool f = false;
		uintptr_t e = any_foreign() ? piece(a, b, &f) : b;
		int rc = 0;

		if (f)
			rc = syscall(SYS_madvise, (void *)a, e - a, advice) ? -errno : 0;
		else if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE)
			rc = run_discard(a, e - a);
		if (rc) {
			errno = -rc;
			return -1;
		}
		a = e;
	}
	return 0;
}

EXPORT int posix_madvise(void *addr, size_t len, int advice)
{
	/* POSIX_MADV_DONTNEED is advice only in glibc: nothing dropped */
	if (advice == POSIX_MADV_DONTNEED)
		return 0;
	return madvise(addr, len, advice) ? errno : 0;
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	uintptr_t lo = (uintptr_t)addr, a, b;
	int rc;

	if (zmi_in_lib || !run.size || !len || !clip(lo, lo + page_up(len), &a, &b))
		return run_sys_mprotect(addr, len, prot);
	if (lo % run.page) {
		errno = EINVAL;
		return -1;
	}
	if ((a > lo && run_sys_mprotect(addr, a - lo, prot)) ||
	    (lo + page_up(len) > b && run_sys_mprotect((void *)b, lo + page_up(len) - b, prot)))
		return -1;
	while (a < b) {
		bool f = false;
		uintptr_t e = any_foreign() ? piece(a, b, &f) : b;

		rc = f ? (run_sys_mprotect((void *)a, e - a, prot) ? -errno : 0)
		       : run_protect(a, e - a, prot);
		if (rc) {
			errno = -rc;
			return -1;
		}
		a = e;
	}
	return 0;
}

/* mremap of region memory: shrink in place; grow in place when the
 * space after is free; else move (MREMAP_MAYMOVE): copy and drop. */
static void *remap_region(uintptr_t old, size_t oldlen, size_t newlen, int flags)
{
	uintptr_t a;
	bool in_place;

	if (newlen <= oldlen) {
		if (newlen < oldlen)
			unmap_region(old + newlen, old + oldlen);
		return (void *)old;
	}
	run_lock();
	in_place = run_space_alloc_at(&run.space, old + oldlen, newlen - oldlen);
	run_unlock();
	if (in_place) {
		if (run_protect(old + oldlen, newlen - oldlen, RW)) {
			unmap_region(old + oldlen, old + newlen);
			errno = ENOMEM;
			return MAP_FAILED;
		}
		__atomic_fetch_add(&run.mmap_bytes, newlen - oldlen, __ATOMIC_RELAXED);
		return (void *)old;
	}
	if (!(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	a = (uintptr_t)map_region(newlen, RW);
	if (!a) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	memcpy((void *)a, (void *)old, oldlen);
	unmap_region(old, old + oldlen);
	return (void *)a;
}

EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	uintptr_t lo = (uintptr_t)old, a, b;
	void *to = NULL;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (zmi_in_lib || !run.size || !clip(lo, lo + page_up(oldlen ? oldlen : 1), &a, &b)) {
		/* the kernel's, but never into the region */
		if (to && clip((uintptr_t)to, (uintptr_t)to + page_up(newlen), &a, &b)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, to);
	}
	if (foreign_in(lo, lo + page_up(oldlen))) {
		/* a foreign mapping moves or grows only where it is */
		if (flags & (MREMAP_MAYMOVE | MREMAP_FIXED)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, to);
	}
	if (lo % run.page || !newlen || !oldlen || a != lo || b < lo + page_up(oldlen) ||
	    (flags & ~MREMAP_MAYMOVE)) {
		/* MREMAP_FIXED and MREMAP_DONTUNMAP of region memory are not
		 * supported; nor is a range that leaves the region */
		errno = EINVAL;
		return MAP_FAILED;
	}
	return remap_region(lo, page_up(oldlen), page_up(newlen), flags);
}
