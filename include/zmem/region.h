/*
 * zm_region: compressed regions, memory a program reads and writes
 * directly, kept compressed when cold and brought back on touch.
 *
 * A region is a range of the process's address space.  The program uses
 * it as ordinary memory, from any thread.  At most resident_limit bytes of
 * it are kept as ordinary (uncompressed) pages; the rest live compressed
 * in a store (store.h), with everything the store does below them: its
 * codec and allocator, same-filled pages, recompression of idle pages
 * and writeback to a backing file (docs/tiering.md).  A page compressed
 * away is brought back when it is touched; pages never written read as
 * zeros and cost nothing.
 *
 * How (docs/region.md has the design and the argument for each rule):
 * the region is registered with a userfaultfd.  A touch of a page that is
 * not resident stops the touching thread; in the default mode the kernel
 * sends it SIGBUS, and the library's handler, on that thread, decodes the
 * page from the store and maps it (UFFDIO_COPY), in a few microseconds.
 * Pages brought back are mapped write-protected while their compressed
 * copy is kept, so that a page evicted again without being written costs
 * nothing to evict; its first write makes it dirty (a write-protect
 * fault) and drops the copy.  One thread per process, shared by every
 * region, evicts the coldest pages when a region nears its limit (cold
 * selection: docs/region.md).  A page being evicted is write-protected
 * first, so a write racing with its eviction waits for the eviction to
 * end and then lands in the page brought back.
 *
 * The kernel and region memory.  In the default mode a system call that
 * reads or writes a page that is not resident (read(2) into it, write(2)
 * from it) fails with EFAULT: the kernel cannot send SIGBUS for its own
 * accesses, nor can it write into a write-protected page.  Two ways
 * around it:
 *   - zm_region_pin() makes a range resident and writable and keeps it
 *     so until zm_region_unpin(); the wrappers below (zm_region_read,
 *     zm_region_write, ...) pin their buffer around the call.  Use them,
 *     or pin, for every system call and every library call (zm_store_*
 *     included) given region memory;
 *   - ZM_REGION_WAIT: faults are served by the library's threads (one per
 *     CPU), and the kernel waits for them as it waits for the disk: every
 *     access is right, system calls and futexes included, for a few
 *     microseconds more a fault.
 *
 * The SIGBUS handler.  The library installs one handler for SIGBUS at a
 * region's create, unless it is in place already; a SIGBUS that is not a
 * region's fault goes to the handler it replaced (or kills the process as
 * SIGBUS does).  A program that installs its own SIGBUS handler while
 * regions live must call the previous one for faults it does not know,
 * or regions stop working until the next create puts the library's back
 * in front.  A thread must not block SIGBUS while it may touch a region
 * (the kernel kills a process faulting with SIGBUS blocked).  The faulting thread may hold any lock of its
 * own; the handler takes only the region's page locks, decodes with the
 * store, and may allocate (a thread's first fault allocates its codec
 * workspace), so region memory must not be touched from inside malloc or
 * from another signal handler that interrupted malloc.  The handler
 * blocks the asynchronous signals while it serves a fault, so a signal
 * handler of the program may touch region memory, unless the signal
 * interrupted a zmem call of its thread (a pin or wrapper, reclaim,
 * discard): that call may hold the page's lock.
 *
 * fork: a region is not inherited.  Its range is not mapped in a child
 * (MADV_DONTFORK), so a child that touches it gets SIGSEGV; calls on the
 * region in the child return -ECHILD, and zm_region_destroy() there frees
 * only the child's copy of the bookkeeping.  With ZM_REGION_INHERIT the
 * child keeps a working copy instead, as it keeps the rest of its
 * memory: its own userfaultfd and threads, the same contents, its
 * changes its own (pages on a backing file excepted: they read -EIO
 * there, store.h).
 *
 * Requirements: Linux with userfaultfd write-protection of anonymous
 * memory (5.7 or later).  Without permission (an unprivileged process
 * where vm.unprivileged_userfaultfd is 0 and /dev/userfaultfd is not
 * readable, a seccomp filter) create fails at once with -EPERM; on a
 * kernel without userfaultfd, -ENOSYS; either way the log sink
 * (common.h) names the sysctl or the device.  An unprivileged process
 * gets a userfaultfd for user-mode faults only, which is what the
 * default mode needs; ZM_REGION_WAIT then fails with -EPERM.
 *
 * Errors follow zmem.h: 0 or a negative errno.
 */
