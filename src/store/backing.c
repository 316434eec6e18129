/*
 * The backing file: where written-back pages go (zram's backing_dev), and
 * where in it.
 *
 * Pages go to the file as they are in the pool: compressed (or raw, for a
 * huge page), not decompressed to whole pages as zram writes them.  A page
 * written back costs its compressed bytes in writes, no decompression to
 * write it and no compression to bring it back into the pool.  Where:
 *
 *   - 4 KiB pages (the file system's block): packed.  Pages are laid end
 *     to end in the block being filled; one that does not fit the rest of
 *     it runs on into the next block if that one is free (freed, or never
 *     used while no block is free), else starts a block of its own, a
 *     freed one if there is one, else the next never used (so that the
 *     blocks ever used stay those in use plus one).  So a first writeback
 *     is packed densely, and blocks freed later are reused first, a page
 *     to a block's start, running on where freed blocks are neighbours
 *     (a page that ran on is not cut off at the block's end: the rest of
 *     the block would be lost).  Each block counts the
 *     pages in it, a page running across counting in both (plus one while
 *     it is the block being filled); the last page out punches it to a
 *     hole and puts it on the free list.  A block not free holds a page,
 *     and a page pins at most two blocks, so the file needs at most two
 *     blocks a page: it is sized so (sparse, costing nothing), and a
 *     block device may be smaller, its writes beyond it failing as a full
 *     file's.
 *   - larger pages: at the page's index, offset index * page_size, its
 *     compressed bytes rounded up to blocks (a 32 KiB page compressed to
 *     a third takes 3 blocks of 8); no allocation at all, and freeing is
 *     one hole punched over the range.
 *
 * How pages written back leave the page cache, chosen at open
 * (backing_cache_mode), the first that works:
 *
 *   - ZM_STORE_CACHE_DIRECT: a second open of the file with O_DIRECT
 *     (the same open file: /proc/self/fd, checked by inode), tried with a
 *     write and a read of block 0 (unused yet, punched again after).  The
 *     pages never enter the page cache.  O_DIRECT wants whole aligned
 *     blocks from an aligned buffer, so each write is rounded out to its
 *     blocks in dbuf: the head of its first block (the bytes before it)
 *     from `head`, the copy of the last block a write ended inside, the
 *     tail of its last block zeros, and `head` becomes that last block as
 *     written.  A read is rounded out the same way into a bounce buffer.
 *     Holes are punched, and the file sized and emptied, through the
 *     first fd as before.
 *   - ZM_STORE_CACHE_DROP: written through the page cache, then (before
 *     a writeback lets go of wb_lock: zmi_store_backing_flush; sooner if it
 *     wrote DROP_BATCH) flushed and dropped, its blocks rounded out to
 *     whole ones: the packed layout's block being filled goes too, and
 *     is read again by the next write into it.  A read drops the blocks
 *     it pulled in, and the file is read without readahead
 *     (POSIX_FADV_RANDOM).
 *   - ZM_STORE_CACHE_NONE: tmpfs or ramfs (the file's pages are memory
 *     and cannot leave), or where neither works.
 *
 * Why padding and the head copy are enough (O_DIRECT).  Every write is
 * of pages zmi_store_backing_alloc just gave room, under wb_lock, in the order
 * the room was given (a batch's runs in order, a unit's chunks and the
 * cleaner's pages one by one), and the packed layout fills a block from
 * its start up, once between two punches (it is reused only when no page
 * is left in it, its bytes all dead).  Hence, when a write is made:
 *
 *   - the bytes of its last block after its end hold no live page: their
 *     room is given later (and written later, with this block's head
 *     from `head`), or never: zeros will do;
 *   - the live bytes of its first block before its start were written
 *     since the block was last taken, by writes of whole blocks, the last
 *     of which ended inside this block and left it in `head` (so `head`
 *     is the block being filled, sp->cur, as far as the writes have
 *     reached it; a freed block taken again is written from its start,
 *     or run on into from the block before it, where the write starts,
 *     and needs no head of its own); when
 *     `head` names another block (room was given in this block and never
 *     written, its page freed at once: dead bytes), the block is read
 *     back from the file first (zmi_store_backing_head_reads counts it; the
 *     tests see none without faults).  If `head` names this block from
 *     before its last punch, no write since put a live byte before the
 *     start (it would have renewed `head`): its stale bytes are dead.
 *
 * Nothing else writes the file.  Larger pages start at a block and own
 * their blocks whole: only the tail is padded.
 *
 * docs/tiering.md has the measurements of the three ways.
 *
 * Errors are the system calls', with EDQUOT and EFBIG (a file that cannot
 * grow) reported as ENOSPC: full, whatever the reason.  A short write is retried; a short read (the file
 * truncated under the store) is -EIO.
 *
 * Each block also counts its live bytes (a page running across counts its
 * part in each), and the space the blocks in use hold: what the cleaner
 * (clean.c) looks at to find blocks mostly dead.
 *
 * The backing store may be an NBD export instead (backing_uri): the same
 * layout, its I/O in backing_nbd.c, to which each I/O here hands over.
 *
 * Locks: space->lock, a leaf, for the packed layout's counts and free
 * list; it is taken under a slot lock (a put freeing a page on file) or
 * under wb_lock (allocating: one writeback at a time).  Every write
 * holds wb_lock: dbuf, head and head_blk are under it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "store/store_internal.h"

int (*zmi_store_backing_fault)(int op, uint64_t index);
int zmi_store_backing_cache_fail;
int zmi_store_backing_direct_fail;
uint64_t zmi_store_backing_pwrites;
uint64_t zmi_store_backing_head_reads;
uint64_t zmi_store_backing_preads;

/* The file system's block, the packed layout's unit. */
#define BLOCK 4096u
/* A writeback drops what it wrote at least every this many bytes of file
 * (the page cache holds no more of it), and spreads the cost of a drop
 * (two system calls and a wait for the disk) over as many pages. */
