/*
 * A workload of zmem runbench (and the run tests): a C program with large
 * malloc'ed arrays, freed and allocated again as it goes.
 *
 *   arrays [MIB]     about MIB MiB live at once (default 384)
 *
 * It keeps NSLOT arrays of 256 KiB .. 8 MiB (glibc maps each with mmap of
 * its own; a preloaded allocator sees them as plain malloc calls), filled
 * with words of a small vocabulary (text compresses as a program's data
 * does).  Then ROUNDS rounds: each frees a seeded quarter of the arrays
 * and allocates new ones of other sizes in their place (the freed memory
 * is reused), and reads and rewrites a seeded sample of words of every
 * array.  Every choice comes from a seeded generator: the same MIB gives
 * the same output on every run, whatever the memory it lives in.  Prints
 * the live bytes and an FNV-1a hash of every array at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSLOT 128
#define ROUNDS 6
#define MIN_LEN ((size_t)256 << 10)
#define TOUCH_PER_ROUND 4        /* sample words per 4 KiB per round */

static const char *const words[] = {
	"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with",
	"be", "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which",
	"but", "have", "an", "they", "you", "were", "her", "she", "there", "been", "one",
	"all", "would", "their", "we", "him", "has", "when", "who", "will", "more", "no",
	"if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them",
	"can", "only", "other", "new", "some", "time", "could", "these", "two", "may",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static uint64_t rng = 20261205;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct slot {
	char *p;
	size_t len;
};

static void fill(struct slot *s)
{
	size_t at = 0;

	while (at < s->len) {
		const char *w = words[next() % NWORDS];
		size_t n = strlen(w);

		if (at + n + 1 > s->len)
			n = s->len - at - 1;
		memcpy(s->p + at, w, n);
		at += n;
		s->p[at++] = next() % 16 ? ' ' : '\n';
	}
}

/* 256 KiB .. 2 * avg - 256 KiB, avg = total / NSLOT */
static size_t pick_len(size_t avg)
{
	return MIN_LEN + (size_t)(next() % (2 * (avg - MIN_LEN))) / 64 * 64;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "arrays: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 384, avg, live = 0;
	struct slot s[NSLOT];
	uint64_t h = 1469598103934665603ull, sum = 0;

	if (mib < 64)
		mib = 64;
	avg = (mib << 20) / NSLOT;
	for (int i = 0; i < NSLOT; i++) {
		s[i].len = pick_len(avg);
		s[i].p = xmalloc(s[i].len);
		fill(&s[i]);
	}
	for (int r = 0; r < ROUNDS; r++) {
		for (int k = 0; k < NSLOT / 4; k++) {
			struct slot *t = &s[next() % NSLOT];

			free(t->p);
			t->len = pick_len(avg);
			t->p = xmalloc(t->len);
			fill(t);
		}
		for (int i = 0; i < NSLOT; i++) {
			size_t n = s[i].len / 4096 * TOUCH_PER_ROUND;

			for (size_t k = 0; k < n; k++) {
				size_t at = (size_t)(next() % (s[i].len - 8));

				sum += (unsigned char)s[i].p[at];
				if (!(k & 7))
					s[i].p[at] = (char)('a' + sum % 26);
			}
		}
	}
	for (int i = 0; i < NSLOT; i++) {
		for (size_t k = 0; k < s[i].len; k++)
			h = (h ^ (unsigned char)s[i].p[k]) * 1099511628211ull;
		live += s[i].len;
		free(s[i].p);
	}
	printf("arrays %d live-bytes %zu sum %llu fnv1a %016llx\n", NSLOT, live,
	       (unsigned long long)sum, (unsigned long long)h);
	return 0;
}
