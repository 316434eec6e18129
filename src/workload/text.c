/*
 * One page of English-like text for a given mix (see the knob in
 * workload_internal.h).
 *
 * Text is a run of sentences (4..17 words, the first capitalised, a comma
 * now and then, ending in '.', '?' or '!') grouped into paragraphs of 3..7
 * sentences.  The mix changes it two ways: a sentence may be replaced by an
 * earlier sentence of the same page (boilerplate: compresses very well),
 * and a word may be replaced by a random "word" of letters or digits
 * (names, numbers, typos: compresses badly).
 *
 * Four independent random streams (structure, words, decisions, noise)
 * are consumed the same way whatever the knob, and every sentence is
 * generated even when a repeat replaces it, so that a small change of the
 * knob changes only a few words: the page's compression ratio is then a
 * nearly smooth, increasing function of the knob, which the tuning loop in
 * generate.c relies on.
 */
#include <string.h>

#include "workload/workload_internal.h"

#define SENT_MAX 512      /* longest sentence kept whole, in bytes */
#define SENT_REMEMBER 256 /* earlier sentences a repeat may copy */

struct text_state {
	struct workload_rng st, wd, dec, nz;
	double rep, noise, wide;
	char *buf;
	size_t len, pos;
	uint32_t sent_off[SENT_REMEMBER];
	uint16_t sent_len[SENT_REMEMBER];
	unsigned nsent;
};

static void emit(struct text_state *t, const char *s, size_t n)
{
	if (n > t->len - t->pos)
		n = t->len - t->pos;
	memcpy(t->buf + t->pos, s, n);
	t->pos += n;
}

/* A random "word": a number, or letters (some from all of printable ASCII
 * when the mix is wide). */
static size_t noise_word(struct text_state *t, char *out)
{
	size_t n = 2 + workload_rng_below(&t->nz, 8);
	int digits = workload_rng_below(&t->nz, 5) == 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t x = workload_rng_below(&t->nz, 94 * 26 * 10);
		double u = workload_rng_unit(&t->nz);

		if (u < t->wide)
			out[i] = (char)(33 + x % 94);
		else if (digits)
			out[i] = (char)('0' + x % 10);
		else
			out[i] = (char)('a' + x % 26);
	}
	return n;
}

/* Generate one sentence into s (SENT_MAX bytes); returns its length. */
static size_t sentence(struct text_state *t, char *s)
{
	unsigned nwords = 4 + workload_rng_below(&t->st, 14);
	size_t n = 0;

	for (unsigned i = 0; i < nwords; i++) {
		char tmp[16];
		size_t wl;
		const char *w = vocab_word(&t->wd, &wl);
		int noisy = workload_rng_unit(&t->dec) < t->noise;
		int comma = i + 1 < nwords && workload_rng_below(&t->st, 12) == 0;

		if (noisy) {
			wl = noise_word(t, tmp);
			w = tmp;
		}
		if (n + wl + 3 > SENT_MAX)
			break;
		if (i)
			s[n++] = ' ';
		memcpy(s + n, w, wl);
		if (i == 0 && s[n] >= 'a' && s[n] <= 'z')
			s[n] = (char)(s[n] - 'a' + 'A');
		n += wl;
		if (comma)
			s[n++] = ',';
	}
	switch (workload_rng_below(&t->st, 16)) {
	case 0: s[n++] = '?'; break;
	case 1: s[n++] = '!'; break;
	default: s[n++] = '.'; break;
	}
	return n;
}

void text_page(uint64_t seed, double knob, char *buf, size_t len)
{
	struct text_state t;
	char s[SENT_MAX];
	unsigned in_para = 0, para_len;

	memset(&t, 0, sizeof(t));
	workload_rng_seed(&t.st, seed ^ 0x5354);
	workload_rng_seed(&t.wd, seed ^ 0x5744);
	workload_rng_seed(&t.dec, seed ^ 0x4445);
	workload_rng_seed(&t.nz, seed ^ 0x4e5a);
	t.rep = knob < 1 ? 1 - knob : 0;
	t.noise = knob <= 1 ? 0 : knob >= 2 ? 1 : knob - 1;
	t.wide = knob <= 2 ? 0 : knob >= 3 ? 1 : knob - 2;
	t.buf = buf;
	t.len = len;
	para_len = 3 + workload_rng_below(&t.st, 5);
	while (t.pos < t.len) {
		size_t n = sentence(&t, s), start = t.pos;
		int repeat = workload_rng_unit(&t.dec) < t.rep;
		uint32_t pick = workload_rng_below(&t.dec, t.nsent ? t.nsent : 1);

		if (repeat && t.nsent) {
			/* copy it from the page (it was written whole or cut
			 * at the end, and the end is not reached yet) */
			memmove(s, t.buf + t.sent_off[pick], t.sent_len[pick]);
			n = t.sent_len[pick];
		}
		emit(&t, s, n);
		if (t.nsent < SENT_REMEMBER && t.pos - start == n) {
			t.sent_off[t.nsent] = (uint32_t)start;
			t.sent_len[t.nsent++] = (uint16_t)n;
		}
		if (++in_para >= para_len) {
			emit(&t, "\n\n", 2);
			in_para = 0;
			para_len = 3 + workload_rng_below(&t.st, 5);
		} else {
			emit(&t, " ", 1);
		}
	}
}
