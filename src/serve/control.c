/*
 * The control socket: `zmem stats`, `zmem ctl` and `zmem list` connect
 * to SOCKET.ctl (a Unix socket beside the data socket, or --control
 * PATH), send one line and read the answer until the server closes.
 * zram's sysfs in a socket:
 *
 *   text, json        the statistics report (below)
 *   info              one line of JSON: the URI, pid, size, codec and
 *                     what is stored (zmem list)
 *   compact           compact the pool now (zram's compact)
 *   compact-file [MAX_BYTES]
 *                     clean the packed backing file now: pages moved out
 *                     of its blocks mostly dead (at most MAX_BYTES)
 *   mem-limit BYTES   change the memory limit, 0 for none (mem_limit)
 *   reset-max         start mem_used_max over (zram's reset)
 *   idle all|SECONDS|MSms
 *                     mark idle the pages not accessed for SECONDS (or
 *                     MS milliseconds: "250ms", what zmem ctl sends), or
 *                     all of them (zram's idle); answers how many are
 *   writeback TYPE [MAX_PAGES]
 *                     write pages back to the backing file (zram's
 *                     writeback); TYPE is zram's: idle, huge, huge_idle,
 *                     incompressible, or all
 *   writeback page INDEX
 *                     one page (zram's page_index=)
 *   recompress [TYPE] [MAX_PAGES]
 *                     re-encode with the secondary codec (zram's
 *                     recompress type= max_pages=); TYPE idle, huge,
 *                     huge_idle or all (the default)
 *   stop              stop the server, as SIGTERM does
 *
 * A request is one line of at most CONTROL_LINE_MAX bytes, its newline
 * included; it runs once the newline is in, and a longer one is refused
 * whole.  Verbs answer one line: "ok: ..." or "error: ...".  An unknown
 * verb gets an error naming the known ones.  Sizes arrive as plain bytes:
 * the client parses units.
 *
 * The report: the export (size, codec, allocator), zram's mm_stat and
 * bd_stat lines and fields, the store's statistics with its size
 * histogram, the cold data (recompression, the backing file), the pool's
 * per-class table, and the server's counters (connections, requests by
 * type, bytes, errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <zmem/codec.h>
#include "base/units.h"
#include "serve/serve.h"

static const char *const counter_names[SC_NR] = {
	"connections", "connections_open", "handshake_failures", "requests", "reads", "writes",
	"flushes", "trims", "write_zeroes", "caches", "block_status", "bytes_read",
	"bytes_written", "errors", "protocol_errors", "timeouts", "streamed",
};

static double uptime(const struct serve_server *s)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)s->started_ns) / 1e9;
}

/* A JSON string: quotes, backslashes and control characters escaped (a
 * socket path may hold any of them). */
static void json_str(FILE *f, const char *str)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)str; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A count that may be "none": JSON's null. */
static void json_limit(FILE *f, uint64_t v)
{
	if (v == UINT64_MAX)
		fputs("null", f);
	else
		fprintf(f, "%llu", (unsigned long long)v);
}

/* The memory limit: null for none (the store's 0). */
static void json_mem_limit(FILE *f, uint64_t v)
{
	json_limit(f, v ? v : UINT64_MAX);
}

/* zram's bd_stat (pages) and the rest of the cold data. */
static void report_json_tiering(struct serve_server *s, const struct zm_store_stats *st,
				FILE *f)
{
	fprintf(f, " \"bd_stat\": {\"bd_count\": %llu, \"bd_reads\": %llu, "
		   "\"bd_writes\": %llu},\n",
		(unsigned long long)st->bd_count, (unsigned long long)st->bd_reads,
		(unsigned long long)st->bd_writes);
	fputs(" \"tiering\": {\"backing\": ", f);
	if (s->cfg.backing)
		json_str(f, s->cfg.backing);
	else
		fputs("null", f);
	fputs(", \"recompress_codec\": ", f);
	if (s->cfg.recompress)
		json_str(f, s->cfg.recompress);
	else
		fputs("null", f);
	fprintf(f, ", \"idle_after_ms\": %u, \"recompressed_pages\": %llu, "
		   "\"recompress_saved_bytes\": %llu, \"recompress_tried\": %llu, "
		   "\"secondary_pages\": %llu, \"incompressible_pages\": %llu, "
		   "\"idle_pages\": %llu, \"bd_bytes\": %llu, \"writeback_failures\": %llu, "
		   "\"file_alloc_bytes\": %llu, \"file_live_bytes\": %llu, \"bd_lost\": %llu, "
		   "\"writeback_left\": ",
		s->cfg.idle_after_ms, (unsigned long long)st->recompressed_pages,
		(unsigned long long)st->recompress_saved, (unsigned long long)st->recompress_tried,
		(unsigned long long)st->secondary_pages,
		(unsigned long long)st->incompressible_pages, (unsigned long long)st->idle_pages,
		(unsigned long long)st->bd_bytes, (unsigned long long)st->writeback_failures,
		(unsigned long long)st->file_alloc_bytes, (unsigned long long)st->file_live_bytes,
		(unsigned long long)st->bd_lost);
	json_limit(f, st->writeback_left);
	fprintf(f, ", \"backing_cache\": \"%s\"",
		st->backing_cache_mode == ZM_STORE_CACHE_DROP     ? "dropped"
		: st->backing_cache_mode == ZM_STORE_CACHE_DIRECT ? "direct"
								  : "kept");
	fputs("},\n", f);
}

/* The store's unit_pages (1: pages alone). */
static unsigned unit_pages(const struct serve_server *s)
{
	return s->cfg.unit_pages ? s->cfg.unit_pages : 1;
}