#ifndef ZMEM_REGION_H
#define ZMEM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <zmem/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* flags */
#define ZM_REGION_WAIT 1u /* faults served by the library's threads; the
			     kernel's own accesses wait too (slower) */
#define ZM_REGION_INHERIT 2u /* a child of fork keeps the region: its own
				copy of the pages and the store, served and
				evicted in the child as in the parent (see
				fork above) */
#define ZM_REGION_AROUND 4u /* a first touch right after a resident page
			       (memory filled in order) maps the next
			       pages as zeros too, up to 16; a refault
			       where a sequential reader's next fault would
			       be brings the next stored pages back, up to
			       8 (read-ahead).  They count as resident
			       (stats: pages_around) */

/* cold selection */
#define ZM_REGION_POLICY_AUTO 0u /* frequency-aware (docs/region.md) */
#define ZM_REGION_POLICY_FIFO 1u /* evict in the order pages came in: the
				    baseline the default is measured against */

/* Buckets of the fault-latency histogram: bucket i counts faults that
 * took [2^i, 2^(i+1)) nanoseconds to serve, from the handler's start to
 * the page mapped (the last bucket: that long or more). */
#define ZM_REGION_HIST_BUCKETS 32

/* Default cold age: see cold_age_ms. */
#define ZM_REGION_COLD_AGE_MS 1000u

struct zm_region_config {
	size_t size;              /* bytes of address space, > 0; rounded up
				     to the page size */
	size_t resident_limit;    /* bytes kept uncompressed at most (see
				     zm_region_stats: the slack); rounded
				     down to pages, at least
				     ZM_REGION_MIN_RESIDENT pages; 0 = no
				     limit (pages are compressed only when
				     zm_region_reclaim asks) */
	unsigned cold_age_ms;     /* a page brought back within this long of
				     its eviction was evicted too early: such
				     refaults are counted apart, and the
				     policy learns from them; 0 =
				     ZM_REGION_COLD_AGE_MS */
	unsigned flags;           /* ZM_REGION_* */
	unsigned policy;          /* ZM_REGION_POLICY_* */
	/* The store below: its codec, allocator, page size (the region's
	 * page: a power of two, at least the system's page), limit,
	 * recompression and backing file (store.h).  nr_pages is set from
	 * size (leave it 0).  NULL: lz4, zsmalloc, the system's page. */
	const struct zm_store_config *store;
	size_t store_size;        /* sizeof(struct zm_store_config) when store
				     is set, else 0 */
};

/* Fewest pages a limit may keep: the eviction batch and the faults in
 * flight must fit under it. */
#define ZM_REGION_MIN_RESIDENT 64u

