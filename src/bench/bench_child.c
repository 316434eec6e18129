/*
 * zmem bench: the "memory" data set, the realistic one.  What a compressed
 * swap really holds is the private memory of processes, so bench spawns a
 * process that builds a typical in-memory data set and captures its memory
 * page by page (workload_capture, the same as `zmem capture`).
 *
 * The child is zmem itself, re-executed as "zmem bench --memory-child
 * SIZE" so that it starts clean (a forked copy would carry the parent's
 * buffers).  It builds, with malloc like any program, about SIZE bytes of:
 *
 *   a chained hash table of string keys to records   (pointer-rich structs,
 *                                                      short strings)
 *   an array of structs pointing into it              (pointers, small ints)
 *   a log buffer of text lines                        (English-like text)
 *   numeric arrays: a time series and counters        (doubles, small ints)
 *   a zeroed buffer pool                              (zero pages)
 *   random tokens                                     (incompressible)
 *   many small strings, a third freed again           (heap holes)
 *
 * then says "ready" on its stdout and waits.  The parent captures it; if
 * it has no right to (ptrace restrictions), it asks the child to capture
 * itself and send the pages through the pipe instead.  Closing the
 * child's stdin ends it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workload/workload.h"
#include "base/rand.h"
#include "bench/bench.h"
#include "tool/opt.h"

/* Shares of SIZE, in percent (the rest is the program's own memory). */
#define SHARE_HASH    38
#define SHARE_RECORDS 18
#define SHARE_LOG     12
#define SHARE_NUMBERS 8
#define SHARE_ZERO    8
#define SHARE_RANDOM  5
#define SHARE_SMALL   7

struct rnd {
	uint64_t s;
};

static uint64_t rnd_next(struct rnd *r)
{
	return zmi_rand(&r->s);
}

static unsigned rnd_below(struct rnd *r, unsigned n)
{
	return (unsigned)(rnd_next(r) % n);
}

/* A pronounceable word of 2..4 syllables, skewed towards few distinct
 * words, as real keys and names are. */
static int word(struct rnd *r, char *out)
{
	static const char *const syl[] = {
		"ka", "ro", "mi", "ten", "sa", "lo", "ver", "an", "is", "da", "nor",
		"pe", "li", "us", "tra", "con", "el", "mar", "fi", "do", "gen", "se",
	};
	unsigned n = 2 + rnd_below(r, 3), k = rnd_below(r, 64);
	int len = 0;

	for (unsigned i = 0; i < n; i++)
		len += sprintf(out + len, "%s", syl[(k * (i + 3) + i * i + (k >> 3)) % 22]);
	return len;
}

struct value {
	int64_t id;
	double score;
	uint32_t flags, refs;
	char *name;
	struct value *parent;
	uint32_t counts[6];
	int64_t created;
};

struct entry {
	struct entry *next;
	uint64_t hash;
	char *key;
	struct value *val;
};

struct record {
	struct entry *owner;
	struct record *next;
	uint32_t id;
	float weight;
	uint16_t kind, flags;
	char code[8];
	uint64_t stamp;
};

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		exit(1);
	return p;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		exit(1);
	return p;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* The live data set: reachable from here so nothing looks leaked. */
static struct {
	struct entry **buckets;
	size_t nbuckets;
	struct record *records;
	char *log, *zero, *random;
	double *series;
	uint32_t *counters;
	char **small;
} live;