static void report_json(struct serve_server *s, FILE *f)
{
	struct zm_store_stats st;
	struct zm_pool *pool = zm_store_pool(s->store);
	unsigned nc = zm_pool_nr_classes(pool);
	bool first = true;

	zm_store_stats(s->store, &st);
	/* the zmem command's common keys first: zmem stats --json prints this */
	fprintf(f, "{\"zmem\": \"%s\", \"command\": \"stats\", ", zm_version_string());
	fprintf(f, "\"export\": {\"size_bytes\": %llu, \"page_size_bytes\": %zu, \"unit_pages\": %u, "
		   "\"codec\": \"%s\", \"allocator\": \"%s\", \"read_only\": %s, \"threads\": %u, "
		   "\"uptime_s\": %.3f},\n",
		(unsigned long long)s->disk.size, st.page_size, unit_pages(s),
		s->cfg.codec ? s->cfg.codec : "lz4",
		zm_pool_backend(pool), s->cfg.read_only ? "true" : "false", s->nworkers, uptime(s));
	fprintf(f, " \"mm_stat\": {\"orig_data_size\": %llu, \"compr_data_size\": %llu, "
		   "\"mem_used_total\": %llu, \"mem_limit_bytes\": ",
		(unsigned long long)st.orig_data_size, (unsigned long long)st.compr_data_size,
		(unsigned long long)st.mem_used_total);
	json_mem_limit(f, st.mem_limit);
	fprintf(f, ", \"mem_used_max\": %llu, \"same_pages\": %llu, \"pages_compacted\": %llu, "
		   "\"huge_pages\": %llu, \"huge_pages_since\": %llu},\n",
		(unsigned long long)st.mem_used_max, (unsigned long long)st.same_pages,
		(unsigned long long)st.pages_compacted, (unsigned long long)st.huge_pages,
		(unsigned long long)st.huge_pages_since);
	report_json_tiering(s, &st, f);
	fprintf(f, " \"store\": {\"pages_stored\": %llu, \"puts\": %llu, \"gets\": %llu, "
		   "\"discards\": %llu, \"failed_reads\": %llu, \"failed_writes\": %llu, "
		   "\"limit_fails\": %llu, \"pool_errors\": %llu, \"pool_objects\": %llu, "
		   "\"pool_meta_bytes\": %llu, \"store_meta_bytes\": %llu, \"units\": %llu, "
		   "\"unit_pages\": %llu, \"unit_bytes\": %llu, \"unit_saved_bytes\": %llu, "
		   "\"units_formed\": %llu, \"units_declined\": %llu, \"unit_splits\": %llu},\n",
		(unsigned long long)st.pages_stored, (unsigned long long)st.puts,
		(unsigned long long)st.gets, (unsigned long long)st.discards,
		(unsigned long long)st.failed_reads, (unsigned long long)st.failed_writes,
		(unsigned long long)st.limit_fails, (unsigned long long)st.pool_errors,
		(unsigned long long)st.pool_objects,
		(unsigned long long)st.pool_meta_bytes, (unsigned long long)st.store_meta_bytes,
		(unsigned long long)st.units, (unsigned long long)st.unit_pages,
		(unsigned long long)st.unit_bytes, (unsigned long long)st.unit_saved,
		(unsigned long long)st.units_formed, (unsigned long long)st.units_declined,
		(unsigned long long)st.unit_splits);
	fprintf(f, " \"classes\": [");
	for (unsigned i = 0; i < nc; i++) {
		struct zm_pool_class_stats cs;

		if (zm_pool_class_stats(pool, i, &cs) || !cs.obj_allocated)
			continue;
		fprintf(f, "%s\n  {\"size\": %u, \"pages_per_zspage\": %u, \"objs_per_zspage\": %u, "
			   "\"obj_allocated\": %llu, \"obj_used\": %llu, \"pages_used\": %llu, "
			   "\"freeable\": %llu}",
			first ? "" : ",", cs.size, cs.pages_per_zspage, cs.objs_per_zspage,
			(unsigned long long)cs.obj_allocated, (unsigned long long)cs.obj_used,
			(unsigned long long)cs.pages_used, (unsigned long long)cs.freeable);
		first = false;
	}
	fprintf(f, "],\n \"server\": {");
	for (int i = 0; i < SC_NR; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", counter_names[i],
			(unsigned long long)__atomic_load_n(&s->counter[i], __ATOMIC_RELAXED));
	fprintf(f, "}}\n");
}

/* What the server tiers to; the store's table above has the counts. */
static void report_text_tiering(struct serve_server *s, const struct zm_store_stats *st,
				FILE *f)
{
	char left[32] = "no limit";

	if (!s->cfg.backing && !s->cfg.recompress)
		return;
	if (st->writeback_left != UINT64_MAX)
		snprintf(left, sizeof(left), "%llu pages", (unsigned long long)st->writeback_left);
	fprintf(f, "cold data: backing %s (writeback left: %s), recompress %s, ",
		s->cfg.backing ? s->cfg.backing : "none", s->cfg.backing ? left : "none",
		s->cfg.recompress ? s->cfg.recompress : "none");
	if (s->cfg.idle_after_ms)
		fprintf(f, "idle after %u ms", s->cfg.idle_after_ms);
	else
		fprintf(f, "idle only when asked");
	fprintf(f, "; %llu pages idle at the last mark\n\n", (unsigned long long)st->idle_pages);
}

/* The per-class table of zmem stats: zm_pool_print_classes(), 80
 * columns; wide: the kernel zsmalloc's layout whole, with its 91-99
 * column (zm_pool_print_classes_wide()). */
static void print_classes(struct zm_pool *pool, FILE *f, bool wide)
{
	if (wide)
		zm_pool_print_classes_wide(pool, f);
	else
		zm_pool_print_classes(pool, f);
}

