/*
 * A connection's byte stream over a socket.  Sends never raise SIGPIPE
 * (MSG_NOSIGNAL): a client that leaves mid-reply costs its connection,
 * never the server.
 *
 * Time limits are deadlines on the whole exchange, not on each system
 * call, so a client trickling a byte at a time cannot stretch them: a
 * reply must leave within the time limit (or by tx_deadline_ns, for a
 * reply sent in pieces), the handshake and a write's payload must be in
 * by rx_deadline_ns; a payload may also pause at most rx_idle_ms, and a
 * request header once begun at most rx_rest_idle_ms.  Each deadline moves
 * a second later for every SERVE_MIN_RATE bytes that get through, so
 * that a slow but steady link is not cut off mid-transfer.  Without a
 * limit a read is one plain blocking recv, as before limits existed.
 *
 * When the server stops, a read waiting between requests or in the
 * handshake gives up -- the handshake's wait sees the drain pipe, a
 * blocking read between requests wakes every SERVE_STOP_CHECK_MS (the
 * socket's receive timeout) to look -- while one within a request goes
 * on, so that a payload the client is still sending arrives whole (the
 * drain's own deadline, server.c, bounds it).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve.h"

uint64_t serve_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait until fd is ready for events, or deadline (0: never) passes, or
 * stop_fd (-1: none) is readable: 0, -1 on a timeout or error, 1 for
 * stop_fd. */
static int wait_ready(int fd, short events, uint64_t deadline, int stop_fd)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = fd, .events = events },
					{ .fd = stop_fd, .events = POLLIN } };
		int ms = -1, r;

		if (deadline) {
			uint64_t now = serve_now_ns();

			if (now >= deadline)
				return -1;
			uint64_t left = (deadline - now + 999999) / 1000000;

			ms = left > 1000000000 ? 1000000000 : (int)left;
		}
		r = poll(pf, 2, ms);
		if (r > 0 && pf[1].revents)
			return 1;
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* How much later a deadline moves for n bytes that got through. */
static inline uint64_t credit(size_t n)
{
	return (uint64_t)n * 1000000000ull / SERVE_MIN_RATE;
}

/* The earlier of the connection's receive deadline and its idle limit
 * from now; 0 for none. */
static uint64_t rx_deadline(const struct nbd_conn *c, unsigned idle_ms)
{
	uint64_t d = c->rx_deadline_ns;

	if (idle_ms) {
		uint64_t idle = serve_now_ns() + (uint64_t)idle_ms * 1000000ull;

		d = d && d < idle ? d : idle;
	}
	return d;
}

int conn_sock_recv(void *ctx, void *buf, size_t n)
{
	struct nbd_conn *c = ctx;
	unsigned idle_ms = c->rx_idle_ms;
	bool timed = c->rx_deadline_ns || idle_ms;
	uint8_t *p = buf;

	while (n) {
		/* the server's stop ends a wait between requests, never one
		 * within a request: the client may still be sending a
		 * payload the server has taken on */
		bool stoppable = c->rx_stop == RX_STOP_ANY ||
				 (c->rx_stop == RX_STOP_IDLE && p == buf);

		if (p != buf && !idle_ms && c->rx_rest_idle_ms) {
			/* the first bytes came: the rest may not pause longer */
			idle_ms = c->rx_rest_idle_ms;
			timed = true;
		}
		/* without a limit a plain blocking read (a request header:
		 * the hot path, one system call); with one, read what is
		 * there and wait for the rest no longer than the limit, nor
		 * past the stop when it may end the wait */
		ssize_t r = recv(c->fd, p, n, timed ? MSG_DONTWAIT : 0);

		if (r == 0)
			return -1;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -1;
			if (timed) {
				int w = wait_ready(c->fd, POLLIN, rx_deadline(c, idle_ms),
						   stoppable ? c->srv->drain_fd[0] : -1);

				if (w < 0)
					__atomic_store_n(&c->timed_out, true, __ATOMIC_RELAXED);
				if (w)
					return -1;
				continue;
			}
			/* a blocking read woken by the socket's receive timeout
			 * (SERVE_STOP_CHECK_MS): is the server stopping? */
			if (stoppable &&
			    __atomic_load_n(&c->srv->stopping_conns, __ATOMIC_SEQ_CST))
				return -1;
			continue;
		}
		if (c->rx_deadline_ns)
			c->rx_deadline_ns += credit((size_t)r);
		p += r, n -= (size_t)r;
	}
	return 0;
}

