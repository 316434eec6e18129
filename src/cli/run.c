/*
 * zmem run: a command with its heap in compressed regions (docs/run.md).
 *
 * This is the launcher.  It checks every option before CMD starts (a bad
 * one: exit 2, CMD never runs), finds the preload library (src/run/,
 * libzmem-run.so), makes a private folder (0700) holding the board
 * (src/run/board.h) and a control socket, registers in zmem.d/ as zmem
 * serve does (src/serve/process.c), then forks and execs CMD with the
 * library prepended to LD_PRELOAD and ZMEM_RUN_* set.  While CMD runs it
 * forwards the signals a user sends it, answers the control socket (zmem
 * stats, ctl, list, stop) from the board and posts zmem ctl's commands
 * there.  When CMD ends it prints the summary (--stats, --stats-file),
 * removes its folder and its registry entry, and exits as a shell would:
 * CMD's status, 128 + N for signal N, 127 when CMD is not found, 126 when
 * it cannot be executed, and RUN_EXIT_FAIL when the launcher itself fails
 * before CMD starts (as env, nice and timeout do).
 *
 * The launcher is one thread: one poll loop over the control socket, its
 * connections and a pipe its signal handlers write to.  It reads the
 * board and never waits on a process of the run, but for a posted
 * command's acknowledgement, at most RUN_ACK_MS.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmem/common.h>
#include <zmem/store.h>
#include "base/units.h"
#include "cli/cli.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "run/board.h"
#include "serve/serve.h"

/* The launcher failed before CMD ran (no preload library, no folder for
 * the board): 125, as env(1), nice(1) and timeout(1) say it, so that it
 * is not taken for CMD's own status. */
#define RUN_EXIT_FAIL 125
/* How long a control request waits for the processes to apply a posted
 * command (each looks every RUN_PUBLISH_MS), and a slot's read retries
 * while its writer is busy. */
#define RUN_ACK_MS 1000u
#define RUN_READ_TRIES 8
/* A control connection must send its line within this long. */
#define RUN_CTL_TIMEOUT_MS 2000u
#define RUN_CTL_CONNS 16
/* The library's file name, beside zmem in a build, in LIBDIR/zmem/ when
 * installed. */
#define RUN_LIB_NAME "libzmem-run.so"

/* What was asked, checked; what the run is. */
struct run {
	/* options, as given (NULL: not given) */
	const char *resident, *codec, *allocator, *recompress, *backing, *idle_after;
	const char *stats_file;
	int stats;
	uint64_t unit_pages;      /* --unit-pages; 1: none */
	char unit_env[8];         /* ZMEM_RUN_UNIT_PAGES */
	char resident_env[64];    /* ZMEM_RUN_RESIDENT: bytes, or "P%" */
	char idle_env[32];        /* ZMEM_RUN_IDLE_AFTER: "Nms" */
	char lib[PATH_MAX];
	char **argv;              /* CMD and its arguments */
	char command[256];        /* CMD's words, for reports (shortened) */
	/* the run */
	char dir[PATH_MAX];       /* the private folder; "" until made */
	char board_path[PATH_MAX + 16];
	char ctl_path[PATH_MAX + 16];
	char entry[4200];         /* the registry's file; "" when none */
	char uri[32];             /* "run:PID" */
	struct run_board *board;
	int lfd;                  /* control socket, -1 when none */
	FILE *stats_out;          /* --stats-file, opened before CMD starts */
	pid_t child;
	uint64_t started_ns;
	uint64_t ended_ns;
	int status;               /* wait status, once ended */
	bool ended;
	struct rusage ru;         /* CMD's, once ended */
};

/* ---- options ---------------------------------------------------------- */

/* --resident: a size (bytes, 1G), or a share of the heap seen so far
 * ("25%", "12.5%": in (0, 100], in steps of 1/100 percent, as the board's
 * commands carry it).  Into r->resident_env: 0, or a usage error. */
static int check_resident(struct run *r)
{
	const char *a = r->resident;
	size_t len = strlen(a);
	uint64_t bytes;
	double pct;
	char num[32];

	if (len > 1 && len < sizeof(num) && a[len - 1] == '%') {
		memcpy(num, a, len - 1);
		num[len - 1] = 0;
		if (!strchr(num, 'e') && !strchr(num, 'E') && !cli_double(num, &pct) &&
		    pct > 0 && pct <= 100 && num[0] != '+') {
			/* at most two decimals: 1/100 percent */
			double steps = pct * 100;

			if (steps - (double)(uint64_t)(steps + 0.5) < 1e-6 &&
			    (double)(uint64_t)(steps + 0.5) - steps < 1e-6) {
				snprintf(r->resident_env, sizeof(r->resident_env), "%g%%", pct);
				return 0;
			}
		}
	} else if (!cli_size(a, &bytes) && bytes > 0) {
		snprintf(r->resident_env, sizeof(r->resident_env), "%llu",
			 (unsigned long long)bytes);
		return 0;
	}
	return cli_usage("run", "invalid --resident '%s' (a size: 512M, 1G; or a share of the "
			 "heap seen so far: 25%%, more than 0 and at most 100, two decimals "
			 "at most)", a);
}

/* --backing: its folder must exist (the file is made there); then the
 * file must be one we may read and write, as zmem serve's. */
static int check_backing(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!*path)
		return cli_usage("run", "--backing: an empty path");
	if (slash) {
		size_t n = slash == path ? 1 : (size_t)(slash - path);

		if (n >= sizeof(dir))
			return cli_usage("run", "--backing %s: path too long", path);
		memcpy(dir, path, n);
		dir[n] = 0;
		if (stat(dir, &st) || !S_ISDIR(st.st_mode))
			return cli_usage("run", "--backing %s: its folder %s %s", path, dir,
					 errno == ENOENT || !stat(dir, &st) ? "does not exist"
					 : strerror(errno));
	}
	/* a bad option of zmem run is status 2 (CMD not run), whatever the
	 * reason: 1 would be CMD's own */
	return cli_check_backing("run", path) ? CLI_USAGE : 0;
}

