/*
 * zmem list: this user's servers and runs, read as zramctl reads zram
 * devices: columns named as zramctl names them where they mean the same
 * (NAME, DISKSIZE, DATA, COMPR, ALGORITHM, TOTAL, MEM-LIMIT), each as
 * wide as its widest cell, sizes as zramctl prints them (64M, 1.5G) or
 * in bytes (-b), -o to choose the columns, -n, --raw, --json; nothing
 * at all when nothing runs.
 *
 * The rows are read first (each server's `info` through its control
 * socket), then printed: a column's width is known only once every row
 * is.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "serve/serve.h"

enum col {
	C_NAME, C_PID, C_ALGORITHM, C_DISKSIZE, C_DATA, C_COMPR, C_TOTAL, C_RATIO,
	C_ALLOCATOR, C_MEMLIMIT, C_URI, C_COMMAND, C_NR
};

static const struct {
	const char *name, *help;
	bool right;  /* numbers: right-aligned */
	bool def;    /* shown without -o */
} cols[C_NR] = {
	[C_NAME] = { "NAME", "what zmem stats, ctl and stop take: the socket, HOST:PORT, run:PID",
		     false, true },
	[C_PID] = { "PID", "the server's (or the run's) process id", true, true },
	[C_ALGORITHM] = { "ALGORITHM", "the codec", false, true },
	[C_DISKSIZE] = { "DISKSIZE", "the disk's size (a run: its heap now)", true, true },
	[C_DATA] = { "DATA", "uncompressed size of the data stored", true, true },
	[C_COMPR] = { "COMPR", "compressed size of the data stored", true, true },
	[C_TOTAL] = { "TOTAL", "all memory used, the pool's waste and metadata included",
		      true, true },
	[C_RATIO] = { "RATIO", "DATA / TOTAL; - for an empty disk", true, true },
	[C_ALLOCATOR] = { "ALLOCATOR", "the pool backend", false, false },
	[C_MEMLIMIT] = { "MEM-LIMIT", "the memory limit; - for none", true, false },
	[C_URI] = { "URI", "the NBD URI clients use", false, false },
	[C_COMMAND] = { "COMMAND", "a run's command; - for a server", false, false },
};

/* What one server or run answered to `info`. */
struct row {
	char *cell[C_NR];
	long pid;
	uint64_t size, data, compr, total, limit;
	char codec[64], alloc[32];
};

/* A JSON number or string field of a flat one-line object. */
static bool field(const char *js, const char *key, char *out, size_t n)
{
	char k[64];
	const char *p;
	size_t len;

	snprintf(k, sizeof(k), "\"%s\": ", key);
	p = strstr(js, k);
	if (!p)
		return false;
	p += strlen(k);
	if (*p == '"')
		len = strcspn(++p, "\"");
	else
		len = strcspn(p, ",}");
	snprintf(out, n, "%.*s", (int)len, p);
	return true;
}

static bool field_u64(const char *js, const char *key, uint64_t *v)
{
	char buf[32];

	if (!field(js, key, buf, sizeof(buf)))
		return false;
	*v = strtoull(buf, NULL, 10);
	return true;
}

/* zramctl's sizes (util-linux's size_to_human_string): "64M", "1.5G",
 * "0B": one decimal, dropped when it rounds to 0; bytes with -b. */
static void size_cell(char *out, size_t n, uint64_t bytes, bool raw_bytes)
{
	static const char units[] = "BKMGTPE";
	uint64_t whole = bytes, rest = 0;
	unsigned tenth;
	int u = 0;

	if (raw_bytes) {
		snprintf(out, n, "%llu", (unsigned long long)bytes);
		return;
	}
	while (whole >= 1024 && u < 6) {
		rest = whole % 1024;
		whole /= 1024;
		u++;
	}
	tenth = (unsigned)((rest * 10 + 512) / 1024);
	if (tenth == 10) {
		whole++;
		tenth = 0;
	}
	if (tenth)
		snprintf(out, n, "%llu.%u%c", (unsigned long long)whole, tenth, units[u]);
	else
		snprintf(out, n, "%llu%c", (unsigned long long)whole, units[u]);
}

