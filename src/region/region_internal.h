/*
 * The region layer's internals: the page table, its state machine, the
 * queues of resident pages, and the process-wide parts (the registry of
 * regions by address, the SIGBUS handler, the region thread).
 *
 * Page states (the low three bits of a page's word; docs/region.md draws
 * the machine):
 *
 *   EMPTY   never written, or discarded: not mapped, nothing stored
 *   ZERO    mapped as the shared zero page by a first read (or, written
 *           since, a private page the kernel gave it on that write without
 *           telling us): resident, treated as dirty
 *   DIRTY   mapped writable; the store's copy, if any, is stale (dropped)
 *   CLEAN   mapped write-protected; the store holds its exact content
 *   STORED  not mapped; the store holds its content (a same-filled page
 *           costs only its slot)
 *
 * Every change of a page's state, and every mapping, unmapping or
 * protection change of the page, is made holding the page's lock (the
 * LOCKED bit of its word, a futex when contended).  Resident pages are
 * ZERO, DIRTY and CLEAN; r->resident counts them (and admissions in
 * flight, see fault.c).
 *
 * Lock order: the registry's locks (registry.c), then a region's call
 * lock, its reclaim lock, a page's lock, then the region's policy lock (a leaf); the
 * store's and pool's locks are taken inside a page's lock (store put, get
 * and discard of that page's slot).  A page lock is only ever taken with
 * a trylock while another page's lock is held.  No lock of this layer is
 * held while region memory that may not be resident is touched: the only
 * region memory the layer reads is a page it holds locked and resident.
 */
#ifndef ZM_REGION_INTERNAL_H
#define ZM_REGION_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <zmem/region.h>

#include "base/lock.h"

enum {
	RP_EMPTY = 0,
	RP_ZERO = 1,
	RP_DIRTY = 2,
	RP_CLEAN = 3,
	RP_STORED = 4,
};

#define RP_KIND_MASK 7u
#define RP_LOCKED    (1u << 3)
#define RP_WAITERS   (1u << 4)   /* someone sleeps on the word (futex) */
#define RP_NOREAD    (1u << 5)   /* its mapping is unreadable now
				     (zm_region_protect): never evicted, as
				     storing it would read it */
#define RP_PIN_SHIFT 8
#define RP_PIN_MAX   0xffffffu   /* pins of one page at once: a count that
				     wrapped would let a pinned page go */
#define RP_PIN_MASK  (RP_PIN_MAX << RP_PIN_SHIFT)
static inline unsigned rp_kind(uint32_t w)
{
	return w & RP_KIND_MASK;
}
static inline bool rp_resident(uint32_t w)
{
	unsigned k = rp_kind(w);
	return k == RP_ZERO || k == RP_DIRTY || k == RP_CLEAN;
}
static inline unsigned rp_pins(uint32_t w)
{
	return (w & RP_PIN_MASK) >> RP_PIN_SHIFT;
}
/* One page's record: 24 bytes.  word is the page lock's (every change
 * under it); lst and link are the policy lock's (r->pol.lock); stamp,
 * evict_t, k and s are written by the page's evictions and refaults
 * (under its lock) and by the policy's aging (under the policy lock):
 * numbers for the policy, where a lost update only misjudges a page. */
struct zmi_region_page {
	uint32_t word;       /* state, lock, pins (above); atomic */
	uint32_t stamp;      /* the refault clock at its last eviction */
	uint32_t link;       /* next in its protected stack */
	uint16_t evict_t;    /* the region's clock at its last eviction, in
				units of 16 ms (wraps after 17 minutes: only
				the young-refault count reads it) */
	uint8_t lst;         /* which list holds its entry: LST_* */
	uint8_t flags;       /* RPF_*, under the page's lock */
	float k, s;          /* decayed refaults, and the refault-clock ticks
				it spent evicted over them */
};

enum { LST_NONE = 0, LST_PROBATION = 1, LST_PROTECTED = 2 };

/* A page brought back by a read was then written (a write-protect fault
 * on it): its next read fault maps it writable at once and drops its
 * copy, as a write fault does, sparing the second fault.  Cleared when
 * the page is evicted clean (brought back, only read). */
#define RPF_WRITER 1u

/* A queue of resident pages in the order they came in: a ring of page
 * numbers.  A page has at most one entry in all the lists (lst says
 * where); an entry whose page left (discarded) is skipped when it comes
 * out. */
struct zmi_region_queue {
	uint32_t *ring;      /* cap entries, reserved address space */
	uint64_t cap;        /* a power of two, > the region's pages */
	uint64_t head, tail; /* entries [head, tail) */
};