static void build_hash(struct rnd *r, size_t bytes)
{
	size_t n = bytes / 200, i; /* about 200 bytes an entry, all told */
	struct value *prev = NULL;
	char key[128], name[64];

	live.nbuckets = 1;
	while (live.nbuckets * 3 / 4 < n)
		live.nbuckets <<= 1;
	live.buckets = calloc(live.nbuckets, sizeof(*live.buckets));
	if (!live.buckets)
		exit(1);
	for (i = 0; i < n; i++) {
		struct entry *e = xmalloc(sizeof(*e));
		struct value *v = xmalloc(sizeof(*v));
		int len = 0;

		switch (i % 3) {
		case 0:
			len = sprintf(key, "session:%08x:", (unsigned)rnd_next(r));
			word(r, key + len);
			break;
		case 1:
			len = sprintf(key, "user/");
			len += word(r, key + len);
			key[len++] = '/';
			word(r, key + len);
			break;
		default:
			len = sprintf(key, "https://www.");
			len += word(r, key + len);
			len += sprintf(key + len, ".com/");
			len += word(r, key + len);
			sprintf(key + len, "/%u", rnd_below(r, 100000));
		}
		word(r, name);
		v->id = (int64_t)i + 1000000;
		v->score = (double)rnd_below(r, 100000) / 100.0;
		v->flags = rnd_below(r, 4) ? 0 : 1u << rnd_below(r, 8);
		v->refs = 1 + rnd_below(r, 3);
		v->name = xstrdup(name);
		v->parent = rnd_below(r, 4) ? prev : NULL;
		for (int k = 0; k < 6; k++)
			v->counts[k] = rnd_below(r, 8) ? rnd_below(r, 100) : 0;
		v->created = 1700000000 + (int64_t)i * 3 + rnd_below(r, 3);
		e->key = xstrdup(key);
		e->hash = hash_str(key);
		e->val = v;
		e->next = live.buckets[e->hash & (live.nbuckets - 1)];
		live.buckets[e->hash & (live.nbuckets - 1)] = e;
		prev = v;
	}
}

static void build_records(struct rnd *r, size_t bytes)
{
	size_t n = bytes / sizeof(struct record);

	live.records = xmalloc(n * sizeof(struct record));
	for (size_t i = 0; i < n; i++) {
		struct record *rec = &live.records[i];
		struct entry *e = live.buckets[rnd_next(r) & (live.nbuckets - 1)];

		memset(rec, 0, sizeof(*rec));
		rec->owner = e;
		rec->next = i && rnd_below(r, 2) ? &live.records[i - 1 - rnd_below(r, (unsigned)(i < 64 ? i : 64))] : NULL;
		rec->id = (uint32_t)i;
		rec->weight = (float)rnd_below(r, 1000) / 10.0f;
		rec->kind = (uint16_t)rnd_below(r, 5);
		rec->flags = (uint16_t)(rnd_below(r, 3) ? 0 : 0x10);
		snprintf(rec->code, sizeof(rec->code), "%c%c%04u", 'A' + rnd_below(r, 6),
			 'K' + rnd_below(r, 4), rnd_below(r, 10000));
		rec->stamp = 1700000000000ull + i * 17 + rnd_below(r, 17);
	}
}

static void build_log(struct rnd *r, size_t bytes)
{
	static const char *const lvl[] = { "INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR" };
	static const char *const what[] = {
		"request served", "cache miss, fetched from upstream", "connection opened",
		"connection closed by peer", "retrying after timeout", "user logged in",
		"session expired", "payload validated", "slow query",
	};
	size_t len = 0;
	char w1[64], w2[64];

	live.log = xmalloc(bytes);
	while (len + 256 < bytes) {
		unsigned t = (unsigned)(len / 97);

		word(r, w1);
		word(r, w2);
		len += (size_t)sprintf(live.log + len,
			"2024-05-%02u %02u:%02u:%02u.%03u %s worker[%u]: %s /api/v1/%s/%s/%u in %u.%u ms\n",
			1 + t / 86400 % 28, t / 3600 % 24, t / 60 % 60, t % 60, rnd_below(r, 1000),
			lvl[rnd_below(r, 6)], rnd_below(r, 16), what[rnd_below(r, 9)], w1, w2,
			rnd_below(r, 100000), rnd_below(r, 200), rnd_below(r, 10));
	}
	memset(live.log + len, 0, bytes - len);
}

static void build_numbers(struct rnd *r, size_t bytes)
{
	size_t n = bytes / 2 / sizeof(double), m = bytes / 2 / sizeof(uint32_t);
	double v = 20.0;

	live.series = xmalloc(n * sizeof(double));
	for (size_t i = 0; i < n; i++) {
		v += ((double)rnd_below(r, 2001) - 1000.0) / 10000.0;
		live.series[i] = (double)(int64_t)(v * 100) / 100; /* two decimals */
	}
	live.counters = xmalloc(m * sizeof(uint32_t));
	for (size_t i = 0; i < m; i++)
		live.counters[i] = rnd_below(r, 8) ? rnd_below(r, 256) : rnd_below(r, 70000);
}