/* The name zmem stats takes for a server: its socket, HOST:PORT or
 * run:PID. */
static void name_of(const char *uri, char *out, size_t n)
{
	const char *p;

	if (!strncmp(uri, "nbd+unix://", 11) && (p = strstr(uri, "socket=")))
		snprintf(out, n, "%s", p + 7);
	else if (!strncmp(uri, "nbd://", 6))
		snprintf(out, n, "%.*s", (int)strcspn(uri + 6, "/"), uri + 6);
	else
		snprintf(out, n, "%s", uri);
}

/* One registry entry into *r: true if its server answered. */
static bool read_row(const char *dir, const char *entry, unsigned ms, bool bytes, struct row *r)
{
	char path[4400], uri[4200] = "", ctl[4200] = "", info[4096] = "", cmd[64] = "-";
	char name[4200], buf[32];
	FILE *f, *mem;
	size_t got;

	r->pid = strtol(entry, NULL, 10);
	if (r->pid <= 0)
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, entry);
	if (kill((pid_t)r->pid, 0) && errno == ESRCH) {
		unlink(path);  /* a server that was killed outright */
		return false;
	}
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(uri, sizeof(uri), f) || !fgets(ctl, sizeof(ctl), f))
		ctl[0] = 0;
	fclose(f);
	uri[strcspn(uri, "\n")] = 0;
	ctl[strcspn(ctl, "\n")] = 0;
	if (!ctl[0])
		return false;
	if (control_probe(ctl) && (errno == ECONNREFUSED || errno == ENOENT)) {
		/* nobody listens: a server killed outright, its pid a
		 * zombie its parent has not reaped yet, or reused */
		unlink(path);
		return false;
	}
	if (!(mem = fmemopen(info, sizeof(info) - 1, "w")))
		return false;
	if (control_send("list", ctl, "info", mem, ms)) {
		fclose(mem);
		return false;
	}
	got = (size_t)ftell(mem);
	fclose(mem);
	info[got] = 0;
	if (!field_u64(info, "size_bytes", &r->size) ||
	    !field(info, "codec", r->codec, sizeof(r->codec)) ||
	    !field(info, "allocator", r->alloc, sizeof(r->alloc)) ||
	    !field_u64(info, "orig_data_size", &r->data) ||
	    !field_u64(info, "compr_data_size", &r->compr) ||
	    !field_u64(info, "mem_used_total", &r->total))
		return false;
	if (!field_u64(info, "mem_limit_bytes", &r->limit))
		r->limit = 0;
	if (!strncmp(uri, "run:", 4))
		field(info, "command", cmd, sizeof(cmd));
	name_of(uri, name, sizeof(name));
	r->cell[C_NAME] = strdup(name);
	snprintf(buf, sizeof(buf), "%ld", r->pid);
	r->cell[C_PID] = strdup(buf);
	r->cell[C_ALGORITHM] = strdup(r->codec);
	size_cell(buf, sizeof(buf), r->size, bytes);
	r->cell[C_DISKSIZE] = strdup(buf);
	size_cell(buf, sizeof(buf), r->data, bytes);
	r->cell[C_DATA] = strdup(buf);
	size_cell(buf, sizeof(buf), r->compr, bytes);
	r->cell[C_COMPR] = strdup(buf);
	size_cell(buf, sizeof(buf), r->total, bytes);
	r->cell[C_TOTAL] = strdup(buf);
	if (r->data && r->total)
		snprintf(buf, sizeof(buf), "%.2f", (double)r->data / (double)r->total);
	else
		snprintf(buf, sizeof(buf), "-");
	r->cell[C_RATIO] = strdup(buf);
	r->cell[C_ALLOCATOR] = strdup(r->alloc);
	if (r->limit)
		size_cell(buf, sizeof(buf), r->limit, bytes);
	else
		snprintf(buf, sizeof(buf), "-");
	r->cell[C_MEMLIMIT] = strdup(buf);
	r->cell[C_URI] = strdup(uri);
	r->cell[C_COMMAND] = strdup(cmd);
	for (int c = 0; c < C_NR; c++)
		if (!r->cell[c])
			return false;
	return true;
}