/* The index of CMD in argv: the word after "--", or the first that is
 * not an option or an option's value.  argc when there is none. */
static int split_at(const struct opt *t, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool takes = false;

		if (!strcmp(a, "--"))
			return i;
		if (a[0] != '-' || !a[1])
			return i;
		if (a[1] == '-' && !strchr(a, '='))
			for (const struct opt *o = t; o->name; o++)
				if (!strcmp(a + 2, o->name))
					takes = o->kind != OPT_FLAG;
		if (takes)
			i++;
	}
	return argc;
}

/* The preload library: $ZMEM_RUN_LIB, else beside this zmem (a build
 * tree), else PREFIX/lib/zmem/ for a zmem in PREFIX/bin.  0, or -1 after
 * a line on stderr. */
static int find_lib(struct run *r)
{
	const char *env = getenv("ZMEM_RUN_LIB");
	char self[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		if (access(env, R_OK))
			return fprintf(stderr, "zmem run: ZMEM_RUN_LIB=%s: %s\n", env,
				       strerror(errno)), -1;
		if (!realpath(env, r->lib))
			snprintf(r->lib, sizeof(r->lib), "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		slash = strrchr(self, '/');
		*slash = 0;
		if (snprintf(r->lib, sizeof(r->lib), "%s/%s", self, RUN_LIB_NAME) <
		    (int)sizeof(r->lib) && !access(r->lib, R_OK))
			return 0;
		if (snprintf(r->lib, sizeof(r->lib), "%s/../lib/zmem/%s", self, RUN_LIB_NAME) <
		    (int)sizeof(r->lib) && !access(r->lib, R_OK) && realpath(r->lib, self)) {
			snprintf(r->lib, sizeof(r->lib), "%s", self);
			return 0;
		}
	}
	fprintf(stderr, "zmem run: %s not found (beside zmem, in ../lib/zmem/, or where "
		"ZMEM_RUN_LIB names it); the command was not run\n", RUN_LIB_NAME);
	return -1;
}

/* ---- the folder and the board ----------------------------------------- */

/* The private folder: in $XDG_RUNTIME_DIR, else $TMPDIR, else /tmp; /tmp
 * too when the socket's path would be too long for a Unix socket. */
static int make_dir(struct run *r)
{
	const char *bases[] = { getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"), "/tmp" };

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || !*bases[i] || strlen(bases[i]) > 60)
			continue;
		snprintf(r->dir, sizeof(r->dir), "%s/zmem-run.XXXXXX", bases[i]);
		if (mkdtemp(r->dir))
			return 0;
	}
	fprintf(stderr, "zmem run: cannot make a private folder in $XDG_RUNTIME_DIR, $TMPDIR "
		"or /tmp: %s\n", strerror(errno));
	r->dir[0] = 0;
	return -1;
}

static int make_board(struct run *r)
{
	int fd;
	struct run_board *b;

	snprintf(r->board_path, sizeof(r->board_path), "%s/board", r->dir);
	fd = open(r->board_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(*b))) {
		fprintf(stderr, "zmem run: %s: %s\n", r->board_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (b == MAP_FAILED) {
		fprintf(stderr, "zmem run: mmap %s: %s\n", r->board_path, strerror(errno));
		return -1;
	}
	b->version = RUN_BOARD_VERSION;
	b->nslots = RUN_BOARD_SLOTS;
	b->launcher_pid = (int32_t)getpid();
	/* the magic last: a board with it is whole */
	__atomic_store_n(&b->magic, RUN_BOARD_MAGIC, __ATOMIC_RELEASE);
	r->board = b;
	return 0;
}

/* A copy of slot i, read under its sequence count: false when the slot
 * is free.  A writer busy through every try leaves what was read last. */
static bool slot_read(const struct run_board *b, unsigned i, struct run_slot *out)
{
	const struct run_slot *s = &b->slot[i];

	if (!__atomic_load_n(&s->pid, __ATOMIC_ACQUIRE))
		return false;
	for (int t = 0; t < RUN_READ_TRIES; t++) {
		uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

		memcpy(out, (const void *)s, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(seq & 1) && seq == __atomic_load_n(&s->seq, __ATOMIC_RELAXED))
			break;
		usleep(100);
	}
	out->comm[sizeof(out->comm) - 1] = 0;
	return out->pid != 0;
}

/* Is the process of a LIVE slot still there?  A program that execs
 * another keeps its pid, and the new one claims a slot of its own: the
 * older slot of the same pid is its past. */
static bool slot_alive(const struct run_board *b, const struct run_slot *s)
{
	if (s->state != RUN_SLOT_LIVE || (kill(s->pid, 0) && errno != EPERM))
		return false;
	for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++) {
		const struct run_slot *o = &b->slot[i];

		if (o != s && __atomic_load_n(&o->pid, __ATOMIC_RELAXED) == s->pid &&
		    __atomic_load_n(&o->started_ns, __ATOMIC_RELAXED) > s->started_ns)
			return false;
	}
	return true;
}

static const char *slot_state(const struct run_board *b, const struct run_slot *s)
{
	return s->state == RUN_SLOT_EXITED ? "exited" : slot_alive(b, s) ? "live" : "gone";
}

/* The sums over the processes: numbers now over those alive, peaks and
 * counts over all that ever reported. */
struct run_totals {
	unsigned procs, live;
	struct run_proc_stats now, all;
};