struct zm_region_stats {
	uint64_t size;            /* bytes of address space */
	uint64_t page_size;
	uint64_t resident_limit;  /* bytes; 0: none */
	uint64_t slack;           /* bytes a limit may be passed by, for a
				     moment, while faults in flight wait for
				     the reclaimer: resident bytes stay at or
				     below resident_limit + slack */
	uint64_t resident_bytes;  /* pages mapped now (written, or mapped as
				     zeros, or being evicted) * page_size */
	uint64_t resident_max;    /* the most resident_bytes has been */
	uint64_t pages_clean;     /* resident pages whose compressed copy is
				     kept (count) */
	uint64_t pages_stored;    /* pages not resident, kept in the store
				     (count; same-filled ones included) */
	uint64_t stored_bytes;    /* compressed bytes of the store's pages
				     (its compr_data_size), clean copies
				     included */
	uint64_t pool_bytes;      /* memory the store's pool holds
				     (mem_used_total) */
	uint64_t meta_bytes;      /* the region's page table and the store's
				     and pool's metadata */
	/* faults, by kind (counts) */
	uint64_t faults_first;    /* first touch of a page never written (or
				     discarded): mapped as zeros */
	uint64_t faults_refault;  /* a page brought back from the store */
	uint64_t faults_wp;       /* first write to a clean page */
	uint64_t refaults_young;  /* refaults within cold_age_ms of the
				     page's eviction */
	uint64_t fault_waits;     /* faults that waited: for the reclaimer (at
				     limit + slack) or for the page's
				     eviction to end */
	uint64_t fault_ns;        /* time spent serving faults, in all */
	uint64_t fault_hist[ZM_REGION_HIST_BUCKETS];
	/* eviction */
	uint64_t evictions;       /* pages evicted, in all */
	uint64_t evictions_clean; /* ... of them clean: nothing to compress */
	uint64_t evict_failures;  /* evictions abandoned: the store refused
				     the page (its limit, no memory) */
	uint64_t pins;            /* zm_region_pin calls that pinned pages */
	uint64_t pages_around;    /* pages mapped ahead of a fault
				     (ZM_REGION_AROUND): as zeros ahead of a
				     first touch, or read ahead of a
				     sequential refault; each spared a fault */
};

struct zm_region;

/* Create a region: its store, its mapping (size bytes, reserved only), its
 * userfaultfd; the first region also installs the SIGBUS handler and
 * starts the process's region thread.  Returns 0 and sets *out, or
 * -EINVAL (cfg or out NULL, size 0, a bad page size or store config,
 * an unknown policy or flag), -EPERM / -ENOSYS (no userfaultfd here, see
 * above), -E2BIG (unknown config fields set), -ENOMEM, or what
 * zm_store_create returns.  *out is NULL on failure.
 * Cost: address space for the mapping and for 28 bytes a page of
 * bookkeeping (a 24-byte record and a 4-byte queue entry), written
 * only where pages are used; the store's (store.h); no thread but the
 * process's one region thread. */
ZM_API int zm_region_create_sized(const struct zm_region_config *cfg, size_t cfg_size,
				  struct zm_region **out);
#define zm_region_create(cfg, out) \
	zm_region_create_sized((cfg), sizeof(struct zm_region_config), (out))

/* Unmap the region and free its store.  Accepts NULL.  No other thread
 * may touch the region, or call on it, during or after the call. */
ZM_API void zm_region_destroy(struct zm_region *r);

/* The first byte of the region (aligned to its page size), and its size. */
ZM_API void *zm_region_base(const struct zm_region *r);
ZM_API size_t zm_region_size(const struct zm_region *r);
ZM_API size_t zm_region_page_size(const struct zm_region *r);
/* The region's store, for its statistics and tiering calls (store.h).
 * Never put, discard or write back its pages directly. */
ZM_API struct zm_store *zm_region_store(struct zm_region *r);

/* Compress now: evict at least bytes of resident pages (rounded up to
 * pages), coldest first; pinned pages stay.  Returns the bytes evicted
 * (less when fewer were resident), or -EINVAL, -ECHILD (a forked child),
 * -ENOSPC (nothing evicted: the store refused, see evict_failures). */
ZM_API long zm_region_reclaim(struct zm_region *r, size_t bytes);

/* Drop the pages of [offset, offset + length): they read as zeros after
 * and cost nothing, resident or stored.  offset and length are multiples
 * of the page size.  A pinned page in the range is zeroed in place.
 * 0, or -EINVAL (out of the region, unaligned), -ECHILD. */
ZM_API int zm_region_discard(struct zm_region *r, size_t offset, size_t length);