#define DROP_BATCH (4ull << 20)
/* A block of its own is looked for among this many freed last. */
#define FREE_LOOK 8
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif

struct zmi_store_file_space {
	pthread_mutex_t lock;
	uint16_t *refs;          /* per block: pages in it (+1: the block being
				    filled); refs_arr's elements */
	struct zmi_lazy refs_arr;
	uint16_t *live;          /* per block: live bytes of pages in it
				    (live_arr's elements) */
	struct zmi_lazy live_arr;
	uint64_t held;           /* blocks with a reference */
	uint64_t live_bytes;     /* the sum of live[] */
	uint64_t *free;          /* punched blocks, a stack; an entry whose
				    block has references again (taken by a
				    page running on into it) is stale, and
				    skipped */
	uint64_t nfree, free_cap;
	uint64_t next;           /* blocks from here on were never used */
	uint64_t cap;            /* blocks the file has room for */
	uint64_t cur, cur_used;  /* the block being filled; UINT64_MAX: none */
	uint64_t epoch;          /* NBD: the connection's epoch the block
				    being filled was taken under */
	/* O_DIRECT (ZM_STORE_CACHE_DIRECT) */
	int dfd;                 /* the file opened O_DIRECT (set at open) */
	char *dbuf;              /* dbuf_len, aligned: a write rounded out to
				    blocks (wb_lock) */
	size_t dbuf_len;
	char *head;              /* a block, aligned: block head_blk as the
				    last write ended inside it (wb_lock) */
	uint64_t head_blk;       /* UINT64_MAX: none */
};

static int fault(int op, uint64_t index)
{
	int (*f)(int, uint64_t) = __atomic_load_n(&zmi_store_backing_fault, __ATOMIC_RELAXED);

	return f ? f(op, index) : 0;
}

static bool packed(const struct zm_store *s)
{
	return s->page_size == BLOCK;
}

static void punch(struct zm_store *s, uint64_t index, uint64_t off, uint64_t len)
{
	/* a file system that cannot punch keeps the blocks: they are
	 * written over when used again */
	if (fault('p', index))
		return;
	if (s->nbd) {
		zmi_store_nbd_trim(s, off, len);
		return;
	}
	(void)fallocate(s->bfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			(off_t)len);
}

/* Is block b free: punched, with no reference (space->lock held)? */
static bool block_free(const struct zmi_store_file_space *sp, uint64_t b)
{
	return b < sp->next && b != sp->cur && !sp->refs[b];
}

/* Drop the free list's stale entries and repeats (space->lock held). */
static void free_tidy(struct zmi_store_file_space *sp)
{
	uint64_t kept = 0;

	for (uint64_t k = 0; k < sp->nfree; k++) {
		uint64_t b = sp->free[k];

		if (block_free(sp, b)) {
			sp->refs[b] = UINT16_MAX;   /* seen: a repeat is dropped */
			sp->free[kept++] = b;
		}
	}
	for (uint64_t k = 0; k < kept; k++)
		sp->refs[sp->free[k]] = 0;
	sp->nfree = kept;
}

