/*
 * The fixed newstyle handshake (proto.md "Newstyle negotiation").
 *
 *   S: NBDMAGIC, IHAVEOPT, handshake flags (FIXED_NEWSTYLE | NO_ZEROES)
 *   C: client flags
 *   C: options, each answered, until EXPORT_NAME or GO (transmission),
 *      or ABORT / EOF / a broken header (close)
 *
 * There is one export; every name reaches it (as nbdkit's memory plugin
 * does), NBD_OPT_LIST shows it as the default export "".  An option the
 * server does not know is answered NBD_REP_ERR_UNSUP and haggling goes on.
 * Options whose data is malformed get NBD_REP_ERR_INVALID; data longer
 * than OPT_MAX_LEN is skipped and answered NBD_REP_ERR_TOO_BIG.  Only a
 * broken option header (wrong magic) or bad client flags drop the client,
 * as the protocol asks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "serve/nbd.h"
#include "serve/serve.h"

/* Longest option data read: export names and queries are strings of at
 * most 4096 bytes; a few of them fit easily. */
#define OPT_MAX_LEN 65536
/* Longest option data skipped before the client is dropped instead. */
#define OPT_SKIP_MAX (16u << 20)

#define META_ALLOC_ID 1  /* our only metadata context: base:allocation */

static int reply(struct nbd_conn *c, uint32_t opt, uint32_t type, const void *data,
		 uint32_t len)
{
	uint8_t h[20];
	struct iovec v[2] = { { h, sizeof(h) }, { (void *)data, len } };

	put_be64(h, NBD_OPT_REPLY_MAGIC);
	put_be32(h + 8, opt);
	put_be32(h + 12, type);
	put_be32(h + 16, len);
	return c->io.send(c->io.ctx, v, len ? 2 : 1);
}

static int reply_err(struct nbd_conn *c, uint32_t opt, uint32_t type, const char *msg)
{
	return reply(c, opt, type, msg, (uint32_t)strlen(msg));
}

static uint16_t transmission_flags(const struct nbd_conn *c)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_CAN_MULTI_CONN |
		     NBD_FLAG_SEND_CACHE;

	if (c->srv->cfg.read_only)
		f |= NBD_FLAG_READ_ONLY;
	else
		f |= NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
		     NBD_FLAG_SEND_FAST_ZERO;
	if (c->structured)
		f |= NBD_FLAG_SEND_DF;
	return f;
}

static int info_export(struct nbd_conn *c, uint32_t opt)
{
	uint8_t b[12];

	put_be16(b, NBD_INFO_EXPORT);
	put_be64(b + 2, c->srv->disk.size);
	put_be16(b + 10, transmission_flags(c));
	return reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

static int info_block_size(struct nbd_conn *c, uint32_t opt)
{
	uint8_t b[14];

	/* any alignment works (read-modify-write); whole pages are cheapest */
	put_be16(b, NBD_INFO_BLOCK_SIZE);
	put_be32(b + 2, 1);
	put_be32(b + 6, (uint32_t)c->srv->disk.page_size);
	put_be32(b + 10, NBD_MAX_PAYLOAD);
	return reply(c, opt, NBD_REP_INFO, b, sizeof(b));
}

static int info_string(struct nbd_conn *c, uint32_t opt, uint16_t type, const char *s)
{
	uint8_t b[2 + 4096];
	size_t n = strlen(s);

	if (n > 4096)
		n = 4096;
	put_be16(b, type);
	memcpy(b + 2, s, n);
	return reply(c, opt, NBD_REP_INFO, b, (uint32_t)(2 + n));
}

/* NBD_OPT_INFO / NBD_OPT_GO: u32 name length, name, u16 count, u16 infos.
 * Returns 1 when GO succeeded (transmission), 0 to go on, -1 to drop. */
static int opt_info_go(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	uint32_t nlen;
	uint16_t nreq;
	bool want_name = false, want_desc = false;

	if (len < 6 || (nlen = get_be32(d)) > len - 6 ||
	    len != 4 + nlen + 2 + 2u * (nreq = get_be16(d + 4 + nlen)))
		return reply_err(c, opt, NBD_REP_ERR_INVALID, "malformed INFO/GO request");
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = get_be16(d + 4 + nlen + 2 + 2 * i);

		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	if (info_export(c, opt) || info_block_size(c, opt))
		return -1;
	if (want_name) {
		char name[4097];  /* names are at most 4096 bytes (proto.md) */
		uint32_t k = nlen < 4096 ? nlen : 4096;

		memcpy(name, d + 4, k);
		name[k] = 0;
		if (info_string(c, opt, NBD_INFO_NAME, name))
			return -1;
	}
	if (want_desc && info_string(c, opt, NBD_INFO_DESCRIPTION, "zmem compressed RAM disk"))
		return -1;
	if (reply(c, opt, NBD_REP_ACK, NULL, 0))
		return -1;
	if (opt == NBD_OPT_GO) {
		c->tflags = transmission_flags(c);
		return 1;
	}
	return 0;
}

/* Does the query select base:allocation?  "base:allocation" does; the
 * bare namespace "base:" only when listing (a wildcard for LIST, nothing
 * for SET, as qemu-nbd and nbdkit read the protocol). */
static bool query_alloc(const uint8_t *q, uint32_t n, bool list)
{
	return (list && n == 5 && !memcmp(q, "base:", 5)) ||
	       (n == 15 && !memcmp(q, "base:allocation", 15));
}

/* NBD_OPT_{LIST,SET}_META_CONTEXT: u32 name length, name, u32 number of
 * queries, each u32 length + string. */
static int opt_meta(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	uint32_t nlen, nq, pos;
	bool alloc = false;

	if (!c->structured)
		return reply_err(c, opt, NBD_REP_ERR_INVALID, "structured replies first");
	if (len < 8 || (nlen = get_be32(d)) > len - 8)
		return reply_err(c, opt, NBD_REP_ERR_INVALID, "malformed meta context request");
	nq = get_be32(d + 4 + nlen);
	pos = 8 + nlen;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t ql;

		if (len - pos < 4 || (ql = get_be32(d + pos)) > len - pos - 4)
			return reply_err(c, opt, NBD_REP_ERR_INVALID, "malformed query");
		alloc |= query_alloc(d + pos + 4, ql, opt == NBD_OPT_LIST_META_CONTEXT);
		pos += 4 + ql;
	}
	if (pos != len)
		return reply_err(c, opt, NBD_REP_ERR_INVALID, "trailing bytes in meta context request");
	if (opt == NBD_OPT_LIST_META_CONTEXT && nq == 0)
		alloc = true;  /* no query: list everything */
	if (opt == NBD_OPT_SET_META_CONTEXT)
		c->meta_alloc = alloc;
	if (alloc) {
		uint8_t b[4 + 15];

		put_be32(b, opt == NBD_OPT_SET_META_CONTEXT ? META_ALLOC_ID : 0);
		memcpy(b + 4, "base:allocation", 15);
		if (reply(c, opt, NBD_REP_META_CONTEXT, b, sizeof(b)))
			return -1;
	}
	return reply(c, opt, NBD_REP_ACK, NULL, 0) ? -1 : 0;
}

