/*
 * Capture: the private writable memory of a live process, page by page,
 * the realistic workload of a compressed swap.
 *
 * 1. /proc/PID/maps is read whole first (the capture itself allocates,
 *    which must not disturb the list when the process is ourselves) and
 *    filtered to private writable mappings, minus the kernel's special
 *    ones ([vvar], [vsyscall]) and mappings too large to be anything but a
 *    reservation.
 * 2. /proc/PID/pagemap says which pages are resident or swapped; the
 *    others were never touched and are not memory the process uses, so
 *    they are counted and skipped.  Without pagemap every page is read.
 * 3. Pages are copied with process_vm_readv(), one iovec per page and up
 *    to BATCH pages per call, so that a page that vanishes (unmapped since
 *    step 1) fails alone: it is counted as unreadable and the copy goes on
 *    after it.  Where process_vm_readv is not allowed (seccomp, old
 *    kernels) /proc/PID/mem is read instead.
 *
 * Everything is on the stack or freed before returning, so concurrent
 * captures are safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/os.h"
#include "workload/workload_internal.h"

/* Pages per process_vm_readv call: 64 pages is 256 KiB at 4 KiB, enough to
 * make the syscall cost vanish, small enough for the stack of iovecs. */
#define BATCH 64
/* pagemap entries read at once: 4 KiB of entries, 2 MiB of address space */
#define PAGEMAP_BATCH 512
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)

struct region {
	uint64_t start, end;
};

struct capture {
	pid_t pid;
	size_t ps;
	size_t max_pages;
	int pagemap_fd, mem_fd;
	bool use_mem;              /* process_vm_readv refused: read mem_fd */
	workload_capture_fn fn;
	void *arg;
	unsigned char *buf;        /* BATCH pages */
	struct workload_capture_stats *st;
};

static int errno_of_proc(int e)
{
	if (e == ENOENT || e == ESRCH)
		return -ESRCH;
	if (e == EACCES || e == EPERM)
		return -EPERM;
	return -e;
}

/* Wanted: private, writable, readable, and not a kernel special mapping. */
static bool wanted(const char *perms, const char *path)
{
	if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
		return false;
	return strncmp(path, "[vvar", 5) && strncmp(path, "[vsyscall", 9);
}

/* Read the wanted regions of /proc/PID/maps into *out (caller frees). */
static int read_maps(struct capture *c, struct region **out, size_t *n)
{
	char path[64], *line = NULL;
	size_t cap = 0, linecap = 0;
	struct region *v = NULL;
	FILE *f;
	int rc = 0;

	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)c->pid);
	f = fopen(path, "re");
	if (!f)
		return errno_of_proc(errno);
	errno = 0;
	while (getline(&line, &linecap, f) > 0) {
		unsigned long long s, e;
		char perms[8] = "", file[256] = "";

		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %255s", &s, &e, perms, file) < 3)
			continue;
		if (!wanted(perms, file) || e <= s)
			continue;
		if (e - s > WORKLOAD_CAPTURE_MAX_REGION) {
			c->st->regions_skipped++;
			continue;
		}
		if (*n == cap) {
			struct region *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[(*n)++] = (struct region){ s, e };
	}
	/* maps of a process we may not trace: open works on some kernels,
	 * read fails */
	if (!rc && ferror(f))
		rc = errno_of_proc(errno ? errno : EIO);
	free(line);
	fclose(f);
	if (rc) {
		free(v);
		*n = 0;
		return rc;
	}
	*out = v;
	return 0;
}

/* Copy pages [addr, addr + n pages) into c->buf; returns how many pages
 * at the start were copied (the next one, if any, failed), or a negative
 * errno when reading is not allowed at all. */
static long copy_pages(struct capture *c, uint64_t addr, size_t n)
{
	struct iovec local = { c->buf, n * c->ps }, remote[BATCH];
	ssize_t got;

	if (!c->use_mem) {
		for (size_t i = 0; i < n; i++)
			remote[i] = (struct iovec){ (void *)(uintptr_t)(addr + i * c->ps), c->ps };
		got = process_vm_readv(c->pid, &local, 1, remote, n, 0);
		if (got >= 0)
			return (long)((size_t)got / c->ps);
		if (errno == ESRCH)
			return -ESRCH;
		if (errno != EPERM && errno != ENOSYS)
			return 0; /* EFAULT: the first page is gone */
		c->use_mem = true;
	}
	if (c->mem_fd < 0) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/mem", (int)c->pid);
		c->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (c->mem_fd < 0)
			return errno_of_proc(errno);
	}
	for (size_t i = 0; i < n; i++) {
		got = pread(c->mem_fd, c->buf + i * c->ps, c->ps, (off_t)(addr + i * c->ps));
		if (got != (ssize_t)c->ps)
			return (long)i;
	}
	return (long)n;
}

