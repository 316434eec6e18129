/*
 * zmem serve against a raw client: every bad input the issue lists, each
 * answered as the protocol says, while a well-behaved client on another
 * connection carries on and finds its data intact.  Also the replies'
 * shapes (simple and structured, block status) and unaligned I/O.
 *
 * The server runs in this process (serve_main in a thread), so ASan sees
 * its leaks and errors.  With ZMEM_NBD_SOCKET set, the tests that need
 * only the default server go to that one instead (the valgrind run in
 * tests/interop/test_serve_valgrind.sh uses this).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <time.h>
#include <cmocka.h>

#include "nbdclient.h"

#define SIZE (8u << 20)

static struct test_server srv;
static const char *path;
static struct nc good;          /* stays connected through every test */
static uint8_t good_pattern[4096];

static void good_check(void)
{
	uint8_t buf[4096];

	assert_int_equal(nc_pread(&good, buf, 0, sizeof(buf)), 0);
	assert_memory_equal(buf, good_pattern, sizeof(buf));
}

static int setup(void **state)
{
	const char *ext = getenv("ZMEM_NBD_SOCKET");

	if (ext && *ext) {
		path = ext;
	} else {
		struct serve_config cfg = { .size = SIZE, .threads = 2 };

		if (test_server_start(&srv, &cfg, "main"))
			return -1;
		path = srv.path;
	}
	for (unsigned i = 0; i < sizeof(good_pattern); i++)
		good_pattern[i] = (uint8_t)(i * 7 + 3);
	if (nc_connect(&good, path, false) || nc_pwrite(&good, good_pattern, 0, 4096))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	nc_close(&good);
	if (path == srv.path && test_server_stop(&srv))
		return -1;
	return 0;
}

static void test_handshake_bad_client_flags(void **state)
{
	struct nc c;

	assert_int_equal(nc_open(&c, path, 1u << 5), 0);  /* an unknown flag */
	assert_true(nc_closed(&c));
	nc_close(&c);
	good_check();
}

static void test_handshake_bad_option_magic(void **state)
{
	struct nc c;
	uint8_t h[16] = "NOTAMAGIC-------";

	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE), 0);
	assert_int_equal(nc_send(&c, h, 16), 0);
	assert_true(nc_closed(&c));
	nc_close(&c);
	good_check();
}

static void test_handshake_unknown_and_malformed_options(void **state)
{
	struct nc c;
	uint32_t type, len;
	uint8_t r[64], d[64];

	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES), 0);
	/* unknown option: ERR_UNSUP, and the client may go on */
	assert_int_equal(nc_opt(&c, 0x4242, "xyz", 3), 0);
	assert_int_equal(nc_opt_reply(&c, 0x4242, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_UNSUP);
	/* STARTTLS: not here */
	assert_int_equal(nc_opt(&c, NBD_OPT_STARTTLS, NULL, 0), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_STARTTLS, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_UNSUP);
	/* GO whose name length runs past the data */
	put_be32(d, 100);
	put_be16(d + 4, 0);
	assert_int_equal(nc_opt(&c, NBD_OPT_GO, d, 6), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_GO, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_INVALID);
	/* INFO with an info count that does not match the length */
	put_be32(d, 0);
	put_be16(d + 4, 3);
	assert_int_equal(nc_opt(&c, NBD_OPT_INFO, d, 8), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_INFO, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_INVALID);
	/* LIST and STRUCTURED_REPLY take no data */
	assert_int_equal(nc_opt(&c, NBD_OPT_LIST, "x", 1), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_LIST, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_INVALID);
	assert_int_equal(nc_opt(&c, NBD_OPT_STRUCTURED_REPLY, "x", 1), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_STRUCTURED_REPLY, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_INVALID);
	/* meta contexts need structured replies first */
	memset(d, 0, 8);
	assert_int_equal(nc_opt(&c, NBD_OPT_SET_META_CONTEXT, d, 8), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_SET_META_CONTEXT, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ERR_INVALID);
	/* option data far too long: skipped, ERR_TOO_BIG */
	{
		uint32_t n = 200000;
		uint8_t *big = calloc(1, n);

		assert_non_null(big);
		assert_int_equal(nc_opt(&c, NBD_OPT_INFO, big, n), 0);
		free(big);
		assert_int_equal(nc_opt_reply(&c, NBD_OPT_INFO, &type, r, sizeof(r), NULL), 0);
		assert_int_equal(type, NBD_REP_ERR_TOO_BIG);
	}
	/* LIST: one export, "" */
	assert_int_equal(nc_opt(&c, NBD_OPT_LIST, NULL, 0), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_LIST, &type, r, sizeof(r), &len), 0);
	assert_int_equal(type, NBD_REP_SERVER);
	assert_int_equal(len, 4);
	assert_int_equal(get_be32(r), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_LIST, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ACK);
	/* after all that, GO works and so does I/O */
	assert_int_equal(nc_go(&c), 0);
	assert_int_equal(c.size, SIZE);
	assert_int_equal(nc_pread(&c, r, 0, 64), 0);
	assert_memory_equal(r, good_pattern, 64);
	nc_close(&c);
	good_check();
}