static void totals(const struct run *r, struct run_totals *t)
{
	struct run_slot s;

	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; r->board && i < RUN_BOARD_SLOTS; i++) {
		uint64_t *all = (uint64_t *)&t->all, *now = (uint64_t *)&t->now;
		const uint64_t *v = (const uint64_t *)&s.st;
		bool alive;

		if (!slot_read(r->board, i, &s))
			continue;
		alive = slot_alive(r->board, &s);
		t->procs++;
		t->live += alive;
		for (size_t k = 0; k < sizeof(s.st) / sizeof(uint64_t); k++) {
			all[k] += v[k];
			if (alive)
				now[k] += v[k];
		}
	}
}

/* Post a command for every process of the run, then wait (at most
 * RUN_ACK_MS) until those alive have applied it: how many have, of how
 * many, into *done and *of. */
static void post(struct run *r, enum run_cmd cmd, uint64_t arg, unsigned *done, unsigned *of)
{
	struct run_board *b = r->board;
	uint64_t end = cli_now_ns() + RUN_ACK_MS * 1000000ull;
	uint32_t seq;

	b->cmd = cmd;
	b->cmd_arg = arg;
	seq = __atomic_add_fetch(&b->cmd_seq, 1, __ATOMIC_RELEASE);
	do {
		struct run_slot s;

		*done = *of = 0;
		for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++) {
			if (!slot_read(b, i, &s) || !slot_alive(b, &s))
				continue;
			(*of)++;
			*done += (int32_t)(__atomic_load_n(&b->slot[i].cmd_done,
							   __ATOMIC_ACQUIRE) - seq) >= 0;
		}
		if (*done == *of)
			break;
		usleep(5000);
	} while (cli_now_ns() < end);
}

/* ---- reports ---------------------------------------------------------- */

static double run_seconds(const struct run *r)
{
	return (double)((r->ended ? r->ended_ns : cli_now_ns()) - r->started_ns) / 1e9;
}

static void json_stats(struct json *j, const char *key, const struct run_proc_stats *st)
{
	if (key)
		json_object(j, key);
	json_uint(j, "heap_bytes", st->heap_bytes);
	json_uint(j, "heap_max", st->heap_max);
	json_uint(j, "resident_bytes", st->resident_bytes);
	json_uint(j, "resident_max", st->resident_max);
	json_uint(j, "resident_limit_bytes", st->resident_limit);
	json_uint(j, "stored_bytes", st->stored_bytes);
	json_uint(j, "pool_bytes", st->pool_bytes);
	json_uint(j, "meta_bytes", st->meta_bytes);
	json_uint(j, "malloc_bytes", st->malloc_bytes);
	json_uint(j, "mmap_bytes", st->mmap_bytes);
	json_uint(j, "faults_first", st->faults_first);
	json_uint(j, "faults_refault", st->faults_refault);
	json_uint(j, "faults_wp", st->faults_wp);
	json_uint(j, "fault_ns", st->fault_ns);
	json_uint(j, "evictions", st->evictions);
	json_uint(j, "outside_bytes", st->outside_bytes);
	json_uint(j, "rss_bytes", st->rss_bytes);
	json_uint(j, "resident_max_bytes", st->resident_max);
	json_uint(j, "pool_max_bytes", st->pool_max);
	json_uint(j, "stored_max_bytes", st->stored_max);
	json_uint(j, "meta_max_bytes", st->meta_max);
	json_uint(j, "total_max_bytes", st->total_max);
	json_uint(j, "rss_max_bytes", st->rss_max);
	if (key)
		json_object_end(j);
}

/* The whole report as one JSON document: --stats-file, zmem stats --json. */
static void report_json(const struct run *r, FILE *f)
{
	struct run_totals t;
	struct run_slot s;
	struct json j;

	totals(r, &t);
	json_begin(&j, f, "run");
	json_str(&j, "uri", r->uri);
	json_int(&j, "pid", getpid());
	json_int(&j, "cmd_pid", r->child);
	json_array(&j, "argv");
	for (int i = 0; r->argv[i]; i++)
		json_str(&j, NULL, r->argv[i]);
	json_array_end(&j);
	json_str(&j, "resident", r->resident);
	json_str(&j, "codec", r->codec ? r->codec : "lz4");
	json_str(&j, "allocator", r->allocator ? r->allocator : RUN_ALLOCATOR);
	json_str(&j, "recompress", r->recompress);
	json_str(&j, "backing", r->backing);
	json_uint(&j, "unit_pages", r->unit_pages);
	json_fixed(&j, "elapsed_s", run_seconds(r), 3);
	if (r->ended) {
		json_bool(&j, "running", false);
		if (WIFSIGNALED(r->status)) {
			json_null(&j, "status");
			json_int(&j, "signal", WTERMSIG(r->status));
		} else {
			json_int(&j, "status", WEXITSTATUS(r->status));
			json_null(&j, "signal");
		}
		/* the kernel's count, whatever the library reports: the
		 * largest resident set of CMD and its reaped children */
		json_uint(&j, "maxrss_bytes", (uint64_t)r->ru.ru_maxrss * 1024);
	} else {
		json_bool(&j, "running", true);
	}
	json_uint(&j, "processes", t.procs);
	json_uint(&j, "processes_live", t.live);
	json_uint(&j, "unreported", __atomic_load_n(&r->board->unreported, __ATOMIC_RELAXED));
	json_array(&j, "process");
	for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++) {
		if (!slot_read(r->board, i, &s))
			continue;
		json_object(&j, NULL);
		json_int(&j, "pid", s.pid);
		json_int(&j, "ppid", s.ppid);
		json_str(&j, "comm", s.comm);
		json_str(&j, "state", slot_state(r->board, &s));
		json_stats(&j, NULL, &s.st);
		json_object_end(&j);
	}
	json_array_end(&j);
	/* now: the live processes' numbers; all: every process's, summed
	 * (their peaks summed: at most what was resident at once) */
	json_stats(&j, "now", &t.now);
	json_stats(&j, "total", &t.all);
	json_end(&j);
}