static void report_text(struct serve_server *s, FILE *f, bool wide)
{
	struct zm_store_stats st;
	struct zm_pool *pool = zm_store_pool(s->store);
	char h[32];

	zm_store_stats(s->store, &st);
	fprintf(f, "export: %s, %s, %s, %zu-byte pages",
		zmi_human_bytes(s->disk.size, h, sizeof(h)), s->cfg.codec ? s->cfg.codec : "lz4",
		zm_pool_backend(pool), st.page_size);
	if (unit_pages(s) > 1)
		fprintf(f, " in units of up to %u", unit_pages(s));
	fprintf(f, "%s, %u workers, up %.1f s\n", s->cfg.read_only ? ", read-only" : "",
		s->nworkers, uptime(s));
	fprintf(f, "mm_stat: ");
	zm_store_print_mm_stat(&st, f);
	/* zram's format: bd_stat_show(), pages, widths of 8 */
	fprintf(f, "bd_stat: %8llu %8llu %8llu\n", (unsigned long long)st.bd_count,
		(unsigned long long)st.bd_reads, (unsigned long long)st.bd_writes);
	fprintf(f, "\n");
	zm_store_print_stats(&st, f);
	fprintf(f, "\n");
	report_text_tiering(s, &st, f);
	print_classes(pool, f, wide);
	fprintf(f, "\nserver:\n");
	for (int i = 0; i < SC_NR; i++) {
		uint64_t v = __atomic_load_n(&s->counter[i], __ATOMIC_RELAXED);

		if (i == SC_BYTES_READ || i == SC_BYTES_WRITTEN)
			fprintf(f, "  %-20s %s\n", counter_names[i],
				zmi_human_bytes(v, h, sizeof(h)));
		else
			fprintf(f, "  %-20s %llu\n", counter_names[i], (unsigned long long)v);
	}
}

/* One line of JSON for zmem list. */
static void report_info(struct serve_server *s, FILE *f)
{
	struct zm_store_stats st;

	zm_store_stats(s->store, &st);
	fputs("{\"uri\": ", f);
	json_str(f, s->uri);
	fprintf(f, ", \"pid\": %d, \"size_bytes\": %llu, \"page_size_bytes\": %zu, "
		   "\"unit_pages\": %u, \"codec\": \"%s\", \"allocator\": \"%s\", "
		   "\"orig_data_size\": %llu, \"compr_data_size\": %llu, "
		   "\"mem_used_total\": %llu, \"mem_limit_bytes\": ",
		(int)getpid(), (unsigned long long)s->disk.size, st.page_size, unit_pages(s),
		s->cfg.codec ? s->cfg.codec : "lz4", zm_pool_backend(zm_store_pool(s->store)),
		(unsigned long long)st.orig_data_size, (unsigned long long)st.compr_data_size,
		(unsigned long long)st.mem_used_total);
	json_mem_limit(f, st.mem_limit);
	fputs("}\n", f);
}

int serve_check_mem_limit(uint64_t bytes, size_t page_size, char *why, size_t n)
{
	if (!bytes || bytes >= page_size)
		return 0;
	snprintf(why, n, "less than a page (%zu bytes); the memory limit is 0 (none) or at "
		 "least a page", page_size);
	return -1;
}

/* A plain decimal number, nothing else: 0 and *v, or -1. */
static int parse_u64(const char *a, uint64_t *v)
{
	char *end;

	if (!a || *a < '0' || *a > '9')
		return -1;
	errno = 0;
	*v = strtoull(a, &end, 10);
	return errno || (*end && *end != '\n') ? -1 : 0;
}

static const char KNOWN[] = "text, json, info, compact, compact-file [MAX_BYTES], "
			    "mem-limit BYTES, reset-max, "
			    "idle all|SECONDS|MSms, writeback TYPE [MAX_PAGES], writeback page INDEX, "
			    "recompress [TYPE] [MAX_PAGES], stop";

/* zram's words for the pages a writeback or recompression takes. */
static const struct {
	const char *name;
	unsigned which;
} picks[] = {
	{ "idle", ZM_STORE_PICK_IDLE },
	{ "huge", ZM_STORE_PICK_HUGE },
	{ "huge_idle", ZM_STORE_PICK_HUGE | ZM_STORE_PICK_IDLE },
	{ "incompressible", ZM_STORE_PICK_INCOMPRESSIBLE },
	{ "all", 0 },
};

/* Split a verb's argument at its first space: arg becomes the first
 * word, the rest (or NULL) is returned. */
static char *next_word(char *arg)
{
	char *sp = arg ? strchr(arg, ' ') : NULL;

	if (sp)
		*sp++ = 0;
	return sp;
}

/* TYPE (NULL: all) and MAX_PAGES (NULL: no bound) of writeback and
 * recompress: 0, or -1 after the error line. */
static int parse_pick(const char *verb, const char *type, const char *max, bool incompr,
		      unsigned *which, uint64_t *n, FILE *f)
{
	size_t i;

	for (i = 0; type && i < sizeof(picks) / sizeof(picks[0]); i++)
		if (!strcmp(type, picks[i].name) && (incompr || picks[i].which !=
						     ZM_STORE_PICK_INCOMPRESSIBLE))
			break;
	if (type && i == sizeof(picks) / sizeof(picks[0])) {
		fprintf(f, "error: %s: type idle, huge, huge_idle%s or all, not '%.40s'\n", verb,
			incompr ? ", incompressible" : "", type);
		return -1;
	}
	*which = type ? picks[i].which : 0;
	*n = UINT64_MAX;
	if (max && (parse_u64(max, n) || !*n)) {
		fprintf(f, "error: %s: MAX_PAGES is a number of pages, at least 1, not '%.40s'\n",
			verb, max);
		return -1;
	}
	return 0;
}

/* Why a writeback or recompression did nothing, for the error line. */
static const char *tier_error(const char *verb, long rc)
{
	switch (rc) {
	case -EOPNOTSUPP:
		return !strcmp(verb, "writeback")
		       ? "no backing file (the server was started without --backing)"
		       : "no secondary codec (the server was started without --recompress)";
	case -EDQUOT: return "the writeback limit is spent (--writeback-limit)";
	case -ENOSPC: return "the backing file is full";
	default: return strerror((int)-rc);
	}
}

