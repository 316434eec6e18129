/*
 * A raw NBD client for the server's tests: it speaks the protocol byte by
 * byte, so that the tests can send what no real client would (bad magic,
 * bad lengths, unknown commands, half a request) and read every byte of
 * what comes back.  And an in-process server: zmem serve's serve_main()
 * in a thread, stopped with a signal to that thread.
 */
#ifndef ZM_TEST_NBDCLIENT_H
#define ZM_TEST_NBDCLIENT_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "serve/nbd.h"
#include "serve/serve.h"

/* ---- an in-process server -------------------------------------------- */

struct test_server {
	struct serve_config cfg;
	char path[108];
	pthread_t thread;
	int status;
};

static void *test_server_main(void *arg)
{
	struct test_server *t = arg;

	t->status = serve_main(&t->cfg);
	return NULL;
}

static int nc_connect_path(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Start a server on a fresh socket; cfg's socket and foreground are set
 * here.  Returns when it accepts connections. */
static inline int test_server_start(struct test_server *t, const struct serve_config *cfg,
				    const char *tag)
{
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	snprintf(t->path, sizeof(t->path), "/tmp/zmem-test-%d-%s.sock", (int)getpid(), tag);
	t->cfg.socket = t->path;
	t->cfg.foreground = true;
	if (pthread_create(&t->thread, NULL, test_server_main, t))
		return -1;
	for (int i = 0; i < 1000; i++) {  /* up to 10 s (valgrind, sanitizers) */
		int fd = nc_connect_path(t->path);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		usleep(10000);
	}
	return -1;
}

static inline int test_server_stop(struct test_server *t)
{
	pthread_kill(t->thread, SIGTERM);
	pthread_join(t->thread, NULL);
	return t->status;
}

/* ---- the raw client --------------------------------------------------- */

struct nc {
	int fd;
	bool structured;
	uint64_t size;
	uint16_t tflags;
};

static inline int nc_send(struct nc *c, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		p += w, n -= (size_t)w;
	}
	return 0;
}

static inline int nc_recv(struct nc *c, void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = recv(c->fd, p, n, 0);

		if (r <= 0)
			return -1;
		p += r, n -= (size_t)r;
	}
	return 0;
}

/* Has the server closed the connection?  (waits up to 5 s) */
static inline bool nc_closed(struct nc *c)
{
	struct timeval tv = { 5, 0 };
	uint8_t b;

	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return recv(c->fd, &b, 1, 0) == 0;
}

/* Connect and read the server's greeting; send client flags. */
static inline int nc_open(struct nc *c, const char *path, uint32_t cflags)
{
	uint8_t b[18];

	memset(c, 0, sizeof(*c));
	c->fd = nc_connect_path(path);
	if (c->fd < 0 || nc_recv(c, b, 18))
		return -1;
	if (get_be64(b) != NBD_MAGIC || get_be64(b + 8) != NBD_IHAVEOPT ||
	    get_be16(b + 16) != (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES))
		return -1;
	put_be32(b, cflags);
	return nc_send(c, b, 4);
}

static inline int nc_opt(struct nc *c, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t h[16];

	put_be64(h, NBD_IHAVEOPT);
	put_be32(h + 8, opt);
	put_be32(h + 12, len);
	return nc_send(c, h, 16) || (len && nc_send(c, data, len)) ? -1 : 0;
}

/* One option reply: its type, and up to cap bytes of data (the rest is
 * read and dropped); *len gets the full length. */