static const char *hb(uint64_t v, char buf[24])
{
	return zmi_human_bytes(v, buf, 24);
}

/* The report people read: --stats on stderr, zmem stats. */
static void report_text(const struct run *r, FILE *f)
{
	struct run_totals t;
	struct run_slot s;
	char a[24], b[24], c[24], d[24], e[24], g[24];
	const struct run_proc_stats *st;

	totals(r, &t);
	fprintf(f, "zmem run: %s (pid %d, %s), %.1f s", r->command, (int)r->child, r->uri,
		run_seconds(r));
	if (!r->ended)
		fprintf(f, ", running\n");
	else if (WIFSIGNALED(r->status))
		fprintf(f, ", killed by signal %d\n", WTERMSIG(r->status));
	else
		fprintf(f, ", exit status %d\n", WEXITSTATUS(r->status));
	fprintf(f, "  resident limit %s, codec %s, allocator %s%s%s",
		r->resident ? r->resident : "none", r->codec ? r->codec : "lz4",
		r->allocator ? r->allocator : RUN_ALLOCATOR, r->recompress ? ", recompress " : "",
		r->recompress ? r->recompress : "");
	if (r->unit_pages > 1)
		fprintf(f, ", units of %u pages", (unsigned)r->unit_pages);
	fprintf(f, "\n");
	if (!t.procs) {
		fprintf(f, "  no process reported (the library did not load, or had no "
			"userfaultfd: see the lines above)\n");
		return;
	}
	fprintf(f, "  %-7s %-7s %-6s %9s %9s %9s %9s %9s %9s %9s %8s  %s\n", "PID", "PPID",
		"STATE", "HEAP_MAX", "RES_MAX", "LIMIT", "COMPR", "POOL", "FAULTS", "EVICTED",
		"FAULT_MS", "COMM");
	for (unsigned i = 0; i < RUN_BOARD_SLOTS; i++) {
		if (!slot_read(r->board, i, &s))
			continue;
		st = &s.st;
		fprintf(f, "  %-7d %-7d %-6s %9s %9s %9s %9s %9s %9llu %9llu %8.1f  %s\n", s.pid,
			s.ppid, slot_state(r->board, &s), hb(st->heap_max, a), hb(st->resident_max, b),
			st->resident_limit ? hb(st->resident_limit, c) : "none",
			hb(st->stored_bytes, d), hb(st->pool_bytes, e),
			(unsigned long long)(st->faults_first + st->faults_refault + st->faults_wp),
			(unsigned long long)st->evictions, (double)st->fault_ns / 1e6, s.comm);
	}
	st = &t.all;
	fprintf(f, "  peak heap %s, peak resident %s%s; compressed %s in a pool of %s, "
		"metadata %s\n", hb(st->heap_max, a), hb(st->resident_max, b),
		t.procs > 1 ? " (sums of each process's)" : "", hb(st->stored_bytes, c),
		hb(st->pool_bytes, d), hb(st->meta_bytes, e));
	fprintf(f, "  faults: %llu first touches, %llu refaults, %llu writes to clean pages; "
		"%.1f ms serving them; %llu pages evicted\n",
		(unsigned long long)st->faults_first, (unsigned long long)st->faults_refault,
		(unsigned long long)st->faults_wp, (double)st->fault_ns / 1e6,
		(unsigned long long)st->evictions);
	if (st->outside_bytes)
		fprintf(f, "  %s went outside the regions (they were full)\n",
			hb(st->outside_bytes, a));
	if (r->ended)
		fprintf(f, "  the kernel's peak resident set of the command: %s\n",
			hb((uint64_t)r->ru.ru_maxrss * 1024, g));
	if (r->board->unreported)
		fprintf(f, "  %u processes found no slot on the board: not counted\n",
			r->board->unreported);
}

/* One line of JSON for zmem list: the fields it reads for a server's
 * disk, given a run's meaning (size: the heap; data: what is stored, as
 * it was before compression; compressed; total: the pool), then the
 * run's own. */
static void report_info(const struct run *r, FILE *f)
{
	struct run_totals t;
	const struct run_proc_stats *n;
	uint64_t orig;

	totals(r, &t);
	n = &t.now;
	orig = n->heap_bytes > n->resident_bytes ? n->heap_bytes - n->resident_bytes : 0;
	fprintf(f, "{\"kind\": \"run\", \"uri\": \"%s\", \"pid\": %d, \"cmd_pid\": %d, "
		"\"command\": ", r->uri, (int)getpid(), (int)r->child);
	json_write_string(f, r->command);
	fprintf(f, ", \"size_bytes\": %llu, \"codec\": \"%s\", \"allocator\": \"%s\", "
		"\"orig_data_size\": %llu, \"compr_data_size\": %llu, \"mem_used_total\": %llu, "
		"\"processes\": %u, \"heap_bytes\": %llu, \"resident_bytes\": %llu, "
		"\"resident_limit_bytes\": ",
		(unsigned long long)n->heap_bytes, r->codec ? r->codec : "lz4",
		r->allocator ? r->allocator : RUN_ALLOCATOR, (unsigned long long)orig,
		(unsigned long long)n->stored_bytes, (unsigned long long)n->pool_bytes, t.live,
		(unsigned long long)n->heap_bytes, (unsigned long long)n->resident_bytes);
	if (n->resident_limit)  /* null: no limit */
		fprintf(f, "%llu", (unsigned long long)n->resident_limit);
	else
		fputs("null", f);
	fprintf(f, ", \"stored_bytes\": %llu, \"pool_bytes\": %llu, \"total_bytes\": %llu}\n",
		(unsigned long long)n->stored_bytes, (unsigned long long)n->pool_bytes,
		(unsigned long long)(n->resident_bytes + n->pool_bytes + n->meta_bytes));
}