static void test_handshake_export_name_and_abort(void **state)
{
	struct nc c;
	uint8_t b[134];
	uint32_t type;

	/* old clients: EXPORT_NAME, then size, flags and 124 zeros */
	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE), 0);
	assert_int_equal(nc_opt(&c, NBD_OPT_EXPORT_NAME, "any", 3), 0);
	assert_int_equal(nc_recv(&c, b, sizeof(b)), 0);
	assert_int_equal(get_be64(b), SIZE);
	assert_true(get_be16(b + 8) & NBD_FLAG_HAS_FLAGS);
	assert_true(get_be16(b + 8) & NBD_FLAG_CAN_MULTI_CONN);
	assert_false(get_be16(b + 8) & NBD_FLAG_SEND_DF);  /* no structured replies */
	for (int i = 10; i < 134; i++)
		assert_int_equal(b[i], 0);
	assert_int_equal(nc_pread(&c, b, 0, 16), 0);
	assert_memory_equal(b, good_pattern, 16);
	nc_close(&c);
	/* with NO_ZEROES: just size and flags */
	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES), 0);
	assert_int_equal(nc_opt(&c, NBD_OPT_EXPORT_NAME, NULL, 0), 0);
	assert_int_equal(nc_recv(&c, b, 10), 0);
	assert_int_equal(nc_pread(&c, b, 0, 16), 0);
	assert_memory_equal(b, good_pattern, 16);
	nc_close(&c);
	/* ABORT: an ACK, then the server closes */
	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE), 0);
	assert_int_equal(nc_opt(&c, NBD_OPT_ABORT, NULL, 0), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_ABORT, &type, b, sizeof(b), NULL), 0);
	assert_int_equal(type, NBD_REP_ACK);
	assert_true(nc_closed(&c));
	nc_close(&c);
	/* a client that leaves in the middle of an option */
	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE), 0);
	put_be64(b, NBD_IHAVEOPT);
	put_be32(b + 8, NBD_OPT_GO);
	put_be32(b + 12, 1000);
	assert_int_equal(nc_send(&c, b, 20), 0);
	nc_close(&c);
	good_check();
}

