/*
 * The backing file: where written-back pages go (zram's backing_dev).
 *
 * Layout: page i, if on file, is at offset i * page_size, as it was in
 * the pool: its compressed bytes (FILE_LEN of them) or, for a raw page,
 * all page_size.  So where a page is needs no record beyond the slot's
 * (store_internal.h), no allocator runs on the file, and freeing a page's
 * space is one hole punched over its range.  The file is sparse: as long
 * as the store's disk, taking blocks only where pages are.
 *
 * Compressed, not whole pages like zram: a page written back costs its
 * compressed bytes in writes (a third to a half of a page on process
 * memory, which is what writeback_limit rations: flash wear), no
 * decompression to write it, and no compression to bring it back into
 * the pool; with pages larger than the file system's blocks it also takes
 * fewer blocks.  What it gives up is O_DIRECT (lengths are not block
 * multiples), so written-back pages pass through the page cache, which
 * the kernel reclaims and writes out as it does any file's.  Packing
 * pages densely in the file instead would save blocks with 4 KiB pages
 * too, at the price of an allocator and a compactor for the file.
 * docs/tiering.md has the measurements.
 *
 * Errors are the system calls': ENOSPC, EDQUOT and EFBIG for a file that
 * cannot grow, EIO.  A short write is retried; a short read (the file
 * truncated under the store) is -EIO.
 *
 * Locks: none; the callers serialise the I/O of one page (writeback.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_internal.h"

int (*zmi_backing_fault)(int op, uint64_t index);

static int fault(int op, uint64_t index)
{
	int (*f)(int, uint64_t) = __atomic_load_n(&zmi_backing_fault, __ATOMIC_RELAXED);

	return f ? f(op, index) : 0;
}

int zmi_backing_open(struct zm_store *s, const char *path, int fd, uint64_t limit)
{
	uint64_t size = s->nr_pages * s->page_size;
	struct stat sb;

	s->bfd = -1;
	s->wb_left = limit ? limit : UINT64_MAX;
	if (!path && fd <= 0)
		return 0;
	if (path) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			zmi_bad_input("zm_store_create: backing file %s: %m", path);
			return -errno;
		}
		s->bfd_own = true;
	}
	s->bfd = fd;
	s->wb_buf = malloc(s->page_size);
	if (!s->wb_buf)
		return -ENOMEM;
	if (fstat(fd, &sb))
		return -errno;
	if (S_ISREG(sb.st_mode)) {
		/* its old content means nothing to this store */
		if (ftruncate(fd, 0) || ftruncate(fd, (off_t)size))
			return -errno;
	} else if (S_ISBLK(sb.st_mode)) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end < 0)
			return -errno;
		if ((uint64_t)end < size) {
			zmi_bad_input("zm_store_create: backing device of %lld bytes, the store "
				      "needs %llu", (long long)end, (unsigned long long)size);
			return -ENOSPC;
		}
	} else {
		zmi_bad_input("zm_store_create: the backing file is not a file or block device");
		return -EINVAL;
	}
	return 0;
}

void zmi_backing_close(struct zm_store *s)
{
	if (s->bfd >= 0) {
		struct stat sb;

		/* what is left on it means nothing without the store (a
		 * failure leaves only garbage behind) */
		if (!fstat(s->bfd, &sb) && S_ISREG(sb.st_mode) && ftruncate(s->bfd, 0) < 0)
			errno = 0;
		if (s->bfd_own)
			close(s->bfd);
	}
	free(s->wb_buf);
	s->wb_buf = NULL;
	s->bfd = -1;
}

int zmi_backing_write(struct zm_store *s, uint64_t index, const void *buf, size_t len)
{
	off_t off = (off_t)(index * s->page_size);
	size_t done = 0;
	int rc = fault('w', index);

	if (rc)
		return rc;
	while (done < len) {
		ssize_t n = pwrite(s->bfd, (const char *)buf + done, len - done,
				   off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int zmi_backing_read(struct zm_store *s, uint64_t index, void *buf, size_t len)
{
	off_t off = (off_t)(index * s->page_size);
	size_t done = 0;
	int rc = fault('r', index);

	if (rc)
		return rc;
	while (done < len) {
		ssize_t n = pread(s->bfd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

void zmi_backing_punch(struct zm_store *s, uint64_t index)
{
	/* a file system that cannot punch keeps the blocks: the next page
	 * written back at this index reuses them */
	if (fault('p', index))
		return;
	(void)fallocate(s->bfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)(index * s->page_size), (off_t)s->page_size);
}
