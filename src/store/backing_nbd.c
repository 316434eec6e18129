/*
 * The backing store on an NBD export (backing_uri): cold pages in another
 * process's or machine's memory, through libnbd.  backing.c lays the
 * pages out as in a file (the same packed layout, the export's size the
 * room) and calls here for the I/O: a write where it would pwrite, a read
 * where it would pread, a trim where it would punch a hole.
 *
 * The export's first block is the store's: a label (LABEL, then a number
 * drawn at open) that says the export still holds what the store wrote.
 * The pages' offsets are the layout's plus that block.
 *
 * Faults.  A command that fails (the connection broke, the server went
 * away) drops the connection: reads of pages on the export answer -EIO,
 * and writeback stops (zmi_store_nbd_ready: -ENOSPC, so that a put at the
 * limit fails as without a backing store); the pages in memory are not
 * touched.  The next writeback, or a read that finds no writeback running,
 * connects again, at most once a second (RETRY_NS).  If the export has
 * the label, nothing was lost; if not (a memory export restarted empty,
 * or another export), every page written before is lost: the epoch goes
 * up, and a page whose blocks were written under an older epoch reads as
 * -EIO until it is overwritten or discarded, which frees its room as
 * any page's.  Each block remembers the epoch of its last write (bepoch);
 * backing.c ends the filling of the block being filled when the epoch
 * changes, so no block holds pages of two epochs.  The pages on the
 * export at a loss are counted in bd_lost (those counted at an earlier
 * loss and still recorded, less).
 *
 * One connection per store, and one command on it at a time: `lock` is
 * held across each libnbd call.  libnbd serialises the calls on a handle
 * anyway (its own lock is held for a whole synchronous command), so
 * concurrent reads would queue there without it; holding ours as well
 * makes the reconnection (the handle swapped, the epoch moved, the lost
 * pages counted) atomic with respect to every I/O.  Writeback is one at
 * a time already (wb_lock) and reads of cold pages are the rare path; a
 * pipeline of aio commands would let reads overlap the writes, at the
 * cost of a second thread of state; not needed for writeback at half the
 * local file's speed (docs/results/2026-12-05-nbd-backing.md).
 *
 * Trims are queued (tlock, a leaf: they come from frees under a slot lock
 * or the layout's space lock, where no network round trip belongs) and
 * sent, merged, before the next write or at the end of a writeback
 * (wb_lock held), so that a block trimmed and then written again sees the
 * trim first.  A full queue drops a trim: the block keeps its old bytes,
 * as a file system that cannot punch keeps them.
 *
 * Locks: wb_lock -> lock -> space lock (backing.c, to count the lost
 * pages) ; tlock is a leaf.  A read takes wb_lock only with trylock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/os.h"
#include "store/store_internal.h"

int zmi_store_nbd_retry_now;

#ifndef ZM_HAVE_LIBNBD

int zmi_store_nbd_open(struct zm_store *s, const char *uri, uint64_t need, uint64_t *room)
{
	zmi_log("zm_store_create: backing_uri %s: zmem was built without libnbd", uri);
	return -EOPNOTSUPP;
}

void zmi_store_nbd_close(struct zm_store *s)
{
}

int zmi_store_nbd_ready(struct zm_store *s, uint64_t *epoch)
{
	return -ENOSPC;
}

int zmi_store_nbd_write(struct zm_store *s, uint64_t off, const void *buf, size_t len)
{
	return -ENOSPC;
}

int zmi_store_nbd_read(struct zm_store *s, uint64_t off, void *buf, size_t len)
{
	return -EIO;
}

void zmi_store_nbd_trim(struct zm_store *s, uint64_t off, uint64_t len)
{
}

void zmi_store_nbd_forget(struct zm_store *s, uint64_t off)
{
}

void zmi_store_nbd_flush(struct zm_store *s)
{
}

uint64_t zmi_store_nbd_lost(const struct zm_store *s)
{
	return 0;
}

#else

#include <dlfcn.h>
#include <libnbd.h>
#include <poll.h>
#include <pthread.h>

/*
 * libnbd is loaded when a store first asks for it (dlopen of its shared
 * library, LIBNBD_SO), not linked: a program that never names a
 * backing_uri needs neither libnbd nor its own dependencies (GnuTLS,
 * libxml2), and links libzmem statically without them.  Its header gives
 * the calls' types; the macros below send each call through the pointer
 * dlsym found.
 */
