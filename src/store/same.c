/*
 * Same-filled pages: a page whose 8-byte words are all equal (zero pages
 * above all; also pages of one repeated pattern such as 0xAB bytes or a
 * poison word) is kept as that word in its slot, like zram's
 * "same_pages", and never reaches the codec or the pool.
 *
 * Detection reads the first and the last word first: almost every page
 * that is not same-filled differs there, so the common "no" costs two
 * loads; a "yes" costs one pass over the page.
 *
 * Callers may pass any buffer (an NBD payload sits at any address), so
 * words are loaded through memcpy, which compiles to plain loads.
 */
#include <string.h>

#include "store/store_internal.h"

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

bool zmi_store_page_same_filled(const void *page, size_t len, uint64_t *word)
{
	const uint8_t *p = page;
	size_t n = len / sizeof(uint64_t);
	uint64_t v = load64(p), w[4];

	if (load64(p + len - 8) != v)
		return false;
	/* Four words a step (page sizes are powers of two of at least 4 KiB,
	 * so n is a multiple of 4): a tight compare loop. */
	for (size_t i = 0; i < n; i += 4) {
		memcpy(w, p + i * 8, sizeof(w));
		if ((w[0] ^ v) | (w[1] ^ v) | (w[2] ^ v) | (w[3] ^ v))
			return false;
	}
	*word = v;
	return true;
}

void zmi_store_page_fill(void *page, size_t len, uint64_t word)
{
	uint8_t *p = page;
	size_t n = len / sizeof(uint64_t);

	if (word == (word & 0xFF) * 0x0101010101010101ull) {
		memset(page, (int)(word & 0xFF), len);
		return;
	}
	for (size_t i = 0; i < n; i++)
		memcpy(p + i * 8, &word, 8);
}
