/*
 * The preload library's shared state (src/run/): one region per process,
 * its address-space allocator, mimalloc over chunks of it, and the
 * calls that go to the system's own allocator and to the kernel.
 *
 * The rule that keeps faults from deadlocking: a thread serving faults
 * never touches region memory.  zmi_in_lib (base/os.h) is raised by the
 * library's threads for good and by the preload around every call it
 * makes into libzmem; while it is raised malloc & co go to glibc's own
 * allocator and mmap & co straight to the kernel.  Before the preload is
 * ready (its constructor not run yet, or it is starting on another
 * thread), and when it runs uncompressed (no userfaultfd, a bad setting,
 * zmem ctl untrack), the same.  free and realloc choose by the pointer's
 * address: inside the region, mimalloc's; anywhere else, glibc's.
 *
 * Lock order: run.lock (the space and the chunk list) is taken before
 * any libzmem call made under it (discard, protect), never the reverse.
 */
#ifndef ZM_RUN_PRELOAD_H
#define ZM_RUN_PRELOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <zmem/region.h>

#include "base/os.h"
#include "run/board.h"
#include "run/space.h"

enum run_state {
	RUN_UNINIT = 0,   /* constructor not run: everything to the system */
	RUN_STARTING = 1, /* one thread is starting it */
	RUN_READY = 2,    /* the region is in use */
	RUN_OFF = 3,      /* running uncompressed for good */
};

/* mimalloc's arenas: the region memory handed to it.  Its segments are
 * MI_SEGMENT_SIZE (32 MiB in mimalloc 2.0, 64-bit) and aligned to it, and
 * an arena's blocks are segments, so a chunk is aligned to it too.  The
 * first chunk is RUN_CHUNK_FIRST, each next one twice the last, or the
 * size an allocation needs; mimalloc takes at most 64 arenas in all. */
#define RUN_MI_SEGMENT  (32ul << 20)
#define RUN_CHUNK_FIRST (256ul << 20)
#define RUN_CHUNKS_MAX  48
#define RUN_FOREIGN_MAX 64

struct run_config {
	uint64_t space;          /* bytes of address space, ZMEM_RUN_SPACE */
	uint64_t resident;       /* bytes, or 0 */
	unsigned pct_x100;       /* 1/100 percent of heap_max, or 0 */
	size_t mmap_min;         /* ZMEM_RUN_MMAP_MIN */
	const char *codec, *allocator, *recompress, *backing, *board;
	unsigned idle_after_ms;
	unsigned unit_pages;     /* the store's (store.h), ZMEM_RUN_UNIT_PAGES;
				    0: 1 */
};

struct run {
	int state;                       /* enum run_state, atomic */
	bool untracked;                  /* zmem ctl untrack: no new memory
					    placed in the region */
	bool inherit;                    /* the region was made with INHERIT */
	struct zm_region *region;
	uintptr_t base;                  /* the region, set before READY */
	size_t size, page;
	struct run_config cfg;

	pthread_mutex_t lock;            /* protects space, chunk[], nchunks */
	struct run_space space;
	struct run_extent chunk[RUN_CHUNKS_MAX]; /* mimalloc's arenas */
	unsigned nchunks;
	/* Foreign ranges: parts of the region a program mapped something
	 * else over with MAP_FIXED (a file, shared memory: V8 maps its
	 * builtins' code so).  Out of the region for good: their pages were
	 * dropped, the kernel's calls on them go to the kernel, and the
	 * space is never handed out again (unmapped, they are reserved
	 * again, PROT_NONE, so that the kernel places nothing there). */
	struct run_extent foreign[RUN_FOREIGN_MAX];
	unsigned nforeign;               /* atomic for the lock-free look */
	size_t next_chunk;

	/* counters, atomic */
	uint64_t mmap_bytes;             /* live region mmap bytes */
	uint64_t outside_bytes;          /* allocations that found the region
					    full */
	uint64_t heap_max;
	struct run_proc_stats max;       /* the run thread's: peaks it saw */

	/* the run thread and the board */
	struct run_board *board;
	int slot;                        /* -1: unreported */
	pthread_t thread;
	bool thread_running;
	uint64_t limit_set;              /* the limit last given the region */
};

extern struct run run;

/* Whether to place memory in the region now: ready, tracking, and not
 * called from the library's own code.  Starts the preload when it can. */
bool run_active(void);

static inline bool run_in_region(const void *p)
{
	return (uintptr_t)p - run.base < run.size;
}

/* Whole pages of [addr, addr + len) that lie in the region, as offsets. */
void run_lock(void);
void run_unlock(void);

/* Region calls with zmi_in_lib raised (base/os.h), on offsets from its
 * base: discard drops pages (they read as zeros); protect sets the
 * protection, keeping the content (zm_region_protect). */
int run_discard(uintptr_t addr, size_t len);
int run_protect(uintptr_t addr, size_t len, int prot);
/* Drop and protect in one: for ranges whose content goes. */
int run_drop(uintptr_t addr, size_t len, int prot);

/* The kernel's own calls. */
void *run_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int run_sys_munmap(void *addr, size_t len);
int run_sys_mprotect(void *addr, size_t len, int prot);

/* glibc's allocator (alloc.c). */
void *run_sys_malloc(size_t n);
void run_sys_free(void *p);

/* Add a mimalloc chunk big enough for an allocation of need bytes, unless
 * another thread added one since gen was read.  true if mimalloc may
 * succeed now (alloc.c). */
bool run_grow(size_t need, unsigned gen);
unsigned run_chunk_gen(void);
/* Find glibc's malloc_usable_size (for the pointers of the system's
 * allocator), before anything else at start (alloc.c). */
void run_alloc_early(void);
/* Load mimalloc and set its options; 0 or -errno (alloc.c). */
int run_alloc_setup(void);

/* One line on stderr, "zmem run: ...", without allocating. */
void run_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