/* Drop a reference to block b (space->lock held); the last punches it. */
static void block_put(struct zm_store *s, uint64_t index, uint64_t b)
{
	struct zmi_store_file_space *sp = s->space;

	ZM_ASSERT(sp->refs[b] > 0);
	if (--sp->refs[b])
		return;
	ZM_ASSERT(!sp->live[b]);
	sp->held--;
	punch(s, index, b * BLOCK, BLOCK);
	if (sp->nfree == sp->free_cap)
		free_tidy(sp);
	if (sp->nfree == sp->free_cap) {
		uint64_t cap = sp->free_cap ? sp->free_cap * 2 : 1024;
		uint64_t *f = realloc(sp->free, cap * sizeof(*f));

		if (!f)
			return;  /* lost to reuse: the file keeps a hole */
		sp->free = f;
		sp->free_cap = cap;
	}
	sp->free[sp->nfree++] = b;
}

/* Block b, to fill, with one reference (space->lock held). */
static void block_take(struct zm_store *s, uint64_t b)
{
	ZM_ASSERT(b < s->space->cap);
	zmi_lazy_mark(&s->space->refs_arr, b);
	zmi_lazy_mark(&s->space->live_arr, b);
	s->space->refs[b] = 1;
	s->space->held++;
}

/* Count len bytes at off in (sign 1) or out of (-1) the live bytes of the
 * blocks they are in (space->lock held; the blocks taken). */
static void live_count(struct zmi_store_file_space *sp, uint64_t off, size_t len, int sign)
{
	uint64_t b = off / BLOCK;
	uint32_t first = (uint32_t)(BLOCK - off % BLOCK);

	if (first > len)
		first = (uint32_t)len;
	sp->live[b] = (uint16_t)(sp->live[b] + sign * (int)first);
	if (len > first)
		sp->live[b + 1] = (uint16_t)(sp->live[b + 1] + sign * (int)(len - first));
	sp->live_bytes += (uint64_t)((int64_t)sign * (int64_t)len);
}

int zmi_store_backing_alloc(struct zm_store *s, uint64_t index, size_t len, uint64_t *off)
{
	struct zmi_store_file_space *sp = s->space;
	uint64_t b, epoch = 0;
	int rc = s->nbd ? zmi_store_nbd_ready(s, &epoch) : 0;

	if (rc)
		return rc;
	if (!packed(s)) {
		*off = index * s->page_size;
		return 0;
	}
	pthread_mutex_lock(&sp->lock);
	if (sp->epoch != epoch && sp->cur != UINT64_MAX) {
		/* the export lost the block's pages: none joins them */
		block_put(s, index, sp->cur);
		sp->cur = UINT64_MAX;
	}
	sp->epoch = epoch;
	if (sp->cur != UINT64_MAX && sp->cur_used + len <= BLOCK) {
		/* it fits the block being filled */
		*off = sp->cur * BLOCK + sp->cur_used;
		sp->cur_used += len;
		sp->refs[sp->cur]++;
	} else if (sp->cur != UINT64_MAX && sp->cur_used < BLOCK &&
		   (block_free(sp, sp->cur + 1) ||
		    (sp->held == sp->next && sp->cur + 1 == sp->next && sp->next < sp->cap))) {
		/* the next block is free, or no block is and the next was
		 * never used: the page runs on into it (freed blocks go
		 * first, so that the blocks ever used stay those in use, plus
		 * one); a freed one's entry on the free list goes stale */
		*off = sp->cur * BLOCK + sp->cur_used;
		sp->refs[sp->cur]++;
		b = sp->cur + 1;
		block_put(s, index, sp->cur);  /* its filling is over */
		block_take(s, b);
		if (b == sp->next)
			sp->next++;
		sp->cur = b;
		sp->cur_used = sp->cur_used + len - BLOCK;
		sp->refs[sp->cur]++;
	} else {
		/* a block of its own to start: a freed one, else the next;
		 * of the last FREE_LOOK freed, one whose next block is free
		 * too if there is one, so that the pages after it run on
		 * into that one rather than each leave its block's end */
		b = UINT64_MAX;
		for (uint64_t k = 1; k <= FREE_LOOK && k <= sp->nfree; k++) {
			uint64_t c = sp->free[sp->nfree - k];

			if (block_free(sp, c) && block_free(sp, c + 1)) {
				sp->free[sp->nfree - k] = sp->free[sp->nfree - 1];
				sp->free[sp->nfree - 1] = c;
				break;
			}
		}
		while (sp->nfree && b == UINT64_MAX) {
			b = sp->free[--sp->nfree];
			if (!block_free(sp, b))
				b = UINT64_MAX;   /* stale */
		}
		if (b == UINT64_MAX) {
			if (sp->next == sp->cap) {
				pthread_mutex_unlock(&sp->lock);
				return -ENOSPC;
			}
			b = sp->next++;
		}
		if (sp->cur != UINT64_MAX)
			block_put(s, index, sp->cur);  /* its filling is over */
		block_take(s, b);
		sp->cur = b;
		*off = b * BLOCK;
		sp->cur_used = len;
		sp->refs[b]++;
	}
	live_count(sp, *off, len, 1);
	pthread_mutex_unlock(&sp->lock);
	return 0;
}

