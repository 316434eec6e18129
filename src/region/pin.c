/*
 * Region memory given to the kernel: pins, and the system calls wrapped
 * in them.
 *
 * In the default mode the kernel cannot fault a region page in (it gets
 * EFAULT where a user access gets SIGBUS) nor write a write-protected
 * one.  A pin brings each page of a range in (writable if asked) and
 * raises its pin count, which the evictor respects; the kernel then finds
 * every page present for as long as the pin lasts.
 *
 * A pin is bounded (half the region's limit), so that pinned pages never
 * crowd the limit out; the wrappers cut larger buffers into pieces.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "region/region_internal.h"

/* Walk the regions overlapping [a, a+len): for each, its page range.
 * On an error, *stop is where the failing region's part begins. */
typedef int (*range_fn)(struct zmi_region *r, uint64_t first, uint64_t end, void *arg);

static int each_region(const char *a, size_t len, range_fn fn, void *arg, const char **stop)
{
	const char *end = a + len;
	struct zmi_region *r;

	while (a < end && (r = zmi_region_find_from(a, end)) != NULL) {
		const char *from = r->base > a ? r->base : a;
		const char *rend = r->base + r->size < end ? r->base + r->size : end;
		uint64_t first = (uint64_t)(from - r->base) >> r->page_shift;
		uint64_t last = (uint64_t)(rend - 1 - r->base) >> r->page_shift;
		int rc = fn(r, first, last + 1, arg);
		if (rc) {
			if (stop)
				*stop = from;
			return rc;
		}
		a = rend;
	}
	return 0;
}

/* Pins of a region together ask for at most half its limit, so that
 * faults always find pages to evict: a pin that would pass it waits for
 * others to end (holding no pin of this region), PIN_WAIT_MS at most,
 * and then goes on (a thread that pins more than that itself must not
 * wait for itself). */
#define PIN_WAIT_MS 100