static void test_bad_requests(void **state)
{
	struct nc c;
	uint8_t buf[4096];

	assert_int_equal(nc_connect(&c, path, false), 0);
	/* unknown command */
	assert_int_equal(nc_cmd(&c, 99, 0, 0, 4096, NULL), NBD_EINVAL);
	/* unknown flag, and a flag the command does not take */
	assert_int_equal(nc_cmd(&c, NBD_CMD_FLUSH, 1u << 9, 0, 0, NULL), NBD_EINVAL);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, NBD_CMD_FLAG_NO_HOLE, 0, 4096, NULL), NBD_EINVAL);
	/* DF without structured replies */
	assert_int_equal(nc_cmd(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 0, NULL), NBD_EINVAL);
	/* a write with a bad flag: its payload is still read and dropped */
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(nc_request(&c, NBD_CMD_WRITE, 1u << 7, 7, 0, 4096, buf, 4096), 0);
	assert_int_equal(nc_simple_reply(&c, 7, NULL, 0), NBD_EINVAL);
	/* past the end: reads EINVAL, writes ENOSPC (payload consumed) */
	assert_int_equal(nc_pread(&c, buf, SIZE - 100, 200), NBD_EINVAL);
	assert_int_equal(nc_pread(&c, buf, UINT64_MAX - 10, 200), NBD_EINVAL);
	assert_int_equal(nc_pwrite(&c, buf, SIZE - 100, 200), NBD_ENOSPC);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, 0, SIZE, 1, NULL), NBD_ENOSPC);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, SIZE - 4096, 8192, NULL), NBD_ENOSPC);
	assert_int_equal(nc_cmd(&c, NBD_CMD_CACHE, 0, SIZE, 4096, NULL), NBD_EINVAL);
	/* zero length */
	assert_int_equal(nc_pread(&c, buf, 0, 0), NBD_EINVAL);
	/* block status without a context */
	assert_int_equal(nc_cmd(&c, NBD_CMD_BLOCK_STATUS, 0, 0, 4096, NULL), NBD_EINVAL);
	/* reads over the maximum payload */
	assert_int_equal(nc_cmd(&c, NBD_CMD_READ, 0, 0, NBD_MAX_PAYLOAD + 1, NULL), NBD_EINVAL);
	/* a write over the maximum: the payload is read and dropped */
	{
		uint32_t n = NBD_MAX_PAYLOAD + 4096;
		uint8_t *big = malloc(n);

		assert_non_null(big);
		memset(big, 0xee, n);
		assert_int_equal(nc_request(&c, NBD_CMD_WRITE, 0, 8, 0, n, big, n), 0);
		free(big);
		assert_int_equal(nc_simple_reply(&c, 8, NULL, 0), NBD_EINVAL);
	}
	/* and the connection still works, with the data untouched */
	assert_int_equal(nc_pread(&c, buf, 0, 4096), 0);
	assert_memory_equal(buf, good_pattern, 4096);
	assert_int_equal(nc_cmd(&c, NBD_CMD_FLUSH, 0, 0, 0, NULL), 0);
	/* DISC: the server closes after answering what was in flight */
	assert_int_equal(nc_request(&c, NBD_CMD_DISC, 0, 9, 0, 0, NULL, 0), 0);
	assert_true(nc_closed(&c));
	nc_close(&c);
	good_check();
}

static void test_bad_request_magic(void **state)
{
	struct nc c;
	uint8_t h[NBD_REQUEST_SIZE] = { 0 };

	assert_int_equal(nc_connect(&c, path, false), 0);
	put_be32(h, 0x12345678);
	assert_int_equal(nc_send(&c, h, sizeof(h)), 0);
	assert_true(nc_closed(&c));
	nc_close(&c);
	good_check();
}

static void test_disconnect_mid_request_and_reply(void **state)
{
	struct nc c;
	uint8_t buf[4096];

	/* half a header */
	assert_int_equal(nc_connect(&c, path, false), 0);
	put_be32(buf, NBD_REQUEST_MAGIC);
	assert_int_equal(nc_send(&c, buf, 10), 0);
	nc_close(&c);
	/* a write whose payload stops short */
	assert_int_equal(nc_connect(&c, path, false), 0);
	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(nc_request(&c, NBD_CMD_WRITE, 0, 1, 8192, 65536, buf, 4096), 0);
	nc_close(&c);
	/* reads whose replies nobody reads */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(nc_connect(&c, path, k), 0);
		for (int i = 0; i < 8; i++)
			assert_int_equal(nc_request(&c, NBD_CMD_READ, 0, (uint64_t)i, 0, 4u << 20,
						    NULL, 0), 0);
		nc_close(&c);
	}
	good_check();
	/* the half-sent write did not land */
	assert_int_equal(nc_pread(&good, buf, 8192, 4096), 0);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(buf[i], 0);
}

static void test_unaligned_io(void **state)
{
	struct nc c;
	uint8_t *ref = calloc(1, 65536), *buf = malloc(65536);
	uint64_t base = 1u << 20, seed = 12345;

	assert_non_null(ref);
	assert_non_null(buf);
	assert_int_equal(nc_connect(&c, path, false), 0);
	for (int i = 0; i < 300; i++) {
		uint32_t off, len;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		off = (uint32_t)(seed >> 33) % 65000;
		len = 1 + (uint32_t)(seed >> 17) % 5000;
		if (off + len > 65536)
			len = 65536 - off;
		if (i % 5 == 4) {
			assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, 0, base + off, len, NULL), 0);
			memset(ref + off, 0, len);
		} else {
			for (uint32_t k = 0; k < len; k++)
				buf[k] = (uint8_t)(i + k);
			assert_int_equal(nc_pwrite(&c, buf, base + off, len), 0);
			memcpy(ref + off, buf, len);
		}
	}
	assert_int_equal(nc_pread(&c, buf, base, 65536), 0);
	assert_memory_equal(buf, ref, 65536);
	/* odd-sized reads at odd places */
	assert_int_equal(nc_pread(&c, buf, base + 4095, 3), 0);
	assert_memory_equal(buf, ref + 4095, 3);
	nc_close(&c);
	free(ref);
	free(buf);
	good_check();
}