static inline int nc_opt_reply(struct nc *c, uint32_t opt, uint32_t *type, void *data,
			       uint32_t cap, uint32_t *len)
{
	uint8_t h[20], junk[256];
	uint32_t n;

	if (nc_recv(c, h, 20) || get_be64(h) != NBD_OPT_REPLY_MAGIC || get_be32(h + 8) != opt)
		return -1;
	*type = get_be32(h + 12);
	n = get_be32(h + 16);
	if (len)
		*len = n;
	for (uint32_t got = 0; got < n;) {
		uint32_t k = n - got;

		if (got < cap) {
			k = k < cap - got ? k : cap - got;
			if (nc_recv(c, (uint8_t *)data + got, k))
				return -1;
		} else {
			k = k < sizeof(junk) ? k : (uint32_t)sizeof(junk);
			if (nc_recv(c, junk, k))
				return -1;
		}
		got += k;
	}
	return 0;
}

/* NBD_OPT_GO for export "", reading the replies; 0 when in transmission. */
static inline int nc_go(struct nc *c)
{
	uint8_t d[6] = { 0 };  /* name length 0, no info requests */
	uint8_t r[64];
	uint32_t type, len;

	if (nc_opt(c, NBD_OPT_GO, d, sizeof(d)))
		return -1;
	for (;;) {
		if (nc_opt_reply(c, NBD_OPT_GO, &type, r, sizeof(r), &len))
			return -1;
		if (type == NBD_REP_ACK)
			return 0;
		if (type != NBD_REP_INFO)
			return -1;
		if (get_be16(r) == NBD_INFO_EXPORT) {
			c->size = get_be64(r + 2);
			c->tflags = get_be16(r + 10);
		}
	}
}

static inline int nc_structured(struct nc *c, bool meta)
{
	uint32_t type;
	uint8_t r[64];
	uint8_t q[4 + 0 + 4 + 4 + 15];

	if (nc_opt(c, NBD_OPT_STRUCTURED_REPLY, NULL, 0) ||
	    nc_opt_reply(c, NBD_OPT_STRUCTURED_REPLY, &type, r, sizeof(r), NULL) ||
	    type != NBD_REP_ACK)
		return -1;
	c->structured = true;
	if (!meta)
		return 0;
	put_be32(q, 0);
	put_be32(q + 4, 1);
	put_be32(q + 8, 15);
	memcpy(q + 12, "base:allocation", 15);
	if (nc_opt(c, NBD_OPT_SET_META_CONTEXT, q, sizeof(q)) ||
	    nc_opt_reply(c, NBD_OPT_SET_META_CONTEXT, &type, r, sizeof(r), NULL) ||
	    type != NBD_REP_META_CONTEXT ||
	    nc_opt_reply(c, NBD_OPT_SET_META_CONTEXT, &type, r, sizeof(r), NULL) ||
	    type != NBD_REP_ACK)
		return -1;
	return 0;
}

/* Connect, negotiate (structured replies and base:allocation if asked),
 * GO.  0 in transmission. */
