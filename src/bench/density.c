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
#include "bench/benchmarks.h"
#include "bench/corpus.h"
#include "tool/json.h"
#include "tool/opt.h"

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
	       "%-9s %9s %9s %9s %9s %9s %9s %9s\n", (double)c->bytes / per,
	       "allocator", "rounding", "unused", "handles", "records", "pg_recs", "other",
	       "total");
	for (int i = 0; i < n; i++) {
		const struct result *r = &all[i];
		const struct zm_pool_stats *st = &r->st;
		uint64_t known = st->handle_bytes + st->record_bytes + st->pages_meta_bytes;
		/* malloc's slot_bytes are usable sizes: its rounding; the rest of
		 * its chunks is glibc's header (in "unused") */
		double round = st->slot_bytes ? ((double)st->slot_bytes - (double)c->bytes) / per : 0;
		double unused = st->slot_bytes ? ((double)st->pool_bytes - (double)st->slot_bytes) / per
					       : ((double)st->pool_bytes - (double)c->bytes) / per;

		printf("%-9s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", st->allocator, round,
		       unused, (double)st->handle_bytes / per, (double)st->record_bytes / per,
		       (double)st->pages_meta_bytes / per,
		       ((double)st->meta_bytes - (double)known) / per,
		       ((double)st->pool_bytes + (double)st->meta_bytes - (double)c->bytes) / per);
	}
	for (int i = 0; i < n; i++)
		if (all[i].classes)
			printf("%s: %llu partly used zspages in %llu classes (%.1f KiB unused)\n",
			       all[i].st.allocator, (unsigned long long)all[i].partial,
			       (unsigned long long)all[i].classes, (double)all[i].partial_free / 1024);
	printf("rounding: slots above the objects' sizes; unused: the pool's bytes holding no\n"
	       "slot (page ends, free slots, malloc's chunk headers); handles, records\n"
	       "(headers, back references, zspage table), pg_recs (the pages layer's\n"
	       "records), other (classes, the pool): its metadata\n");
}

static void json_row(struct json *j, const char *allocator, const struct result *r)
{
	json_object(j, NULL);
	json_str(j, "allocator", allocator);
	json_uint(j, "pool_bytes", r->pool_bytes);
	json_uint(j, "meta_bytes", r->meta_bytes);
	json_uint(j, "slot_bytes", r->st.slot_bytes);
	json_uint(j, "handle_bytes", r->st.handle_bytes);
	json_uint(j, "record_bytes", r->st.record_bytes);
	json_uint(j, "pages_meta_bytes", r->st.pages_meta_bytes);
	json_uint(j, "partly_used_zspages", r->partial);
	json_fixed(j, "rounding", r->round, 4);
	json_fixed(j, "overhead", r->overhead, 4);
}