void zmi_store_backing_free(struct zm_store *s, uint64_t index, uint64_t off, size_t len)
{
	struct zmi_store_file_space *sp = s->space;

	if (s->nbd)
		zmi_store_nbd_forget(s, off);
	if (!packed(s)) {
		punch(s, index, off, s->page_size);
		return;
	}
	pthread_mutex_lock(&sp->lock);
	live_count(sp, off, len, -1);
	block_put(s, index, off / BLOCK);
	if ((off + len - 1) / BLOCK != off / BLOCK)
		block_put(s, index, off / BLOCK + 1);  /* it ran on into the next */
	pthread_mutex_unlock(&sp->lock);
}

void zmi_store_backing_usage(struct zm_store *s, uint64_t *held, uint64_t *live)
{
	struct zmi_store_file_space *sp = s->space;

	*held = *live = 0;
	if (!sp || !packed(s))
		return;
	pthread_mutex_lock(&sp->lock);
	*held = sp->held * BLOCK;
	*live = sp->live_bytes;
	pthread_mutex_unlock(&sp->lock);
}

/* Live bytes by sixteenths of a block, for the cleaner's threshold. */
#define LIVE_BUCKETS 16

uint32_t zmi_store_backing_clean_threshold(struct zm_store *s, unsigned target_pct)
{
	struct zmi_store_file_space *sp = s->space;
	uint64_t n[LIVE_BUCKETS] = { 0 }, bytes[LIVE_BUCKETS] = { 0 };
	uint64_t held, live, goal, moved = 0, blocks = 0;
	uint32_t max_live = 0;

	if (!sp || !packed(s))
		return 0;
	pthread_mutex_lock(&sp->lock);
	held = sp->held * BLOCK;
	live = sp->live_bytes;
	goal = live / 100 * target_pct + live % 100 * target_pct / 100;
	if (held > goal) {
		for (uint64_t b = zmi_lazy_next(&sp->refs_arr, 0, sp->next); b < sp->next;
		     b = zmi_lazy_next(&sp->refs_arr, b + 1, sp->next)) {
			unsigned k;

			if (!sp->refs[b] || b == sp->cur)
				continue;
			k = sp->live[b] * LIVE_BUCKETS / (BLOCK + 1);
			n[k]++;
			bytes[k] += sp->live[b];
		}
		/* the sparsest first, until moving them (their bytes packed
		 * anew, a tenth of it lost to blocks' ends) brings the file
		 * to the goal; never blocks more than 7/8 full */
		for (unsigned k = 0; k < LIVE_BUCKETS - 2; k++) {
			blocks += n[k];
			moved += bytes[k];
			max_live = (k + 1) * BLOCK / LIVE_BUCKETS;
			if (held - blocks * BLOCK + moved + moved / 10 <= goal)
				break;
		}
	}
	pthread_mutex_unlock(&sp->lock);
	return max_live;
}

bool zmi_store_backing_sparse(struct zm_store *s, uint64_t off, size_t len, uint32_t max_live)
{
	struct zmi_store_file_space *sp = s->space;
	uint64_t b = off / BLOCK, e = (off + len - 1) / BLOCK;
	bool yes;

	if (!sp || !packed(s) || !max_live)
		return false;
	pthread_mutex_lock(&sp->lock);
	/* the block being filled is where the page would go */
	yes = b != sp->cur && e != sp->cur && (sp->live[b] < max_live || sp->live[e] < max_live);
	pthread_mutex_unlock(&sp->lock);
	return yes;
}

bool zmi_store_has_file(const struct zm_store *s)
{
	/* getpid() rather than a fork handler: it also sees a child made
	 * by a clone() that runs no handlers; every caller is about to
	 * make a system call on the file anyway */
	return (s->bfd >= 0 || s->nbd) && s->bfd_pid == getpid();
}

