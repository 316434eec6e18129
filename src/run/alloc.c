/*
 * malloc & co over region memory: mimalloc (Debian's libmimalloc 2.0)
 * given chunks of the region as its arenas, with OS allocation turned off
 * (mi_option_limit_os_alloc), so that every block it hands out is region
 * memory.  When it runs out, a chunk big enough is added and the call
 * tried again; when the region is full, the system's allocator serves it
 * (counted in outside_bytes).
 *
 * mimalloc is loaded with dlopen(RTLD_LOCAL): the Debian library also
 * defines malloc, free and __libc_malloc, which must not be seen by the
 * program or by this file's own references to glibc's allocator.  Its
 * own calls to mmap, madvise and mprotect (decommitting and resetting
 * parts of its segments) still reach this library's (map.c).
 *
 * The system's allocator is glibc's: __libc_malloc and its kind, which
 * glibc exports for preloads such as this one.
 *
 * What the C library and the dynamic loader allocate for themselves
 * (locale data, stdio buffers, directory streams, thread-local storage of
 * libraries loaded later) goes to glibc's allocator too, told by the
 * caller's address: glibc's own code reads some of it where no fault may
 * be taken.  A thread starting reads the locale's tables
 * (__ctype_init); in the child of a fork the library's fault threads
 * start anew, and the first one to start would wait on a page of the
 * program's locale data that only it could bring back (seen: bash under
 * zmem run hung in a command substitution).  Small, and not the
 * program's data: nothing worth compressing is lost.
 */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mimalloc.h>

#include "run/preload.h"

#define EXPORT __attribute__((visibility("default")))

/* glibc's allocator */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* mimalloc's calls, found in the library loaded by run_alloc_setup */
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	size_t (*usable_size)(const void *);
	void *(*malloc_aligned)(size_t, size_t);
	void (*option_set)(mi_option_t, long);
	bool (*manage_os_memory)(void *, size_t, bool, bool, bool, int);
} mi;
/* glibc's malloc_usable_size (the program's finds this file's) */
static size_t (*sys_usable_size)(void *);

/* The number of chunks added so far: a thread that failed to allocate
 * before a chunk was added tries again instead of adding another. */
static unsigned chunk_gen;
/* Tries of an allocation after chunks were added for it. */
#define RUN_GROW_TRIES 3


void *run_sys_malloc(size_t n)
{
	return __libc_malloc(n);
}

void run_sys_free(void *p)
{
	__libc_free(p);
}

/* The executable code of libc and of the dynamic loader (found once, at
 * start): a caller there gets glibc's allocator. */
#define SYS_TEXT_MAX 8
static struct run_extent sys_text[SYS_TEXT_MAX];
static unsigned nsys_text;

static int note_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	const char *base = strrchr(name, '/');

	(void)size;
	(void)arg;
	base = base ? base + 1 : name;
	if (strncmp(base, "libc.so", 7) && strncmp(base, "ld-linux", 8) &&
	    strncmp(base, "ld64.so", 7))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && nsys_text < SYS_TEXT_MAX; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			sys_text[nsys_text++] = (struct run_extent){
				info->dlpi_addr + ph->p_vaddr, info->dlpi_addr + ph->p_vaddr + ph->p_memsz
			};
	}
	return 0;
}

static bool from_sys(const void *ret)
{
	uintptr_t a = (uintptr_t)ret;

	for (unsigned i = 0; i < nsys_text; i++)
		if (a - sys_text[i].lo < sys_text[i].hi - sys_text[i].lo)
			return true;
	return false;
}

void run_alloc_early(void)
{
	sys_usable_size = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	dl_iterate_phdr(note_text, NULL);
}

int run_alloc_setup(void)
{
	void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		run_say("libmimalloc.so.2 not found (package libmimalloc2.0): running uncompressed");
		return -ENOENT;
	}
#define SYM(f, name) (*(void **)&mi.f = dlsym(h, name))
	if (!SYM(malloc, "mi_malloc") || !SYM(calloc, "mi_calloc") ||
	    !SYM(realloc, "mi_realloc") || !SYM(free, "mi_free") ||
	    !SYM(usable_size, "mi_usable_size") || !SYM(malloc_aligned, "mi_malloc_aligned") ||
	    !SYM(option_set, "mi_option_set") ||
	    !SYM(manage_os_memory, "mi_manage_os_memory") || !sys_usable_size) {
		run_say("libmimalloc.so.2 lacks mi_manage_os_memory (mimalloc 2.0 or later "
			"needed): running uncompressed");
		return -ENOENT;
	}
#undef SYM
	mi.option_set(mi_option_limit_os_alloc, 1);
	mi.option_set(mi_option_show_errors, 0);
	return 0;
}

unsigned run_chunk_gen(void)
{
	return __atomic_load_n(&chunk_gen, __ATOMIC_ACQUIRE);
}

/* Give [lo, hi) back: dropped first (free space reads as zeros). */
static void chunk_undo(uintptr_t lo, size_t len)
{
	run_drop(lo, len, PROT_NONE);
	run_space_free(&run.space, lo, len);
}