static inline int nc_connect(struct nc *c, const char *path, bool structured)
{
	if (nc_open(c, path, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
		return -1;
	if (structured && nc_structured(c, true))
		return -1;
	return nc_go(c);
}

static inline void nc_close(struct nc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static inline int nc_request(struct nc *c, uint16_t type, uint16_t flags, uint64_t cookie,
			     uint64_t off, uint32_t len, const void *payload, uint32_t plen)
{
	uint8_t h[NBD_REQUEST_SIZE];

	put_be32(h, NBD_REQUEST_MAGIC);
	put_be16(h + 4, flags);
	put_be16(h + 6, type);
	put_be64(h + 8, cookie);
	put_be64(h + 16, off);
	put_be32(h + 24, len);
	return nc_send(c, h, sizeof(h)) || (plen && nc_send(c, payload, plen)) ? -1 : 0;
}

/* A simple reply: returns its error (>= 0) and reads len bytes of data if
 * there is no error; -1 if the stream broke or the cookie is wrong. */
static inline int nc_simple_reply(struct nc *c, uint64_t cookie, void *data, uint32_t len)
{
	uint8_t h[NBD_SIMPLE_REPLY_SIZE];
	uint32_t err;

	if (nc_recv(c, h, sizeof(h)) || get_be32(h) != NBD_SIMPLE_REPLY_MAGIC ||
	    get_be64(h + 8) != cookie)
		return -1;
	err = get_be32(h + 4);
	if (!err && len && nc_recv(c, data, len))
		return -1;
	return (int)err;
}

/* One structured chunk: header fields, payload into buf (cap bytes). */
struct nc_chunk {
	uint16_t flags, type;
	uint64_t cookie;
	uint32_t len;
};

static inline int nc_chunk(struct nc *c, struct nc_chunk *ch, void *buf, uint32_t cap)
{
	uint8_t h[NBD_CHUNK_HEADER_SIZE];

	if (nc_recv(c, h, sizeof(h)) || get_be32(h) != NBD_STRUCTURED_REPLY_MAGIC)
		return -1;
	ch->flags = get_be16(h + 4);
	ch->type = get_be16(h + 6);
	ch->cookie = get_be64(h + 8);
	ch->len = get_be32(h + 16);
	if (ch->len > cap)
		return -1;
	return nc_recv(c, buf, ch->len);
}

/* A structured read reply: data chunks (any number, any order, each
 * within the request) until the one flagged DONE, or an error chunk.  The
 * NBD error, or -1 for a broken reply or data that does not cover the
 * request exactly. */
static inline int nc_read_chunks(struct nc *c, uint64_t ck, void *buf, uint64_t off,
				 uint32_t len)
{
	uint64_t got = 0;
	int err = 0;

	for (;;) {
		uint8_t h[NBD_CHUNK_HEADER_SIZE], e[64];
		uint32_t n;
		uint16_t flags, type;

		if (nc_recv(c, h, sizeof(h)) || get_be32(h) != NBD_STRUCTURED_REPLY_MAGIC ||
		    get_be64(h + 8) != ck)
			return -1;
		flags = get_be16(h + 4);
		type = get_be16(h + 6);
		n = get_be32(h + 16);
		if (type == NBD_REPLY_TYPE_ERROR) {
			if (n > sizeof(e) || n < 6 || nc_recv(c, e, n))
				return -1;
			err = (int)get_be32(e);
		} else if (type == NBD_REPLY_TYPE_OFFSET_DATA) {
			uint8_t o[8];
			uint64_t at;

			if (n <= 8 || nc_recv(c, o, 8))  /* no empty data chunks */
				return -1;
			at = get_be64(o);
			if (at < off || at - off + (n - 8) > len ||
			    nc_recv(c, (uint8_t *)buf + (at - off), n - 8))
				return -1;
			got += n - 8;
		} else {
			return -1;
		}
		if (flags & NBD_REPLY_FLAG_DONE)
			break;
	}
	return err ? err : got == len ? 0 : -1;
}

/* Read/write helpers for either reply style: the NBD error or -1. */
static inline int nc_pread(struct nc *c, void *buf, uint64_t off, uint32_t len)
{
	static uint64_t cookie = 1000;
	uint64_t ck = __atomic_add_fetch(&cookie, 1, __ATOMIC_RELAXED);

	if (nc_request(c, NBD_CMD_READ, 0, ck, off, len, NULL, 0))
		return -1;
	if (!c->structured)
		return nc_simple_reply(c, ck, buf, len);
	return nc_read_chunks(c, ck, buf, off, len);
}

static inline int nc_cmd(struct nc *c, uint16_t type, uint16_t flags, uint64_t off,
			 uint32_t len, const void *payload)
{
	static uint64_t cookie = 1u << 30;
	uint64_t ck = __atomic_add_fetch(&cookie, 1, __ATOMIC_RELAXED);

	if (nc_request(c, type, flags, ck, off, len, payload, payload ? len : 0))
		return -1;
	return nc_simple_reply(c, ck, NULL, 0);
}

static inline int nc_pwrite(struct nc *c, const void *buf, uint64_t off, uint32_t len)
{
	return nc_cmd(c, NBD_CMD_WRITE, 0, off, len, buf);
}

#endif