/* Is the file on tmpfs or ramfs, its pages memory themselves? */
static bool file_in_memory(int fd)
{
	struct statfs fs;

	return !fstatfs(fd, &fs) && ((unsigned long)fs.f_type == TMPFS_MAGIC ||
				     (unsigned long)fs.f_type == RAMFS_MAGIC);
}

/* Round x up to blocks. */
static uint64_t block_up(uint64_t x)
{
	return (x + BLOCK - 1) / BLOCK * BLOCK;
}

/* Read n bytes (whole blocks) at off into buf, aligned, through the
 * O_DIRECT fd: 0 or -EIO (a short read: the file cut under the store). */
static int direct_pread(int dfd, void *buf, size_t n, uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = pread(dfd, (char *)buf + done, n - done, (off_t)(off + done));

		__atomic_fetch_add(&zmi_store_backing_preads, 1, __ATOMIC_RELAXED);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/* Write n bytes (whole blocks) at off from buf, aligned, through the
 * O_DIRECT fd: 0 or a negative errno as zmi_store_backing_write_run's. */
static int direct_pwrite(int dfd, const void *buf, size_t n, uint64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = pwrite(dfd, (const char *)buf + done, n - done, (off_t)(off + done));

		__atomic_fetch_add(&zmi_store_backing_pwrites, 1, __ATOMIC_RELAXED);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w < 0 && (errno == EFBIG || errno == EDQUOT))
				return -ENOSPC;
			return w < 0 ? -errno : -EIO;
		}
		done += (size_t)w;
	}
	return 0;
}

/* Open the file fd again with O_DIRECT (the same file, not the same
 * path: it may have moved) and try it on block 0, unused yet: 0 and
 * sp->dfd set, or -1 where the file system refuses (or the seam). */
static int direct_open(struct zm_store *s, int fd, bool regular)
{
	struct zmi_store_file_space *sp = s->space;
	struct stat a, b;
	char name[64];
	int dfd;

	if (zmi_store_backing_direct_fail || zmi_store_backing_cache_fail || file_in_memory(fd))
		return -1;
	snprintf(name, sizeof(name), "/proc/self/fd/%d", fd);
	dfd = open(name, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	/* a write a batch (or a page), rounded out: a block more each side */
	sp->dbuf_len = (s->page_size > ZMI_WB_BATCH_BYTES ? s->page_size : ZMI_WB_BATCH_BYTES) +
		       2 * BLOCK;
	if (fstat(fd, &a) || fstat(dfd, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino ||
	    posix_memalign((void **)&sp->dbuf, BLOCK, sp->dbuf_len) ||
	    posix_memalign((void **)&sp->head, BLOCK, BLOCK))
		goto fail;
	memset(sp->dbuf, 0, BLOCK);
	if (direct_pwrite(dfd, sp->dbuf, BLOCK, 0) || direct_pread(dfd, sp->head, BLOCK, 0) ||
	    memcmp(sp->dbuf, sp->head, BLOCK))
		goto fail;
	if (regular)   /* sparse again */
		(void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, BLOCK);
	sp->dfd = dfd;
	return 0;
fail:
	free(sp->dbuf);
	free(sp->head);
	sp->dbuf = sp->head = NULL;
	close(dfd);
	return -1;
}

/* How the file's pages leave the page cache: never entering it where the
 * file takes O_DIRECT, else flushed and dropped where the file allows
 * both (and its pages are not memory themselves), else not at all. */
static int cache_mode(struct zm_store *s, int fd, bool regular)
{
	if (zmi_store_backing_cache_fail || file_in_memory(fd))
		return ZM_STORE_CACHE_NONE;
	if (!direct_open(s, fd, regular))
		return ZM_STORE_CACHE_DIRECT;
	/* nothing is written yet: cheap, and fails where it cannot work */
	if (sync_file_range(fd, 0, BLOCK, SYNC_FILE_RANGE_WRITE))
		return ZM_STORE_CACHE_NONE;
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) ||
	    posix_fadvise(fd, 0, BLOCK, POSIX_FADV_DONTNEED))
		return ZM_STORE_CACHE_NONE;
	return ZM_STORE_CACHE_DROP;
}

/* Write [lo, hi) out, waiting for it, and drop its blocks, whole, from the
 * page cache.  Failures change nothing the store relies on: the blocks
 * stay cached (a write error the kernel met is the file's, as without
 * this). */