static int by_pid(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static void row_free(struct row *r)
{
	for (int c = 0; c < C_NR; c++)
		free(r->cell[c]);
}

/* -o LIST into the columns shown: NAME,DATA; +COL,... adds to the
 * default ones.  The number of columns, or CLI_USAGE's negative. */
static int parse_columns(const char *list, int *shown)
{
	char copy[256], all[256] = "";
	int n = 0;

	if (list[0] == '+') {
		for (int c = 0; c < C_NR; c++)
			if (cols[c].def)
				shown[n++] = c;
		list++;
	}
	snprintf(copy, sizeof(copy), "%s", list);
	for (char *save = NULL, *w = strtok_r(copy, ",", &save); n >= 0; w = strtok_r(NULL, ",", &save)) {
		int c = 0;

		if (!w && n)
			break;
		while (w && c < C_NR && strcasecmp(w, cols[c].name))
			c++;
		if (!w || c == C_NR || n == C_NR * 2) {
			for (int k = 0; k < C_NR; k++)
				snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s",
					 k ? ", " : "", cols[k].name);
			cli_usage("list", "-o: unknown column '%s'; columns: %s", w ? w : "",
				  all);
			return -CLI_USAGE;
		}
		shown[n++] = c;
	}
	return n;
}

/* raw: a cell's spaces and backslashes as \x20 and \x5c (libsmartcols) */
static void put_raw(const char *s)
{
	for (; *s; s++)
		if (*s == ' ' || *s == '\\' || *s == '\t' || *s == '\n')
			printf("\\x%02x", (unsigned char)*s);
		else
			putchar(*s);
}

static void print_table(struct row *rows, int nr, const int *shown, int ns, bool heads,
			bool raw)
{
	size_t w[C_NR * 2] = { 0 };

	for (int k = 0; k < ns; k++) {
		w[k] = heads ? strlen(cols[shown[k]].name) : 0;
		for (int i = 0; i < nr; i++)
			if (strlen(rows[i].cell[shown[k]]) > w[k])
				w[k] = strlen(rows[i].cell[shown[k]]);
	}
	for (int i = heads ? -1 : 0; i < nr; i++) {
		for (int k = 0; k < ns; k++) {
			const char *s = i < 0 ? cols[shown[k]].name : rows[i].cell[shown[k]];
			bool last = k == ns - 1;

			if (raw) {
				printf("%s", k ? " " : "");
				put_raw(s);
			} else if (cols[shown[k]].right) {
				printf("%s%*s", k ? " " : "", (int)w[k], s);
			} else {
				printf("%s%-*s", k ? " " : "", last ? 0 : (int)w[k], s);
			}
		}
		putchar('\n');
	}
}

