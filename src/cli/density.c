/*
 * zmem density: how densely each pool backend holds realistic compressed
 * pages: (pool + metadata) / object bytes, and with -v where each
 * backend's bytes beyond the objects go.
 *
 * The sizes come from compressing real pages with lz4: by default the
 * files of the system (/usr/lib, /usr/bin, /usr/share, in directory order),
 * or any page corpus given with --corpus (a file from `zmem capture`, say).
 * Same-filled pages are skipped (the store keeps those in the slot), pages
 * that do not compress are kept at page size (the huge class).  The same
 * sizes, in the same order, go into every backend; --sweep also runs
 * zsmalloc over a grid of class spacings, zspage sizes and borrow depths,
 * which is how the defaults were chosen (docs/zsmalloc.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include "cli/cli.h"
#include "cli/corpus.h"

struct result {
	double overhead, pool, meta, round;
	uint64_t pool_bytes, meta_bytes, pages;
	struct zm_pool_stats st;
	/* classes holding objects; of their zspages, those partly used, and
	 * the free slots' bytes in those (class stats) */
	uint64_t classes, partial, partial_free;
};

/* The classes' part of the breakdown (backends with size classes). */
static void class_breakdown(struct zm_pool *p, struct result *r)
{
	unsigned n = zm_pool_nr_classes(p);
	struct zm_pool_class_stats cs;

	if (strcmp(r->st.allocator, "zsmalloc"))
		return;  /* the others' "classes" are lists, not slot sizes */
	for (unsigned i = 0; i < n; i++) {
		uint64_t part = 0;

		if (zm_pool_class_stats(p, i, &cs) || !cs.obj_used)
			continue;
		r->classes++;
		for (int g = 1; g < 10; g++)
			part += cs.fullness[g];
		r->partial += part;
		/* a fill frees nothing: the class's unused bytes are its zspages'
		 * ends and the rest of its partly used zspages' last pages */
		r->partial_free += cs.pages_used * r->st.page_size - cs.obj_used * cs.size;
	}
}

static int fill(const struct zm_pool_config *cfg, const struct corpus *c, struct result *r)
{
	struct zm_pool_config pc = *cfg;
	struct zm_pool_stats st;
	struct zm_pool *p;
	zm_handle_t *h = malloc(c->n * sizeof(*h));

	if (!h || zm_pool_create(&pc, &p)) {
		free(h);
		return -1;
	}
	for (size_t i = 0; i < c->n; i++)
		if (!(h[i] = zm_pool_alloc(p, c->size[i])))
			return -1;
	zm_pool_stats(p, &st);
	r->st = st;
	r->classes = r->partial = r->partial_free = 0;
	class_breakdown(p, r);
	r->pool_bytes = st.pool_bytes;
	r->meta_bytes = st.meta_bytes;
	r->pages = st.pool_pages;
	r->pool = (double)st.pool_bytes / (double)c->bytes;
	r->meta = (double)st.meta_bytes / (double)c->bytes;
	/* of pool/obj: rounding up to the slot sizes (the rest is slots
	 * not holding objects: unused page ends, free slots) */
	r->round = st.slot_bytes ? (double)st.slot_bytes / (double)c->bytes - 1 : 0;
	r->overhead = r->pool + r->meta;
	for (size_t i = 0; i < c->n; i++)
		zm_pool_free(p, h[i]);
	zm_pool_destroy(p);
	free(h);
	return 0;
}

/* -v: where each backend's bytes beyond the objects' go, per object. */
static void breakdown(const struct result *all, int n, const struct corpus *c)
{
	double per = (double)c->n;

	printf("\nbytes per object beyond its own (%.0f bytes on average):\n"
	       "%-9s %9s %9s %9s %9s %9s %9s %9s  %s\n", (double)c->bytes / per,
	       "allocator", "rounding", "unused", "handles", "records", "pg_recs", "other",
	       "total", "partly used zspages");
	for (int i = 0; i < n; i++) {
		const struct result *r = &all[i];
		const struct zm_pool_stats *st = &r->st;
		uint64_t known = st->handle_bytes + st->record_bytes + st->pages_meta_bytes;
		/* malloc's slot_bytes are usable sizes: its rounding; the rest of
		 * its chunks is glibc's header (in "unused") */
		double round = st->slot_bytes ? ((double)st->slot_bytes - (double)c->bytes) / per : 0;
		double unused = st->slot_bytes ? ((double)st->pool_bytes - (double)st->slot_bytes) / per
					       : ((double)st->pool_bytes - (double)c->bytes) / per;
		char part[64] = "-";

		if (r->classes)
			snprintf(part, sizeof(part), "%llu in %llu classes (%.1f KiB unused)",
				 (unsigned long long)r->partial, (unsigned long long)r->classes,
				 (double)r->partial_free / 1024);
		printf("%-9s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f  %s\n", st->allocator, round,
		       unused, (double)st->handle_bytes / per, (double)st->record_bytes / per,
		       (double)st->pages_meta_bytes / per,
		       ((double)st->meta_bytes - (double)known) / per,
		       ((double)st->pool_bytes + (double)st->meta_bytes - (double)c->bytes) / per,
		       part);
	}
	printf("rounding: slots above the objects' sizes; unused: the pool's bytes holding no\n"
	       "slot (page ends, free slots, malloc's chunk headers); handles, records\n"
	       "(headers, back references, zspage table), pg_recs (the pages layer's\n"
	       "records), other (classes, the pool): its metadata\n");
}