static void drop_range(int fd, uint64_t lo, uint64_t hi)
{
	lo = lo / BLOCK * BLOCK;
	hi = (hi + BLOCK - 1) / BLOCK * BLOCK;
	(void)sync_file_range(fd, (off_t)lo, (off_t)(hi - lo),
			      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				      SYNC_FILE_RANGE_WAIT_AFTER);
	(void)posix_fadvise(fd, (off_t)lo, (off_t)(hi - lo), POSIX_FADV_DONTNEED);
}

void zmi_store_backing_flush(struct zm_store *s)
{
	if (s->nbd) {
		zmi_store_nbd_flush(s);
		return;
	}
	if (s->wb_lo == s->wb_hi)
		return;
	if (s->bcache == ZM_STORE_CACHE_DROP && zmi_store_has_file(s))
		drop_range(s->bfd, s->wb_lo, s->wb_hi);
	s->wb_lo = s->wb_hi = 0;
}

int zmi_store_backing_open(struct zm_store *s, const char *path, int fd, uint64_t limit)
{
	/* packed: two blocks a page at most (one that runs on into a second
	 * pins both), and the one being filled */
	uint64_t size = (s->nr_pages * (packed(s) ? 2 : 1) + 1) * s->page_size;
	struct zmi_store_file_space *sp;
	struct stat sb;

	s->wb_left = limit ? limit : UINT64_MAX;
	if (!path && fd <= 0)
		return 0;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	pthread_mutex_init(&sp->lock, NULL);
	sp->cur = UINT64_MAX;
	sp->dfd = -1;
	sp->head_blk = UINT64_MAX;
	s->space = sp;
	s->wb_buf = malloc(s->page_size > ZMI_WB_BATCH_BYTES ? s->page_size : ZMI_WB_BATCH_BYTES);
	if (!s->wb_buf)
		return -ENOMEM;
	if (path) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			zmi_bad_input("zm_store_create: backing file %s: %m", path);
			return -errno;
		}
		s->bfd_own = true;
	}
	s->bfd = fd;
	s->bfd_pid = getpid();
	/* two stores on one file would empty and overwrite each other's
	 * pages: the first holds it (an fd the caller locked already, on
	 * the same open file, passes) */
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;

		/* not ours: closed here, never emptied (zmi_store_backing_close
		 * empties the file of a store that held it) */
		zmi_bad_input("zm_store_create: the backing file is in use by another store");
		if (s->bfd_own)
			close(fd);
		s->bfd = -1;
		return rc;
	}
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
		/* packed: what the device has, as long as every page fits
		 * once (writes beyond its room fail as a full file) */
		if (packed(s) && (uint64_t)end >= (s->nr_pages + 1) * s->page_size)
			size = (uint64_t)end / BLOCK * BLOCK;
		if ((uint64_t)end < size) {
			zmi_bad_input("zm_store_create: backing device of %lld bytes, the store "
				      "needs %llu", (long long)end, (unsigned long long)size);
			return -ENOSPC;
		}
	} else {
		zmi_bad_input("zm_store_create: the backing file is not a file or block device");
		return -EINVAL;
	}
	sp->cap = size / BLOCK;
	/* a count for every block the file has room for */
	if (packed(s) && zmi_lazy_init(&sp->refs_arr, sp->cap, sizeof(uint16_t)))
		return -ENOMEM;
	sp->refs = sp->refs_arr.base;
	s->bcache = cache_mode(s, fd, S_ISREG(sb.st_mode));
	if (packed(s) && zmi_lazy_init(&sp->live_arr, sp->cap, sizeof(uint16_t)))
		return -ENOMEM;
	sp->live = sp->live_arr.base;
	return 0;
}

void zmi_store_backing_close(struct zm_store *s)
{
	zmi_store_nbd_close(s);
	if (s->bfd >= 0 && !zmi_store_has_file(s)) {
		/* a forked child's: the file and its lock stay the parent's
		 * (the lock belongs to the open file both share) */
		if (s->bfd_own)
			close(s->bfd);
	} else if (s->bfd >= 0) {
		struct stat sb;

		/* what is left on it means nothing without the store (a
		 * failure leaves only garbage behind) */
		if (!fstat(s->bfd, &sb) && S_ISREG(sb.st_mode) && ftruncate(s->bfd, 0) < 0)
			errno = 0;
		/* a caller's fd outlives the store: so would the lock */
		(void)flock(s->bfd, LOCK_UN);
		if (s->bfd_own)
			close(s->bfd);
	}
	if (s->space) {
		/* ours in a forked child too (its copy of the fd) */
		if (s->space->dfd >= 0)
			close(s->space->dfd);
		free(s->space->dbuf);
		free(s->space->head);
		zmi_lazy_fini(&s->space->refs_arr);
		zmi_lazy_fini(&s->space->live_arr);
		free(s->space->free);
		pthread_mutex_destroy(&s->space->lock);
		free(s->space);
		s->space = NULL;
	}
	free(s->wb_buf);
	s->wb_buf = NULL;
	s->bfd = -1;
	s->bcache = ZM_STORE_CACHE_NONE;
	s->wb_lo = s->wb_hi = 0;
}