static void test_structured_and_block_status(void **state)
{
	struct nc c;
	struct nc_chunk ch;
	uint8_t buf[4096 + 64];
	uint64_t base = 4u << 20;

	assert_int_equal(nc_connect(&c, path, true), 0);
	assert_true(c.tflags & NBD_FLAG_SEND_DF);
	memset(buf, 0x31, 4096);
	/* [base, +4K) data, [+4K, +8K) zeroes without a hole, then holes */
	assert_int_equal(nc_pwrite(&c, buf, base, 4096), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, base + 4096, 4096,
				NULL), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, base + 8192, 8192, NULL), 0);
	assert_int_equal(nc_request(&c, NBD_CMD_BLOCK_STATUS, 0, 42, base, 16384, NULL, 0), 0);
	assert_int_equal(nc_chunk(&c, &ch, buf, sizeof(buf)), 0);
	assert_int_equal(ch.type, NBD_REPLY_TYPE_BLOCK_STATUS);
	assert_int_equal(ch.cookie, 42);
	assert_true(ch.flags & NBD_REPLY_FLAG_DONE);
	assert_int_equal(ch.len, 4 + 3 * 8);
	assert_int_equal(get_be32(buf), 1);
	assert_int_equal(get_be32(buf + 4), 4096);
	assert_int_equal(get_be32(buf + 8), 0);
	assert_int_equal(get_be32(buf + 12), 4096);
	assert_int_equal(get_be32(buf + 16), NBD_STATE_ZERO);
	assert_int_equal(get_be32(buf + 20), 8192);
	assert_int_equal(get_be32(buf + 24), NBD_STATE_ZERO | NBD_STATE_HOLE);
	/* REQ_ONE: one extent, as long as its status runs */
	assert_int_equal(nc_request(&c, NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_REQ_ONE, 43, base, 16384,
				    NULL, 0), 0);
	assert_int_equal(nc_chunk(&c, &ch, buf, sizeof(buf)), 0);
	assert_int_equal(ch.len, 4 + 8);
	assert_int_equal(get_be32(buf + 4), 4096);
	assert_int_equal(get_be32(buf + 8), 0);
	/* a structured read, and a structured error */
	assert_int_equal(nc_pread(&c, buf, base, 4096), 0);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(buf[i], 0x31);
	assert_int_equal(nc_pread(&c, buf, SIZE, 1), NBD_EINVAL);
	assert_int_equal(nc_cmd(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 0, NULL), -1);  /* chunk, not simple */
	nc_close(&c);
	good_check();
}

/* One extent from a block status request with REQ_ONE: its length and
 * status into *len, *st. */
