/*
 * libFuzzer harness for zmem serve's protocol code: the input is what a
 * client sends -- the handshake and option haggling, then requests with
 * their payloads -- fed to the real handshake and request loop of one
 * connection on a 1 MiB store (requests run inline, no threads).  The
 * first byte chooses where to start: bit 0 skips the handshake (straight
 * to requests), bits 1 and 2 then turn on structured replies and
 * base:allocation, so that the request parser is reached without having
 * to discover the magic numbers first.  Replies are parsed as they leave,
 * and must be well-formed; sanitizer reports and leaks are findings.
 *
 *   make fuzz; build/fuzz/fuzz_nbd -max_total_time=60
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/nbd.h"
#include "serve/serve.h"

struct input {
	const uint8_t *p;
	size_t n;
};

static int in_recv(void *ctx, void *buf, size_t n)
{
	struct input *in = ctx;

	if (n > in->n)
		return -1;
	memcpy(buf, in->p, n);
	in->p += n, in->n -= n;
	return 0;
}

/* Every message the server sends starts with a known magic. */
static int out_send(void *ctx, const struct iovec *iov, int n)
{
	const uint8_t *h = iov[0].iov_base;
	size_t len = 0;

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (len >= 8) {
		uint32_t m32 = get_be32(h);
		uint64_t m64 = get_be64(h);

		if (m32 != NBD_SIMPLE_REPLY_MAGIC && m32 != NBD_STRUCTURED_REPLY_MAGIC &&
		    m64 != NBD_OPT_REPLY_MAGIC && m64 != NBD_MAGIC &&
		    len != 10 && len != 134)  /* EXPORT_NAME's size + flags (+ zeros) */
			abort();
		if (m32 == NBD_STRUCTURED_REPLY_MAGIC && get_be32(h + 16) != len - 20)
			abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static struct serve_server s;
	static bool ready;
	struct serve_config cfg = { .size = (1u << 20) - 512, .threads = 0,
				       .mem_limit = 256u << 10 };
	struct nbd_conn c;
	struct input in;

	if (len < 1)
		return 0;
	if (!ready) {
		if (server_init(&s, &cfg))
			abort();
		ready = true;
	}
	in = (struct input){ data + 1, len - 1 };
	conn_init(&c, &s, (struct nbd_io){ in_recv, out_send, &in }, -1);
	if (data[0] & 1) {
		c.structured = data[0] & 2;
		c.meta_alloc = c.structured && (data[0] & 4);
		nbd_transmit(&c);
	} else if (nbd_handshake(&c) == 0) {
		nbd_transmit(&c);
	}
	if (zm_store_check(s.store))
		abort();
	conn_fini(&c);
	if (zm_store_discard(s.store, 0, zm_store_nr_pages(s.store)))
		abort();
	{
		struct zm_store_stats st;

		zm_store_stats(s.store, &st);
		if (st.pages_stored || st.compr_data_size)
			abort();
	}
	return 0;
}