int conn_sock_send(void *ctx, const struct iovec *iov, int n)
{
	struct nbd_conn *c = ctx;
	uint64_t deadline = c->tx_deadline_ns ? c->tx_deadline_ns : serve_deadline(c->srv);
	struct iovec v[8];
	struct msghdr mh = { 0 };

	if (n > 8)
		return -1;
	memcpy(v, iov, sizeof(*iov) * (size_t)n);
	mh.msg_iov = v;
	mh.msg_iovlen = (size_t)n;
	while (mh.msg_iovlen) {
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				/* the whole reply within the time limit, however
				 * the client trickles it out */
				if (wait_ready(c->fd, POLLOUT, deadline, -1)) {
					__atomic_store_n(&c->timed_out, true, __ATOMIC_RELAXED);
					return -1;
				}
				continue;
			}
			return -1;
		}
		deadline += credit((size_t)w);
		if (c->tx_deadline_ns)
			c->tx_deadline_ns = deadline;
		while (mh.msg_iovlen && (size_t)w >= mh.msg_iov->iov_len) {
			w -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++, mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (uint8_t *)mh.msg_iov->iov_base + w;
			mh.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int conn_skip(struct nbd_conn *c, uint64_t n)
{
	uint8_t junk[4096];

	while (n) {
		size_t k = n < sizeof(junk) ? (size_t)n : sizeof(junk);

		if (c->io.recv(c->io.ctx, junk, k))
			return -1;
		n -= k;
	}
	return 0;
}

void conn_init(struct nbd_conn *c, struct serve_server *srv, struct nbd_io io, int fd)
{
	memset(c, 0, sizeof(*c));
	c->srv = srv;
	c->io = io;
	c->fd = fd;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->buf_lock, NULL);
	pthread_cond_init(&c->idle, NULL);
}

void conn_buf_drop(struct nbd_conn *c)
{
	pthread_mutex_lock(&c->buf_lock);
	for (unsigned i = 0; i < c->nbufs; i++)
		free(c->buf[i]);
	c->nbufs = 0;
	c->buf_bytes = 0;
	pthread_mutex_unlock(&c->buf_lock);
}

void conn_fini(struct nbd_conn *c)
{
	conn_buf_drop(c);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->send_lock);
	pthread_mutex_destroy(&c->buf_lock);
	pthread_cond_destroy(&c->idle);
}

void *conn_buf_get(struct nbd_conn *c, size_t len, size_t *cap)
{
	void *p = NULL;
	unsigned best = CONN_BUFS;

	pthread_mutex_lock(&c->buf_lock);
	for (unsigned i = 0; i < c->nbufs; i++)  /* the smallest that fits */
		if (c->buf_cap[i] >= len && (best == CONN_BUFS || c->buf_cap[i] < c->buf_cap[best]))
			best = i;
	if (best < CONN_BUFS) {
		p = c->buf[best];
		*cap = c->buf_cap[best];
		c->buf_bytes -= *cap;
		c->nbufs--;
		c->buf[best] = c->buf[c->nbufs];
		c->buf_cap[best] = c->buf_cap[c->nbufs];
	}
	pthread_mutex_unlock(&c->buf_lock);
	if (p)
		return p;
	*cap = len < 4096 ? 4096 : len;
	return malloc(*cap);
}

void conn_buf_put(struct nbd_conn *c, void *buf, size_t cap)
{
	if (!buf)
		return;
	if (cap <= CONN_BUF_MAX_ONE) {
		pthread_mutex_lock(&c->buf_lock);
		if (c->nbufs < CONN_BUFS && c->buf_bytes + cap <= CONN_BUF_BYTES) {
			c->buf[c->nbufs] = buf;
			c->buf_cap[c->nbufs++] = cap;
			c->buf_bytes += cap;
			buf = NULL;
		}
		pthread_mutex_unlock(&c->buf_lock);
	}
	free(buf);
}