static void print_json(struct row *rows, int nr)
{
	struct json j;

	json_begin(&j, stdout, "list");
	json_array(&j, "servers");
	for (int i = 0; i < nr; i++) {
		struct row *r = &rows[i];

		json_object(&j, NULL);
		json_str(&j, "name", r->cell[C_NAME]);
		json_int(&j, "pid", r->pid);
		json_str(&j, "algorithm", r->codec);
		json_uint(&j, "disksize_bytes", r->size);
		json_uint(&j, "data_bytes", r->data);
		json_uint(&j, "compr_bytes", r->compr);
		json_uint(&j, "total_bytes", r->total);
		if (r->data && r->total)
			json_fixed(&j, "ratio", (double)r->data / (double)r->total, 4);
		else
			json_null(&j, "ratio");
		json_str(&j, "allocator", r->alloc);
		if (r->limit)
			json_uint(&j, "mem_limit_bytes", r->limit);
		else
			json_null(&j, "mem_limit_bytes");
		json_str(&j, "uri", r->cell[C_URI]);
		json_str(&j, "command", strcmp(r->cell[C_COMMAND], "-") ? r->cell[C_COMMAND] : NULL);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_end(&j);
}

int cmd_list(int argc, char **argv)
{
	char dir[4096], more[2048];
	struct dirent *e;
	struct row *rows = NULL;
	DIR *d = NULL;
	const char *tmo = NULL, *out = NULL;
	unsigned ms;
	int nr = 0, cap = 0, ns = 0, shown[C_NR * 2], rc;
	int bytes = 0, noheads = 0, raw = 0, json = 0, wide = 0;
	const struct opt table[] = {
		O_FLAG("bytes", 'b', &bytes, "sizes in bytes, not 64M, 1.5G"),
		O_STR("output", 'o', &out, "LIST",
		      "the columns, comma-separated (below);\n+LIST adds to the default ones",
		      "NAME,PID,ALGORITHM,\nDISKSIZE,DATA,COMPR,TOTAL,RATIO"),
		O_FLAG("wide", 0, &wide, "every column"),
		O_FLAG("noheadings", 'n', &noheads, "no header line"),
		O_FLAG("raw", 0, &raw, "cells apart by one space, not aligned\n(a space in a "
		       "cell written \\x20)"),
		O_FLAG("json", 'j', &json,
		       "one JSON document: every column, sizes\nin bytes, null for none"),
		O_TIMEOUT(&tmo),
		O_END,
	};
	struct opt_cmd cmd = {
		"list", "[OPTIONS]",
		"The zmem serve processes and zmem runs of this user, as zramctl lists\n"
		"zram devices: one row each, nothing when none runs.  A zmem run is\n"
		"run:PID; its DISKSIZE is its heap now.",
		table, more,
	};

	snprintf(more, sizeof(more), "Columns:\n");
	for (int c = 0; c < C_NR; c++)
		snprintf(more + strlen(more), sizeof(more) - strlen(more), "  %-10s %s\n",
			 cols[c].name, cols[c].help);
	snprintf(more + strlen(more), sizeof(more) - strlen(more),
		 "\nThe servers register in $XDG_RUNTIME_DIR/zmem.d/, else /tmp/zmem-UID/zmem.d/;\n"
		 "those that are gone are skipped and their entries removed.\n");
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if ((rc = cli_client_timeout("list", tmo, &ms)))
		return rc;
	if (raw && json)
		return cli_usage("list", "--raw and --json: one or the other");
	if (out && (ns = parse_columns(out, shown)) < 0)
		return -ns;
	for (int c = 0; !out && c < C_NR; c++)
		if (cols[c].def || wide)
			shown[ns++] = c;
	if (!serve_registry_dir(dir, sizeof(dir), false))
		d = opendir(dir);
	else if (errno == EPERM)
		fprintf(stderr, "zmem list: %s is not a folder of this user's own that no one "
			"else may use: its entries are not read\n", dir);
	while (d && (e = readdir(d))) {
		struct row r = { 0 };

		if (!read_row(dir, e->d_name, ms, bytes, &r)) {
			row_free(&r);
			continue;
		}
		if (nr == cap) {
			struct row *more_rows = realloc(rows, sizeof(*rows) * (size_t)(cap += 16));

			if (!more_rows) {
				row_free(&r);
				break;
			}
			rows = more_rows;
		}
		rows[nr++] = r;
	}
	if (d)
		closedir(d);
	if (nr)
		qsort(rows, (size_t)nr, sizeof(*rows), by_pid);
	if (json)
		print_json(rows, nr);
	else if (nr)
		print_table(rows, nr, shown, ns, !noheads, raw);
	for (int i = 0; i < nr; i++)
		row_free(&rows[i]);
	free(rows);
	return CLI_OK;
}
