/*
 * libFuzzer harness for the store: the input bytes choose a backend (from
 * zm_pool_backends()), a codec (zm_codec_list()) and a memory limit, then
 * are a program of puts, gets, discards, compactions and corruptions of
 * stored objects on a store of NSLOT pages, checked against a model:
 *
 *   a get of a slot the model knows returns 0 and exactly its page (zeros
 *   for an empty slot); a put either stores the page (0) or fails with
 *   -ENOSPC (the limit) and leaves the slot as it was; discards of a
 *   range beyond the store are refused with -EINVAL and change nothing;
 *   a slot whose pool object was damaged (bytes overwritten through
 *   zm_store_pool and the slot's key handle) reads back as 0 or -EIO,
 *   never anything else, until a put or discard replaces it; at the end,
 *   and every so often, zm_store_check() is clean.
 *
 * Any mismatch aborts; so does any sanitizer report.
 *
 *   make fuzz            build build/fuzz/fuzz_store (clang)
 *   build/fuzz/fuzz_store -max_total_time=60
 */
#define ZMEM_ADVANCED
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include <zmem/store.h>

#define PS 4096
#define NSLOT 48

static void check(int ok)
{
	if (!ok)
		abort();
}

/* A slot of the model: empty, a page it can rebuild, or damaged. */
enum { EMPTY, KNOWN, DAMAGED };

struct slot {
	uint8_t state;
	uint8_t kind;       /* page content: 0 same-filled, 1 text-like, 2 noise */
	uint32_t cookie;
};

/* The page of (kind, cookie): a same-filled word, a repetitive pattern
 * that compresses well, or a pattern with a noisy part that compresses
 * little or not at all (the huge class). */
static void page_of(uint8_t *b, unsigned kind, uint32_t cookie)
{
	uint64_t x = cookie * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i < PS; i++) {
		if (kind == 0) {
			b[i] = (uint8_t)(cookie >> (i % 4 * 8));
			continue;
		}
		if (kind == 2 && i < PS * (cookie % 9) / 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			b[i] = (uint8_t)x;
			continue;
		}
		b[i] = (uint8_t)("zmem keeps pages compressed "[(i + cookie) % 28] ^ (i / 512));
	}
}

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* Damage index's pool object with bytes from the input; returns whether
 * there was one to damage (same-filled and empty slots have none). */
static int damage(struct zm_store *s, uint64_t index, struct in *in)
{
	struct zm_pool *pool = zm_store_pool(s);
	unsigned kind;
	zm_handle_t h;
	size_t len;
	uint8_t *m;
	unsigned n = 1 + take(in) % 8;

	if (zm_store_slot_info(s, index, &kind, &h, &len) ||
	    (kind != ZM_STORE_SLOT_POOL && kind != ZM_STORE_SLOT_HUGE) || !len)
		return 0;
	m = zm_pool_map(pool, h, ZM_MAP_RW);
	check(m != NULL);
	if (take(in) & 1) {
		memset(m, take(in), len);      /* the whole object */
	} else {
		for (unsigned k = 0; k < n; k++) {
			size_t at = ((size_t)take(in) << 8 | take(in)) % len;

			m[at] ^= (uint8_t)(1 + take(in) % 255);
		}
	}
	zm_pool_unmap(pool, h);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *const *backends = zm_pool_backends();
	const char *const *codecs = zm_codec_list();
	static uint8_t page[PS], out[PS];
	struct slot m[NSLOT];
	struct in in = { data, size };
	struct zm_store_config cfg = { .nr_pages = NSLOT, .page_size = PS };
	struct zm_store *s;
	unsigned nb = 0, nc = 0, steps = 0;

	while (backends[nb])
		nb++;
	while (codecs[nc])
		nc++;
	cfg.allocator = backends[take(&in) % nb];
	cfg.codec = codecs[take(&in) % nc];
	/* no limit, or 4..67 pages of memory: puts then fail with -ENOSPC */
	{
		unsigned l = take(&in);

		cfg.limit_bytes = l & 0x80 ? (size_t)(4 + (l & 63)) * PS : 0;
	}
	if (zm_store_create(&cfg, &s))
		return 0;
	memset(m, 0, sizeof(m));
	while (in.n && steps++ < 2000) {
		unsigned op = take(&in), i = take(&in) % NSLOT;
		int rc;

		switch (op % 6) {
		case 0:
		case 1: {                      /* put */
			unsigned kind = take(&in) % 3;
			uint32_t cookie = (uint32_t)take(&in) << 8 | take(&in);

			page_of(page, kind, cookie);
			rc = zm_store_put(s, i, page);
			check(rc == 0 || rc == -ENOSPC);
			if (rc == 0)
				m[i] = (struct slot){ KNOWN, (uint8_t)kind, cookie };
			break;
		}
		case 2:                        /* get */
			rc = zm_store_get(s, i, out);
			if (m[i].state == DAMAGED) {
				check(rc == 0 || rc == -EIO);
				break;
			}
			check(rc == 0);
			if (m[i].state == EMPTY) {
				for (size_t k = 0; k < PS; k++)
					check(out[k] == 0);
			} else {
				page_of(page, m[i].kind, m[i].cookie);
				check(!memcmp(out, page, PS));
			}
			break;
		case 3: {                      /* discard, sometimes past the end */
			unsigned count = take(&in) % 8;

			rc = zm_store_discard(s, i, count);
			if (i + count > NSLOT) {
				check(rc == -EINVAL);
				break;
			}
			check(rc == 0);
			for (unsigned k = i; k < i + count; k++)
				m[k].state = EMPTY;
			break;
		}
		case 4:                        /* damage a stored object */
			if (damage(s, i, &in))
				m[i].state = DAMAGED;
			break;
		default:                       /* compact, or check */
			if (op & 0x40)
				check(zm_store_check(s) == 0);
			else
				(void)zm_store_compact(s);
			break;
		}
	}
	check(zm_store_check(s) == 0);
	for (unsigned i = 0; i < NSLOT; i++) {
		int rc = zm_store_get(s, i, out);

		if (m[i].state == DAMAGED) {
			check(rc == 0 || rc == -EIO);
		} else if (m[i].state == KNOWN) {
			check(rc == 0);
			page_of(page, m[i].kind, m[i].cookie);
			check(!memcmp(out, page, PS));
		} else {
			check(rc == 0);
		}
	}
	zm_store_destroy(s);
	return 0;
}