int cmd_density(int argc, char **argv)
{
	struct corpus c = { 0 };
	size_t target = 30u << 20;
	const char *corpus[16];
	int ncorpus = 0, json = 0, sweep = 0, verbose = 0, first = 1;
	struct result all[16];
	int nall = 0;
	struct result r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--sweep"))
			sweep = 1;
		else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			verbose = 1;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			target = cli_parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--corpus") && i + 1 < argc && ncorpus < 16)
			corpus[ncorpus++] = argv[++i];
		else {
			fprintf(stderr, "usage: zmem density [--size 30M] [--corpus PATH]... "
					"[--sweep] [-v] [--json]\n");
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (!target || corpus_load(corpus, ncorpus, target, &c) || !c.n) {
		fprintf(stderr, "density: bad --size, no lz4, or no pages\n");
		return 2;
	}
	if (json)
		printf("{\"objects\": %zu, \"obj_bytes\": %zu, \"same_pages_skipped\": %zu, "
		       "\"raw_pages\": %zu, \"results\": [", c.n, c.bytes, c.same, c.raw);
	else
		printf("zmem density: %zu objects, %.1f MiB of lz4-compressed pages "
		       "(mean %.0f bytes; %zu same-filled pages skipped, %zu stored raw)\n\n"
		       "%-9s %7s %6s %6s %10s %10s %9s %9s %9s %9s\n",
		       c.n, (double)c.bytes / 1048576, (double)c.bytes / (double)c.n,
		       c.same, c.raw, "allocator", "spacing", "maxpg", "borrow",
		       "pool MiB", "meta KiB", "pool/obj", "rounding", "meta/obj", "overhead");
	for (const char *const *b = zm_pool_backends(); *b; b++) {
		struct zm_pool_config cfg = { .allocator = *b };

		if (fill(&cfg, &c, &r))
			return 1;
		if (nall < 16)
			all[nall++] = r;
		if (json)
			printf("%s\n {\"allocator\": \"%s\", \"pool_bytes\": %llu, \"meta_bytes\": %llu, "
			       "\"slot_bytes\": %llu, \"handle_bytes\": %llu, \"record_bytes\": %llu, "
			       "\"pages_meta_bytes\": %llu, \"partly_used_zspages\": %llu, "
			       "\"rounding\": %.4f, \"overhead\": %.4f}", first ? "" : ",", *b,
			       (unsigned long long)r.pool_bytes, (unsigned long long)r.meta_bytes,
			       (unsigned long long)r.st.slot_bytes,
			       (unsigned long long)r.st.handle_bytes,
			       (unsigned long long)r.st.record_bytes,
			       (unsigned long long)r.st.pages_meta_bytes,
			       (unsigned long long)r.partial, r.round, r.overhead);
		else
			printf("%-9s %7s %6s %6s %10.2f %10.1f %9.4f %9.4f %9.4f %9.4f\n", *b,
			       "dflt", "dflt", "dflt", r.pool_bytes / 1048576.0,
			       r.meta_bytes / 1024.0, r.pool, r.round, r.meta, r.overhead);
		first = 0;
	}
	if (verbose && !json)
		breakdown(all, nall, &c);
	if (sweep) {
		static const unsigned sp[] = { 8, 16, 32, 64 }, mp[] = { 4, 8, 16, 32 };
		static const int bo[] = { -1, 2, 4 };

		for (size_t i = 0; i < 4; i++)
			for (size_t j = 0; j < 4; j++)
				for (size_t k = 0; k < 3; k++) {
					struct zm_pool_config cfg = { .allocator = "zsmalloc",
						.class_spacing = sp[i], .max_zspage_pages = mp[j],
						.class_borrow = bo[k] };

					if (fill(&cfg, &c, &r))
						return 1;
					if (json)
						printf(",\n {\"allocator\": \"zsmalloc\", \"spacing\": %u, "
						       "\"max_pages\": %u, \"borrow\": %d, \"overhead\": %.4f}",
						       sp[i], mp[j], bo[k], r.overhead);
					else
						printf("%-9s %7u %6u %6d %10.2f %10.1f %9.4f %9.4f %9.4f %9.4f\n",
						       "zsmalloc", sp[i], mp[j], bo[k],
						       r.pool_bytes / 1048576.0, r.meta_bytes / 1024.0,
						       r.pool, r.round, r.meta, r.overhead);
				}
	}
	if (json)
		printf("\n]}\n");
	corpus_free(&c);
	return 0;
}