static void status_one(struct nc *c, uint64_t off, uint32_t len, uint32_t *elen, uint32_t *st)
{
	struct nc_chunk ch;
	uint8_t b[64];

	assert_int_equal(nc_request(c, NBD_CMD_BLOCK_STATUS, NBD_CMD_FLAG_REQ_ONE, 44, off, len,
				    NULL, 0), 0);
	assert_int_equal(nc_chunk(c, &ch, b, sizeof(b)), 0);
	assert_int_equal(ch.type, NBD_REPLY_TYPE_BLOCK_STATUS);
	assert_int_equal(ch.len, 4 + 8);
	*elen = get_be32(b + 4);
	*st = get_be32(b + 8);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* qemu asks block status with REQ_ONE and walks the disk extent by
 * extent: each extent must run as far as its status, over holes, zeros
 * and data alike, or qemu walks page by page.  Zero and hole runs shorter
 * than SERVE_ZERO_RUN_MIN are reported as the run around them, whichever
 * page a request starts at.  A sparse 1 TiB disk, never written past its
 * first pages, answers for 4 GiB at once. */
static void test_block_status_runs(void **state)
{
	enum { P = 4096, M = SERVE_ZERO_RUN_MIN / P };
	struct test_server big;
	struct serve_config cfg = { .size = 1ull << 40, .threads = 1 };
	struct nc c;
	uint8_t *buf = malloc(5 * P);
	uint32_t len, st, max = 0xFFFFF000u;  /* the most a request asks: 4 GiB - 4 KiB */
	const uint64_t z = 11, zh = z + M, z2 = zh + 2, h = z2 + M, last = h + M;
	uint64_t t0, worst = 0;

	assert_non_null(buf);
	assert_int_equal(test_server_start(&big, &cfg, "big"), 0);
	assert_int_equal(nc_connect(&c, big.path, true), 0);
	/* pages 0-4 data, 5-7 zeros (not holes), 8-9 trimmed, 10 data: the
	 * zero run 5-9 is short, all data; then M pages of zeros, 2 trimmed,
	 * M zeros: one run of zeros; M trimmed: a hole; one page of data,
	 * and the rest never written */
	memset(buf, 0x5a, 5 * P);
	assert_int_equal(nc_pwrite(&c, buf, 0, 5 * P), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, 5 * P, 3 * P,
				NULL), 0);
	assert_int_equal(nc_pwrite(&c, buf, 8 * P, 2 * P), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, 8 * P, 2 * P, NULL), 0);
	assert_int_equal(nc_pwrite(&c, buf, 10 * P, P), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, z * P, (h - z) * P,
				NULL), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, zh * P, 2 * P, NULL), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, h * P, M * P,
				NULL), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, h * P, M * P, NULL), 0);
	assert_int_equal(nc_pwrite(&c, buf, last * P, P), 0);

	status_one(&c, 0, max, &len, &st);
	assert_int_equal(len, z * P);
	assert_int_equal(st, 0);
	status_one(&c, 1000, max, &len, &st);  /* unaligned: to the run's end */
	assert_int_equal(len, z * P - 1000);
	status_one(&c, 6 * P, max, &len, &st);  /* inside the short zero run */
	assert_int_equal(len, (z - 6) * P);
	assert_int_equal(st, 0);
	status_one(&c, 9 * P, max, &len, &st);  /* inside the short hole */
	assert_int_equal(len, (z - 9) * P);
	assert_int_equal(st, 0);
	status_one(&c, z * P, max, &len, &st);
	assert_int_equal(len, (h - z) * P);
	assert_int_equal(st, NBD_STATE_ZERO);
	status_one(&c, (zh + 1) * P, max, &len, &st);  /* the short hole in zeros */
	assert_int_equal(len, (h - zh - 1) * P);
	assert_int_equal(st, NBD_STATE_ZERO);
	status_one(&c, (z + M - 1) * P, 3 * P, &len, &st);  /* the request's length */
	assert_int_equal(len, 3 * P);
	assert_int_equal(st, NBD_STATE_ZERO);
	status_one(&c, h * P, max, &len, &st);
	assert_int_equal(len, M * P);
	assert_int_equal(st, NBD_STATE_ZERO | NBD_STATE_HOLE);
	status_one(&c, (h + M - 1) * P, max, &len, &st);
	assert_int_equal(len, P);
	assert_int_equal(st, NBD_STATE_ZERO | NBD_STATE_HOLE);
	status_one(&c, last * P, max, &len, &st);
	assert_int_equal(len, P);
	assert_int_equal(st, 0);
	/* never written: the whole request, however long, and fast */
	for (uint64_t off = (last + 1) * P; off < (64ull << 30); off += max) {
		t0 = mono_ns();
		status_one(&c, off, max, &len, &st);
		t0 = mono_ns() - t0;
		worst = t0 > worst ? t0 : worst;
		assert_int_equal(len, max);
		assert_int_equal(st, NBD_STATE_ZERO | NBD_STATE_HOLE);
	}
	/* the disk's last bytes, in a partial page */
	status_one(&c, (1ull << 40) - 12345, 12345, &len, &st);
	assert_int_equal(len, 12345);
	assert_int_equal(st, NBD_STATE_ZERO | NBD_STATE_HOLE);
	/* not a speed test (the skip takes microseconds, the round trip
	 * dominates): a guard against a walk that reads the pages */
	printf("block status over 4 GiB of holes: worst %.3f ms\n", (double)worst / 1e6);
	assert_true(worst < 1000000000ull);
	nc_close(&c);
	assert_int_equal(test_server_stop(&big), 0);
	free(buf);
}