int cmd_density(int argc, char **argv)
{
	struct corpus c = { 0 };
	size_t target = 30u << 20, ncorpus = 0;
	const char *corpus[CORPUS_SOURCES];
	int json = 0, sweep = 0, verbose = 0, rc;
	struct result all[16];
	int nall = 0;
	struct result r;
	struct json j;
	char h[32];
	const struct opt table[] = {
		O_SIZE("size", 's', &target, "SIZE", "compressed bytes of pages to read", "30M",
		       4096, (double)((uint64_t)4 << 30)),
		O_LIST("corpus", 'c', corpus, "PATH",
		       "read pages from this file or directory\n(repeatable)",
		       "/usr/lib, /usr/bin, /usr/share", &ncorpus, CORPUS_SOURCES),
		O_FLAG("sweep", 'S', &sweep,
		       "also zsmalloc over a grid of class spacings,\nzspage sizes and borrow depths"),
		O_FLAG("verbose", 'v', &verbose, "also each backend's bytes per object"),
		O_FLAG("json", 'j', &json,
		       "one JSON document on stdout instead (with\nevery file read)"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"density", "[OPTIONS]",
		"How densely each pool backend holds realistic compressed pages: the sizes\n"
		"of real pages compressed with lz4 (same-filled ones skipped, incompressible\n"
		"ones kept at page size), the same sizes in the same order into every backend.",
		table,
		"Without --corpus, the pages are the system's files under /usr/lib, /usr/bin\n"
		"and /usr/share, in directory order: the output names the directories and\n"
		"files read (--json: every file and its bytes), so a run can be repeated\n"
		"with --corpus.\n",
	};

	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = corpus_load_cmd("density", corpus, (int)ncorpus, target, &c);
	if (rc)
		return rc;
	if (json) {
		json_begin(&j, stdout, "density");
		json_uint(&j, "objects", c.n);
		json_uint(&j, "obj_bytes", c.bytes);
		json_uint(&j, "same_pages_skipped", c.same);
		json_uint(&j, "raw_pages", c.raw);
		corpus_json(&c, &j);
		json_array(&j, "results");
	} else {
		printf("zmem density: %zu objects, %s of lz4-compressed pages "
		       "(mean %.0f bytes;\n%zu same-filled pages skipped, %zu stored raw)\n",
		       c.n, zmi_human_bytes(c.bytes, h, sizeof(h)), (double)c.bytes / (double)c.n,
		       c.same, c.raw);
		corpus_print(&c, stdout, "");
		/* 70 columns; --sweep's table after it puts zsmalloc's
		 * knobs where the allocator was (75) */
		printf("\n%-9s %9s %9s %9s %9s %9s %9s\n", "allocator", "pool MiB", "meta KiB",
		       "pool/obj", "rounding", "meta/obj", "overhead");
	}
	for (const char *const *b = zm_pool_backends(); *b; b++) {
		struct zm_pool_config cfg = { .allocator = *b };

		cli_progress("%s", *b);
		if (fill(&cfg, &c, &r))
			return cli_fail("density", "%s: the fill failed", *b);
		cli_progress_done();
		if (nall < 16)
			all[nall++] = r;
		if (json) {
			json_row(&j, *b, &r);
			json_object_end(&j);
		} else {
			printf("%-9s %9.2f %9.1f %9.4f %9.4f %9.4f %9.4f\n", *b, r.pool_bytes / 1048576.0,
			       r.meta_bytes / 1024.0, r.pool, r.round, r.meta, r.overhead);
		}
	}
	if (verbose && !json)
		breakdown(all, nall, &c);
	if (sweep) {
		static const unsigned sp[] = { 8, 16, 32, 64 }, mp[] = { 4, 8, 16, 32 };
		static const int bo[] = { -1, 2, 4 };

		if (!json)
			printf("\nzsmalloc over a grid of knobs; its defaults are its row in the first table\n"
			       "%7s %5s %6s %9s %9s %9s %9s %9s %9s\n", "spacing", "maxpg", "borrow",
			       "pool MiB", "meta KiB", "pool/obj", "rounding", "meta/obj", "overhead");

		for (size_t i = 0; i < 4; i++)
			for (size_t k2 = 0; k2 < 4; k2++)
				for (size_t k = 0; k < 3; k++) {
					struct zm_pool_config cfg = { .allocator = "zsmalloc",
						.class_spacing = sp[i], .max_zspage_pages = mp[k2],
						.class_borrow = bo[k] };

					cli_progress("sweep: spacing %u, max pages %u, borrow %d", sp[i],
						     mp[k2], bo[k]);
					if (fill(&cfg, &c, &r))
						return cli_fail("density", "zsmalloc: the fill failed");
					cli_progress_done();
					if (json) {
						json_object(&j, NULL);
						json_str(&j, "allocator", "zsmalloc");
						json_uint(&j, "spacing", sp[i]);
						json_uint(&j, "max_pages", mp[k2]);
						json_int(&j, "borrow", bo[k]);
						json_fixed(&j, "overhead", r.overhead, 4);
						json_object_end(&j);
					} else {
						printf("%7u %5u %6d %9.2f %9.1f %9.4f %9.4f %9.4f %9.4f\n",
						       sp[i], mp[k2], bo[k],
						       r.pool_bytes / 1048576.0, r.meta_bytes / 1024.0,
						       r.pool, r.round, r.meta, r.overhead);
					}
				}
	}
	if (json) {
		json_array_end(&j);
		json_end(&j);
	}
	corpus_free(&c);
	return 0;
}