/* ---- the control socket ---------------------------------------------- */

static const char KNOWN[] = "info, text, json, reclaim [BYTES], mem-limit BYTES|PCT%, untrack, "
			    "stop";

/* "25%", "12.5%" into 1/100 percent: 0, or -1 */
static int parse_pct(const char *a, uint64_t *hundredths)
{
	char num[32];
	size_t len = strlen(a);
	double v;

	if (len < 2 || len >= sizeof(num) || a[len - 1] != '%')
		return -1;
	memcpy(num, a, len - 1);
	num[len - 1] = 0;
	if (cli_double(num, &v) || !(v > 0 && v <= 100))
		return -1;
	*hundredths = (uint64_t)(v * 100 + 0.5);
	return *hundredths ? 0 : -1;
}

static void say_applied(FILE *f, const char *what, unsigned done, unsigned of)
{
	if (done == of)
		fprintf(f, "ok: %s: applied by %u process%s\n", what, of, of == 1 ? "" : "es");
	else
		fprintf(f, "ok: %s: applied by %u of %u processes so far (the others are busy: "
			"they apply it at their next look)\n", what, done, of);
}

/* Carry out one request line; the answer goes to f. */
static void control_do(struct run *r, char *line, FILE *f)
{
	char *arg = strchr(line, ' ');
	unsigned done, of;
	uint64_t v = 0;

	if (arg)
		*arg++ = 0;
	if (!strcmp(line, "info")) {
		report_info(r, f);
	} else if (!strcmp(line, "text") || !strcmp(line, "stats")) {
		report_text(r, f);
	} else if (!strcmp(line, "json")) {
		report_json(r, f);
	} else if (!strcmp(line, "reclaim")) {
		if (arg && cli_parse_u64(arg, &v)) {
			fprintf(f, "error: reclaim takes a number of bytes (none: all it can)\n");
			return;
		}
		post(r, RUN_CMD_RECLAIM, v, &done, &of);
		say_applied(f, "reclaim", done, of);
	} else if (!strcmp(line, "mem-limit")) {
		if (!arg || (cli_parse_u64(arg, &v) && parse_pct(arg, &v))) {
			fprintf(f, "error: mem-limit takes a number of bytes (0: no limit) or a "
				"share of the heap seen: 25%%\n");
			return;
		}
		if (strchr(arg, '%'))
			v |= RUN_ARG_PCT;
		post(r, RUN_CMD_MEM_LIMIT, v, &done, &of);
		say_applied(f, "mem-limit", done, of);
	} else if (!strcmp(line, "untrack")) {
		post(r, RUN_CMD_UNTRACK, 0, &done, &of);
		say_applied(f, "untrack", done, of);
	} else if (!strcmp(line, "stop")) {
		if (!r->ended && r->child > 0 && !kill(r->child, SIGTERM))
			fprintf(f, "ok: stopping (SIGTERM to %d)\n", (int)r->child);
		else
			fprintf(f, "error: cannot stop: the command has ended\n");
	} else {
		fprintf(f, "error: unknown command '%.40s'; known: %s\n", line, KNOWN);
	}
}

struct ctl_conn {
	int fd;                   /* -1: free */
	uint64_t deadline_ns;
	size_t len;
	char line[CONTROL_LINE_MAX + 1];
	char refused[128];        /* another user's: "" when allowed */
};

static struct ctl_conn conns[RUN_CTL_CONNS];

static void conn_close(struct ctl_conn *c)
{
	close(c->fd);
	c->fd = -1;
}

/* Send the whole answer: the socket blocks now, for at most a second a
 * piece (the client reads it at once, as control_send does). */
static void conn_answer(struct ctl_conn *c, const char *text, size_t len)
{
	struct timeval tv = { 1, 0 };
	char junk[4096];

	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (len) {
		ssize_t n = send(c->fd, text, len, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		text += n;
		len -= (size_t)n;
	}
	/* what came after the line is dropped: closing with input unread
	 * would reset the connection before the client has the answer */
	while (recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
	shutdown(c->fd, SHUT_WR);
	conn_close(c);
}

static void conn_read(struct run *r, struct ctl_conn *c)
{
	ssize_t n = recv(c->fd, c->line + c->len, CONTROL_LINE_MAX - c->len, 0);
	char *nl, *out = NULL;
	size_t len = 0;
	FILE *f;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->len += (size_t)n;
	c->line[c->len] = 0;
	nl = memchr(c->line, '\n', c->len);
	if (!nl) {
		if (c->len == CONTROL_LINE_MAX)
			conn_answer(c, "error: request line too long\n", 29);
		return;
	}
	*nl = 0;
	if (nl > c->line && nl[-1] == '\r')
		nl[-1] = 0;
	if (c->refused[0]) {
		conn_answer(c, c->refused, strlen(c->refused));
		return;
	}
	f = open_memstream(&out, &len);
	if (f) {
		control_do(r, c->line, f);
		fclose(f);
	}
	conn_answer(c, out ? out : "error: out of memory\n", out ? len : 21);
	free(out);
}

static void control_accept(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct ctl_conn *c = NULL, *oldest = NULL;

		if (fd < 0)
			return;
		for (unsigned i = 0; i < RUN_CTL_CONNS && !c; i++)
			if (conns[i].fd < 0)
				c = &conns[i];
			else if (!oldest || conns[i].deadline_ns < oldest->deadline_ns)
				oldest = &conns[i];
		if (!c) {
			conn_close(oldest);
			c = oldest;
		}
		c->fd = fd;
		c->len = 0;
		c->deadline_ns = cli_now_ns() + RUN_CTL_TIMEOUT_MS * 1000000ull;
		if (serve_peer_allowed(fd, c->refused, sizeof(c->refused)))
			c->refused[0] = 0;
	}
}

/* ---- signals ----------------------------------------------------------- */

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define NFORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))
static volatile pid_t child_pid;
static int wake[2] = { -1, -1 };