/* A whole-disk write of zeros is reported as one extent: the disk's last
 * page, partial when the size is not a multiple of the page, is reported
 * as the others are (a hole after write-zeroes, zeros after a write of a
 * zero payload), whatever it held before. */
static void status_all(struct nc *c, uint64_t size, uint32_t want)
{
	struct nc_chunk ch;
	uint8_t b[256];

	for (int one = 0; one < 2; one++) {
		assert_int_equal(nc_request(c, NBD_CMD_BLOCK_STATUS, one ? NBD_CMD_FLAG_REQ_ONE : 0, 45,
					    0, (uint32_t)size, NULL, 0), 0);
		assert_int_equal(nc_chunk(c, &ch, b, sizeof(b)), 0);
		assert_int_equal(ch.type, NBD_REPLY_TYPE_BLOCK_STATUS);
		assert_int_equal(ch.len, 4 + 8);
		assert_int_equal(get_be32(b + 4), size);
		assert_int_equal(get_be32(b + 8), want);
	}
}

static void test_block_status_whole_disk_zeros(void **state)
{
	static const size_t pages[] = { 4096, 32768 };

	for (unsigned k = 0; k < 2; k++) {
		const uint64_t size = (1u << 20) + 1424;  /* a partial last page */
		struct serve_config cfg = { .size = size, .threads = 1, .page_size = pages[k] };
		struct test_server z;
		struct nc c;
		uint8_t *data = malloc(size), *zero = calloc(1, size);

		assert_non_null(data);
		assert_non_null(zero);
		for (uint64_t i = 0; i < size; i++)
			data[i] = (uint8_t)(i * 13 + 1);
		assert_int_equal(test_server_start(&z, &cfg, "zeros"), 0);
		assert_int_equal(nc_connect(&c, z.path, true), 0);
		assert_int_equal(nc_pwrite(&c, data, 0, (uint32_t)size), 0);
		assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, 0, 0, size, NULL), 0);
		status_all(&c, size, NBD_STATE_ZERO | NBD_STATE_HOLE);
		assert_int_equal(nc_pwrite(&c, data, 0, (uint32_t)size), 0);
		assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, 0, size, NULL), 0);
		status_all(&c, size, NBD_STATE_ZERO | NBD_STATE_HOLE);
		assert_int_equal(nc_pwrite(&c, data, 0, (uint32_t)size), 0);
		assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE, 0, size, NULL), 0);
		status_all(&c, size, NBD_STATE_ZERO);
		assert_int_equal(nc_pwrite(&c, data, 0, (uint32_t)size), 0);
		assert_int_equal(nc_pwrite(&c, zero, 0, (uint32_t)size), 0);
		status_all(&c, size, NBD_STATE_ZERO);
		assert_int_equal(nc_pread(&c, data, 0, (uint32_t)size), 0);
		assert_memory_equal(data, zero, size);
		nc_close(&c);
		assert_int_equal(test_server_stop(&z), 0);
		free(data);
		free(zero);
	}
}

/* Reads longer than a piece leave as several data chunks; with DF (do not
 * fragment) a read leaves in one chunk or gets EOVERFLOW, and up to 64 KiB
 * it must leave whole. */
static void test_read_pieces_and_df(void **state)
{
	enum { LEN = 1u << 20 };
	struct nc c;
	struct nc_chunk ch;
	uint8_t *buf = malloc(LEN + 64), *back = malloc(LEN);
	uint64_t base = 5u << 20;

	assert_non_null(buf);
	assert_non_null(back);
	assert_int_equal(nc_connect(&c, path, true), 0);
	for (unsigned i = 0; i < LEN; i++)
		buf[i] = (uint8_t)(i / 4096 + i * 13);
	assert_int_equal(nc_pwrite(&c, buf, base, LEN), 0);
	/* plain: several chunks, together the data (nc_read_chunks checks) */
	assert_int_equal(nc_pread(&c, back, base, LEN), 0);
	assert_memory_equal(back, buf, LEN);
	assert_int_equal(nc_pread(&c, back, base + 100, LEN - 300), 0);  /* unaligned */
	assert_memory_equal(back, buf + 100, LEN - 300);
	/* DF, 64 KiB: one chunk, flagged done */
	assert_int_equal(nc_request(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 61, base + 100, 65536, NULL,
				    0), 0);
	assert_int_equal(nc_chunk(&c, &ch, back, LEN), 0);
	assert_int_equal(ch.type, NBD_REPLY_TYPE_OFFSET_DATA);
	assert_true(ch.flags & NBD_REPLY_FLAG_DONE);
	assert_int_equal(ch.len, 8 + 65536);
	assert_int_equal(get_be64(back), base + 100);
	assert_memory_equal(back + 8, buf + 100, 65536);
	/* DF, 1 MiB: EOVERFLOW, and the connection goes on */
	assert_int_equal(nc_request(&c, NBD_CMD_READ, NBD_CMD_FLAG_DF, 62, base, LEN, NULL, 0), 0);
	assert_int_equal(nc_chunk(&c, &ch, back, LEN), 0);
	assert_int_equal(ch.type, NBD_REPLY_TYPE_ERROR);
	assert_int_equal(get_be32(back), NBD_EOVERFLOW);
	assert_int_equal(nc_pread(&c, back, base, 4096), 0);
	assert_memory_equal(back, buf, 4096);
	nc_close(&c);
	free(buf);
	free(back);
	good_check();
}