/* mprotect(2) on [offset, offset + length) of the region, kept right
 * with the region: pages made unreadable (prot without PROT_READ) are
 * compressed away first and are never evicted while so (the evictor
 * must read a page to store it); making them readable again lets them
 * come back on touch.  offset and length are multiples of the page size.
 * 0, or -EINVAL, -ECHILD, or mprotect's -errno. */
ZM_API int zm_region_protect(struct zm_region *r, size_t offset, size_t length, int prot);

/* mprotect(2) on [offset, offset + length) of the region, kept right
 * with the region: pages made unreadable (prot without PROT_READ) are
 * compressed away first and are never evicted while so (the evictor
 * must read a page to store it); made readable again, they come back on
 * touch as before.  offset and length are multiples of the page size.
 * 0, or -EINVAL (out of the region, unaligned), -ECHILD, or mprotect's
 * -errno. */
ZM_API int zm_region_protect(struct zm_region *r, size_t offset, size_t length, int prot);

/* Change the resident limit (0: none); the region's thread evicts down to
 * it soon after.  0, or -EINVAL, -ECHILD. */
ZM_API int zm_region_set_limit(struct zm_region *r, size_t bytes);

/* Fill *st.  Counters are read without stopping the faulting threads. */
ZM_API int zm_region_stats_sized(struct zm_region *r, struct zm_region_stats *st, size_t st_size);
#define zm_region_stats(r, st) \
	zm_region_stats_sized((r), (st), sizeof(struct zm_region_stats))
ZM_API void zm_region_print_stats_sized(const struct zm_region_stats *st, size_t st_size, FILE *f);
#define zm_region_print_stats(st, f) \
	zm_region_print_stats_sized((st), sizeof(struct zm_region_stats), (f))

/* ---- region memory given to the kernel ---- */

#define ZM_REGION_PIN_WRITE 1u /* the range will be written (by read(2)) */

/* Make the pages of [addr, addr + len) resident (writable with
 * ZM_REGION_PIN_WRITE) and keep them so until the matching unpin: the
 * kernel may then read and write them.  Any address may be given: the
 * parts outside every region are left alone, so a caller can pin any
 * buffer before a system call.  Pins nest (a count per page).  A range
 * of more than half a region's limit cannot be pinned at once: -E2BIG
 * (pin and call in pieces; the wrappers below do).  0, or -EINVAL (len
 * overflows), -E2BIG, -EIO (the store could not give a page back),
 * -EOVERFLOW (a page is pinned 2^24 - 1 times already). */
ZM_API int zm_region_pin(const void *addr, size_t len, unsigned flags);
ZM_API void zm_region_unpin(const void *addr, size_t len);

/* System calls with the buffer pinned for the call: each behaves as the
 * call it names (same return, same errno) whatever memory the buffer is
 * in.  A buffer longer than a region can pin at once is done in pieces
 * pinned one after another: read, recv and their kind may return short,
 * as they may anyway; write, pwrite and send loop until done or an
 * error, so that a datagram or a pipe write is never cut by the
 * wrapper (its part in a region must then fit in one pin: -E2BIG, errno
 * E2BIG, otherwise). */
ZM_API ssize_t zm_region_read(int fd, void *buf, size_t count);
ZM_API ssize_t zm_region_write(int fd, const void *buf, size_t count);
ZM_API ssize_t zm_region_pread(int fd, void *buf, size_t count, off_t offset);
ZM_API ssize_t zm_region_pwrite(int fd, const void *buf, size_t count, off_t offset);
ZM_API ssize_t zm_region_readv(int fd, const struct iovec *iov, int iovcnt);
ZM_API ssize_t zm_region_writev(int fd, const struct iovec *iov, int iovcnt);
ZM_API ssize_t zm_region_recv(int fd, void *buf, size_t len, int flags);
ZM_API ssize_t zm_region_send(int fd, const void *buf, size_t len, int flags);

#ifdef __cplusplus
}
#endif
#endif
