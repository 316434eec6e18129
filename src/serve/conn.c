/*
 * A connection's byte stream over a socket.  Sends never raise SIGPIPE
 * (MSG_NOSIGNAL): a client that leaves mid-reply costs its connection,
 * never the server.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/serve.h"

int conn_sock_recv(void *ctx, void *buf, size_t n)
{
	int fd = *(int *)ctx;
	uint8_t *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r == 0)
			return -1;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += r, n -= (size_t)r;
	}
	return 0;
}

int conn_sock_send(void *ctx, const struct iovec *iov, int n)
{
	int fd = *(int *)ctx;
	struct iovec v[8];
	struct msghdr mh = { 0 };

	if (n > 8)
		return -1;
	memcpy(v, iov, sizeof(*iov) * (size_t)n);
	mh.msg_iov = v;
	mh.msg_iovlen = (size_t)n;
	while (mh.msg_iovlen) {
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
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