/* Old clients: EXPORT_NAME ends haggling with no reply header. */
static int opt_export_name(struct nbd_conn *c, bool no_zeroes)
{
	uint8_t b[10 + 124] = { 0 };
	struct iovec v = { b, no_zeroes ? 10 : sizeof(b) };

	c->tflags = transmission_flags(c);
	put_be64(b, c->srv->disk.size);
	put_be16(b + 8, c->tflags);
	return c->io.send(c->io.ctx, &v, 1);
}

int nbd_handshake(struct nbd_conn *c)
{
	uint8_t hello[18], b[16], *data = NULL;
	uint32_t cflags;
	struct iovec v = { hello, sizeof(hello) };
	int rc = -1;

	put_be64(hello, NBD_MAGIC);
	put_be64(hello + 8, NBD_IHAVEOPT);
	put_be16(hello + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	if (c->io.send(c->io.ctx, &v, 1) || c->io.recv(c->io.ctx, b, 4))
		return -1;
	cflags = get_be32(b);
	if (cflags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
		return -1;  /* the protocol says: drop a client with unknown flags */
	data = malloc(OPT_MAX_LEN);
	if (!data)
		return -1;
	for (;;) {
		uint32_t opt, len;
		int r = 0;

		if (c->io.recv(c->io.ctx, b, 16) || get_be64(b) != NBD_IHAVEOPT)
			break;
		opt = get_be32(b + 8);
		len = get_be32(b + 12);
		if (len > OPT_MAX_LEN) {
			if (len > OPT_SKIP_MAX || conn_skip(c, len) ||
			    reply_err(c, opt, NBD_REP_ERR_TOO_BIG, "option data too long"))
				break;
			continue;
		}
		if (c->io.recv(c->io.ctx, data, len))
			break;
		switch (opt) {
		case NBD_OPT_EXPORT_NAME:
			if (len > 4096)
				goto out;  /* no way to answer: drop, as the spec says */
			rc = opt_export_name(c, cflags & NBD_FLAG_C_NO_ZEROES) ? -1 : 0;
			goto out;
		case NBD_OPT_ABORT:
			(void)reply(c, opt, NBD_REP_ACK, NULL, 0);
			goto out;
		case NBD_OPT_LIST:
			if (len) {
				r = reply_err(c, opt, NBD_REP_ERR_INVALID, "LIST takes no data");
			} else {
				uint8_t e[4] = { 0 };  /* one export: "" */

				r = reply(c, opt, NBD_REP_SERVER, e, 4) ||
				    reply(c, opt, NBD_REP_ACK, NULL, 0) ? -1 : 0;
			}
			break;
		case NBD_OPT_INFO:
		case NBD_OPT_GO:
			r = opt_info_go(c, opt, data, len);
			if (r == 1) {
				rc = 0;
				goto out;
			}
			break;
		case NBD_OPT_STRUCTURED_REPLY:
			if (len) {
				r = reply_err(c, opt, NBD_REP_ERR_INVALID, "takes no data");
			} else {
				c->structured = true;
				r = reply(c, opt, NBD_REP_ACK, NULL, 0);
			}
			break;
		case NBD_OPT_LIST_META_CONTEXT:
		case NBD_OPT_SET_META_CONTEXT:
			r = opt_meta(c, opt, data, len);
			break;
		default:  /* STARTTLS among them: no TLS here */
			r = reply_err(c, opt, NBD_REP_ERR_UNSUP, "option not supported");
		}
		if (r < 0)
			break;
	}
out:
	free(data);
	return rc;
}