static void budget_take(struct zmi_region *r, uint64_t n)
{
	uint64_t lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED), used;
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; lim && i < PIN_WAIT_MS; i++) {
		used = __atomic_load_n(&r->pin_pages, __ATOMIC_RELAXED);
		if (used + n <= lim / 2 &&
		    __atomic_compare_exchange_n(&r->pin_pages, &used, used + n, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return;
		if (used + n <= lim / 2)
			continue;
		nanosleep(&ms, NULL);
	}
	__atomic_add_fetch(&r->pin_pages, n, __ATOMIC_ACQ_REL);
}

static void budget_give(struct zmi_region *r, uint64_t n)
{
	uint64_t used = __atomic_load_n(&r->pin_pages, __ATOMIC_RELAXED);

	while (!__atomic_compare_exchange_n(&r->pin_pages, &used, used > n ? used - n : 0,
					    false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		;
}

static int unpin_range(struct zmi_region *r, uint64_t first, uint64_t end, void *arg)
{
	(void)arg;
	if (r->pid != getpid())
		return 0;
	budget_give(r, end - first);
	pthread_rwlock_rdlock(&r->call_lock);
	for (uint64_t pg = first; pg < end; pg++) {
		uint32_t w = zmi_region_page_lock(r, pg, NULL);
		if (rp_pins(w))
			w -= 1u << RP_PIN_SHIFT;
		zmi_region_page_unlock(r, pg, w);
	}
	pthread_rwlock_unlock(&r->call_lock);
	return 0;
}

struct pin_arg {
	bool write;
};

static int pin_range(struct zmi_region *r, uint64_t first, uint64_t end, void *arg)
{
	struct pin_arg *pa = arg;
	uint64_t lim = __atomic_load_n(&r->limit, __ATOMIC_RELAXED);

	if (r->pid != getpid())
		return -ECHILD;
	if (lim && end - first > lim / 2)
		return -E2BIG;
	budget_take(r, end - first);
	for (uint64_t pg = first; pg < end; pg++) {
		int rc;
		pthread_rwlock_rdlock(&r->call_lock);
		rc = zmi_region_make_present(r, pg, pa->write, 1);
		pthread_rwlock_unlock(&r->call_lock);
		if (rc) {
			if (pg > first)
				unpin_range(r, first, pg, NULL);
			budget_give(r, end - pg);
			return rc;
		}
	}
	zmi_region_count(r, RC_PINS, 1);
	return 0;
}

int zm_region_pin(const void *addr, size_t len, unsigned flags)
{
	struct pin_arg pa = { .write = flags & ZM_REGION_PIN_WRITE };
	const char *a = addr, *stop = addr;
	int rc;

	if (!len)
		return 0;
	if ((uintptr_t)a + len < (uintptr_t)a || (flags & ~ZM_REGION_PIN_WRITE))
		return -EINVAL;
	rc = each_region(a, len, pin_range, &pa, &stop);
	if (rc && stop > a) /* the regions before the failing one: undo */
		each_region(a, (size_t)(stop - a), unpin_range, NULL, NULL);
	return rc;
}

void zm_region_unpin(const void *addr, size_t len)
{
	if (!len || (uintptr_t)addr + len < (uintptr_t)addr)
		return;
	each_region(addr, len, unpin_range, NULL, NULL);
}

/* ---- the wrappers ---- */

/* The largest prefix of [buf, buf+count) the wrappers try to pin at
 * once: a start that fits any limit; halved on E2BIG. */
static ssize_t with_pin(const void *buf, size_t *count, bool write)
{
	size_t n = *count;
	int rc;

	for (;;) {
		rc = zm_region_pin(buf, n, write ? ZM_REGION_PIN_WRITE : 0);
		if (rc != -E2BIG || n <= 4096)
			break;
		n /= 2;
	}
	if (rc) {
		errno = -rc;
		return -1;
	}
	*count = n;
	return 0;
}

#define WRAP_IN(call, buf, count, ...)                                          \
	do {                                                                    \
		size_t n_ = (count);                                            \
		ssize_t ret_;                                                   \
		int e_;                                                         \
		if (with_pin((buf), &n_, true))                                 \
			return -1;                                              \
		ret_ = call(__VA_ARGS__);                                       \
		e_ = errno;                                                     \
		zm_region_unpin((buf), n_);                                     \
		errno = e_;                                                     \
		return ret_;                                                    \
	} while (0)

ssize_t zm_region_read(int fd, void *buf, size_t count)
{
	WRAP_IN(read, buf, count, fd, buf, n_);
}

ssize_t zm_region_pread(int fd, void *buf, size_t count, off_t offset)
{
	WRAP_IN(pread, buf, count, fd, buf, n_, offset);
}

ssize_t zm_region_recv(int fd, void *buf, size_t len, int flags)
{
	WRAP_IN(recv, buf, len, fd, buf, n_, flags);
}

/* fd is a socket whose writes are messages (datagrams, records), which
 * a write in pieces would cut into several. */
static bool msg_socket(int fd)
{
	int type = 0, e = errno;
	socklen_t len = sizeof(type);
	bool msg = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
		   (type == SOCK_DGRAM || type == SOCK_SEQPACKET || type == SOCK_RDM);

	errno = e;
	return msg;
}

/* Writes go on piece after piece until all is written, a short write or
 * an error (which is returned only if nothing was written). */
#define WRAP_OUT(call, buf, count, off, ...)                                    \
	do {                                                                    \
		const char *p_ = (buf);                                         \
		size_t left_ = (count), done_ = 0;                              \
		while (left_ || !done_) {                                       \
			size_t n_ = left_;                                      \
			ssize_t ret_;                                           \
			int e_;                                                 \
			if (with_pin(p_, &n_, false))                           \
				return done_ ? (ssize_t)done_ : -1;             \
			if (n_ < left_ && msg_socket(fd)) {                     \
				/* a message is never cut: whole or not */      \
				zm_region_unpin(p_, n_);                        \
				errno = E2BIG;                                  \
				return -1;                                      \
			}                                                       \
			ret_ = call(__VA_ARGS__);                               \
			e_ = errno;                                             \
			zm_region_unpin(p_, n_);                                \
			errno = e_;                                             \
			if (ret_ < 0)                                           \
				return done_ ? (ssize_t)done_ : -1;             \
			done_ += (size_t)ret_;                                  \
			p_ += ret_;                                             \
			left_ -= (size_t)ret_;                                  \
			(void)(off);                                            \
			if ((size_t)ret_ < n_ || !left_)                        \
				break;                                          \
		}                                                               \
		return (ssize_t)done_;                                          \
	} while (0)

ssize_t zm_region_write(int fd, const void *buf, size_t count)
{
	WRAP_OUT(write, buf, count, 0, fd, p_, n_);
}

ssize_t zm_region_pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	WRAP_OUT(pwrite, buf, count, offset, fd, p_, n_, offset + (off_t)done_);
}

ssize_t zm_region_send(int fd, const void *buf, size_t len, int flags)
{
	WRAP_OUT(send, buf, len, 0, fd, p_, n_, flags);
}

/* Vectors: pinned whole when they fit; otherwise one buffer at a time
 * (readv stops at the first short read). */
static ssize_t vec(int fd, const struct iovec *iov, int iovcnt, bool in)
{
	ssize_t ret, total = 0;
	int i, rc = 0, e;

	if (iovcnt < 0 || (iovcnt && !iov)) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < iovcnt; i++) {
		rc = zm_region_pin(iov[i].iov_base, iov[i].iov_len, in ? ZM_REGION_PIN_WRITE : 0);
		if (rc)
			break;
	}
	if (!rc) {
		ret = in ? readv(fd, iov, iovcnt) : writev(fd, iov, iovcnt);
		e = errno;
		for (i = 0; i < iovcnt; i++)
			zm_region_unpin(iov[i].iov_base, iov[i].iov_len);
		errno = e;
		return ret;
	}
	while (--i >= 0)
		zm_region_unpin(iov[i].iov_base, iov[i].iov_len);
	if (rc != -E2BIG || (!in && msg_socket(fd))) {
		errno = -rc; /* a message in pieces would be several */
		return -1;
	}
	for (i = 0; i < iovcnt; i++) {
		ret = in ? zm_region_read(fd, iov[i].iov_base, iov[i].iov_len)
			 : zm_region_write(fd, iov[i].iov_base, iov[i].iov_len);
		if (ret < 0)
			return total ? total : -1;
		total += ret;
		if ((size_t)ret < iov[i].iov_len)
			break;
	}
	return total;
}

ssize_t zm_region_readv(int fd, const struct iovec *iov, int iovcnt)
{
	return vec(fd, iov, iovcnt, true);
}

ssize_t zm_region_writev(int fd, const struct iovec *iov, int iovcnt)
{
	return vec(fd, iov, iovcnt, false);
}