#define LIBNBD_SO "libnbd.so.0"
#define NBD_CALLS(X)                                                          \
	X(nbd_aio_get_fd) X(nbd_can_trim) X(nbd_close) X(nbd_connect_uri)     \
	X(nbd_create) X(nbd_flush) X(nbd_get_error) X(nbd_get_size)           \
	X(nbd_is_read_only) X(nbd_pread) X(nbd_pwrite) X(nbd_shutdown)        \
	X(nbd_trim)
#define NBD_PTR(f) __typeof__(f) *f;
static struct {
	NBD_CALLS(NBD_PTR)
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;
static bool lib_ok;

static void lib_load(void)
{
	void *h = dlopen(LIBNBD_SO, RTLD_NOW | RTLD_LOCAL);
	bool ok = h != NULL;

	if (!h)
		return;
#define NBD_SYM(f) ok = ok && (*(void **)&lib.f = dlsym(h, #f)) != NULL;
	NBD_CALLS(NBD_SYM)
	/* the handle stays open: the calls live in it */
	lib_ok = ok;
}

#define nbd_aio_get_fd (*lib.nbd_aio_get_fd)
#define nbd_can_trim (*lib.nbd_can_trim)
#define nbd_close (*lib.nbd_close)
#define nbd_connect_uri (*lib.nbd_connect_uri)
#define nbd_create (*lib.nbd_create)
#define nbd_flush (*lib.nbd_flush)
#define nbd_get_error (*lib.nbd_get_error)
#define nbd_get_size (*lib.nbd_get_size)
#define nbd_is_read_only (*lib.nbd_is_read_only)
#define nbd_pread (*lib.nbd_pread)
#define nbd_pwrite (*lib.nbd_pwrite)
#define nbd_shutdown (*lib.nbd_shutdown)
#define nbd_trim (*lib.nbd_trim)

/* The layout's block (backing.c's). */
#define BLOCK 4096u
/* The label at the export's start. */
#define LABEL "zmem backing store\n"
#define LABEL_BYTES 64
/* Reconnections are tried at most this often. */
#define RETRY_NS 1000000000ull
/* The connection is looked at (is the socket still open?) at most this
 * often before a command. */
#define ALIVE_NS 1000000ull
/* Trims waiting for the next write (ranges, adjacent ones merged). */
#define TRIM_QUEUE 256

struct zmi_store_nbd {
	pthread_mutex_t lock;    /* the handle and what follows, to tlock */
	struct nbd_handle *h;    /* NULL: no connection */
	char *uri;
	uint64_t room;           /* bytes for pages (the export's, less BLOCK) */
	uint64_t epoch;          /* atomic reads: the connection's epoch */
	uint64_t last_try;       /* ns: the last connection attempt */
	uint64_t last_look;      /* ns: the last look at the socket */
	uint64_t lost;           /* atomic: bd_lost */
	uint64_t lost_on;        /* atomic: pages lost still recorded */
	bool can_trim;
	char label[LABEL_BYTES];
	uint32_t *bepoch;        /* per block: its last write's epoch
				    (bepoch_arr's elements) */
	struct zmi_lazy bepoch_arr;