/* idle all|SECONDS: zram's idle. */
static void do_idle(struct serve_server *s, char *arg, FILE *f)
{
	uint64_t v = 0, unit = 1000;
	size_t len = arg ? strlen(arg) : 0;
	long n;

	if (len > 2 && !strcmp(arg + len - 2, "ms")) {
		arg[len - 2] = 0;  /* "250ms": milliseconds */
		unit = 1;
	}
	if (!arg || next_word(arg) || (strcmp(arg, "all") && (parse_u64(arg, &v) ||
							     v > UINT32_MAX / unit))) {
		fprintf(f, "error: idle takes all, a number of seconds (at most %u) or of "
			"milliseconds (250ms)\n", UINT32_MAX / 1000);
		return;
	}
	n = zm_store_mark_idle(s->store, (unsigned)(v * unit));
	if (n < 0)
		fprintf(f, "error: idle: %s\n", strerror((int)-n));
	else
		fprintf(f, "ok: %ld pages idle\n", n);
}

/* writeback page INDEX: zram's page_index=. */
static void do_writeback_page(struct serve_server *s, const char *index, FILE *f)
{
	uint64_t i, nr = zm_store_nr_pages(s->store);
	int rc;

	if (!index || parse_u64(index, &i) || i >= nr) {
		fprintf(f, "error: writeback page takes a page index in 0..%llu (pages of %zu "
			"bytes), not '%.40s'\n", (unsigned long long)nr - 1,
			zm_store_page_size(s->store), index ? index : "");
		return;
	}
	rc = zm_store_writeback_page(s->store, i);
	if (rc == -ENOENT)
		fprintf(f, "error: writeback page %llu: not in memory (empty, same-filled or on "
			"the file already)\n", (unsigned long long)i);
	else if (rc)
		fprintf(f, "error: writeback page %llu: %s\n", (unsigned long long)i,
			tier_error("writeback", rc));
	else
		fprintf(f, "ok: page %llu written back\n", (unsigned long long)i);
}

/* Pages a writeback takes at a time, so that a stop is seen between
 * steps: a few MiB of I/O.  Each step's walk starts over, past the pages
 * written already (no longer in memory). */
#define WRITEBACK_STEP 4096