/* "base:" is a wildcard for LIST_META_CONTEXT, and selects nothing for
 * SET_META_CONTEXT; then block status is refused. */
static void test_meta_context_namespace(void **state)
{
	struct nc c;
	uint8_t q[4 + 4 + 4 + 5], r[64];
	uint32_t type, len;

	assert_int_equal(nc_open(&c, path, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES), 0);
	assert_int_equal(nc_structured(&c, false), 0);
	put_be32(q, 0);             /* export "" */
	put_be32(q + 4, 1);         /* one query */
	put_be32(q + 8, 5);
	memcpy(q + 12, "base:", 5);
	assert_int_equal(nc_opt(&c, NBD_OPT_LIST_META_CONTEXT, q, sizeof(q)), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_LIST_META_CONTEXT, &type, r, sizeof(r), &len), 0);
	assert_int_equal(type, NBD_REP_META_CONTEXT);
	assert_int_equal(len, 4 + 15);
	assert_memory_equal(r + 4, "base:allocation", 15);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_LIST_META_CONTEXT, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ACK);
	assert_int_equal(nc_opt(&c, NBD_OPT_SET_META_CONTEXT, q, sizeof(q)), 0);
	assert_int_equal(nc_opt_reply(&c, NBD_OPT_SET_META_CONTEXT, &type, r, sizeof(r), NULL), 0);
	assert_int_equal(type, NBD_REP_ACK);
	assert_int_equal(nc_go(&c), 0);
	assert_int_equal(nc_request(&c, NBD_CMD_BLOCK_STATUS, 0, 77, 0, 4096, NULL, 0), 0);
	{
		struct nc_chunk ch;
		uint8_t e[64];

		assert_int_equal(nc_chunk(&c, &ch, e, sizeof(e)), 0);
		assert_int_equal(ch.type, NBD_REPLY_TYPE_ERROR);
		assert_int_equal(get_be32(e), NBD_EINVAL);
	}
	nc_close(&c);
}

/* FUA is valid on every command once SEND_FUA is advertised (proto.md);
 * some clients send it with FLUSH. */
static void test_fua_everywhere(void **state)
{
	struct nc c;
	uint8_t buf[4096];

	assert_int_equal(nc_connect(&c, path, false), 0);
	assert_true(c.tflags & NBD_FLAG_SEND_FUA);
	assert_int_equal(nc_cmd(&c, NBD_CMD_FLUSH, NBD_CMD_FLAG_FUA, 0, 0, NULL), 0);
	assert_int_equal(nc_cmd(&c, NBD_CMD_CACHE, NBD_CMD_FLAG_FUA, 0, 4096, NULL), 0);
	assert_int_equal(nc_request(&c, NBD_CMD_READ, NBD_CMD_FLAG_FUA, 5, 0, 4096, NULL, 0), 0);
	assert_int_equal(nc_simple_reply(&c, 5, buf, 4096), 0);
	assert_memory_equal(buf, good_pattern, 4096);
	nc_close(&c);
}

/* A client that sends large writes and never reads the replies must not
 * hold up other clients: it may block one worker, not all of them. */