	pthread_mutex_t tlock;   /* a leaf: the queue */
	uint64_t trim[TRIM_QUEUE][2];  /* offset, length */
	unsigned ntrim;
};

/* Drop the connection (lock held); what: the failed call (its libnbd
 * error said), or NULL: the server closed it. */
static void drop(struct zmi_store_nbd *n, const char *what)
{
	const char *e = nbd_get_error();

	zmi_log("backing store %s: %s%s%s; pages on it read as errors until it is back", n->uri,
		what ? what : "the server closed the connection", what ? ": " : "",
		what ? (e ? e : "failed") : "");
	nbd_close(n->h);
	n->h = NULL;
}

/* Connect (lock held); on a new handle, *h.  0 or -EIO. */
static int connect_uri(struct zmi_store_nbd *n, struct nbd_handle **out)
{
	struct nbd_handle *h = nbd_create();

	if (!h)
		return -ENOMEM;
	if (nbd_connect_uri(h, n->uri) == -1) {
		nbd_close(h);
		return -EIO;
	}
	*out = h;
	return 0;
}

/* Has the server closed the connection while it was idle (lock held)?
 * No command is in flight between calls, so a socket with something to
 * read has met its end; libnbd would find out only at the next command,
 * which would fail for nothing.  Then it is dropped. */
static void look(struct zmi_store_nbd *n)
{
	uint64_t now = zmi_os_now_ns();
	struct pollfd p;

	if (!n->h || now - n->last_look < ALIVE_NS)
		return;
	n->last_look = now;
	p.fd = nbd_aio_get_fd(n->h);
	p.events = POLLIN | POLLRDHUP;
	if (p.fd < 0 || poll(&p, 1, 0) != 0)
		drop(n, NULL);
}

static bool block_ok(const struct zmi_store_nbd *n, uint64_t b)
{
	return __atomic_load_n(&n->bepoch[b], __ATOMIC_RELAXED) == n->epoch;
}

/* The export is back (lock held, wb_lock too: no page is being written):
 * is it the one we wrote, or did it lose the pages? */
static void reconnect(struct zm_store *s, struct zmi_store_nbd *n)
{
	uint64_t now = zmi_os_now_ns(), on_file, before;
	char label[LABEL_BYTES];
	struct nbd_handle *h;

	if (!zmi_store_nbd_retry_now && n->last_try && now - n->last_try < RETRY_NS)
		return;
	n->last_try = now;
	if (connect_uri(n, &h))
		return;
	if (nbd_get_size(h) < (int64_t)(n->room + BLOCK)) {
		zmi_log("backing store %s: back smaller than before; not used", n->uri);
		nbd_close(h);
		return;
	}
	if (nbd_pread(h, label, sizeof(label), 0, 0) == -1) {
		nbd_close(h);
		return;
	}
	if (memcmp(label, n->label, sizeof(label))) {
		/* every page written before is gone */
		if (nbd_pwrite(h, n->label, sizeof(n->label), 0, 0) == -1) {
			nbd_close(h);
			return;
		}
		on_file = zmi_store_counter_sum(s, C_FILE);
		before = __atomic_load_n(&n->lost_on, __ATOMIC_RELAXED);
		__atomic_fetch_add(&n->lost, on_file > before ? on_file - before : 0,
				   __ATOMIC_RELAXED);
		__atomic_store_n(&n->lost_on, on_file, __ATOMIC_RELAXED);
		__atomic_store_n(&n->epoch, n->epoch + 1, __ATOMIC_RELAXED);
		zmi_log("backing store %s: back without its pages: %llu lost", n->uri,
			(unsigned long long)(on_file > before ? on_file - before : 0));
	} else {
		zmi_log("backing store %s: back, with its pages", n->uri);
	}
	n->can_trim = nbd_can_trim(h) == 1;
	n->h = h;
}

int zmi_store_nbd_open(struct zm_store *s, const char *uri, uint64_t need, uint64_t *room)
{
	struct zmi_store_nbd *n = calloc(1, sizeof(*n));
	uint64_t id[2];
	int64_t size;
	int rc;

	if (!n)
		return -ENOMEM;
	pthread_once(&lib_once, lib_load);
	if (!lib_ok) {
		free(n);
		zmi_log("zm_store_create: backing_uri %s: %s not found (Debian's libnbd0)", uri,
			LIBNBD_SO);
		return -EOPNOTSUPP;
	}
	pthread_mutex_init(&n->lock, NULL);
	pthread_mutex_init(&n->tlock, NULL);
	s->nbd = n;
	n->epoch = 1;
	n->uri = strdup(uri);
	if (!n->uri)
		return -ENOMEM;
	rc = connect_uri(n, &n->h);
	if (rc) {
		zmi_log("zm_store_create: backing_uri %s: %s", uri,
			nbd_get_error() ? nbd_get_error() : "cannot connect");
		return rc;
	}
	size = nbd_get_size(n->h);
	if (size < 0 || (uint64_t)size < need + BLOCK) {
		zmi_log("zm_store_create: backing_uri %s: an export of %lld bytes, the store "
			"needs %llu", uri, (long long)size, (unsigned long long)(need + BLOCK));
		return -ENOSPC;
	}
	if (nbd_is_read_only(n->h) == 1) {
		zmi_log("zm_store_create: backing_uri %s: the export is read-only", uri);
		return -EROFS;
	}
	n->room = ((uint64_t)size - BLOCK) / BLOCK * BLOCK;
	n->can_trim = nbd_can_trim(n->h) == 1;
	if (zmi_lazy_init(&n->bepoch_arr, n->room / BLOCK, sizeof(uint32_t)))
		return -ENOMEM;
	n->bepoch = n->bepoch_arr.base;
	/* the label: this store's, for as long as the export keeps it */
	id[0] = zmi_os_now_ns() ^ (uint64_t)getpid() << 32;
	id[1] = (uint64_t)(uintptr_t)n;
	snprintf(n->label, sizeof(n->label), LABEL "%016llx%016llx",
		 (unsigned long long)id[0], (unsigned long long)id[1]);
	if (nbd_pwrite(n->h, n->label, sizeof(n->label), 0, 0) == -1) {
		zmi_log("zm_store_create: backing_uri %s: %s", uri, nbd_get_error());
		return -EIO;
	}
	*room = n->room;
	return 0;
}

void zmi_store_nbd_close(struct zm_store *s)
{
	struct zmi_store_nbd *n = s->nbd;

	if (!n)
		return;
	/* a forked child's connection is the parent's: only its copy of the
	 * socket is closed; the parent's own empties the export (what is
	 * left on it means nothing without the store) and says goodbye */
	if (n->h && s->bfd_pid == getpid()) {
		if (n->can_trim)
			(void)nbd_trim(n->h, n->room + BLOCK, 0, 0);
		(void)nbd_shutdown(n->h, 0);
	}
	if (n->h)
		nbd_close(n->h);
	zmi_lazy_fini(&n->bepoch_arr);
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->tlock);
	free(n->uri);
	free(n);
	s->nbd = NULL;
}