#define PROT_BUCKETS 256

/* The policy's lists (policy.c). */
struct zmi_region_policy {
	zmi_lock_t lock;
	struct zmi_region_queue prob;  /* probation: FIFO */
	uint32_t top[PROT_BUCKETS];    /* protected: a stack per score
					  bucket, UINT32_MAX when empty */
	uint64_t bits[PROT_BUCKETS / 64]; /* non-empty buckets */
	uint64_t nprot;                /* entries in the stacks */
	uint32_t rclock;               /* atomic: refaults so far */
	uint64_t next_age;             /* evictions at the next aging */
};

/* Counters, written with relaxed atomics by every thread. */
enum {
	RC_FIRST, RC_REFAULT, RC_WP, RC_YOUNG, RC_WAITS, RC_FAULT_NS, RC_EVICT,
	RC_EVICT_CLEAN, RC_EVICT_FAIL, RC_PINS, RC_AROUND, RC_COUNTERS
};

struct zmi_region {
	/* set at create, read-only after */
	char *base;
	size_t size;
	size_t page_size;
	unsigned page_shift;
	uint64_t nr_pages;
	unsigned flags;
	unsigned policy;
	unsigned cold_age_ms;
	int uffd;
	pid_t pid;               /* the creator: a child is refused */
	struct zm_store *store;
	unsigned unit_pages;     /* the store's (store.h): > 1, runs of
				    dirty pages evicted together are
				    stored with zm_store_put_range */
	struct zmi_region_page *pages; /* nr_pages records, reserved */
	uint64_t t0_ns;          /* the region's clock starts here */

	/* the limit, in pages (0: none), and its watermarks; atomic */
	uint64_t limit;
	uint64_t slack;          /* hard cap: limit + slack */
	uint64_t high, low;      /* the thread evicts from high down to low */

	uint64_t resident;       /* atomic: resident pages + admissions */
	uint64_t resident_max;   /* atomic */
	uint32_t room_seq;       /* futex: bumped when room is made */
	uint32_t room_waiters;   /* atomic */
	uint32_t pins_full_ms;   /* atomic: since when (the region's clock)
				    eviction rounds find only pinned pages,
				    as many as the limit; 0: they do not */
	uint64_t pin_pages;      /* atomic: pages the live pins asked for */
	int stuck;               /* atomic: the last eviction round found
				    nothing it could evict (the store full):
				    admissions stop waiting for room */
	uint64_t evict_seq;      /* atomic: pages evicted */
	uint64_t seq_next;       /* atomic: where a sequential reader's next
				    refault would be (fault.c, read-ahead) */

	struct zmi_region_policy pol;

	pthread_mutex_t reclaim_lock; /* one evictor at a time per region */
	pthread_rwlock_t call_lock; /* read side: a call on the region from
				       a program's thread (reclaim, discard,
				       protect, pin) that takes page locks;
				       write side: fork's prepare, so no page
				       lock is held across a fork */
	uint64_t hw_pages;       /* atomic: 1 + the highest page ever
				    brought in (the child of a fork looks
				    at no page above it) */
	int kicked;              /* atomic: the thread was asked to reclaim */

	uint64_t count[RC_COUNTERS];
	uint64_t hist[ZM_REGION_HIST_BUCKETS];
	struct zmi_region *next_live; /* the thread's list; registry lock */
};

/* ---- uffd.c: the userfaultfd, behind a seam for tests ---- */

/* Opens a userfaultfd with these flags (O_CLOEXEC | O_NONBLOCK, maybe
 * UFFD_USER_MODE_ONLY); returns the fd or -1 with errno set.  Tests set it
 * to refuse; NULL means the system's. */
extern int (*zmi_region_uffd_open)(int flags);
/* A region's userfaultfd, set up and registered over [base, base+size):
 * the fd, or -errno after a message naming what is missing. */
int zmi_region_uffd_setup(void *base, size_t size, bool wait_mode);
int zmi_region_uffd_copy(int uffd, void *dst, const void *src, size_t len, bool wp, bool wake);
int zmi_region_uffd_zeropage(int uffd, void *dst, size_t len, bool wake);
int zmi_region_uffd_protect(int uffd, void *addr, size_t len, bool wp, bool wake);
int zmi_region_uffd_wake(int uffd, void *addr, size_t len);

/* ---- page.c: page locks, the region's clock ---- */
uint32_t zmi_region_page_lock(struct zmi_region *r, uint64_t pg, bool *waited);
bool zmi_region_page_trylock(struct zmi_region *r, uint64_t pg, uint32_t *word);
/* Unlock, setting the word's state bits to w (LOCKED and WAITERS are
 * the lock's own). */
