/*
 * The operating system, in one place.  Every mmap, munmap and madvise of the
 * library goes through these functions.
 *
 * Contract: reserve returns memory that reads as zero, is readable and
 * writable, and costs no physical memory until touched (MAP_NORESERVE);
 * decommit gives the physical memory of a range back at once (the range
 * reads as zero afterwards and stays usable); release unmaps.
 */
#ifndef ZM_BASE_OS_H
#define ZM_BASE_OS_H

#include <stddef.h>
#include <stdint.h>

/* Reserve bytes of address space aligned to align (a power of two, at
 * least the system page size).  NULL on failure. */
void *zmi_os_reserve(size_t bytes, size_t align);
void zmi_os_release(void *addr, size_t bytes);
/* Give the memory of [addr, addr+bytes) back; 0 or -errno. */
int zmi_os_decommit(void *addr, size_t bytes);
/* The same for n ranges (iov_base, iov_len: as struct iovec) in one
 * system call where the kernel can (process_madvise on the process
 * itself, Linux 6.15+; kernels that batch its TLB flushes then flush the
 * other CPUs' once, not once a range), else one madvise each.  0 or the
 * first -errno. */
struct iovec;
int zmi_os_decommit_many(const struct iovec *iov, size_t n);
/* Make [addr, addr+bytes) resident now, in one call, instead of one page
 * fault per page later (MADV_POPULATE_WRITE, Linux 5.14+); 0 or -errno
 * (-EINVAL where the kernel does not know it: the faults happen later). */
int zmi_os_prefault(void *addr, size_t bytes);
/* Nonzero on a thread while it runs the library's own code that must not
 * be given region memory: the threads the library starts (the worker,
 * the region threads) hold it from their start, and a preload that
 * replaces malloc and mmap (src/run/) raises it around each call it
 * makes into the library.  While it is raised, such a preload hands
 * every allocation and mapping to the system's own.  Initial-exec TLS:
 * reading it never allocates. */
extern __thread unsigned zmi_in_lib __attribute__((tls_model("initial-exec")));

/* The system's page size. */
size_t zmi_os_page_size(void);
/* Resident set size of this process in bytes (from /proc/self/statm),
 * or 0 if unknown. */
size_t zmi_os_rss_bytes(void);
/* ... of it, the anonymous part: resident less the pages of files (the
 * program's and libraries' code and data as they are paged in); 0 if
 * unknown. */
size_t zmi_os_anon_bytes(void);
/* A memory barrier on every running thread of the process, so that a
 * thread's plain stores before, and loads after, a compiler barrier are
 * ordered against this thread's accesses around the call (the heavy side
 * of an asymmetric fence: membarrier(2), PRIVATE_EXPEDITED, registered on
 * first use).  0, or -errno where the kernel has no such call or refuses
 * it (then the caller must not rely on the light side's plain accesses). */
int zmi_os_membarrier(void);
/* Register the process for it now (once; a forked child registers again
 * on its first call above): with more than one thread, registering takes
 * the kernel a grace period, 13-15 ms here
 * (docs/results/2026-12-03-first-fill.md), which is for a create call to
 * pay, not a call on a fast path.  0, or -errno of the first try. */
int zmi_os_membarrier_register(void);
/* Monotonic time in nanoseconds. */
uint64_t zmi_os_now_ns(void);
/* The same to a few milliseconds (the kernel's tick), cheaper to read:
 * for windows of tens of milliseconds and more. */
uint64_t zmi_os_coarse_ns(void);

#endif