int zmi_store_nbd_ready(struct zm_store *s, uint64_t *epoch)
{
	struct zmi_store_nbd *n = s->nbd;
	int rc = 0;

	pthread_mutex_lock(&n->lock);
	look(n);
	if (!n->h)
		reconnect(s, n);
	if (!n->h)
		rc = -ENOSPC;
	*epoch = n->epoch;
	pthread_mutex_unlock(&n->lock);
	return rc;
}

/* Send the queued trims (lock held). */
static void send_trims(struct zmi_store_nbd *n)
{
	uint64_t t[TRIM_QUEUE][2];
	unsigned k, nt;

	pthread_mutex_lock(&n->tlock);
	nt = n->ntrim;
	memcpy(t, n->trim, nt * sizeof(t[0]));
	n->ntrim = 0;
	pthread_mutex_unlock(&n->tlock);
	for (k = 0; k < nt && n->h && n->can_trim; k++)
		if (nbd_trim(n->h, t[k][1], t[k][0] + BLOCK, 0) == -1)
			drop(n, "trim");
}

int zmi_store_nbd_write(struct zm_store *s, uint64_t off, const void *buf, size_t len)
{
	struct zmi_store_nbd *n = s->nbd;
	int rc = 0;

	if (off + len > n->room)
		return -ENOSPC;
	pthread_mutex_lock(&n->lock);
	send_trims(n);
	if (!n->h) {
		rc = -ENOSPC;   /* away: writeback stops, as with a full file */
	} else if (nbd_pwrite(n->h, buf, len, off + BLOCK, 0) == -1) {
		drop(n, "write");
		rc = -ENOSPC;
	} else {
		for (uint64_t b = off / BLOCK; b <= (off + len - 1) / BLOCK; b++) {
			zmi_lazy_mark(&n->bepoch_arr, b);
			__atomic_store_n(&n->bepoch[b], (uint32_t)n->epoch, __ATOMIC_RELAXED);
		}
	}
	__atomic_fetch_add(&zmi_store_backing_pwrites, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int zmi_store_nbd_read(struct zm_store *s, uint64_t off, void *buf, size_t len)
{
	struct zmi_store_nbd *n = s->nbd;
	int rc = 0;

	if (!len || off + len > n->room)
		return -EIO;
	pthread_mutex_lock(&n->lock);
	look(n);
	if (!n->h && !pthread_mutex_trylock(&s->wb_lock)) {
		/* no writeback runs: the lost pages can be counted */
		reconnect(s, n);
		pthread_mutex_unlock(&s->wb_lock);
	}
	if (!n->h || !block_ok(n, off / BLOCK) || !block_ok(n, (off + len - 1) / BLOCK)) {
		rc = -EIO;   /* away, or lost at a restart */
	} else if (nbd_pread(n->h, buf, len, off + BLOCK, 0) == -1) {
		drop(n, "read");
		rc = -EIO;
	}
	__atomic_fetch_add(&zmi_store_backing_preads, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

void zmi_store_nbd_trim(struct zm_store *s, uint64_t off, uint64_t len)
{
	struct zmi_store_nbd *n = s->nbd;

	pthread_mutex_lock(&n->tlock);
	if (n->ntrim && n->trim[n->ntrim - 1][0] + n->trim[n->ntrim - 1][1] == off)
		n->trim[n->ntrim - 1][1] += len;
	else if (n->ntrim < TRIM_QUEUE)
		n->trim[n->ntrim][0] = off, n->trim[n->ntrim++][1] = len;
	pthread_mutex_unlock(&n->tlock);
}

void zmi_store_nbd_forget(struct zm_store *s, uint64_t off)
{
	struct zmi_store_nbd *n = s->nbd;
	uint64_t b = off / BLOCK, left;

	/* a page lost at a restart leaves the count of those still recorded
	 * (epoch read without the lock: a reconnection waits for wb_lock,
	 * and a loss only moves it up) */
	if (b >= n->room / BLOCK ||
	    __atomic_load_n(&n->bepoch[b], __ATOMIC_RELAXED) ==
		    __atomic_load_n(&n->epoch, __ATOMIC_RELAXED))
		return;
	left = __atomic_load_n(&n->lost_on, __ATOMIC_RELAXED);
	while (left && !__atomic_compare_exchange_n(&n->lost_on, &left, left - 1, false,
						    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void zmi_store_nbd_flush(struct zm_store *s)
{
	struct zmi_store_nbd *n = s->nbd;

	pthread_mutex_lock(&n->lock);
	send_trims(n);
	pthread_mutex_unlock(&n->lock);
}

uint64_t zmi_store_nbd_lost(const struct zm_store *s)
{
	return __atomic_load_n(&s->nbd->lost, __ATOMIC_RELAXED);
}

#endif
