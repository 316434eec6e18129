/*
 * The address-space allocator (space.h): free extents, first fit,
 * merged when they meet.
 */
#include "run/space.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The extent array comes from the kernel directly: the preload's own mmap
 * would route it back here. */
static void *raw_map(size_t len)
{
	long p = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
	return p < 0 && p > -4096 ? NULL : (void *)p;
}

static int grow(struct run_space *s, size_t need)
{
	size_t cap = s->cap ? s->cap * 2 : 4096 / sizeof(*s->ext);
	struct run_extent *e;

	if (need <= s->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	e = raw_map(cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	if (s->ext) {
		memcpy(e, s->ext, s->n * sizeof(*e));
		syscall(SYS_munmap, s->ext, s->cap * sizeof(*e));
	}
	s->ext = e;
	s->cap = cap;
	return 0;
}

int run_space_init(struct run_space *s, uintptr_t base, size_t size, size_t page)
{
	memset(s, 0, sizeof(*s));
	s->base = base;
	s->end = base + size;
	s->page = page;
	if (grow(s, 1))
		return -ENOMEM;
	s->ext[0] = (struct run_extent){ base, base + size };
	s->n = 1;
	s->free_bytes = size;
	return 0;
}

void run_space_fini(struct run_space *s)
{
	if (s->ext)
		syscall(SYS_munmap, s->ext, s->cap * sizeof(*s->ext));
	memset(s, 0, sizeof(*s));
}

/* The first extent whose hi is at or above addr (n if none). */
static size_t first_reaching(const struct run_space *s, uintptr_t addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->ext[mid].hi < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Carve [a, a + len) out of extent i, which holds it. */
static bool carve(struct run_space *s, size_t i, uintptr_t a, size_t len)
{
	struct run_extent e = s->ext[i];
	bool left = a > e.lo, right = a + len < e.hi;

	if (left && right) {
		if (grow(s, s->n + 1))
			return false;
		memmove(&s->ext[i + 1], &s->ext[i], (s->n - i) * sizeof(e));
		s->n++;
		s->ext[i].hi = a;
		s->ext[i + 1].lo = a + len;
	} else if (left) {
		s->ext[i].hi = a;
	} else if (right) {
		s->ext[i].lo = a + len;
	} else {
		memmove(&s->ext[i], &s->ext[i + 1], (s->n - i - 1) * sizeof(e));
		s->n--;
	}
	s->free_bytes -= len;
	return true;
}

uintptr_t run_space_alloc(struct run_space *s, size_t len, size_t align)
{
	if (!len || len % s->page || align < s->page || (align & (align - 1)))
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		uintptr_t a = (s->ext[i].lo + align - 1) & ~(uintptr_t)(align - 1);

		if (a >= s->ext[i].lo && a < s->ext[i].hi && s->ext[i].hi - a >= len)
			return carve(s, i, a, len) ? a : 0;
	}
	return 0;
}

bool run_space_alloc_at(struct run_space *s, uintptr_t addr, size_t len)
{
	size_t i;

	if (!len || len % s->page || addr % s->page || addr < s->base ||
	    addr > s->end || s->end - addr < len)
		return false;
	i = first_reaching(s, addr + 1);
	if (i == s->n || s->ext[i].lo > addr || s->ext[i].hi - addr < len)
		return false;
	return carve(s, i, addr, len);
}

size_t run_space_free(struct run_space *s, uintptr_t addr, size_t len)
{
	uintptr_t lo = addr, hi = addr + len;
	size_t i, j, overlap = 0;

	if (hi < lo) /* wrapped: to the end */
		hi = UINTPTR_MAX;
	lo = lo < s->base ? s->base : lo;
	hi = hi > s->end ? s->end : hi;
	if (lo >= hi)
		return 0;
	len = hi - lo;
	/* extents i..j-1 overlap or touch [lo, hi): they merge into one */
	i = first_reaching(s, lo);
	for (j = i; j < s->n && s->ext[j].lo <= hi; j++) {
		uintptr_t a = s->ext[j].lo > lo ? s->ext[j].lo : lo;
		uintptr_t b = s->ext[j].hi < hi ? s->ext[j].hi : hi;

		if (b > a)
			overlap += b - a;
	}
	if (j == i) {
		if (grow(s, s->n + 1))
			return (size_t)-1;
		memmove(&s->ext[i + 1], &s->ext[i], (s->n - i) * sizeof(*s->ext));
		s->n++;
		s->ext[i] = (struct run_extent){ lo, hi };
	} else {
		if (s->ext[i].lo < lo)
			lo = s->ext[i].lo;
		if (s->ext[j - 1].hi > hi)
			hi = s->ext[j - 1].hi;
		s->ext[i] = (struct run_extent){ lo, hi };
		memmove(&s->ext[i + 1], &s->ext[j], (s->n - j) * sizeof(*s->ext));
		s->n -= j - i - 1;
	}
	s->free_bytes += len - overlap;
	return len - overlap;
}

int run_space_check(const struct run_space *s)
{
	size_t sum = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct run_extent *e = &s->ext[i];

		if (e->lo >= e->hi || e->lo < s->base || e->hi > s->end ||
		    e->lo % s->page || e->hi % s->page ||
		    (i && s->ext[i - 1].hi >= e->lo))
			return -EUCLEAN;
		sum += e->hi - e->lo;
	}
	return sum == s->free_bytes ? 0 : -EUCLEAN;
}