int zmi_store_backing_write_fault(uint64_t index)
{
	return fault('w', index);
}

/* zmi_store_backing_write_run through the O_DIRECT fd: [off, off + len) rounded
 * out to its blocks in dbuf, the head of the first from `head` (or the
 * file), the tail of the last zeros (why that is enough: the comment at
 * the top), then `head` is the last block as written.  wb_lock held. */
static int direct_write(struct zm_store *s, uint64_t off, const void *buf, size_t len)
{
	struct zmi_store_file_space *sp = s->space;
	uint64_t lo = off / BLOCK * BLOCK, n = block_up(off + len) - lo;
	size_t in = (size_t)(off - lo);
	int rc;

	if (n > sp->dbuf_len)
		return -EINVAL;   /* no caller writes more than a batch */
	if (in && sp->head_blk == lo / BLOCK) {
		memcpy(sp->dbuf, sp->head, in);
	} else if (in) {
		rc = direct_pread(sp->dfd, sp->dbuf, BLOCK, lo);
		__atomic_fetch_add(&zmi_store_backing_head_reads, 1, __ATOMIC_RELAXED);
		if (rc)
			return rc;
	}
	memcpy(sp->dbuf + in, buf, len);
	memset(sp->dbuf + in + len, 0, (size_t)(n - in - len));
	rc = direct_pwrite(sp->dfd, sp->dbuf, (size_t)n, lo);
	/* what the write meant to leave, even if it failed: its pages are
	 * then freed, dead, and the live bytes before them were right */
	if ((off + len) % BLOCK) {
		sp->head_blk = (off + len) / BLOCK;
		memcpy(sp->head, sp->dbuf + n - BLOCK, BLOCK);
	} else {
		sp->head_blk = UINT64_MAX;
	}
	return rc;
}

