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
 *   mem-limit BYTES   change the memory limit, 0 for none (mem_limit)
 *   reset-max         start mem_used_max over (zram's reset)
 *   idle all|SECONDS  mark idle the pages not accessed for SECONDS, or
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
 * Verbs answer one line: "ok: ..." or "error: ...".  An unknown verb gets
 * an error naming the known ones.  Sizes arrive as plain bytes: the
 * client parses units.
 *
 * The report: the export (size, codec, allocator), zram's mm_stat and
 * bd_stat lines and fields, the store's statistics with its size
 * histogram, the cold data (recompression, the backing file), the pool's
 * per-class table, and the server's counters (connections, requests by
 * type, bytes, errors).
 */
#include <errno.h>
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

static double uptime(const struct zmi_server *s)
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

/* zram's bd_stat (pages) and the rest of the cold data. */
static void report_json_tiering(struct zmi_server *s, const struct zm_store_stats *st,
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
		   "\"recompress_saved\": %llu, \"recompress_tried\": %llu, "
		   "\"secondary_pages\": %llu, \"incompressible_pages\": %llu, "
		   "\"idle_pages\": %llu, \"bd_bytes\": %llu, \"writeback_failures\": %llu, "
		   "\"writeback_left\": ",
		s->cfg.idle_after_ms, (unsigned long long)st->recompressed_pages,
		(unsigned long long)st->recompress_saved, (unsigned long long)st->recompress_tried,
		(unsigned long long)st->secondary_pages,
		(unsigned long long)st->incompressible_pages, (unsigned long long)st->idle_pages,
		(unsigned long long)st->bd_bytes, (unsigned long long)st->writeback_failures);
	json_limit(f, st->writeback_left);
	fputs("},\n", f);
}