bool run_grow(size_t need, unsigned gen)
{
	size_t len, min;
	uintptr_t a = 0;
	bool ok = false;

	/* a huge block's segment: the block, its segment's header, and the
	 * arena's alignment */
	if (need > run.size)
		return false;
	min = (need + 2 * RUN_MI_SEGMENT + RUN_MI_SEGMENT - 1) & ~(RUN_MI_SEGMENT - 1);
	run_lock();
	if (run_chunk_gen() != gen) {
		run_unlock();
		return true;
	}
	len = run.next_chunk > min ? run.next_chunk : min;
	if (run.nchunks < RUN_CHUNKS_MAX) {
		a = run_space_alloc(&run.space, len, RUN_MI_SEGMENT);
		if (!a && len > min)
			a = run_space_alloc(&run.space, len = min, RUN_MI_SEGMENT);
	}
	if (a && !run_protect(a, len, PROT_READ | PROT_WRITE)) {
		zmi_in_lib++;
		ok = mi.manage_os_memory((void *)a, len, false, false, true, -1);
		zmi_in_lib--;
	}
	if (ok) {
		run.chunk[run.nchunks++] = (struct run_extent){ a, a + len };
		run.next_chunk = len * 2;
		__atomic_fetch_add(&chunk_gen, 1, __ATOMIC_RELEASE);
	} else if (a) {
		chunk_undo(a, len);
	}
	run_unlock();
	return ok;
}

static void *outside(void *p, size_t n)
{
	if (p)
		__atomic_fetch_add(&run.outside_bytes, n, __ATOMIC_RELAXED);
	return p;
}

/* Try call; while it fails, add a chunk for need bytes and try again;
 * then the system's allocator (sys). */
#define RUN_ALLOC(call, need, sys)                                        \
	do {                                                              \
		unsigned gen_ = run_chunk_gen();                          \
		void *p_ = (call);                                        \
		for (int t_ = 0; !p_ && t_ < RUN_GROW_TRIES &&            \
				 run_grow((need), gen_); t_++) {          \
			gen_ = run_chunk_gen();                           \
			p_ = (call);                                      \
		}                                                         \
		return p_ ? p_ : outside((sys), (need));                  \
	} while (0)

EXPORT void *malloc(size_t n)
{
	if (!run_active() || from_sys(__builtin_return_address(0)))
		return __libc_malloc(n);
	RUN_ALLOC(mi.malloc(n), n, __libc_malloc(n));
}

EXPORT void *calloc(size_t n, size_t size)
{
	size_t total;

	if (!run_active() || from_sys(__builtin_return_address(0)))
		return __libc_calloc(n, size);
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	RUN_ALLOC(mi.calloc(n, size), total, __libc_calloc(n, size));
}

EXPORT void free(void *p)
{
	if (!p)
		return;
	if (run_in_region(p))
		mi.free(p);
	else
		__libc_free(p);
}

/* A block of mimalloc's moved to the system's allocator (the region is
 * full). */
static void *realloc_out(void *p, size_t n)
{
	size_t old = mi.usable_size(p);
	void *q = __libc_malloc(n);

	if (q) {
		memcpy(q, p, old < n ? old : n);
		mi.free(p);
	}
	return outside(q, n);
}

EXPORT void *realloc(void *p, size_t n)
{
	if (!p)
		return from_sys(__builtin_return_address(0)) ? __libc_malloc(n) : malloc(n);
	if (!run_in_region(p))
		return __libc_realloc(p, n);
	RUN_ALLOC(mi.realloc(p, n), n, realloc_out(p, n));
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, total);
}

/* Debian's mimalloc 2.0.9 returns blocks misaligned for alignments of
 * 256 and 512 (mi_malloc_aligned(512, 256) gives an address ending in
 * 0x180): a block that is not aligned is freed and asked for again with
 * the alignment 4 times larger, which it gets right. */
static void *mi_aligned(size_t n, size_t align)
{
	for (;;) {
		void *p = mi.malloc_aligned(n, align);

		if (!p || !((uintptr_t)p & (align - 1)))
			return p;
		mi.free(p);
		n = n > align * 4 ? n : align * 4;
		align *= 4;
	}
}

static void *aligned(size_t align, size_t n, const void *caller)
{
	if (!run_active() || from_sys(caller))
		return __libc_memalign(align, n);
	RUN_ALLOC(mi_aligned(n, align), n + align, __libc_memalign(align, n));
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	p = aligned(align, n, __builtin_return_address(0));
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, n, __builtin_return_address(0));
}

EXPORT void *memalign(size_t align, size_t n)
{
	/* glibc's: a non-power of two is rounded up to one */
	size_t a = sizeof(void *);

	while (a < align && a)
		a <<= 1;
	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(a, n, __builtin_return_address(0));
}

EXPORT void *valloc(size_t n)
{
	return aligned((size_t)sysconf(_SC_PAGESIZE), n, __builtin_return_address(0));
}

EXPORT void *pvalloc(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (n > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned(page, (n + page - 1) & ~(page - 1), __builtin_return_address(0));
}

EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (run_in_region(p))
		return mi.usable_size(p);
	return sys_usable_size ? sys_usable_size(p) : 0;
}