/* Copy and hand over a run of wanted pages. */
static int capture_run(struct capture *c, uint64_t addr, size_t n)
{
	while (n) {
		size_t want = n < BATCH ? n : BATCH;
		long got;

		if (c->st->pages + want > c->max_pages)
			want = c->max_pages - c->st->pages;
		if (!want) {
			c->st->limited = 1;
			return 0;
		}
		got = copy_pages(c, addr, want);
		if (got < 0)
			return (int)got;
		for (long i = 0; i < got; i++) {
			int rc = c->fn(c->arg, c->buf + (size_t)i * c->ps, c->ps);

			c->st->pages++;
			if (rc)
				return rc;
		}
		if ((size_t)got < want) { /* page addr + got failed: skip it */
			c->st->unreadable++;
			got++;
		}
		addr += (uint64_t)got * c->ps;
		n -= (size_t)got;
	}
	return 0;
}

static int capture_region(struct capture *c, const struct region *r)
{
	uint64_t pm[PAGEMAP_BATCH];
	uint64_t addr = r->start;

	while (addr < r->end && !c->st->limited) {
		size_t n = (size_t)((r->end - addr) / c->ps), i = 0;
		int rc;

		if (n > PAGEMAP_BATCH)
			n = PAGEMAP_BATCH;
		if (c->pagemap_fd < 0 ||
		    pread(c->pagemap_fd, pm, n * 8, (off_t)(addr / c->ps * 8)) != (ssize_t)(n * 8))
			for (size_t j = 0; j < n; j++)
				pm[j] = PM_PRESENT;
		while (i < n && !c->st->limited) {
			size_t j = i;

			if (!(pm[i] & (PM_PRESENT | PM_SWAPPED))) {
				c->st->unpopulated++;
				i++;
				continue;
			}
			while (j < n && (pm[j] & (PM_PRESENT | PM_SWAPPED)))
				j++;
			if ((rc = capture_run(c, addr + i * c->ps, j - i)))
				return rc;
			i = j;
		}
		addr += (uint64_t)n * c->ps;
	}
	return 0;
}

/* The published layout's end (base/abi.h): never changes. */
#define CAPTURE_STATS_MIN zmi_size_upto(struct workload_capture_stats, limited)

static int capture(pid_t pid, size_t max_bytes, workload_capture_fn fn, void *arg,
		   struct workload_capture_stats *st);

int workload_capture_sized(pid_t pid, size_t max_bytes, workload_capture_fn fn, void *arg,
			   struct workload_capture_stats *out, size_t size)
{
	struct workload_capture_stats st;
	int rc;

	if (out && size < CAPTURE_STATS_MIN)
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	rc = capture(pid, max_bytes, fn, arg, &st);
	if (out)
		zmi_struct_out(out, size, CAPTURE_STATS_MIN, &st, sizeof(st));
	return rc;
}

static int capture(pid_t pid, size_t max_bytes, workload_capture_fn fn, void *arg,
		   struct workload_capture_stats *st)
{
	struct capture c = { .pid = pid, .fn = fn, .arg = arg,
			     .pagemap_fd = -1, .mem_fd = -1 };
	struct region *regions = NULL;
	size_t nregions = 0;
	char path[64];
	int rc;

	if (pid <= 0 || !fn)
		return -EINVAL;
	c.st = st;
	c.ps = zmi_os_page_size();
	c.max_pages = max_bytes ? max_bytes / c.ps : SIZE_MAX;
	st->page_size = c.ps;
	if (kill(pid, 0) && errno == ESRCH)
		return -ESRCH;
	rc = read_maps(&c, &regions, &nregions);
	if (rc)
		return rc;
	c.buf = malloc(BATCH * c.ps);
	if (!c.buf) {
		free(regions);
		return -ENOMEM;
	}
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	c.pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
	for (size_t i = 0; i < nregions && !rc && !st->limited; i++) {
		st->regions++;
		rc = capture_region(&c, &regions[i]);
	}
	if (c.pagemap_fd >= 0)
		close(c.pagemap_fd);
	if (c.mem_fd >= 0)
		close(c.mem_fd);
	free(c.buf);
	free(regions);
	return rc;
}

struct membuf {
	unsigned char *p;
	size_t len, cap;
};

static int append(void *arg, const void *page, size_t ps)
{
	struct membuf *m = arg;

	if (m->len + ps > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256 * ps;
		unsigned char *np = realloc(m->p, cap);

		if (!np)
			return -ENOMEM;
		m->p = np;
		m->cap = cap;
	}
	memcpy(m->p + m->len, page, ps);
	m->len += ps;
	return 0;
}

int workload_capture_mem_sized(pid_t pid, size_t max_bytes, void **buf, size_t *len,
			       struct workload_capture_stats *st, size_t st_size)
{
	struct membuf m = { 0 };
	int rc;

	if (!buf || !len)
		return -EINVAL;
	*buf = NULL;
	*len = 0;
	rc = workload_capture_sized(pid, max_bytes, append, &m, st, st_size);
	if (rc) {
		free(m.p);
		return rc;
	}
	*buf = m.p;
	*len = m.len;
	return 0;
}