static void report_json(struct zmi_server *s, FILE *f)
{
	struct zm_store_stats st;
	struct zm_pool *pool = zm_store_pool(s->store);
	unsigned nc = zm_pool_nr_classes(pool);
	bool first = true;

	zm_store_stats(s->store, &st);
	/* the zmem command's common keys first: zmem stats --json prints this */
	fprintf(f, "{\"zmem\": \"%s\", \"command\": \"stats\", ", zm_version_string());
	fprintf(f, "\"export\": {\"size\": %llu, \"page_size\": %zu, \"codec\": \"%s\", "
		   "\"allocator\": \"%s\", \"read_only\": %s, \"threads\": %u, \"uptime_s\": %.3f},\n",
		(unsigned long long)s->disk.size, st.page_size, s->cfg.codec ? s->cfg.codec : "lz4",
		zm_pool_backend(pool), s->cfg.read_only ? "true" : "false", s->nworkers, uptime(s));
	fprintf(f, " \"mm_stat\": {\"orig_data_size\": %llu, \"compr_data_size\": %llu, "
		   "\"mem_used_total\": %llu, \"mem_limit\": %llu, \"mem_used_max\": %llu, "
		   "\"same_pages\": %llu, \"pages_compacted\": %llu, \"huge_pages\": %llu, "
		   "\"huge_pages_since\": %llu},\n",
		(unsigned long long)st.orig_data_size, (unsigned long long)st.compr_data_size,
		(unsigned long long)st.mem_used_total, (unsigned long long)st.mem_limit,
		(unsigned long long)st.mem_used_max, (unsigned long long)st.same_pages,
		(unsigned long long)st.pages_compacted, (unsigned long long)st.huge_pages,
		(unsigned long long)st.huge_pages_since);
	report_json_tiering(s, &st, f);
	fprintf(f, " \"store\": {\"pages_stored\": %llu, \"puts\": %llu, \"gets\": %llu, "
		   "\"discards\": %llu, \"failed_reads\": %llu, \"failed_writes\": %llu, "
		   "\"limit_fails\": %llu, \"pool_objects\": %llu, \"pool_meta_bytes\": %llu, "
		   "\"store_meta_bytes\": %llu},\n",
		(unsigned long long)st.pages_stored, (unsigned long long)st.puts,
		(unsigned long long)st.gets, (unsigned long long)st.discards,
		(unsigned long long)st.failed_reads, (unsigned long long)st.failed_writes,
		(unsigned long long)st.limit_fails, (unsigned long long)st.pool_objects,
		(unsigned long long)st.pool_meta_bytes, (unsigned long long)st.store_meta_bytes);
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
static void report_text_tiering(struct zmi_server *s, const struct zm_store_stats *st,
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

static void report_text(struct zmi_server *s, FILE *f)
{
	struct zm_store_stats st;
	struct zm_pool *pool = zm_store_pool(s->store);
	char h[32];

	zm_store_stats(s->store, &st);
	fprintf(f, "export: %s, %s, %s%s, %u workers, up %.1f s\n",
		zmi_human_bytes(s->disk.size, h, sizeof(h)), s->cfg.codec ? s->cfg.codec : "lz4",
		zm_pool_backend(pool), s->cfg.read_only ? ", read-only" : "", s->nworkers,
		uptime(s));
	fprintf(f, "mm_stat: ");
	zm_store_print_mm_stat(&st, f);
	/* zram's format: bd_stat_show(), pages, widths of 8 */
	fprintf(f, "bd_stat: %8llu %8llu %8llu\n", (unsigned long long)st.bd_count,
		(unsigned long long)st.bd_reads, (unsigned long long)st.bd_writes);
	fprintf(f, "\n");
	zm_store_print_stats(&st, f);
	fprintf(f, "\n");
	report_text_tiering(s, &st, f);
	zm_pool_print_classes(pool, f);
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
static void report_info(struct zmi_server *s, FILE *f)
{
	struct zm_store_stats st;

	zm_store_stats(s->store, &st);
	fputs("{\"uri\": ", f);
	json_str(f, s->uri);
	fprintf(f, ", \"pid\": %d, \"size\": %llu, \"page_size\": %zu, "
		   "\"codec\": \"%s\", \"allocator\": \"%s\", \"orig_data_size\": %llu, "
		   "\"compr_data_size\": %llu, \"mem_used_total\": %llu, \"mem_limit\": %llu}\n",
		(int)getpid(), (unsigned long long)s->disk.size, st.page_size,
		s->cfg.codec ? s->cfg.codec : "lz4", zm_pool_backend(zm_store_pool(s->store)),
		(unsigned long long)st.orig_data_size, (unsigned long long)st.compr_data_size,
		(unsigned long long)st.mem_used_total, (unsigned long long)st.mem_limit);
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

static const char KNOWN[] = "text, json, info, compact, mem-limit BYTES, reset-max, "
			    "idle all|SECONDS, writeback TYPE [MAX_PAGES], writeback page INDEX, "
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
static void do_idle(struct zmi_server *s, char *arg, FILE *f)
{
	uint64_t sec = 0;
	long n;

	if (!arg || next_word(arg) || (strcmp(arg, "all") && (parse_u64(arg, &sec) ||
							     sec > UINT32_MAX / 1000))) {
		fprintf(f, "error: idle takes all or a number of seconds (at most %u)\n",
			UINT32_MAX / 1000);
		return;
	}
	n = zm_store_mark_idle(s->store, (unsigned)sec * 1000);
	if (n < 0)
		fprintf(f, "error: idle: %s\n", strerror((int)-n));
	else
		fprintf(f, "ok: %ld pages idle\n", n);
}

/* writeback page INDEX: zram's page_index=. */
static void do_writeback_page(struct zmi_server *s, const char *index, FILE *f)
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

/* writeback TYPE [MAX_PAGES] | page INDEX; recompress [TYPE] [MAX_PAGES] */
static void do_tier(struct zmi_server *s, const char *verb, char *arg, FILE *f)
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
	n = wb ? zm_store_writeback(s->store, which, max)
	       : zm_store_recompress(s->store, which, max);
	if (n < 0)
		fprintf(f, "error: %s: %s\n", verb, tier_error(verb, n));
	else
		fprintf(f, "ok: %ld pages %s\n", n, wb ? "written back" : "recompressed");
}

/* Carry out one request line; the answer goes to f. */
static void control_do(struct zmi_server *s, char *line, FILE *f)
{
	char *arg = strchr(line, ' ');
	uint64_t v;
	int rc;

	line[strcspn(line, "\r\n")] = 0;
	if (arg)
		*arg++ = 0;
	if (!strcmp(line, "text") || !strcmp(line, "stats")) {
		report_text(s, f);
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
	} else if (!strcmp(line, "mem-limit")) {
		if (parse_u64(arg, &v))
			fprintf(f, "error: mem-limit takes a number of bytes (0: no limit)\n");
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
		do_tier(s, line, arg, f);
	} else if (!strcmp(line, "stop")) {
		if (s->stop_fd >= 0 && write(s->stop_fd, "", 1) == 1)
			fprintf(f, "ok: stopping\n");
		else
			fprintf(f, "error: cannot stop\n");
	} else {
		fprintf(f, "error: unknown command '%.40s'; known: %s\n", line, KNOWN);
	}
}

/* Answer a request line on fd. */
static void control_answer(struct zmi_server *s, int fd, char *line)
{
	int dfd = dup(fd);
	FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;

	if (!f) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	control_do(s, line, f);
	fclose(f);
}

struct control {
	struct zmi_server *s;
	int fd;
};

static void *control_thread(void *arg)
{
	struct control *ctl = arg;

	for (;;) {
		int fd = accept4(ctl->fd, NULL, NULL, SOCK_CLOEXEC);
		char line[128] = "";
		struct timeval tv = { 2, 0 };
		ssize_t n;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				usleep(100000);  /* out of descriptors for now */
				continue;
			}
			break;  /* shut down */
		}
		if (!serve_peer_allowed(fd)) {  /* another user: told so (peer.c) */
			close(fd);
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		n = recv(fd, line, sizeof(line) - 1, 0);
		if (n > 0)
			control_answer(ctl->s, fd, line);
		close(fd);
	}
	free(ctl);
	return NULL;
}

int control_start(struct zmi_server *s, const char *path, pthread_t *thread, int *out)
{
	struct control *ctl;
	int fd = serve_listen_unix(path);  /* never removes a live socket or a file */

	if (fd < 0)
		return -1;
	ctl = malloc(sizeof(*ctl));
	if (!ctl) {
		close(fd);
		unlink(path);
		return -1;
	}
	ctl->s = s;
	ctl->fd = fd;
	if (pthread_create(thread, NULL, control_thread, ctl)) {
		free(ctl);
		close(fd);
		unlink(path);
		return -1;
	}
	*out = fd;
	return 0;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -1;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The control socket of what the user named: a data socket's path.ctl,
 * or path itself (a --control of any name).  ctl gets path.ctl. */
static int connect_control(const char *path, char *ctl, size_t n)
{
	int fd;

	snprintf(ctl, n, "%s.ctl", path);
	fd = connect_unix(ctl);
	return fd >= 0 ? fd : connect_unix(path);
}

int control_probe(const char *path)
{
	char ctl[4200];
	int fd = connect_control(path, ctl, sizeof(ctl));

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int control_send(const char *cmd, const char *path, const char *line, FILE *out)
{
	char ctl[4200], buf[65536], req[256];
	size_t len, got = 0;
	bool err = false;
	int fd;
	ssize_t n;

	fd = connect_control(path, ctl, sizeof(ctl));
	if (fd < 0) {
		fprintf(stderr, "zmem %s: no server answers at %s (nor at %s): %s\n", cmd, path,
			ctl, strerror(errno));
		return 1;
	}
	/* one send: the server answers the first read and closes */
	snprintf(req, sizeof(req), "%s\n", line);
	len = strlen(req);
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
		fprintf(stderr, "zmem %s: %s: %s\n", cmd, path, strerror(errno));
		close(fd);
		return 1;
	}
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		if (!got && n >= 8 && !memcmp(buf, "NBDMAGIC", 8)) {
			fprintf(stderr, "zmem %s: %s is a server's NBD socket, and %s is not its "
				"control socket (see its --control)\n", cmd, path, ctl);
			close(fd);
			return 1;
		}
		if (!got && n >= 6 && !strncmp(buf, "error:", 6)) {
			/* the server's "error: ..." as the command's message */
			err = true;
			fprintf(stderr, "zmem %s:", cmd);
			got += 6;
			fwrite(buf + 6, 1, (size_t)n - 6, stderr);
			continue;
		}
		got += (size_t)n;
		fwrite(buf, 1, (size_t)n, err ? stderr : out);
	}
	close(fd);
	return n < 0 || err || !got;
}