void zmi_region_page_unlock(struct zmi_region *r, uint64_t pg, uint32_t w);
uint64_t zmi_region_now_ns(void);
static inline uint32_t zmi_region_ms(const struct zmi_region *r)
{
	return (uint32_t)((zmi_region_now_ns() - r->t0_ns) / 1000000);
}
static inline void *zmi_region_page_addr(const struct zmi_region *r, uint64_t pg)
{
	return r->base + (pg << r->page_shift);
}
static inline void zmi_region_count(struct zmi_region *r, int c, uint64_t n)
{
	__atomic_fetch_add(&r->count[c], n, __ATOMIC_RELAXED);
}

/* ---- fault.c: bringing pages in ---- */
/* Serve a fault at page pg (write: the access was a write, as far as is
 * known).  from_thread: the region thread serving a ZM_REGION_WAIT fault
 * (it wakes the faulting thread).  0, or -errno (the page could not be
 * brought back: -EIO). */
int zmi_region_fault(struct zmi_region *r, uint64_t pg, bool write, bool from_thread);
/* Make page pg resident (writable if write), add pins to its count.
 * 0 or -errno. */
int zmi_region_make_present(struct zmi_region *r, uint64_t pg, bool write, unsigned pins);
/* The SIGBUS handler's setup (once per process). */
int zmi_region_signals_init(void);

/* ---- reclaim.c: eviction ---- */
/* Evict up to n pages, coldest first; returns pages evicted. */
uint64_t zmi_region_evict(struct zmi_region *r, uint64_t n);
/* Evict page pg now, outside the policy's order: its lock held, *w its
 * word, resident and not pinned.  0 (*w is STORED), or -errno (the store
 * refused it: it stays resident). */
int zmi_region_evict_page(struct zmi_region *r, uint64_t pg, uint32_t *w);
/* Recompute the watermarks from r->limit. */
void zmi_region_set_marks(struct zmi_region *r, uint64_t limit);

/* ---- policy.c: cold selection ---- */
int zmi_region_policy_init(struct zmi_region *r);
void zmi_region_policy_free(struct zmi_region *r);
/* A page came in (its lock held, its state set): list it.  refault: it
 * came from the store. */
void zmi_region_policy_admit(struct zmi_region *r, uint64_t pg, bool refault);
/* The next page to try evicting, taken off its list, or false when no
 * page is listed. */
bool zmi_region_policy_pick(struct zmi_region *r, uint32_t *pg);
/* A picked page that stays resident (busy, pinned, refused): list it
 * again, on probation. */
void zmi_region_policy_putback(struct zmi_region *r, uint32_t pg);
/* A picked page was evicted (its lock held): stamp it. */
void zmi_region_policy_evicted(struct zmi_region *r, uint64_t pg);
/* A page was discarded: forget its history (its lock held). */
void zmi_region_policy_forget(struct zmi_region *r, uint64_t pg);
/* Periodic work before an eviction round (reclaim lock held). */
void zmi_region_policy_tick(struct zmi_region *r);

/* A reader-writer lock whose writer does not starve behind a stream of
 * readers (a fork's prepare, a destroy).  Also how the child of a fork
 * sets free one its parent's prepare held: glibc's unlock tells a
 * writer by its thread id, which the child's thread does not have. */
static inline void zmi_region_rwlock_init(pthread_rwlock_t *l)
{
	pthread_rwlockattr_t at;

	pthread_rwlockattr_init(&at);
	pthread_rwlockattr_setkind_np(&at, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(l, &at);
	pthread_rwlockattr_destroy(&at);
}

/* ---- region.c ---- */
/* In the child of a fork, take over an inheriting region: a userfaultfd
 * of the child's own over the same range, the clean pages protected
 * again.  0, or -errno (the region stays the parent's copy: -ECHILD). */
int zmi_region_adopt(struct zmi_region *r);

/* ---- registry.c: regions by address; the region thread ---- */
int zmi_region_register(struct zmi_region *r);
void zmi_region_unregister(struct zmi_region *r);
/* The region holding addr, or NULL: async-signal-safe. */
struct zmi_region *zmi_region_find(const void *addr);
/* The first region overlapping [from, end), or NULL. */
struct zmi_region *zmi_region_find_from(const void *from, const void *end);
/* Ask the region thread to reclaim r (async-signal-safe). */
void zmi_region_kick(struct zmi_region *r);
/* The calling thread is the region thread. */
bool zmi_region_on_thread(void);

#endif