int zmi_store_backing_write_run(struct zm_store *s, uint64_t off, const void *buf, size_t len)
{
	size_t done = 0;

	if (s->nbd)
		return zmi_store_nbd_write(s, off, buf, len);
	if (s->bcache == ZM_STORE_CACHE_DIRECT)
		return direct_write(s, off, buf, len);
	while (done < len) {
		ssize_t n = pwrite(s->bfd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		__atomic_fetch_add(&zmi_store_backing_pwrites, 1, __ATOMIC_RELAXED);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* a file that cannot grow, whatever the reason, is
			 * full (-EDQUOT is the store's writeback_limit) */
			if (n < 0 && (errno == EFBIG || errno == EDQUOT))
				return -ENOSPC;
			return n < 0 ? -errno : -EIO;
		}
		done += (size_t)n;
	}
	if (s->bcache != ZM_STORE_CACHE_DROP)
		return 0;
	/* the range to drop: this write's, with the batch's while they stay
	 * within DROP_BATCH of each other (packed writes run on, mostly) */
	if (s->wb_lo != s->wb_hi &&
	    (off + len > s->wb_lo + DROP_BATCH || off + DROP_BATCH < s->wb_hi))
		zmi_store_backing_flush(s);
	if (s->wb_lo == s->wb_hi) {
		s->wb_lo = off;
		s->wb_hi = off + len;
	} else {
		s->wb_lo = off < s->wb_lo ? off : s->wb_lo;
		s->wb_hi = off + len > s->wb_hi ? off + len : s->wb_hi;
	}
	return 0;
}

int zmi_store_backing_write(struct zm_store *s, uint64_t index, uint64_t off, const void *buf,
			    size_t len)
{
	int rc = fault('w', index);

	return rc ? rc : zmi_store_backing_write_run(s, off, buf, len);
}

/* zmi_store_backing_read through the O_DIRECT fd: the record's blocks into an
 * aligned bounce buffer of the caller's own (reads run in parallel, with
 * no lock), then its bytes out. */
static int direct_read(struct zm_store *s, uint64_t off, void *buf, size_t len)
{
	uint64_t lo = off / BLOCK * BLOCK, n = block_up(off + len) - lo;
	_Alignas(BLOCK) char two[2 * BLOCK];   /* a packed page's at most */
	char *b = two;
	int rc;

	if (n > sizeof(two) && posix_memalign((void **)&b, BLOCK, (size_t)n))
		return -ENOMEM;
	rc = direct_pread(s->space->dfd, b, (size_t)n, lo);
	if (!rc)
		memcpy(buf, b + (off - lo), len);
	if (b != two)
		free(b);
	return rc;
}

int zmi_store_backing_read(struct zm_store *s, uint64_t index, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;
	int rc = fault('r', index);

	if (rc)
		return rc;
	if (s->nbd)
		return zmi_store_nbd_read(s, off, buf, len);
	if (s->bcache == ZM_STORE_CACHE_DIRECT)
		return direct_read(s, off, buf, len);
	while (done < len) {
		ssize_t n = pread(s->bfd, (char *)buf + done, len - done, (off_t)(off + done));

		__atomic_fetch_add(&zmi_store_backing_preads, 1, __ATOMIC_RELAXED);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		done += (size_t)n;
	}
	/* the blocks it pulled in (a dirty one of a writeback under way is
	 * left be by the kernel) */
	if (s->bcache == ZM_STORE_CACHE_DROP)
		(void)posix_fadvise(s->bfd, (off_t)(off / BLOCK * BLOCK),
				    (off_t)((off + len + BLOCK - 1) / BLOCK * BLOCK - off / BLOCK * BLOCK),
				    POSIX_FADV_DONTNEED);
	return 0;
}

int zmi_store_backing_read_fault(uint64_t index)
{
	return fault('r', index);
}

int zmi_store_backing_read_run(struct zm_store *s, uint64_t off, void *buf, size_t len)
{
	size_t done = 0;
	/* the O_DIRECT fd where writes go round the page cache: reads too */
	int fd = s->bcache == ZM_STORE_CACHE_DIRECT ? s->space->dfd : s->bfd;

	if (s->nbd)
		return zmi_store_nbd_read(s, off, buf, len);
	/* whole blocks, at a block-aligned buffer: what O_DIRECT takes */
	ZM_ASSERT(off % BLOCK == 0 && len % BLOCK == 0 && (uintptr_t)buf % BLOCK == 0);
	while (done < len) {
		ssize_t n2 = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		__atomic_fetch_add(&zmi_store_backing_preads, 1, __ATOMIC_RELAXED);
		if (n2 < 0 && errno == EINTR)
			continue;
		if (n2 <= 0)
			return -EIO;
		done += (size_t)n2;
	}
	if (s->bcache == ZM_STORE_CACHE_DROP)
		(void)posix_fadvise(s->bfd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
	return 0;
}

int zmi_store_backing_read_span(struct zm_store *s, const uint64_t *index, unsigned n, uint64_t off,
				void *buf, size_t len)
{
	for (unsigned k = 0; k < n; k++) {
		int rc = fault('r', index[k]);

		if (rc)
			return rc;
	}
	return zmi_store_backing_read_run(s, off, buf, len);
}

int zmi_store_backing_open_uri(struct zm_store *s, const char *uri)
{
	/* as a block device: room for every page once (and a block), more
	 * used up to two blocks a page */
	uint64_t size = (s->nr_pages * (packed(s) ? 2 : 1) + 1) * s->page_size;
	uint64_t room;
	struct zmi_store_file_space *sp = calloc(1, sizeof(*sp));
	int rc;

	if (!sp)
		return -ENOMEM;
	pthread_mutex_init(&sp->lock, NULL);
	sp->cur = UINT64_MAX;
	s->space = sp;
	s->wb_buf = malloc(s->page_size > ZMI_WB_BATCH_BYTES ? s->page_size : ZMI_WB_BATCH_BYTES);
	if (!s->wb_buf)
		return -ENOMEM;
	s->bfd_pid = getpid();
	rc = zmi_store_nbd_open(s, uri, (s->nr_pages + 1) * s->page_size, &room);
	if (rc)
		return rc;
	if (room < size)
		size = room;
	sp->cap = size / BLOCK;
	if (packed(s) && (zmi_lazy_init(&sp->refs_arr, sp->cap, sizeof(uint16_t)) ||
			  zmi_lazy_init(&sp->live_arr, sp->cap, sizeof(uint16_t))))
		return -ENOMEM;
	sp->refs = sp->refs_arr.base;
	sp->live = sp->live_arr.base;
	s->bcache = ZM_STORE_CACHE_NONE;   /* no page cache on this side */
	return 0;
}