static void build_misc(struct rnd *r, size_t zero, size_t random, size_t small)
{
	size_t n = small / 48;
	char w[64];

	live.zero = xmalloc(zero);
	memset(live.zero, 0, zero);
	live.random = xmalloc(random);
	for (size_t i = 0; i + 8 <= random; i += 8) {
		uint64_t x = rnd_next(r);

		memcpy(live.random + i, &x, 8);
	}
	live.small = calloc(n, sizeof(char *));
	if (!live.small)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		int len = word(r, w);

		snprintf(w + len, sizeof(w) - (size_t)len, "-%u", rnd_below(r, 1000));
		live.small[i] = xstrdup(w);
	}
	for (size_t i = 0; i < n; i += 3) { /* holes with stale data */
		free(live.small[i]);
		live.small[i] = NULL;
	}
}

static int write_page(void *arg, const void *page, size_t ps)
{
	const char *p = page;

	for (size_t done = 0; done < ps;) {
		ssize_t k = write(1, p + done, ps - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EPIPE;
		done += (size_t)k;
	}
	return 0;
}

int bench_memory_child(size_t size)
{
	struct rnd r = { 0x9E3779B97F4A7C15ull };
	char cmd;

	build_hash(&r, size / 100 * SHARE_HASH);
	build_records(&r, size / 100 * SHARE_RECORDS);
	build_log(&r, size / 100 * SHARE_LOG);
	build_numbers(&r, size / 100 * SHARE_NUMBERS);
	build_misc(&r, size / 100 * SHARE_ZERO, size / 100 * SHARE_RANDOM,
		   size / 100 * SHARE_SMALL);
	if (write(1, "ready\n", 6) != 6)
		return 1;
	while (read(0, &cmd, 1) == 1) {
		if (cmd == 'd') /* capture ourselves, pages to stdout */
			return workload_capture(getpid(), size, write_page, NULL, NULL) ? 1 : 0;
	}
	return 0;
}

/* ---- the parent side ------------------------------------------------ */

static int read_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		ssize_t k = read(fd, buf + n, 1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return 0;
}

/* The child's own capture, through the pipe. */
static int read_dump(int in, int out, size_t size, struct bench_data *d)
{
	size_t got = 0;

	d->buf = malloc(size);
	if (!d->buf || write(out, "d", 1) != 1)
		return -1;
	while (got < size) {
		ssize_t k = read(in, d->buf + got, size - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	d->len = got;
	return 0;
}

int bench_memory(size_t size, size_t ps, struct bench_data *d)
{
	struct workload_capture_stats st = { 0 };
	int to_child[2], from_child[2], status, rc = -1;
	char arg[32], line[64];
	void *buf = NULL;
	pid_t pid;

	if (pipe(to_child) || pipe(from_child)) {
		fprintf(stderr, "zmem %s: pipe: %s\n", cli_cmd, strerror(errno));
		return -1;
	}
	snprintf(arg, sizeof(arg), "%zu", size);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "zmem %s: fork: %s\n", cli_cmd, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		close(to_child[0]), close(to_child[1]);
		close(from_child[0]), close(from_child[1]);
		execl("/proc/self/exe", "zmem", "bench", "--memory-child", arg, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	if (read_line(from_child[0], line, sizeof(line)) || strcmp(line, "ready\n")) {
		fprintf(stderr, "zmem %s: the workload process did not start\n", cli_cmd);
		goto out;
	}
	rc = workload_capture_mem(pid, size, &buf, &d->len, &st);
	if (!rc) {
		d->buf = buf;
		snprintf(d->note, sizeof(d->note), "captured from a spawned process (PID %d): "
			 "%zu pages of %zu mappings", (int)pid, st.pages, st.regions);
	} else if (rc == -EPERM) {
		rc = read_dump(from_child[0], to_child[1], size, d);
		snprintf(d->note, sizeof(d->note), "a spawned process's own capture "
			 "(no ptrace rights over it)");
	}
	if (rc)
		fprintf(stderr, "zmem %s: capturing the workload process: %s\n", cli_cmd,
			strerror(-rc));
out:
	close(to_child[1]);
	close(from_child[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
		if (!rc)
			fprintf(stderr, "zmem %s: the workload process failed\n", cli_cmd);
		rc = -1;
	}
	d->len = d->len / ps * ps;
	if (!rc && !d->len) {
		fprintf(stderr, "zmem %s: the workload process gave no pages\n", cli_cmd);
		rc = -1;
	}
	return rc ? -1 : 0;
}
