/*
 * The transmission phase: requests in, replies out.
 *
 * The connection's reader thread reads each request header (and a write's
 * payload), checks it, and either answers an error at once or makes a job.
 * Large writes go to the worker pool (OFFLOAD_MIN below), so that the
 * reader receives the next payload while they are compressed; everything
 * else runs in the reader itself (flush after the jobs in flight).
 * Several connections are served side by side by their readers.  Replies
 * may leave in any order, as NBD allows; each leaves whole under the send
 * lock.
 *
 * Memory: a write's payload and a read's reply buffer are taken from the
 * server's budget (server.c) before the payload is read or the reply
 * built; a request that finds no room is not held up but done in pieces
 * through one page-sized buffer (stream_write, reply_read), so a client
 * that stalls holding its share cannot stall anyone else.
 *
 * Bad requests and what they get (proto.md "Request types" and "Error
 * values"):
 *   wrong request magic                 the connection is dropped (no way
 *                                       to find the next request)
 *   unknown command, unknown flags,
 *   a flag the command does not take,
 *   length 0, block status without a
 *   selected context                    EINVAL
 *   read/cache/status past the end      EINVAL
 *   write/trim/zeroes past the end      ENOSPC
 *   any write on a read-only export     EPERM
 *   more than NBD_MAX_PAYLOAD           EINVAL (a write's payload is read
 *                                       and thrown away first)
 *   the store out of memory or at
 *   its limit                           ENOSPC / ENOMEM, the pages not
 *                                       written keep their content
 * After every error the connection carries on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "serve/nbd.h"
#include "serve/serve.h"

/* Requests a connection may have in flight, and their payload bytes: a
 * reader stops reading while either is reached, which bounds a client's
 * memory (qemu keeps 16 in flight, fio its iodepth). */
#define MAX_INFLIGHT 64
#define MAX_INFLIGHT_BYTES (64u << 20)
/* Jobs of one connection in the worker pool at once: one is enough to
 * overlap receiving a payload with compressing the last, and a client
 * that stops reading its replies can then hold up one worker, not all
 * (until the send timeout, server.c, drops it). */
#define CONN_MAX_QUEUED 1

/* Writes of this many bytes or more go to the workers, so that the reader
 * takes in the next request's payload while they are compressed; every
 * other request runs in the reader, since handing a small request to
 * another thread costs more than it saves (docs/results/2026-12-02-code-choices.md). */
#define OFFLOAD_MIN (64u << 10)

/* Most extents in one block status reply. */
#define MAX_EXTENTS 2048

/* A read reply is built and sent this many bytes at a time: a read
 * holds at most this much of the budget, however long it is (nbdcopy's
 * requests, 256 KiB, leave in one piece). */
#define READ_PIECE (256u << 10)
/* A read with DF (do not fragment) leaves in one chunk; one longer than
 * the piece the budget gives it gets EOVERFLOW, except up to this
 * length, which the protocol requires a server to send whole. */
#define DF_MIN (64u << 10)


static __thread void *tl_scratch;

static void *scratch(struct nbd_conn *c)
{
	if (!tl_scratch)
		tl_scratch = malloc(c->srv->disk.page_size);
	return tl_scratch;
}

void serve_scratch_free(void)
{
	free(tl_scratch);
	tl_scratch = NULL;
}

static uint32_t nbd_errno(int rc)
{
	switch (rc) {
	case 0: return 0;
	case -EPERM: return NBD_EPERM;
	case -ENOMEM: return NBD_ENOMEM;
	case -EINVAL: return NBD_EINVAL;
	case -ENOSPC: return NBD_ENOSPC;
	case -EOVERFLOW: return NBD_EOVERFLOW;
	case -EOPNOTSUPP: return NBD_ENOTSUP;
	default: return NBD_EIO;
	}
}

/* ---- replies --------------------------------------------------------- */