static bool stopped(const int *stop)
{
	return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

/* The pages written back, in steps until max or a step finds fewer than
 * it may take; the first error if none was written. */
static long writeback_steps(struct zm_store *st, unsigned which, uint64_t max, const int *stop)
{
	long done = 0;

	while ((uint64_t)done < max && !stopped(stop)) {
		uint64_t step = max - (uint64_t)done < WRITEBACK_STEP ? max - (uint64_t)done
								      : WRITEBACK_STEP;
		long n = zm_store_writeback(st, which, step);

		if (n < 0)
			return done ? done : n;
		done += n;
		if ((uint64_t)n < step)
			break;
	}
	return done;
}

/* Bytes of pages the cleaner moves at a time, so that a stop is seen
 * between steps. */
#define CLEAN_STEP (16u << 20)

/* compact-file [MAX_BYTES]: the packed backing file cleaned, in steps;
 * ended early once *stop is set. */
static void do_compact_file(struct serve_server *s, char *arg, FILE *f, const int *stop)
{
	uint64_t max = UINT64_MAX, done = 0;
	long n = 0;

	if (arg && (next_word(arg) || parse_u64(arg, &max) || !max)) {
		fprintf(f, "error: compact-file takes a number of bytes to move at most\n");
		return;
	}
	while (!stopped(stop)) {
		n = zm_store_compact_file(s->store, max < CLEAN_STEP ? max : CLEAN_STEP);
		if (n <= 0)
			break;
		done += (uint64_t)n;
		if (max != UINT64_MAX) {
			/* a step moved at most what it was given: count that */
			max = max > CLEAN_STEP ? max - CLEAN_STEP : 0;
			if (!max)
				break;
		}
	}
	if (n < 0 && !done)
		fprintf(f, "error: compact-file: %s\n", n == -EOPNOTSUPP
			? "no backing file (the server was started without --backing)"
			: strerror((int)-n));
	else if (stopped(stop))
		fprintf(f, "error: compact-file: interrupted (the server is stopping, or the client "
			"left) after %llu bytes freed\n", (unsigned long long)done);
	else
		fprintf(f, "ok: file compacted, %llu bytes freed\n", (unsigned long long)done);
}

/* writeback TYPE [MAX_PAGES] | page INDEX; recompress [TYPE] [MAX_PAGES];
 * ended early once *stop is set (the server stops, the client left). */
static void do_tier(struct serve_server *s, const char *verb, char *arg, FILE *f, const int *stop)
{
	bool wb = !strcmp(verb, "writeback");
	char *rest = next_word(arg), *extra = next_word(rest);
	unsigned which;
	uint64_t max;
	long n;

	if (wb && arg && !strcmp(arg, "page") && !extra) {
		do_writeback_page(s, rest, f);
		return;
	}
	if (wb && !arg) {
		fprintf(f, "error: writeback takes a type: idle, huge, huge_idle, incompressible, "
			"all, or page INDEX\n");
		return;
	}
	if (extra) {
		fprintf(f, "error: %s: unexpected '%.40s'\n", verb, extra);
		return;
	}
	if (parse_pick(verb, arg, rest, wb, &which, &max, f))
		return;
	n = wb ? writeback_steps(s->store, which, max, stop)
	       : zm_store_recompress_stoppable(s->store, which, max, stop);
	if (n < 0)
		fprintf(f, "error: %s: %s\n", verb, tier_error(verb, n));
	else if (stopped(stop))
		fprintf(f, "error: %s: interrupted (the server is stopping, or the client left) "
			"after %ld pages %s\n", verb, n, wb ? "written back" : "recompressed");
	else
		fprintf(f, "ok: %ld pages %s\n", n, wb ? "written back" : "recompressed");
}

/* Carry out one request line; the answer goes to f. */
static void control_do(struct serve_server *s, char *line, FILE *f, const int *stop)
{
	char *arg = strchr(line, ' ');
	uint64_t v;
	int rc;

	line[strcspn(line, "\r\n")] = 0;
	if (arg)
		*arg++ = 0;
	if (!strcmp(line, "text") || !strcmp(line, "stats")) {
		/* "text wide": every column of the class table */
		report_text(s, f, arg && !strcmp(arg, "wide"));
	} else if (!strcmp(line, "json")) {
		report_json(s, f);
	} else if (!strcmp(line, "info")) {
		report_info(s, f);
	} else if (!strcmp(line, "compact")) {
		long n = zm_store_compact(s->store);

		if (n < 0)
			fprintf(f, "error: compact: %s\n", strerror((int)-n));
		else
			fprintf(f, "ok: compacted, %ld pages freed\n", n);
	} else if (!strcmp(line, "compact-file")) {
		do_compact_file(s, arg, f, stop);
	} else if (!strcmp(line, "mem-limit")) {
		char why[128];

		if (parse_u64(arg, &v))
			fprintf(f, "error: mem-limit takes a number of bytes (0: no limit)\n");
		else if (serve_check_mem_limit(v, zm_store_page_size(s->store), why, sizeof(why)))
			fprintf(f, "error: mem-limit %llu: %s\n", (unsigned long long)v, why);
		else if ((rc = zm_store_set_limit(s->store, (size_t)v)))
			fprintf(f, "error: mem-limit %llu: %s\n", (unsigned long long)v,
				s->cfg.mem_limit ? "the server was started with --mem-limit, "
				"which it may lower or restore but not exceed or remove"
				: strerror(-rc));
		else
			fprintf(f, "ok: mem-limit %llu\n", (unsigned long long)v);
	} else if (!strcmp(line, "reset-max")) {
		rc = zm_store_reset_max(s->store);
		fprintf(f, rc ? "error: reset-max\n" : "ok: mem_used_max reset\n");
	} else if (!strcmp(line, "idle")) {
		do_idle(s, arg, f);
	} else if (!strcmp(line, "writeback") || !strcmp(line, "recompress")) {
		do_tier(s, line, arg, f, stop);
	} else if (!strcmp(line, "stop")) {
		if (s->stop_fd >= 0 && write(s->stop_fd, "", 1) == 1)
			fprintf(f, "ok: stopping\n");
		else
			fprintf(f, "error: cannot stop\n");
	} else {
		fprintf(f, "error: unknown command '%.40s'; known: %s\n", line, KNOWN);
	}
}

/* ---- the control thread ----------------------------------------------
 *
 * One thread polls the listening socket and every control connection,
 * each with its own line buffer and answer, so that no connection waits
 * on another: a client that sends half a line, or none, or does not take
 * its answer holds up nobody.  A request runs once its newline is in; a
 * line longer than CONTROL_LINE_MAX is refused whole.  Each connection
 * gets the server's time limit (--timeout) to send its line and again to
 * take its answer, and is closed then.
 *
 * The verbs that may take long (compact, idle, writeback, recompress:
 * minutes, with zstd at level 19 over gigabytes) run in a thread of
 * their own, one at a time, while the control thread goes on answering
 * the others; their client gets a line "# VERB: running, N s" every
 * CONTROL_KEEPALIVE_MS meanwhile, so that it can tell a busy server from
 * a hung one.  A client that leaves, and control_stop, end a writeback
 * or recompression before its next page.
 *
 * Ownership: the connections and their buffers belong to the control
 * thread alone; a job's line and answer belong to its thread until it
 * sets done, then to the control thread.
 */

/* Control connections open at once.  When all are taken, the oldest
 * that has not sent its line yet makes room for a new one. */
#define CONTROL_MAX_CONNS 64
/* Bytes of a client's input thrown away after a refused line, so that
 * closing the socket with input unread does not reset it before the
 * client has read the refusal. */
#define CONTROL_DRAIN_MAX (64u << 10)
/* A long verb's client hears it is still running this often: well
 * within any sensible client timeout (zmem's: 10 s). */
#define CONTROL_KEEPALIVE_MS 250
/* Keepalive lines stop when this much of the answer is not taken yet. */
#define CONTROL_OUT_MAX (4u << 10)

enum ctl_state {
	CC_READ,      /* reading the request line */
	CC_RUN,       /* its verb runs in the job thread */
	CC_WRITE,     /* sending the answer */
};

struct ctl_job {
	pthread_t thread;
	struct serve_server *s;
	char line[CONTROL_LINE_MAX + 1];
	char verb[16];
	uint64_t started_ns;
	int wake_fd;              /* the control thread's wake pipe */
	int stop;                 /* atomic: end early */
	bool done;                /* atomic: out is the answer, join me */
	char *out;
	size_t out_len;
};

struct ctl_conn {
	int fd;                   /* nonblocking */
	enum ctl_state state;
	uint64_t deadline_ns;     /* the line in, or the answer out, by then;
				     CC_RUN: the next keepalive */
	size_t len;               /* bytes in line */
	char line[CONTROL_LINE_MAX + 1];
	char *out;                /* what is to be sent (malloc) */
	size_t out_len, out_off;  /* its length, and how much is sent */
	/* another user's connection (peer.c): its line, once in, gets this
	 * refusal and runs nothing; "" for a peer that may drive the server */
	char refused[128];
};

struct serve_control {
	struct serve_server *s;
	int lfd;                  /* the listening socket, nonblocking */
	int wake[2];              /* control_stop and the job write here */
	bool quit;                /* atomic */
	pthread_t thread;
	struct ctl_conn *conn[CONTROL_MAX_CONNS];
	unsigned nconn;
	struct ctl_job *job;      /* the long verb running, or NULL */
	struct ctl_conn *job_conn;  /* who asked for it; NULL once gone */
};

/* Add len bytes to what c sends; false if memory ran out. */
static bool conn_queue(struct ctl_conn *c, const char *text, size_t len)
{
	char *out;

	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	out = realloc(c->out, c->out_len + len + 1);
	if (!out)
		return false;
	memcpy(out + c->out_len, text, len);
	c->out = out;
	c->out_len += len;
	return true;
}

static void conn_close(struct serve_control *ctl, unsigned i)
{
	struct ctl_conn *c = ctl->conn[i];

	if (c == ctl->job_conn) {
		/* its client left: the verb ends before its next page */
		ctl->job_conn = NULL;
		__atomic_store_n(&ctl->job->stop, 1, __ATOMIC_RELAXED);
	}
	close(c->fd);
	free(c->out);
	free(c);
	ctl->conn[i] = ctl->conn[--ctl->nconn];
}

/* text (len bytes) is c's answer: send it from now on.  false if memory
 * ran out. */
static bool conn_answer(struct serve_control *ctl, struct ctl_conn *c, const char *text,
			size_t len)
{
	c->state = CC_WRITE;
	c->deadline_ns = serve_deadline(ctl->s);
	return text && conn_queue(c, text, len);
}

/* An answer of one line, printf-style (a refusal before any verb ran). */
static bool conn_say(struct serve_control *ctl, struct ctl_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool conn_say(struct serve_control *ctl, struct ctl_conn *c, const char *fmt, ...)
{
	char text[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return conn_answer(ctl, c, text, n < 0 ? 0 : strnlen(text, sizeof(text)));
}

/* Does the verb of line take long (run in the job thread)? */
static bool long_verb(const char *line, char *verb, size_t n)
{
	static const char *const slow[] = { "compact", "compact-file", "idle", "writeback",
					    "recompress", NULL };
	size_t len = strcspn(line, " ");

	snprintf(verb, n, "%.*s", (int)len, line);
	for (int i = 0; slow[i]; i++)
		if (!strcmp(verb, slow[i]))
			return true;
	return false;
}

static void *job_thread(void *arg)
{
	struct ctl_job *job = arg;
	FILE *f = open_memstream(&job->out, &job->out_len);

	if (f) {
		control_do(job->s, job->line, f, &job->stop);
		fclose(f);
	}
	__atomic_store_n(&job->done, true, __ATOMIC_RELEASE);
	if (write(job->wake_fd, "", 1) < 0) {
		/* the pipe is full: the control thread is awake already */
	}
	return NULL;
}

/* Run c's long verb in the job thread: false (c answered) if one runs
 * already or the thread cannot start. */
static bool job_start(struct serve_control *ctl, struct ctl_conn *c, const char *verb)
{
	struct ctl_job *job;

	if (ctl->job)
		return !conn_say(ctl, c, "error: %s: busy, %s has been running for %.0f s; one "
				 "of compact, idle, writeback and recompress runs at a time\n",
				 verb, ctl->job->verb,
				 (double)(serve_now_ns() - ctl->job->started_ns) / 1e9);
	job = calloc(1, sizeof(*job));
	if (!job)
		return !conn_say(ctl, c, "error: %s: out of memory\n", verb);
	job->s = ctl->s;
	memcpy(job->line, c->line, sizeof(job->line));
	snprintf(job->verb, sizeof(job->verb), "%s", verb);
	job->started_ns = serve_now_ns();
	job->wake_fd = ctl->wake[1];
	if (pthread_create(&job->thread, NULL, job_thread, job)) {
		free(job);
		return !conn_say(ctl, c, "error: %s: cannot start a thread\n", verb);
	}
	ctl->job = job;
	ctl->job_conn = c;
	c->state = CC_RUN;
	c->deadline_ns = serve_now_ns() + CONTROL_KEEPALIVE_MS * 1000000ull;
	return true;
}

/* The job has ended (or was told to, and is waited for): its answer goes
 * to its client, if still there. */
static void job_finish(struct serve_control *ctl)
{
	struct ctl_job *job = ctl->job;
	struct ctl_conn *c = ctl->job_conn;

	pthread_join(job->thread, NULL);
	if (c && !conn_answer(ctl, c, job->out, job->out_len))
		c->out_len = c->out_off = 0;  /* nothing to say: the socket closes */
	free(job->out);
	free(job);
	ctl->job = NULL;
	ctl->job_conn = NULL;
}

/* Carry out c's request line: the answer becomes c's, or the job's. */
static void conn_run(struct serve_control *ctl, struct ctl_conn *c)
{
	char *out = NULL, verb[16];
	size_t len = 0;
	FILE *f;

	if (long_verb(c->line, verb, sizeof(verb))) {
		job_start(ctl, c, verb);
		return;
	}
	f = open_memstream(&out, &len);
	if (f) {
		control_do(ctl->s, c->line, f, NULL);
		fclose(f);
	}
	conn_answer(ctl, c, out, len);
	free(out);
}

/* Read what c sent; run its line once the newline is in.  false when c
 * is done with (closed by its client before a line). */
static bool conn_read(struct serve_control *ctl, struct ctl_conn *c)
{
	ssize_t n = recv(c->fd, c->line + c->len, CONTROL_LINE_MAX - c->len, 0);
	char *nl;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	if (n == 0) {
		if (!c->len)
			return false;
		conn_say(ctl, c, "error: the request line ended without its newline; "
			 "nothing done\n");
		return true;
	}
	nl = memchr(c->line + c->len, '\n', (size_t)n);
	c->len += (size_t)n;
	if (!nl) {
		if (c->len == CONTROL_LINE_MAX)
			conn_say(ctl, c, "error: request line longer than %u bytes (newline "
				 "included); nothing done\n", CONTROL_LINE_MAX);
		return true;
	}
	if (memchr(c->line, 0, (size_t)(nl - c->line))) {
		conn_say(ctl, c, "error: the request line holds a NUL byte; nothing done\n");
		return true;
	}
	*nl = 0;
	if (nl > c->line && nl[-1] == '\r')
		nl[-1] = 0;
	if (c->refused[0]) {
		conn_say(ctl, c, "%s", c->refused);
		return true;
	}
	conn_run(ctl, c);
	return true;
}

/* Send what c's client will take: false once the whole answer is sent
 * (or the client is gone). */
static bool conn_write(struct ctl_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->out_off += (size_t)n;
	}
	if (c->state != CC_WRITE)
		return true;  /* a keepalive: the answer is still to come */
	/* what the client sent beyond its line is read and dropped first:
	 * closing a socket with input unread resets it, and the client
	 * would get an error rather than the end of the answer */
	for (size_t got = 0; got < CONTROL_DRAIN_MAX;) {
		char junk[4096];
		ssize_t n = recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	return false;
}

/* A long verb's client hears that it still runs. */
static bool conn_keepalive(struct serve_control *ctl, struct ctl_conn *c, uint64_t now)
{
	char text[64];
	int n;

	c->deadline_ns = now + CONTROL_KEEPALIVE_MS * 1000000ull;
	if (c->out_len - c->out_off > CONTROL_OUT_MAX)
		return true;  /* it does not read: its answer's limit will come */
	n = snprintf(text, sizeof(text), "# %s: running, %.0f s\n", ctl->job->verb,
		     (double)(now - ctl->job->started_ns) / 1e9);
	return conn_queue(c, text, (size_t)n) && conn_write(c);
}

/* Make room for one more connection: the oldest still reading its line
 * goes.  false if every connection is past that (they end soon). */
static bool conn_make_room(struct serve_control *ctl)
{
	unsigned oldest = CONTROL_MAX_CONNS;

	for (unsigned i = 0; i < ctl->nconn; i++)
		if (ctl->conn[i]->state == CC_READ && (oldest == CONTROL_MAX_CONNS ||
		    ctl->conn[i]->deadline_ns < ctl->conn[oldest]->deadline_ns))
			oldest = i;
	if (oldest == CONTROL_MAX_CONNS)
		return false;
	conn_close(ctl, oldest);
	return true;
}

/* Take the connections waiting on the listening socket. */
static void control_accept(struct serve_control *ctl)
{
	for (;;) {
		int fd = accept4(ctl->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ctl_conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				usleep(100000);  /* out of descriptors for now */
			return;
		}
		if ((ctl->nconn == CONTROL_MAX_CONNS && !conn_make_room(ctl)) ||
		    !(c = calloc(1, sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->state = CC_READ;
		c->deadline_ns = serve_deadline(ctl->s);
		/* another user is answered once its line is in, as anyone is,
		 * so that its client reads the refusal rather than a reset */
		if (serve_peer_allowed(fd, c->refused, sizeof(c->refused)))
			c->refused[0] = 0;
		ctl->conn[ctl->nconn++] = c;
	}
}

/* Milliseconds until the first deadline, for poll (-1: none). */
static int control_wait_ms(const struct serve_control *ctl)
{
	uint64_t now = serve_now_ns(), first = UINT64_MAX;

	for (unsigned i = 0; i < ctl->nconn; i++)
		if (ctl->conn[i]->deadline_ns < first)
			first = ctl->conn[i]->deadline_ns;
	if (first == UINT64_MAX)
		return -1;
	return first <= now ? 0 : (int)((first - now) / 1000000 + 1);
}

/* One connection after poll: false when it is done with. */
static bool conn_step(struct serve_control *ctl, struct ctl_conn *c, short revents, uint64_t now)
{
	bool keep = true;

	if (revents && c->state == CC_RUN)
		keep = (revents & (POLLHUP | POLLERR)) ? false : conn_write(c);
	else if (revents && c->state == CC_WRITE)
		keep = conn_write(c);
	else if (revents && (keep = conn_read(ctl, c)) && c->state == CC_WRITE)
		keep = conn_write(c);  /* answered now: send at once */
	if (keep && c->state == CC_RUN && c->deadline_ns <= now)
		keep = conn_keepalive(ctl, c, now);
	else if (keep && c->deadline_ns <= now)
		keep = false;  /* the time limit */
	return keep;
}

static void control_loop(struct serve_control *ctl)
{
	struct pollfd pf[CONTROL_MAX_CONNS + 2];
	struct ctl_conn *polled[CONTROL_MAX_CONNS];

	while (!__atomic_load_n(&ctl->quit, __ATOMIC_ACQUIRE)) {
		unsigned n = ctl->nconn;
		uint64_t now;

		pf[0] = (struct pollfd){ .fd = ctl->wake[0], .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = ctl->lfd, .events = POLLIN };
		for (unsigned i = 0; i < n; i++) {
			struct ctl_conn *c = polled[i] = ctl->conn[i];
			short ev = c->state == CC_READ ? POLLIN : c->state == CC_WRITE ? POLLOUT
				   : c->out_off < c->out_len ? POLLOUT : 0;

			pf[i + 2] = (struct pollfd){ .fd = c->fd, .events = ev };
		}
		if (poll(pf, n + 2, control_wait_ms(ctl)) < 0 && errno != EINTR)
			break;
		if (pf[0].revents) {
			char junk[64];

			while (read(ctl->wake[0], junk, sizeof(junk)) > 0)
				;
		}
		if (ctl->job && __atomic_load_n(&ctl->job->done, __ATOMIC_ACQUIRE))
			job_finish(ctl);
		/* a closed connection's slot takes the last one: walk from
		 * the end */
		now = serve_now_ns();
		for (unsigned i = ctl->nconn; i-- > 0;) {
			short revents = 0;

			for (unsigned j = 0; j < n; j++)
				if (polled[j] == ctl->conn[i])
					revents = pf[j + 2].revents;
			if (!conn_step(ctl, ctl->conn[i], revents, now))
				conn_close(ctl, i);
		}
		if (pf[1].revents)
			control_accept(ctl);
	}
}

static void *control_thread(void *arg)
{
	struct serve_control *ctl = arg;

	control_loop(ctl);
	/* stopping: a running verb ends before its next page; its client
	 * gets what it says, if it takes it now */
	if (ctl->job) {
		__atomic_store_n(&ctl->job->stop, 1, __ATOMIC_RELAXED);
		job_finish(ctl);
	}
	while (ctl->nconn) {
		struct ctl_conn *c = ctl->conn[ctl->nconn - 1];

		if (c->state == CC_WRITE)
			conn_write(c);
		conn_close(ctl, ctl->nconn - 1);
	}
	return NULL;
}

int control_start(struct serve_server *s, const char *path, struct serve_control **out)
{
	struct serve_control *ctl;
	int fd = serve_listen_unix(path);  /* never removes a live socket or a file */

	if (fd < 0)
		return -1;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl || pipe2(ctl->wake, O_CLOEXEC | O_NONBLOCK)) {
		free(ctl);
		close(fd);
		unlink(path);
		return -1;
	}
	ctl->s = s;
	ctl->lfd = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (pthread_create(&ctl->thread, NULL, control_thread, ctl)) {
		close(ctl->wake[0]);
		close(ctl->wake[1]);
		free(ctl);
		close(fd);
		unlink(path);
		return -1;
	}
	*out = ctl;
	return 0;
}

void control_stop(struct serve_control *ctl)
{
	if (!ctl)
		return;
	__atomic_store_n(&ctl->quit, true, __ATOMIC_RELEASE);
	if (write(ctl->wake[1], "", 1) < 0) {
		/* the pipe is full: the thread is awake already */
	}
	pthread_join(ctl->thread, NULL);
	close(ctl->lfd);
	close(ctl->wake[0]);
	close(ctl->wake[1]);
	free(ctl);
}

/* A connection to the Unix socket at path: fd, or -1.  A listener whose
 * queue is full makes connect wait: at most timeout_ms. */
static int connect_unix(const char *path, unsigned timeout_ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int err = errno;

		close(fd);
		errno = err;
		fd = -1;
	}
	return fd;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* The control socket of what the user named: a data socket's path.ctl,
 * or path itself (a --control of any name, or the .ctl path itself).
 * ctl gets the path tried last, whose errno stands. */
static int connect_control(const char *path, char *ctl, size_t n, unsigned timeout_ms)
{
	int fd, err;

	snprintf(ctl, n, "%s", path);
	if (ends_with(path, ".ctl"))
		return connect_unix(path, timeout_ms);
	snprintf(ctl, n, "%s.ctl", path);
	fd = connect_unix(ctl, timeout_ms);
	if (fd >= 0)
		return fd;
	err = errno;
	fd = connect_unix(path, timeout_ms);
	if (fd < 0)
		errno = err;  /* path.ctl's: the one a server would have */
	return fd;
}

int control_probe(const char *path)
{
	char ctl[4200];
	int fd = connect_control(path, ctl, sizeof(ctl), 1000);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Wait up to ms for fd to have input: 1, or 0 on a timeout. */
static int wait_input(int fd, unsigned ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint64_t end = serve_now_ns() + (uint64_t)ms * 1000000ull;

	for (;;) {
		uint64_t now = serve_now_ns();
		int rc;

		if (now >= end)
			return 0;
		rc = poll(&pf, 1, (int)((end - now + 999999) / 1000000));
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return 1;  /* recv tells */
	}
}

/* Say on stderr why what was asked did not answer. */
static void say_timeout(const char *cmd, const char *path, unsigned ms)
{
	fprintf(stderr, "zmem %s: no answer from %s within %.3g s: the server is hung or "
		"too busy (--timeout sets the wait)\n", cmd, path, (double)ms / 1000);
}

int control_send(const char *cmd, const char *path, const char *line, FILE *out,
		 unsigned timeout_ms)
{
	char ctl[4200], req[CONTROL_LINE_MAX + 1], *buf = NULL, *p;
	size_t len, got = 0, cap = 0;
	int fd, rc = 1;
	ssize_t n = 0;

	fd = connect_control(path, ctl, sizeof(ctl), timeout_ms);
	if (fd < 0) {
		if (errno == EAGAIN)
			say_timeout(cmd, ctl, timeout_ms);
		else if (strcmp(ctl, path))
			fprintf(stderr, "zmem %s: no server answers at %s (nor at %s): %s\n", cmd,
				path, ctl, strerror(errno));
		else
			fprintf(stderr, "zmem %s: no server answers at %s: %s\n", cmd, path,
				strerror(errno));
		return 1;
	}
	snprintf(req, sizeof(req), "%s\n", line);
	len = strlen(req);
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		if (errno == EAGAIN)
			say_timeout(cmd, ctl, timeout_ms);
		else
			fprintf(stderr, "zmem %s: %s: %s\n", cmd, ctl, strerror(errno));
		close(fd);
		return 1;
	}
	/* the answer, until the server closes; the wait is for each piece
	 * (a long verb says "# VERB: running" now and then meanwhile) */
	for (;;) {
		if (got + 4096 > cap) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 65536);

			if (!nb) {
				fprintf(stderr, "zmem %s: out of memory\n", cmd);
				goto out;
			}
			buf = nb;
		}
		if (!wait_input(fd, timeout_ms)) {
			say_timeout(cmd, ctl, timeout_ms);
			goto out;
		}
		n = recv(fd, buf + got, cap - got - 1, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got >= 8 && !memcmp(buf, "NBDMAGIC", 8)) {
			fprintf(stderr, "zmem %s: %s is a server's NBD socket, and %s is not its "
				"control socket (see its --control)\n", cmd, path, ctl);
			goto out;
		}
	}
	if (n < 0) {
		fprintf(stderr, "zmem %s: %s: %s\n", cmd, ctl, strerror(errno));
		goto out;
	}
	buf[got] = 0;
	/* the keepalive lines of a long verb say nothing to keep */
	for (p = buf; !strncmp(p, "# ", 2) && strchr(p, '\n');)
		p = strchr(p, '\n') + 1;
	len = got - (size_t)(p - buf);
	if (!len) {
		fprintf(stderr, "zmem %s: %s closed without an answer\n", cmd, ctl);
	} else if (!strncmp(p, "error:", 6)) {
		/* the server's "error: ..." as the command's message */
		fprintf(stderr, "zmem %s:", cmd);
		fwrite(p + 6, 1, len - 6, stderr);
	} else {
		fwrite(p, 1, len, out);
		rc = 0;
	}
out:
	free(buf);
	close(fd);
	return rc;
}