/* A signal sent to zmem run goes on to CMD.  One the terminal sent to
 * the whole foreground group (si_code SI_KERNEL: ^C, ^\) reached CMD
 * already, and is not sent twice. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int e = errno;

	if (child_pid > 0 && si->si_code != SI_KERNEL)
		kill(child_pid, sig);
	errno = e;
}

static void on_child(int sig)
{
	int e = errno;

	if (write(wake[1], "", 1) < 0) {
		/* full: the loop is awake already */
	}
	errno = e;
}

static void set_signals(bool ours)
{
	struct sigaction sa = { 0 };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART | (ours ? SA_SIGINFO : 0);
	for (size_t i = 0; i < NFORWARDED; i++) {
		if (ours)
			sa.sa_sigaction = on_signal;
		else
			sa.sa_handler = SIG_DFL;
		sigaction(forwarded[i], &sa, NULL);
	}
	sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
	sa.sa_handler = ours ? on_child : SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
}

/* ---- running CMD ------------------------------------------------------- */

/* An option's variable, when given; one the user set stays otherwise. */
static int set_opt(const char *name, const char *v)
{
	return v ? setenv(name, v, 1) : 0;
}

static int set_env(const struct run *r)
{
	const char *old = getenv("LD_PRELOAD");
	char *pre;
	int rc;

	if (old && *old) {
		pre = malloc(strlen(r->lib) + strlen(old) + 2);
		if (!pre)
			return -1;
		sprintf(pre, "%s:%s", r->lib, old);
	} else {
		pre = strdup(r->lib);
		if (!pre)
			return -1;
	}
	rc = setenv("LD_PRELOAD", pre, 1);
	free(pre);
	if (rc || setenv("ZMEM_RUN_BOARD", r->board_path, 1) ||
	    set_opt("ZMEM_RUN_RESIDENT", r->resident ? r->resident_env : NULL) ||
	    set_opt("ZMEM_RUN_CODEC", r->codec) || set_opt("ZMEM_RUN_ALLOCATOR", r->allocator) ||
	    set_opt("ZMEM_RUN_RECOMPRESS", r->recompress) ||
	    set_opt("ZMEM_RUN_BACKING", r->backing) ||
	    set_opt("ZMEM_RUN_UNIT_PAGES", r->unit_pages > 1 ? r->unit_env : NULL) ||
	    set_opt("ZMEM_RUN_IDLE_AFTER", r->idle_after ? r->idle_env : NULL))
		return -1;
	return 0;
}

/* Fork and exec CMD.  The child tells an exec that failed through a pipe
 * closed on exec: its errno, so that the launcher says it and exits 127
 * or 126 as a shell does.  0, or that exit status. */
static int start(struct run *r, const sigset_t *blocked)
{
	int p[2], err = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "zmem run: pipe: %s\n", strerror(errno));
		return RUN_EXIT_FAIL;
	}
	fflush(NULL);
	r->child = fork();
	if (r->child < 0) {
		fprintf(stderr, "zmem run: fork: %s\n", strerror(errno));
		close(p[0]);
		close(p[1]);
		return RUN_EXIT_FAIL;
	}
	if (r->child == 0) {
		set_signals(false);
		sigprocmask(SIG_UNBLOCK, blocked, NULL);
		close(p[0]);
		execvp(r->argv[0], r->argv);
		err = errno;
		if (write(p[1], &err, sizeof(err)) < 0) {
			/* the parent then sees a plain exit 127 */
		}
		_exit(127);
	}
	close(p[1]);
	do
		n = read(p[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n != (ssize_t)sizeof(err))
		return 0;  /* exec'd */
	wait4(r->child, &r->status, 0, NULL);
	r->child = 0;
	fprintf(stderr, "zmem run: %s: %s\n", r->argv[0],
		err == ENOENT ? "command not found" : strerror(err));
	return err == ENOENT ? 127 : 126;
}