static void send_locked(struct nbd_conn *c, struct iovec *v, int n)
{
	serve_send_begin();
	pthread_mutex_lock(&c->send_lock);
	if (!c->dead && c->io.send(c->io.ctx, v, n)) {
		/* gone, or not reading within the time limit: end the
		 * connection, so that its reader stops too */
		c->dead = true;
		if (c->fd >= 0)
			shutdown(c->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&c->send_lock);
	serve_send_end();
}

static void simple_header(uint8_t *h, uint32_t err, uint64_t cookie)
{
	put_be32(h, NBD_SIMPLE_REPLY_MAGIC);
	put_be32(h + 4, err);
	put_be64(h + 8, cookie);
}

static void reply_simple(struct nbd_conn *c, uint64_t cookie, uint32_t err, const void *data,
			 uint32_t len)
{
	uint8_t h[NBD_SIMPLE_REPLY_SIZE];
	struct iovec v[2] = { { h, sizeof(h) }, { (void *)data, len } };

	simple_header(h, err, cookie);
	send_locked(c, v, err || !len ? 1 : 2);
}

static void chunk_header(uint8_t *h, uint16_t flags, uint16_t type, uint64_t cookie, uint32_t len)
{
	put_be32(h, NBD_STRUCTURED_REPLY_MAGIC);
	put_be16(h + 4, flags);
	put_be16(h + 6, type);
	put_be64(h + 8, cookie);
	put_be32(h + 16, len);
}

static void reply_error_chunk(struct nbd_conn *c, uint64_t cookie, uint32_t err)
{
	uint8_t b[NBD_CHUNK_HEADER_SIZE + 6];
	struct iovec v = { b, sizeof(b) };

	chunk_header(b, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, cookie, 6);
	put_be32(b + NBD_CHUNK_HEADER_SIZE, err);
	put_be16(b + NBD_CHUNK_HEADER_SIZE + 4, 0);  /* no message */
	send_locked(c, &v, 1);
}

/* An error to a request: reads and block status need a structured reply
 * once structured replies are on; everything else may have a simple one. */
static void reply_error(struct nbd_conn *c, const struct serve_job *j, uint32_t err)
{
	serve_count(c->srv, SC_ERRORS, 1);
	if (c->structured && (j->type == NBD_CMD_READ || j->type == NBD_CMD_BLOCK_STATUS))
		reply_error_chunk(c, j->cookie, err);
	else
		reply_simple(c, j->cookie, err, NULL, 0);
}

/* Send a read reply of j->len bytes from off, reading the disk a piece
 * of `piece` bytes at a time into buf.  The reply leaves under the send
 * lock, whole, within one time limit.  Structured: a data chunk a piece,
 * and an error chunk if a later piece fails.  Simple: the header goes
 * with the first piece, so only a failure after it (corrupt data further
 * on) has no way to be told and ends the connection.  0, or the error of
 * the first piece (nothing sent then: the caller answers it). */
static int reply_read(struct nbd_conn *c, const struct serve_job *j, uint8_t *buf,
		      size_t piece, void *page)
{
	struct serve_disk *d = &c->srv->disk;
	uint32_t done = 0, n = j->len < piece ? j->len : (uint32_t)piece;
	size_t mis = j->offset & (d->page_size - 1);
	int rc;

	/* in pieces (never with DF, which has one): the first ends on a page
	 * boundary, so that no page is decompressed for two pieces */
	if (n < j->len && mis && !(j->flags & NBD_CMD_FLAG_DF))
		n = (uint32_t)(piece - mis);
	rc = disk_read(d, j->offset, n, buf, page);

	if (rc)
		return rc;
	pthread_mutex_lock(&c->send_lock);
	c->tx_deadline_ns = serve_deadline(c->srv);
	for (;;) {
		uint8_t h[NBD_CHUNK_HEADER_SIZE + 8];
		struct iovec v[2] = { { h, sizeof(h) }, { buf, n } };
		bool last = done + n == j->len;

		if (c->structured) {
			chunk_header(h, last ? NBD_REPLY_FLAG_DONE : 0, NBD_REPLY_TYPE_OFFSET_DATA,
				     j->cookie, 8 + n);
			put_be64(h + NBD_CHUNK_HEADER_SIZE, j->offset + done);
		} else if (!done) {
			simple_header(h, 0, j->cookie);
			v[0].iov_len = NBD_SIMPLE_REPLY_SIZE;
		}
		if (c->dead || c->io.send(c->io.ctx, c->structured || !done ? v : v + 1,
					  c->structured || !done ? 2 : 1)) {
			c->dead = true;
			break;
		}
		done += n;
		if (last)
			break;
		n = j->len - done < piece ? j->len - done : (uint32_t)piece;
		rc = disk_read(d, j->offset + done, n, buf, page);
		if (rc) {
			serve_count(c->srv, SC_ERRORS, 1);
			if (c->structured) {
				uint8_t e[NBD_CHUNK_HEADER_SIZE + 6];
				struct iovec ev = { e, sizeof(e) };

				chunk_header(e, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, j->cookie, 6);
				put_be32(e + NBD_CHUNK_HEADER_SIZE, nbd_errno(rc));
				put_be16(e + NBD_CHUNK_HEADER_SIZE + 4, 0);
				if (c->io.send(c->io.ctx, &ev, 1))
					c->dead = true;
			} else {
				c->dead = true;  /* half a simple reply: nothing else to do */
			}
			break;
		}
	}
	c->tx_deadline_ns = 0;
	if (c->dead && c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->send_lock);
	return 0;
}

static void reply_status(struct nbd_conn *c, const struct serve_job *j)
{
	unsigned max = j->flags & NBD_CMD_FLAG_REQ_ONE ? 1 : MAX_EXTENTS;
	uint32_t *ext = malloc(sizeof(uint32_t) * 2 * max);
	uint8_t *b;
	unsigned n;

	if (!ext) {
		reply_error(c, j, NBD_ENOMEM);
		return;
	}
	n = disk_extents(&c->srv->disk, j->offset, j->len, ext, max);
	b = malloc(NBD_CHUNK_HEADER_SIZE + 4 + 8 * (size_t)n);
	if (!b) {
		free(ext);
		reply_error(c, j, NBD_ENOMEM);
		return;
	}
	chunk_header(b, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS, j->cookie, 4 + 8 * n);
	put_be32(b + NBD_CHUNK_HEADER_SIZE, 1);  /* the id SET_META_CONTEXT gave */
	for (unsigned i = 0; i < n; i++) {
		put_be32(b + NBD_CHUNK_HEADER_SIZE + 4 + 8 * i, ext[2 * i]);
		put_be32(b + NBD_CHUNK_HEADER_SIZE + 8 + 8 * i, ext[2 * i + 1]);
	}
	{
		struct iovec v = { b, NBD_CHUNK_HEADER_SIZE + 4 + 8 * (size_t)n };

		send_locked(c, &v, 1);
	}
	free(b);
	free(ext);
}

/* ---- execution ------------------------------------------------------- */

/* Return what a job held.  The connection is touched last, under its
 * lock: once inflight reaches 0 the reader may leave and the connection be
 * freed, so nothing may follow the unlock. */
static void job_done(struct serve_job *j)
{
	struct nbd_conn *c = j->c;
	size_t charged = j->charged;
	bool offloaded = j->offloaded;

	conn_buf_put(c, j->data, j->data_cap);
	free(j);
	server_budget_put(c->srv, c, charged);
	pthread_mutex_lock(&c->lock);
	c->inflight--;
	c->inflight_bytes -= charged;
	c->queued -= offloaded;
	pthread_cond_broadcast(&c->idle);
	pthread_mutex_unlock(&c->lock);
}

/* Wait for room for one more request in the connection's limits (see
 * above), count it in flight, and take `bytes` of the budget for it if
 * they fit there and in the connection's share (j->charged says; a write
 * without them is received in pieces, a read is sent in pages, and
 * neither goes to the workers).  A flush waits for every request before
 * it; a job for the workers, for the connection's previous one there.
 * Nothing here waits on another connection. */
static void acquire(struct nbd_conn *c, struct serve_job *j, size_t bytes)
{
	pthread_mutex_lock(&c->lock);
	while (c->inflight && (c->inflight >= MAX_INFLIGHT ||
			       c->inflight_bytes + bytes > MAX_INFLIGHT_BYTES ||
			       j->type == NBD_CMD_FLUSH ||
			       (j->offloaded && c->queued >= CONN_MAX_QUEUED)))
		pthread_cond_wait(&c->idle, &c->lock);
	j->charged = bytes && server_budget_try(c->srv, c, bytes) ? bytes : 0;
	if (bytes && !j->charged) {
		j->offloaded = false;
		serve_count(c->srv, SC_STREAMED, 1);
	}
	c->inflight++;
	c->inflight_bytes += j->charged;
	c->queued += j->offloaded;
	pthread_mutex_unlock(&c->lock);
}

/* A write that found no room in the budget: receive its payload a page at
 * a time (a unit, with units) into the connection's small buffer and write
 * each piece as it arrives (pieces after the first start on page (unit)
 * boundaries, so none is read-modify-written twice and a unit's pages
 * still arrive together).  After a failed piece the rest is still read,
 * then the error answered.  0, or -1 when the client is gone. */
static int stream_write(struct nbd_conn *c, struct serve_job *j)
{
	struct serve_disk *d = &c->srv->disk;
	size_t cap, piece = d->page_size << d->unit_shift;
	uint8_t *buf = conn_buf_get(c, piece, &cap);
	void *page = scratch(c);
	uint64_t off = j->offset;
	uint32_t left = j->len;
	int rc = buf && page ? 0 : -ENOMEM;

	while (left) {
		uint32_t n = (uint32_t)(piece - (off & (piece - 1)));

		n = n < left ? n : left;
		if (!buf) {
			if (conn_skip(c, left))
				return -1;
			break;
		}
		if (c->io.recv(c->io.ctx, buf, n)) {
			conn_buf_put(c, buf, cap);
			return -1;
		}
		if (!rc)
			rc = disk_write(d, off, n, buf, page);
		off += n, left -= n;
	}
	conn_buf_put(c, buf, cap);
	serve_count(c->srv, SC_WRITES, 1);
	if (rc) {
		reply_error(c, j, nbd_errno(rc));
	} else {
		serve_count(c->srv, SC_BYTES_WRITTEN, j->len);
		reply_simple(c, j->cookie, 0, NULL, 0);
	}
	return 0;
}

void serve_job_run(struct serve_job *j)
{
	struct nbd_conn *c = j->c;
	struct serve_server *s = c->srv;
	void *page = scratch(c);
	int rc = 0;

	if (!page) {
		reply_error(c, j, NBD_ENOMEM);
		job_done(j);
		return;
	}
	switch (j->type) {
	case NBD_CMD_READ: {
		/* a piece as large as the budget gave, else a page; with DF
		 * one piece, which the protocol asks up to DF_MIN at least */
		size_t piece = j->charged ? j->charged : s->disk.page_size, cap;
		uint8_t *buf;

		serve_count(s, SC_READS, 1);
		if ((j->flags & NBD_CMD_FLAG_DF) && j->len > piece) {
			if (j->len > DF_MIN) {
				reply_error(c, j, NBD_EOVERFLOW);
				job_done(j);
				return;
			}
			piece = j->len;  /* outside the budget, like a page */
		}
		buf = conn_buf_get(c, piece, &cap);
		rc = buf ? reply_read(c, j, buf, piece, page) : -ENOMEM;
		if (rc)
			reply_error(c, j, nbd_errno(rc));
		else
			serve_count(s, SC_BYTES_READ, j->len);
		conn_buf_put(c, buf, cap);
		job_done(j);
		return;
	}
	case NBD_CMD_WRITE:
		serve_count(s, SC_WRITES, 1);
		rc = disk_write(&s->disk, j->offset, j->len, j->data, page);
		if (!rc)
			serve_count(s, SC_BYTES_WRITTEN, j->len);
		break;
	case NBD_CMD_TRIM:
		serve_count(s, SC_TRIMS, 1);
		rc = disk_zero(&s->disk, j->offset, j->len, true, page);
		break;
	case NBD_CMD_WRITE_ZEROES:
		serve_count(s, SC_ZEROES, 1);
		rc = disk_zero(&s->disk, j->offset, j->len, !(j->flags & NBD_CMD_FLAG_NO_HOLE), page);
		break;
	case NBD_CMD_FLUSH:  /* the store is memory: a replied write is done */
		serve_count(s, SC_FLUSHES, 1);
		break;
	case NBD_CMD_CACHE:  /* everything is in memory already */
		serve_count(s, SC_CACHES, 1);
		break;
	case NBD_CMD_BLOCK_STATUS:
		serve_count(s, SC_STATUS, 1);
		reply_status(c, j);
		job_done(j);
		return;
	}
	if (rc)
		reply_error(c, j, nbd_errno(rc));
	else
		reply_simple(c, j->cookie, 0, NULL, 0);
	job_done(j);
}

/* ---- checking -------------------------------------------------------- */

/* 0 if the request may run, else the NBD error to answer. */
static uint32_t check_request(struct nbd_conn *c, const struct serve_job *j)
{
	const struct serve_server *s = c->srv;
	uint32_t allowed;
	bool writes = false;

	switch (j->type) {
	case NBD_CMD_READ:
		allowed = c->structured ? NBD_CMD_FLAG_DF : 0;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		allowed = NBD_CMD_FLAG_FUA;
		writes = true;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FAST_ZERO;
		writes = true;
		break;
	case NBD_CMD_FLUSH:
		allowed = 0;
		break;
	case NBD_CMD_CACHE:
		allowed = 0;
		break;
	case NBD_CMD_BLOCK_STATUS:
		if (!c->meta_alloc)
			return NBD_EINVAL;
		allowed = NBD_CMD_FLAG_REQ_ONE;
		break;
	default:
		return NBD_EINVAL;
	}
	/* "valid for all commands" once SEND_FUA is advertised (proto.md);
	 * some clients set it on flush */
	if (c->tflags & NBD_FLAG_SEND_FUA)
		allowed |= NBD_CMD_FLAG_FUA;
	if (j->flags & ~allowed)
		return NBD_EINVAL;
	if (j->type == NBD_CMD_FLUSH)
		return 0;  /* offset and length mean nothing to it */
	if (writes && s->cfg.read_only)
		return NBD_EPERM;
	if (j->len == 0)
		return NBD_EINVAL;
	if ((j->type == NBD_CMD_READ || j->type == NBD_CMD_WRITE) && j->len > NBD_MAX_PAYLOAD)
		return NBD_EINVAL;
	if (j->offset > s->disk.size || j->len > s->disk.size - j->offset)
		return writes ? NBD_ENOSPC : NBD_EINVAL;
	return 0;
}

void nbd_transmit(struct nbd_conn *c)
{
	struct serve_server *s = c->srv;
	uint8_t h[NBD_REQUEST_SIZE];

	for (;;) {
		struct serve_job *j;
		uint32_t err;

		/* idle between requests as long as it likes, but a header once
		 * begun comes whole within the limit */
		c->rx_idle_ms = 0;
		c->rx_deadline_ns = 0;
		c->rx_rest_idle_ms = s->cfg.timeout_ms;
		c->rx_stop = RX_STOP_IDLE;
		if (__atomic_load_n(&s->stopping_conns, __ATOMIC_SEQ_CST) ||
		    c->io.recv(c->io.ctx, h, sizeof(h)))
			break;  /* the client left, or the server stops */
		/* a request begun is a request taken: read it whole, its
		 * payload too, and answer it, stopping or not */
		c->rx_stop = RX_STOP_NEVER;
		c->rx_rest_idle_ms = 0;
		if (get_be32(h) != NBD_REQUEST_MAGIC) {
			serve_count(s, SC_PROTOCOL_ERRORS, 1);
			break;
		}
		j = calloc(1, sizeof(*j));
		if (!j)
			break;
		j->c = c;
		j->flags = get_be16(h + 4);
		j->type = get_be16(h + 6);
		j->cookie = get_be64(h + 8);
		j->offset = get_be64(h + 16);
		j->len = get_be32(h + 24);
		if (j->type == NBD_CMD_DISC) {
			free(j);
			break;
		}
		serve_count(s, SC_REQUESTS, 1);
		if (j->type == NBD_CMD_WRITE) {
			/* a payload that stops arriving ends it, and so does one
			 * trickling in slower than the limit allows */
			c->rx_idle_ms = s->cfg.timeout_ms;
			c->rx_deadline_ns = serve_deadline(s);
		}
		err = check_request(c, j);
		if (j->type == NBD_CMD_WRITE && (err || j->len > NBD_MAX_PAYLOAD)) {
			/* the payload follows whatever we think of the request */
			if (conn_skip(c, j->len)) {
				free(j);
				break;
			}
		}
		if (err) {
			reply_error(c, j, err);
			free(j);
			continue;
		}
		j->offloaded = j->type == NBD_CMD_WRITE && j->len >= OFFLOAD_MIN && s->nworkers;
		/* room first, then the payload: a client cannot make the server
		 * hold more than the limits by sending */
		acquire(c, j, j->type == NBD_CMD_WRITE ? j->len
			      : j->type == NBD_CMD_READ ? (j->len < READ_PIECE ? j->len : READ_PIECE)
			      : 0);
		if (j->type == NBD_CMD_WRITE && !j->charged) {
			int r = stream_write(c, j);

			job_done(j);
			if (r)
				break;
			continue;
		}
		if (j->type == NBD_CMD_WRITE) {
			j->data = conn_buf_get(c, j->len, &j->data_cap);
			if (!j->data) {
				/* (offloaded stays: job_done counts it out) */
				if (conn_skip(c, j->len)) {
					job_done(j);
					break;
				}
				reply_error(c, j, NBD_ENOMEM);
				job_done(j);
				continue;
			}
			if (c->io.recv(c->io.ctx, j->data, j->len)) {
				job_done(j);
				break;
			}
		}
		if (j->offloaded)
			server_submit(s, j);
		else
			serve_job_run(j);
	}
	pthread_mutex_lock(&c->lock);
	while (c->inflight)
		pthread_cond_wait(&c->idle, &c->lock);
	pthread_mutex_unlock(&c->lock);
}
