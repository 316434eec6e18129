/* OS primitives; see os.h for the contract. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/os.h"

__thread unsigned zmi_in_lib __attribute__((tls_model("initial-exec")));

void *zmi_os_reserve(size_t bytes, size_t align)
{
	size_t span = bytes + align;
	char *p, *start;

	if (span < bytes)
		return NULL;
	p = mmap(NULL, span, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	/* Trim the head and the tail so that what remains is aligned. */
	start = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (start > p)
		munmap(p, (size_t)(start - p));
	if (p + span > start + bytes)
		munmap(start + bytes, (size_t)(p + span - (start + bytes)));
	return start;
}

void zmi_os_release(void *addr, size_t bytes)
{
	if (addr)
		munmap(addr, bytes);
}

int zmi_os_decommit(void *addr, size_t bytes)
{
	return madvise(addr, bytes, MADV_DONTNEED) == 0 ? 0 : -errno;
}

/* process_madvise(2) of the calling process by the pidfd sentinel
 * PIDFD_SELF_PROCESS (Linux 6.15; the headers of older systems lack
 * both), any advice allowed on oneself (6.13): one system call for a
 * trim's sixteen blocks, and on kernels that batch the TLB flushes of
 * MADV_DONTNEED over the ranges (a 2025 series; not checked which
 * release) one flush of the other CPUs', each an interrupt of the
 * process's running threads, instead of sixteen (measured here:
 * docs/results/2026-12-03-in-place.md).  Where the
 * call fails once (an older kernel: EBADF, EINVAL, ENOSYS; a seccomp
 * filter: EPERM), every range is one madvise from then on. */
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif
#define ZMI_PIDFD_SELF_PROCESS (-10001)
#define ZMI_IOV_MAX 16   /* the trims' batch; UIO_MAXIOV is 1024 */
static int madvise_many = 1;  /* atomic: 0 once the kernel said no */

int zmi_os_decommit_many(const struct iovec *iov, size_t n)
{
	size_t done = 0;
	int rc = 0;

	while (n - done > 1 && __atomic_load_n(&madvise_many, __ATOMIC_RELAXED)) {
		size_t k = n - done < ZMI_IOV_MAX ? n - done : ZMI_IOV_MAX, want = 0;
		long got;

		for (size_t i = 0; i < k; i++)
			want += iov[done + i].iov_len;
		got = syscall(__NR_process_madvise, ZMI_PIDFD_SELF_PROCESS, iov + done, k,
			      MADV_DONTNEED, 0u);
		if (got < 0) {
			__atomic_store_n(&madvise_many, 0, __ATOMIC_RELAXED);
			break;
		}
		if ((size_t)got != want)
			break;  /* cut short: the rest one range at a time */
		done += k;
	}
	for (; done < n; done++) {
		int r = zmi_os_decommit(iov[done].iov_base, iov[done].iov_len);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int zmi_os_prefault(void *addr, size_t bytes)
{
	return madvise(addr, bytes, MADV_POPULATE_WRITE) == 0 ? 0 : -errno;
}

size_t zmi_os_page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

/* /proc/self/statm's resident and shared (file-backed resident) pages:
 * 0, or -1 with both 0 */
static int statm(unsigned long *resident, unsigned long *shared)
{
	unsigned long size = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	int rc = -1;

	*resident = *shared = 0;
	if (!f)
		return -1;
	if (fscanf(f, "%lu %lu %lu", &size, resident, shared) == 3 && *shared <= *resident)
		rc = 0;
	else
		*resident = *shared = 0;
	fclose(f);
	return rc;
}

size_t zmi_os_rss_bytes(void)
{
	unsigned long resident, shared;

	statm(&resident, &shared);
	return resident * zmi_os_page_size();
}

size_t zmi_os_anon_bytes(void)
{
	unsigned long resident, shared;

	statm(&resident, &shared);
	return (resident - shared) * zmi_os_page_size();
}

uint64_t zmi_os_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t zmi_os_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static int membarrier_rc;  /* set once, before pthread_once returns */

static void membarrier_register(void)
{
	membarrier_rc = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
				0, 0) == 0 ? 0 : -errno;
}

int zmi_os_membarrier_register(void)
{
	pthread_once(&membarrier_once, membarrier_register);
	return membarrier_rc;
}

int zmi_os_membarrier(void)
{
	/* registered per process (a forked child is not): registration is
	 * idempotent, so an unregistered call registers and tries again */
	for (int tries = 0; tries < 2; tries++) {
		if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
			return 0;
		if (errno != EPERM ||
		    syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
			break;
	}
	return -errno;
}