/* Serve the control socket until CMD ends. */
static void loop(struct run *r)
{
	struct pollfd pf[RUN_CTL_CONNS + 2];
	struct ctl_conn *polled[RUN_CTL_CONNS];

	for (unsigned i = 0; i < RUN_CTL_CONNS; i++)
		conns[i].fd = -1;
	while (!r->ended) {
		uint64_t now = cli_now_ns(), first = UINT64_MAX;
		unsigned n = 2;
		pid_t w;

		w = wait4(r->child, &r->status, WNOHANG, &r->ru);
		if (w == r->child) {
			r->ended_ns = cli_now_ns();
			r->ended = true;
			break;
		}
		if (w < 0 && errno != EINTR) {
			/* cannot happen for our own child; say it and end */
			fprintf(stderr, "zmem run: wait: %s\n", strerror(errno));
			r->status = 1 << 8;
			r->ended = true;
			break;
		}
		pf[0] = (struct pollfd){ .fd = wake[0], .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
		for (unsigned i = 0; i < RUN_CTL_CONNS; i++) {
			struct ctl_conn *c = &conns[i];

			if (c->fd < 0)
				continue;
			if (c->deadline_ns <= now) {
				conn_close(c);
				continue;
			}
			if (c->deadline_ns < first)
				first = c->deadline_ns;
			polled[n - 2] = c;
			pf[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
		}
		if (poll(pf, r->lfd >= 0 ? n : 1, first == UINT64_MAX ? -1
			 : (int)((first - now) / 1000000 + 1)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents) {
			char junk[64];

			while (read(wake[0], junk, sizeof(junk)) > 0)
				;
		}
		for (unsigned i = 2; i < n; i++)
			if (pf[i].revents)
				conn_read(r, polled[i - 2]);
		if (r->lfd >= 0 && pf[1].revents)
			control_accept(r->lfd);
	}
	for (unsigned i = 0; i < RUN_CTL_CONNS; i++)
		if (conns[i].fd >= 0)
			conn_close(&conns[i]);
}

static void cleanup(struct run *r)
{
	serve_unregister(r->entry);
	r->entry[0] = 0;
	if (r->lfd >= 0) {
		close(r->lfd);
		unlink(r->ctl_path);
		r->lfd = -1;
	}
	if (r->board_path[0])
		unlink(r->board_path);
	if (r->dir[0])
		rmdir(r->dir);
}

static void join_words(struct run *r)
{
	size_t n = 0;

	for (int i = 0; r->argv[i] && n < sizeof(r->command) - 1; i++)
		n += (size_t)snprintf(r->command + n, sizeof(r->command) - n, "%s%s",
				      i ? " " : "", r->argv[i]);
	if (n >= sizeof(r->command) - 1)
		memcpy(r->command + sizeof(r->command) - 4, "...", 4);
}

static int check_options(struct run *r)
{
	int rc;

	if ((r->resident && (rc = check_resident(r))) ||
	    (r->codec && (rc = cli_check_codec("run", "--codec", r->codec))) ||
	    (r->allocator && (rc = cli_check_allocator("run", "--allocator", r->allocator))) ||
	    (r->recompress && (rc = cli_check_codec("run", "--recompress", r->recompress))) ||
	    (r->backing && (rc = check_backing(r->backing))))
		return rc;
	if (r->unit_pages & (r->unit_pages - 1))
		return cli_usage("run", "--unit-pages must be 1, 2, 4, 8 or 16");
	snprintf(r->unit_env, sizeof(r->unit_env), "%u", (unsigned)r->unit_pages);
	if (r->idle_after) {
		unsigned ms;

		if ((rc = cli_check_duration("run", "--idle-after", r->idle_after, &ms)))
			return rc;
		if (!r->recompress && !r->backing)
			return cli_usage("run", "--idle-after needs --recompress CODEC (idle pages "
					 "are recompressed) or --backing FILE (idle pages are "
					 "written back first)");
		snprintf(r->idle_env, sizeof(r->idle_env), "%ums", ms);
	}
	if (r->stats_file) {
		/* opened now: a file that cannot be written is told before
		 * CMD runs, not after */
		int fd = open(r->stats_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || !(r->stats_out = fdopen(fd, "w"))) {
			if (fd >= 0)
				close(fd);
			return cli_usage("run", "--stats-file %s: %s", r->stats_file,
					 strerror(errno));
		}
	}
	return 0;
}

/* Everything made before CMD starts: the library found, the folder, the
 * board, the control socket and the registry entry (these two only
 * noted when they fail: the run goes on without them). */
static int prepare(struct run *r)
{
	if (find_lib(r) || make_dir(r) || make_board(r))
		return -1;
	if (strchr(r->lib, ':') || strchr(r->lib, ' '))
		return fprintf(stderr, "zmem run: %s: LD_PRELOAD cannot name a path with a "
			       "colon or a space\n", r->lib), -1;
	snprintf(r->uri, sizeof(r->uri), "run:%d", (int)getpid());
	snprintf(r->ctl_path, sizeof(r->ctl_path), "%s/zmem-run.ctl", r->dir);
	r->lfd = serve_listen_unix(r->ctl_path);
	if (r->lfd < 0) {
		cli_notice("no control socket: zmem stats and ctl will not reach this run");
	} else {
		fcntl(r->lfd, F_SETFL, fcntl(r->lfd, F_GETFL) | O_NONBLOCK);
		if (serve_register(r->uri, r->ctl_path, r->entry, sizeof(r->entry)))
			cli_notice("not registered (%s): zmem list will not show this run",
				 strerror(errno));
	}
	if (set_env(r))
		return fprintf(stderr, "zmem run: setenv: %s\n", strerror(errno)), -1;
	return 0;
}

static int exit_status(const struct run *r)
{
	if (WIFSIGNALED(r->status))
		return 128 + WTERMSIG(r->status);
	return WEXITSTATUS(r->status);
}

int cmd_run(int argc, char **argv)
{
	struct run r = { .lfd = -1, .unit_pages = 1 };
	sigset_t blocked;
	int at, rc;
	const struct opt table[] = {
		O_STR("resident", 0, &r.resident, "SIZE|PCT",
		      "the most heap kept uncompressed, per\nprocess: a size (512M, 1G) or a "
		      "share\nof the heap seen so far (25%)", "no limit"),
		O_STR("codec", 0, &r.codec, "NAME", "lz4, zstd[:LEVEL], lzo, none", "lz4"),
		O_STR("allocator", 0, &r.allocator, "NAME", "the store's pool backend",
		      RUN_ALLOCATOR),
		O_STR("recompress", 0, &r.recompress, "CODEC",
		      "the secondary codec for idle or huge\npages: zstd, zstd:19, ...", "none"),
		O_STR("backing", 0, &r.backing, "FILE",
		      "cold data: a backing file for pages\nwritten back; a process other than "
		      "the\nfirst uses FILE.PID", "none"),
		O_STR("idle-after", 0, &r.idle_after, "DURATION",
		      "pages not touched this long are\nrecompressed or written back: 500ms,\n"
		      "30s, 10m (needs --recompress or\n--backing)", "never"),
		O_U64("unit-pages", 0, &r.unit_pages, "N",
		      "adjacent pages evicted together are\nkept as one compressed unit of up to N\n"
		      "pages where that pays: 1 (none), 4, 16", "1", 1, ZM_STORE_UNIT_MAX),
		O_FLAG("stats", 0, &r.stats,
		       "a summary on stderr at the end: peak\nheap and resident, compressed, "
		       "faults,\ntime in faults, per process"),
		O_STR("stats-file", 0, &r.stats_file, "FILE",
		      "the same as one JSON document into FILE", NULL),
		O_END,
	};
	const struct opt_cmd cmd = {
		"run", "[OPTIONS] -- CMD [ARGS...]",
		"Run CMD with its heap in compressed regions (LD_PRELOAD of\n"
		RUN_LIB_NAME "); exit with CMD's status.",
		table,
		"Exit status: CMD's; 128+N when a signal N ended it; 127: CMD not found;\n"
		"126: not executable; 2: a bad option (CMD not run); 125: zmem run could\n"
		"not start it.  SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 go on\n"
		"to CMD.  While it runs, zmem list shows it as run:PID, and zmem stats\n"
		"run:PID and zmem ctl run:PID VERB (reclaim, mem-limit, untrack, stop)\n"
		"reach it (\"run\" alone: the only run).  docs/run.md has the details.\n",
	};

	at = split_at(table, argc, argv);
	rc = opt_parse(&cmd, at, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (at < argc && !strcmp(argv[at], "--"))
		at++;
	if (at >= argc)
		return cli_usage("run", "a command to run is required: zmem run [OPTIONS] -- CMD "
				 "[ARGS...]");
	r.argv = argv + at;
	join_words(&r);
	rc = check_options(&r);
	if (rc)
		return rc;
	r.started_ns = cli_now_ns();
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) || prepare(&r)) {
		cleanup(&r);
		return RUN_EXIT_FAIL;
	}
	/* the signals wait while CMD starts: child_pid is set first */
	sigemptyset(&blocked);
	for (size_t i = 0; i < NFORWARDED; i++)
		sigaddset(&blocked, forwarded[i]);
	sigaddset(&blocked, SIGCHLD);
	sigprocmask(SIG_BLOCK, &blocked, NULL);
	set_signals(true);
	rc = start(&r, &blocked);
	child_pid = r.child;
	sigprocmask(SIG_UNBLOCK, &blocked, NULL);
	if (rc) {
		cleanup(&r);
		return rc;
	}
	loop(&r);
	child_pid = 0;
	/* the last numbers: processes publish them as they exit */
	if (r.stats)
		report_text(&r, stderr);
	if (r.stats_out) {
		report_json(&r, r.stats_out);
		if (fclose(r.stats_out))
			fprintf(stderr, "zmem run: --stats-file %s: %s\n", r.stats_file,
				strerror(errno));
	}
	cleanup(&r);
	return exit_status(&r);
}

/* ---- naming a run ------------------------------------------------------ */

/* The registry entry at path: a run's ("run:PID" first) whose process is
 * alive: its control socket into buf, true. */
static bool read_entry(const char *path, long pid, char *buf, size_t n)
{
	char uri[4200] = "", ctl[4200] = "";
	FILE *f;

	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(uri, sizeof(uri), f) || !fgets(ctl, sizeof(ctl), f))
		ctl[0] = 0;
	fclose(f);
	ctl[strcspn(ctl, "\n")] = 0;
	if (strncmp(uri, "run:", 4) || !ctl[0])
		return false;
	snprintf(buf, n, "%s", ctl);
	return true;
}

int run_target(const char *cmd, const char *arg, char *buf, size_t n)
{
	char dir[4096], path[4400], first[4200] = "";
	unsigned found = 0;
	struct dirent *e;
	DIR *d;
	long pid;
	char *end;

	if (serve_registry_dir(dir, sizeof(dir), false) || !(d = opendir(dir))) {
		fprintf(stderr, "zmem %s: no zmem run is registered (%s)\n", cmd, dir);
		return -1;
	}
	if (arg[3] == ':') {
		pid = strtol(arg + 4, &end, 10);
		closedir(d);
		snprintf(path, sizeof(path), "%s/%ld", dir, pid);
		if (pid <= 0 || *end || !read_entry(path, pid, buf, n)) {
			fprintf(stderr, "zmem %s: %s: no such run (zmem list shows them)\n", cmd,
				arg);
			return -1;
		}
		return 0;
	}
	while ((e = readdir(d))) {
		pid = strtol(e->d_name, &end, 10);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (pid > 0 && !*end && read_entry(path, pid, buf, n) && !found++)
			snprintf(first, sizeof(first), "%s", buf);
	}
	closedir(d);
	if (found == 1) {
		snprintf(buf, n, "%s", first);
		return 0;
	}
	if (found)
		fprintf(stderr, "zmem %s: %u runs are running: name one, run:PID (zmem list)\n",
			cmd, found);
	else
		fprintf(stderr, "zmem %s: no zmem run is running (zmem list)\n", cmd);
	return -1;
}

int run_ctl_line(const char *verb, const char *arg, char *line, size_t n)
{
	uint64_t v = 0, pct;

	if (!strcmp(verb, "reclaim")) {
		if (arg && (cli_size(arg, &v) || !v))
			return cli_usage("ctl", "reclaim takes a size (64M, 1G; none: all it can), "
					 "not '%s'", arg);
		snprintf(line, n, arg ? "reclaim %llu" : "reclaim", (unsigned long long)v);
	} else if (!strcmp(verb, "mem-limit")) {
		if (arg && !parse_pct(arg, &pct))
			snprintf(line, n, "mem-limit %s", arg);
		else if (arg && (!strcmp(arg, "none") || !cli_size(arg, &v)))
			snprintf(line, n, "mem-limit %llu", (unsigned long long)v);
		else
			return cli_usage("ctl", "mem-limit takes a size (512M, 1G), a share of the "
					 "heap seen (25%%), 0 or none, not '%s'", arg ? arg : "");
	} else if (arg) {
		return cli_usage("ctl", "%s takes no argument, not '%s'", verb, arg);
	} else {
		/* unknown verbs go too: the run names the ones it knows */
		snprintf(line, n, "%.100s", verb);
	}
	return 0;
}