static void test_stalled_client(void **state)
{
	struct nc a, b;
	struct timeval t = { 2, 0 }, rt = { 20, 0 };
	uint8_t *buf = calloc(1, 65536);
	int sent = 0;

	assert_non_null(buf);
	assert_int_equal(nc_connect(&a, path, false), 0);
	setsockopt(a.fd, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof(t));
	for (; sent < 600; sent++)  /* until the server stops taking them */
		if (nc_request(&a, NBD_CMD_WRITE, 0, (uint64_t)sent, 2u << 20, 65536, buf, 65536))
			break;
	assert_true(sent > 10);
	assert_int_equal(nc_connect(&b, path, false), 0);
	setsockopt(b.fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
	memset(buf, 0x6b, 65536);
	assert_int_equal(nc_pwrite(&b, buf, 3u << 20, 65536), 0);
	assert_int_equal(nc_pread(&b, buf, 3u << 20, 4096), 0);
	assert_int_equal(buf[4095], 0x6b);
	nc_close(&b);
	nc_close(&a);
	free(buf);
	good_check();
}

static void test_read_only(void **state)
{
	struct test_server ro;
	struct serve_config cfg = { .size = 1u << 20, .read_only = true };
	struct nc c;
	uint8_t buf[4096] = { 1 };

	assert_int_equal(test_server_start(&ro, &cfg, "ro"), 0);
	assert_int_equal(nc_connect(&c, ro.path, false), 0);
	assert_true(c.tflags & NBD_FLAG_READ_ONLY);
	assert_false(c.tflags & NBD_FLAG_SEND_TRIM);
	assert_int_equal(nc_pwrite(&c, buf, 0, 4096), NBD_EPERM);
	assert_int_equal(nc_cmd(&c, NBD_CMD_WRITE_ZEROES, 0, 0, 4096, NULL), NBD_EPERM);
	assert_int_equal(nc_pread(&c, buf, 0, 4096), 0);
	assert_int_equal(buf[0], 0);
	nc_close(&c);
	assert_int_equal(test_server_stop(&ro), 0);
}

static void test_memory_limit(void **state)
{
	struct test_server lim;
	struct serve_config cfg = { .size = 64u << 20, .mem_limit = 512u << 10, .threads = 1 };
	struct nc c;
	uint8_t first[4096], buf[4096];
	uint64_t seed = 99;
	int rc = 0, i;

	assert_int_equal(test_server_start(&lim, &cfg, "lim"), 0);
	assert_int_equal(nc_connect(&c, lim.path, false), 0);
	memset(first, 0x42, sizeof(first));
	memcpy(first, "zmem", 4);
	assert_int_equal(nc_pwrite(&c, first, 0, 4096), 0);
	/* random pages until the limit says no */
	for (i = 1; i < 16384 && rc == 0; i++) {
		for (int k = 0; k < 4096; k += 8) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			memcpy(buf + k, &seed, 8);
		}
		rc = nc_pwrite(&c, buf, (uint64_t)i * 4096, 4096);
	}
	assert_int_equal(rc, NBD_ENOSPC);
	assert_true(i > 10);
	/* overwriting page 0 with random data fails too, and keeps page 0 */
	assert_int_equal(nc_pwrite(&c, buf, 0, 4096), NBD_ENOSPC);
	assert_int_equal(nc_pread(&c, buf, 0, 4096), 0);
	assert_memory_equal(buf, first, 4096);
	/* freeing room makes writes work again */
	assert_int_equal(nc_cmd(&c, NBD_CMD_TRIM, 0, 4096, 32u << 20, NULL), 0);
	assert_int_equal(nc_pwrite(&c, first, 8192, 4096), 0);
	nc_close(&c);
	assert_int_equal(test_server_stop(&lim), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_bad_client_flags),
		cmocka_unit_test(test_handshake_bad_option_magic),
		cmocka_unit_test(test_handshake_unknown_and_malformed_options),
		cmocka_unit_test(test_handshake_export_name_and_abort),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_bad_request_magic),
		cmocka_unit_test(test_disconnect_mid_request_and_reply),
		cmocka_unit_test(test_unaligned_io),
		cmocka_unit_test(test_structured_and_block_status),
		cmocka_unit_test(test_block_status_runs),
		cmocka_unit_test(test_block_status_whole_disk_zeros),
		cmocka_unit_test(test_read_pieces_and_df),
		cmocka_unit_test(test_meta_context_namespace),
		cmocka_unit_test(test_fua_everywhere),
		cmocka_unit_test(test_stalled_client),
		cmocka_unit_test(test_read_only),
		cmocka_unit_test(test_memory_limit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
