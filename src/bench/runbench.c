/*
 * zmem runbench: unmodified programs under `zmem run` against the kernel's
 * own compressed swap, side by side in one run.
 *
 * The programs (bench/run/, built or copied beside the zmem binary):
 *
 *   python   python3 dict.py N: a dict of strings
 *   node     node objects.js N: an array of objects
 *   c        arrays MIB: large malloc'ed arrays, freed and allocated again
 *
 * Each prints a checksum of what it built.  For each program, the sides:
 *
 *   plain         run as is, no limit: wall time and peak RSS (wait4's
 *                 ru_maxrss); L = a quarter of that peak (--fraction)
 *   zmem run      zmem run --resident L --stats-file F -- PROG: peak
 *                 resident, compressed and metadata bytes from F
 *   kernel zram   as root, PROG in a memory cgroup limited to L with a
 *                 zram device of its own as the swap in use: the cgroup's
 *                 peak usage, zram's mem_used_max
 *   kernel zswap  the same with a swap file and zswap on, where the
 *                 kernel has zswap
 *
 * Total memory: plain, the peak RSS; zmem run, peak resident + pool +
 * metadata; zram, the cgroup's peak + zram's mem_used_max; zswap, the
 * cgroup's peak, + zswap's pool at most (sampled) with cgroup v1, which
 * does not charge that pool to the cgroup (v2 does).  Every side's output must equal the plain run's.
 *
 * A side that cannot run here (no root or no zram for the kernel's; no
 * `zmem run` or no userfaultfd for zmem's; a program not installed) is
 * reported as n/a with the reason.  A kernel side killed by the cgroup's
 * out-of-memory killer is reported as such (a result: the kernel could
 * not run the program in L).  Exit status: 0; 1 if a run failed otherwise
 * or an output differed from the plain run's; 2 usage; 77 if neither zmem
 * run nor the kernel's sides can run here (only plain runs: nothing to
 * compare; tests skip on it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmem/region.h>
#include "bench/bench.h"
#include "bench/benchmarks.h"
#include "bench/kswap.h"
#include "tool/check.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "tool/plot.h"

#define EXIT_SKIP 77
#define MIB 1048576.0
#define PAGE 4096
#define MIN_LIMIT ((uint64_t)16 << 20)  /* a cgroup much smaller cannot hold an
					   interpreter's text and working set: the
					   kernel's out-of-memory killer, at once */
#define SAMPLE_NS 10000000ull           /* zswap's pool, sampled every 10 ms */
#define OUT_MAX 4096                    /* a program's output kept: its checksum line */

enum prog { P_PYTHON, P_NODE, P_C, NPROGS };
enum side { S_PLAIN, S_ZMEM, S_ZRAM, S_ZSWAP, NSIDES };

static const char *const side_names[NSIDES] = { "plain", "zmem run", "kernel zram",
						"kernel zswap" };
static const char *const side_keys[NSIDES] = { "plain", "zmem-run", "kernel-zram",
					       "kernel-zswap" };

struct progdef {
	const char *name;
	const char *interp;    /* NULL: the file is the program */
	const char *file;      /* in the programs' folder */
	const char *size, *quick;  /* its argument: default, --quick */
	const char *what;
};

/* Sizes: a plain run of 3..10 s peaking at 400..500 MiB on a 2-core
 * machine; --quick: well under a second and a few tens of MiB. */
static const struct progdef progs[NPROGS] = {
	{ "python", "python3", "dict.py", "1000000", "40000", "a dict of strings" },
	{ "node", "node", "objects.js", "1000000", "40000", "an array of objects" },
	{ "c", NULL, "arrays", "384", "64", "large malloc arrays, freed and reused" },
};

struct opts {
	const char *codec, *dir, *prog_dir, *plot, *fraction_s;
	double fraction;
	bool progs[NPROGS], sides[NSIDES];
	int json, quick, wide;
};

/* One program on one side. */
struct row {
	bool ran;                  /* measured (a failed run too: failed set) */
	bool failed;               /* exit status not 0, or killed */
	bool output_equal;
	char note[200];            /* why it did not run, or what went wrong */
	int status;                /* the shell's: 128+N for signal N */
	double time_s;
	uint64_t limit;            /* L (not plain) */
	uint64_t rss_peak;         /* ru_maxrss of the process (tree) */
	uint64_t peak_resident;    /* plain: rss; zmem: the stats'; kernel: cgroup peak */
	uint64_t compressed;       /* zmem: pool; zram: mem_used_max; zswap: pool peak */
	uint64_t stored;           /* zmem: the compressed data (stored bytes) */
	uint64_t meta;             /* zmem's metadata */
	uint64_t total;
	char out[OUT_MAX];
	size_t out_len;
};

static struct row rows[NPROGS][NSIDES];

/* ---- running a program ------------------------------------------------ */

struct spawn {
	char *const *argv;
	const struct kcgroup *cg;  /* NULL: none */
	const char *out, *err;     /* files for its stdout, stderr */
	bool sample_zswap;         /* sample /proc/meminfo's Zswap meanwhile */
	/* results */
	int status;                /* as a shell: 128+N for a signal */
	double time_s;
	uint64_t maxrss;           /* bytes */
	uint64_t zswap_max;
};

static int spawn_run(struct spawn *sp, char *why, size_t wl)
{
	int go[2], st = 0;
	struct rusage ru;
	uint64_t t0;
	pid_t pid, w;
	char c = 1;

	if (pipe(go)) {
		snprintf(why, wl, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(why, wl, "fork: %s", strerror(errno));
		close(go[0]), close(go[1]);
		return -1;
	}
	if (!pid) {
		int o = open(sp->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int e = open(sp->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		kswap_signals_child();
		signal(SIGPIPE, SIG_DFL);
		close(go[1]);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		/* started once the parent has put it where it belongs */
		if (read(go[0], &c, 1) != 1)
			_exit(126);
		close(go[0]);
		execvp(sp->argv[0], sp->argv);
		dprintf(2, "%s: %s\n", sp->argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(go[0]);
	if (sp->cg && kcg_enter(sp->cg, pid)) {
		snprintf(why, wl, "moving the program into %.120s failed", sp->cg->dir);
		kill(pid, SIGKILL);
	}
	t0 = cli_now_ns();
	(void)!write(go[1], &c, 1);
	close(go[1]);
	sp->zswap_max = 0;
	for (;;) {
		w = wait4(pid, &st, sp->sample_zswap ? WNOHANG : 0, &ru);
		if (w == pid || (w < 0 && errno != EINTR))
			break;
		if (w == 0) {
			struct timespec ts = { 0, (long)SAMPLE_NS };
			uint64_t z = kswap_meminfo("Zswap");

			if (z > sp->zswap_max)
				sp->zswap_max = z;
			nanosleep(&ts, NULL);
		}
	}
	sp->time_s = (double)(cli_now_ns() - t0) / 1e9;
	if (w != pid) {
		snprintf(why, wl, "wait4: %s", strerror(errno));
		return -1;
	}
	sp->maxrss = (uint64_t)ru.ru_maxrss * 1024;
	sp->status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
	return 0;
}

/* The first n bytes of a file (NUL-terminated); its length or -1. */
static ssize_t slurp(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got = 0, k;

	if (fd < 0)
		return -1;
	while ((size_t)got < n - 1 && (k = read(fd, buf + got, n - 1 - (size_t)got)) > 0)
		got += k;
	close(fd);
	buf[got] = 0;
	return got;
}

/* ---- zmem run's stats file ----------------------------------------------- */

/* The value of the first of keys found in doc, summed over every
 * occurrence (one per process), or taken once from the object after
 * "totals" if the document has one; 0 if none is there. */
static uint64_t stats_get(const char *doc, const char *const *keys)
{
	const char *tot = strstr(doc, "\"total\"");

	for (; *keys; keys++) {
		char pat[64];
		const char *p = tot ? tot : doc;
		uint64_t sum = 0;
		bool found = false;
		size_t pl;

		pl = (size_t)snprintf(pat, sizeof(pat), "\"%s\"", *keys);
		while ((p = strstr(p, pat))) {
			p += pl;
			while (*p == ' ' || *p == ':')
				p++;
			if (*p >= '0' && *p <= '9') {
				sum += strtoull(p, NULL, 10);
				found = true;
				if (tot)
					break;
			}
		}
		if (found)
			return sum;
	}
	return 0;
}

static void zmem_stats(const char *path, struct row *w)
{
	static const char *const resident[] = { "peak_resident_bytes", "resident_max_bytes",
						"resident_peak_bytes", NULL };
	static const char *const pool[] = { "pool_max_bytes", "pool_bytes", NULL };
	static const char *const stored[] = { "stored_max_bytes", "stored_bytes",
					      "compressed_bytes", NULL };
	static const char *const meta[] = { "meta_max_bytes", "meta_bytes", NULL };
	char *doc = malloc(1 << 20);

	if (!doc)
		return;
	if (slurp(path, doc, 1 << 20) > 0) {
		w->peak_resident = stats_get(doc, resident);
		w->compressed = stats_get(doc, pool);
		w->stored = stats_get(doc, stored);
		w->meta = stats_get(doc, meta);
	}
	free(doc);
	if (!w->peak_resident) {
		/* no figures: the process's own peak (pool and metadata in it) */
		w->peak_resident = w->rss_peak;
		snprintf(w->note, sizeof(w->note), "no figures in the stats file: RSS");
	}
	w->total = w->peak_resident + w->compressed + w->meta;
	/* the process's own peak holds all of it at one moment, and what is
	 * not in the region (code, the C library's heap): the machine's
	 * cost, as the cgroup's peak is the kernel sides' */
	if (w->rss_peak > w->total)
		w->total = w->rss_peak;
}

/* ---- the sides ----------------------------------------------------------- */

struct env {
	const struct opts *o;
	char tmp[256];                 /* our scratch folder */
	char self[512];                /* this zmem binary */
	char python[512];              /* python3's own binary (not a shim) */
	bool zmem_ok, kernel_ok;
	char zmem_why[160], kernel_why[160];
};

static void set_note(struct row *w, const char *fmt, const char *arg)
{
	snprintf(w->note, sizeof(w->note), fmt, arg);
}

/* argv of program p: [interp] path size, into v (strings in buf) */
static int prog_argv(const struct env *e, enum prog p, char **v, char (*buf)[600])
{
	const struct progdef *d = &progs[p];
	int n = 0;

	snprintf(buf[0], sizeof(buf[0]), "%s/%s", e->o->prog_dir, d->file);
	if (access(buf[0], d->interp ? R_OK : X_OK))
		return -1;
	if (d->interp)
		v[n++] = (char *)(p == P_PYTHON && e->python[0] ? e->python : d->interp);
	/* node sizes its heap from the cgroup's limit and aborts past it:
	 * the same fixed ceiling on every side */
	if (p == P_NODE)
		v[n++] = (char *)"--max-old-space-size=4096";
	v[n++] = buf[0];
	v[n++] = (char *)(e->o->quick ? d->quick : d->size);
	v[n] = NULL;
	return n;
}

/* The program's stderr's first line, for a note. */
static void first_err_line(const char *path, char *out, size_t len)
{
	char buf[256];

	if (slurp(path, buf, sizeof(buf)) <= 0) {
		out[0] = 0;
		return;
	}
	buf[strcspn(buf, "\n")] = 0;
	snprintf(out, len, ": %.100s", buf);
}

static void check_output(const struct env *e, enum prog p, enum side s, struct spawn *sp,
			 struct row *w)
{
	char err[160];
	ssize_t n = slurp(sp->out, w->out, sizeof(w->out));

	w->out_len = n > 0 ? (size_t)n : 0;
	w->status = sp->status;
	w->time_s = sp->time_s;
	w->rss_peak = sp->maxrss;
	w->ran = true;
	if (sp->status) {
		w->failed = true;
		first_err_line(sp->err, err, sizeof(err));
		snprintf(w->note, sizeof(w->note), "%s %d%s%.100s",
			 sp->status > 128 ? "killed by signal" : "exit status",
			 sp->status > 128 ? sp->status - 128 : sp->status,
			 sp->status == 128 + SIGKILL && s >= S_ZRAM ?
			 " (the cgroup's out-of-memory killer?)" : "", err);
	}
	if (s == S_PLAIN) {
		w->output_equal = !sp->status;
		return;
	}
	w->output_equal = !sp->status && rows[p][S_PLAIN].ran && !rows[p][S_PLAIN].failed &&
			  w->out_len == rows[p][S_PLAIN].out_len &&
			  !memcmp(w->out, rows[p][S_PLAIN].out, w->out_len);
	(void)e;
}

static void files(const struct env *e, enum prog p, enum side s, char *out, char *err,
		  char *stats)
{
	snprintf(out, 320, "%.200s/%s.%s.out", e->tmp, progs[p].name, side_keys[s]);
	snprintf(err, 320, "%.200s/%s.%s.err", e->tmp, progs[p].name, side_keys[s]);
	snprintf(stats, 320, "%.200s/%s.%s.json", e->tmp, progs[p].name, side_keys[s]);
}

static int run_plain(const struct env *e, enum prog p, struct row *w)
{
	char *argv[10], buf[1][600], out[320], err[320], stats[320], why[200] = "";
	struct spawn sp = { .argv = argv, .out = out, .err = err };

	files(e, p, S_PLAIN, out, err, stats);
	if (prog_argv(e, p, argv, buf) < 0) {
		set_note(w, "n/a: %.160s not built or copied (make)", buf[0]);
		return 0;
	}
	if (spawn_run(&sp, why, sizeof(why))) {
		set_note(w, "n/a: %.150s", why);
		return 0;
	}
	check_output(e, p, S_PLAIN, &sp, w);
	w->peak_resident = w->total = w->rss_peak;
	return 0;
}

static int run_zmem(const struct env *e, enum prog p, uint64_t limit, struct row *w)
{
	char *argv[16], buf[1][600], out[320], err[320], stats[320], why[200] = "", lim[32];
	char *pa[10];
	struct spawn sp = { .argv = argv, .out = out, .err = err };
	int n = 0, k;

	w->limit = limit;
	if (!e->zmem_ok) {
		set_note(w, "n/a: %.150s", e->zmem_why);
		return 0;
	}
	files(e, p, S_ZMEM, out, err, stats);
	if (prog_argv(e, p, pa, buf) < 0) {
		set_note(w, "n/a: %.160s not built or copied (make)", buf[0]);
		return 0;
	}
	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)limit);
	argv[n++] = (char *)e->self;
	argv[n++] = (char *)"run";
	argv[n++] = (char *)"--resident";
	argv[n++] = lim;
	argv[n++] = (char *)"--codec";
	argv[n++] = (char *)e->o->codec;
	argv[n++] = (char *)"--stats-file";
	argv[n++] = stats;
	argv[n++] = (char *)"--";
	for (k = 0; pa[k]; k++)
		argv[n++] = pa[k];
	argv[n] = NULL;
	unlink(stats);
	if (spawn_run(&sp, why, sizeof(why))) {
		set_note(w, "n/a: %.150s", why);
		return 0;
	}
	check_output(e, p, S_ZMEM, &sp, w);
	if (!w->failed)
		zmem_stats(stats, w);
	return 0;
}

static int run_kernel(const struct env *e, enum prog p, enum side s, uint64_t limit,
		      uint64_t swap_bytes, struct row *w)
{
	char *argv[10], buf[1][600], out[320], err[320], stats[320], why[200] = "";
	struct spawn sp = { .argv = argv, .out = out, .err = err, .sample_zswap = s == S_ZSWAP };
	struct sigaction old[KSWAP_NSTOP];
	struct kcgroup cg;
	struct kswap k;
	uint64_t mm[5];

	w->limit = limit;
	if (!e->kernel_ok) {
		set_note(w, "n/a: %.150s", e->kernel_why);
		return 0;
	}
	files(e, p, s, out, err, stats);
	if (prog_argv(e, p, argv, buf) < 0) {
		set_note(w, "n/a: %.160s not built or copied (make)", buf[0]);
		return 0;
	}
	kswap_signals_hold(old);
	if (kswap_up(&k, s == S_ZRAM ? KSWAP_ZRAM : KSWAP_ZSWAP, e->o->codec, e->o->dir,
		     swap_bytes, why, sizeof(why)) ||
	    kcg_create(&cg, "zmem-runbench", limit, why, sizeof(why))) {
		kswap_down(&k);
		kswap_signals_release(old);
		set_note(w, "n/a: %.150s", why);
		return 0;
	}
	sp.cg = &cg;
	if (spawn_run(&sp, why, sizeof(why))) {
		set_note(w, "n/a: %.150s", why);
	} else {
		check_output(e, p, s, &sp, w);
		w->peak_resident = kcg_peak(&cg);
		w->total = w->peak_resident;
		if (s == S_ZRAM && !kswap_zram_mm(&k, mm, 5)) {
			w->compressed = mm[4];   /* mem_used_max */
			w->total += mm[4];
		} else if (s == S_ZSWAP) {
			/* charged to the cgroup in v2 only: in its peak there */
			w->compressed = sp.zswap_max;
			if (!cg.v2)
				w->total += sp.zswap_max;
		}
	}
	kcg_destroy(&cg);
	kswap_down(&k);
	kswap_signals_release(old);
	return 0;
}

/* ---- what can run here ------------------------------------------------ */

/* Does this zmem have a run command, and this process userfaultfd? */
static void probe_zmem(struct env *e)
{
	/* a program started through it, not only its --help: the library
	 * must load into a program here (in a sanitizer's build it cannot:
	 * the sanitizer's runtime must come first in a program) */
	char *argv[] = { e->self, (char *)"run", (char *)"-q", (char *)"--", (char *)"true", NULL };
	char out[320], err[320], why[200];
	struct spawn sp = { .argv = argv, .out = out, .err = err };
	struct zm_region_config cfg = { .size = (size_t)1 << 20,
					.resident_limit = ZM_REGION_MIN_RESIDENT * PAGE };
	struct zm_region *r;
	int rc;

	snprintf(out, sizeof(out), "%s/probe.out", e->tmp);
	snprintf(err, sizeof(err), "%s/probe.err", e->tmp);
	if (spawn_run(&sp, why, sizeof(why)) || sp.status) {
		snprintf(e->zmem_why, sizeof(e->zmem_why),
			 "zmem run does not start a program here (see %.100s)", err);
		return;
	}
	rc = zm_region_create(&cfg, &r);
	if (rc) {
		snprintf(e->zmem_why, sizeof(e->zmem_why), "no userfaultfd here (%s)",
			 strerror(-rc));
		return;
	}
	zm_region_destroy(r);
	e->zmem_ok = true;
}

static void probe_kernel(struct env *e)
{
	if (geteuid() != 0)
		snprintf(e->kernel_why, sizeof(e->kernel_why),
			 "needs root (a memory cgroup and swapon)");
	else if (access("/sys/class/zram-control/hot_add", F_OK))
		snprintf(e->kernel_why, sizeof(e->kernel_why),
			 "no zram here (modprobe zram)");
	else
		e->kernel_ok = true;
}

/* python3's own binary: a shim (pyenv) in front of it would be timed and
 * limited too. */
static void find_python(struct env *e)
{
	FILE *f = popen("python3 -c 'import sys; print(sys.executable)' 2>/dev/null", "r");

	e->python[0] = 0;
	if (!f)
		return;
	if (!fgets(e->python, sizeof(e->python), f))
		e->python[0] = 0;
	e->python[strcspn(e->python, "\n")] = 0;
	pclose(f);
}

static bool have_prog(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* ---- output ---------------------------------------------------------- */

static double ratio(double a, double b)
{
	return b > 0 ? a / b : -1;
}

static void print_ratio(double v)
{
	if (v >= 0)
		printf(" %7.2f", v);
	else
		printf(" %7s", "-");
}

static void print_table(const struct env *e)
{
	const struct opts *o = e->o;

	printf("zmem runbench: limit L = %.0f%% of each program's plain peak RSS;\ncodec %s%s\n\n",
	       100 * o->fraction, o->codec, o->quick ? "; --quick sizes" : "");
	/* 80 columns with "DIFFERENT"; --wide adds time, peak, comp, RSS (113) */
	printf("%-7s %-12s %7s", "program", "side", "limit");
	if (o->wide)
		printf(" %8s %8s %8s", "time s", "peak MiB", "comp MiB");
	printf(" %8s", "totl MiB");
	if (o->wide)
		printf(" %8s", "RSS MiB");
	printf(" %7s %7s %7s %7s  %s\n", "t/plain", "m/plain", "zm/k t", "zm/k m", "output");
	for (int p = 0; p < NPROGS; p++) {
		if (!o->progs[p])
			continue;
		for (int s = 0; s < NSIDES; s++) {
			const struct row *w = &rows[p][s], *pl = &rows[p][S_PLAIN];
			const struct row *z = &rows[p][S_ZMEM];
			char lim[16] = "-";

			if (!o->sides[s])
				continue;
			if (w->limit)
				snprintf(lim, sizeof(lim), "%.1fM", (double)w->limit / MIB);
			printf("%-7s %-12s %7s", progs[p].name, side_names[s], lim);
			if (!w->ran) {
				printf("  %s\n", w->note);
				continue;
			}
			if (o->wide)
				printf(" %8.2f %8.1f %8.1f", w->time_s, w->peak_resident / MIB,
				       w->compressed / MIB);
			printf(" %8.1f", w->total / MIB);
			if (o->wide)
				printf(" %8.1f", w->rss_peak / MIB);
			print_ratio(s != S_PLAIN && pl->ran ? ratio(w->time_s, pl->time_s) : -1);
			print_ratio(s != S_PLAIN && pl->ran ?
				    ratio((double)w->total, (double)pl->total) : -1);
			print_ratio(s >= S_ZRAM && z->ran && !z->failed ?
				    ratio(z->time_s, w->time_s) : -1);
			print_ratio(s >= S_ZRAM && z->ran && !z->failed ?
				    ratio((double)z->total, (double)w->total) : -1);
			printf("  %s%s%s\n", w->failed ? "failed" : s == S_PLAIN ? "-" :
			       w->output_equal ? "same" : "DIFFERENT",
			       w->note[0] ? "  " : "", w->note);
		}
	}
	printf("\nlimit: L, the resident limit (zmem run --resident) or the cgroup's limit;\n"
	       "peak: resident memory at most (plain: RSS; zmem run: its resident heap; the\n"
	       "kernel: the cgroup's peak usage); comp: compressed memory (zmem run: its pool;\n"
	       "zram: mem_used_max; zswap: its pool's peak); totl: peak + comp (+ zmem's\n"
	       "metadata; zswap with cgroup v2: the cgroup's peak, the pool charged to it);\n"
	       "RSS: the process's peak RSS; t/plain, m/plain: time and total against plain;\n"
	       "zm/k t, zm/k m: zmem run's time and total against this kernel side's; output:\n"
	       "the same bytes as plain's (failed: the run did not end with status 0).\n");
	if (!o->wide)
		printf("--wide adds the time, peak, comp and RSS columns.\n");
}

static void print_json(const struct env *e)
{
	const struct opts *o = e->o;
	struct json j;

	json_begin(&j, stdout, "runbench");
	json_str(&j, "codec", o->codec);
	json_fixed(&j, "fraction", o->fraction, 3);
	json_bool(&j, "quick", o->quick);
	json_str(&j, "plot", o->plot);
	json_array(&j, "programs");
	for (int p = 0; p < NPROGS; p++) {
		if (!o->progs[p])
			continue;
		json_object(&j, NULL);
		json_str(&j, "name", progs[p].name);
		json_str(&j, "what", progs[p].what);
		json_str(&j, "file", progs[p].file);
		json_str(&j, "arg", o->quick ? progs[p].quick : progs[p].size);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_array(&j, "results");
	for (int p = 0; p < NPROGS; p++)
		for (int s = 0; s < NSIDES; s++) {
			const struct row *w = &rows[p][s], *pl = &rows[p][S_PLAIN];
			const struct row *z = &rows[p][S_ZMEM];

			if (!o->progs[p] || !o->sides[s])
				continue;
			json_object(&j, NULL);
			json_str(&j, "program", progs[p].name);
			json_str(&j, "side", side_keys[s]);
			json_bool(&j, "ran", w->ran);
			if (w->note[0])
				json_str(&j, "note", w->note);
			if (s != S_PLAIN)
				json_uint(&j, "limit_bytes", w->limit);
			if (!w->ran) {
				json_object_end(&j);
				continue;
			}
			json_int(&j, "exit_status", w->status);
			json_fixed(&j, "time_s", w->time_s, 3);
			json_uint(&j, "peak_resident_bytes", w->peak_resident);
			json_uint(&j, "compressed_bytes", w->compressed);
			if (s == S_ZMEM) {
				json_uint(&j, "stored_bytes", w->stored);
				json_uint(&j, "meta_bytes", w->meta);
			}
			if (s >= S_ZRAM)
				json_uint(&j, "cgroup_peak_bytes", w->peak_resident);
			if (s == S_ZRAM)
				json_uint(&j, "zram_mem_used_max_bytes", w->compressed);
			json_uint(&j, "total_bytes", w->total);
			json_uint(&j, "rss_peak_bytes", w->rss_peak);
			if (s != S_PLAIN && pl->ran && !pl->failed) {
				json_fixed(&j, "time_vs_plain", ratio(w->time_s, pl->time_s), 3);
				json_fixed(&j, "total_vs_plain",
					   ratio((double)w->total, (double)pl->total), 3);
			}
			if (s >= S_ZRAM && z->ran && !z->failed && !w->failed) {
				json_fixed(&j, "zmem_time_vs_this", ratio(z->time_s, w->time_s), 3);
				json_fixed(&j, "zmem_total_vs_this",
					   ratio((double)z->total, (double)w->total), 3);
			}
			json_bool(&j, "output_equal", w->output_equal);
			json_str(&j, "output", w->out_len ? w->out : "");
			json_object_end(&j);
		}
	json_array_end(&j);
	json_end(&j);
}

/* Time, peak resident and total memory by program, a marker per side;
 * the programs are categories, not joined. */
static int write_plot(const struct env *e)
{
	const struct opts *o = e->o;
	double y[3][NSIDES][NPROGS];
	const char *x[NPROGS], *names[NSIDES];
	struct plot_series sr[NSIDES];
	size_t nx = 0, ns = 0;
	int sides[NSIDES], px[NPROGS];
	char title[160];
	FILE *f;

	for (int p = 0; p < NPROGS; p++)
		if (o->progs[p])
			px[nx] = p, x[nx++] = progs[p].name;
	for (int s = 0; s < NSIDES; s++) {
		bool any = false;

		for (size_t i = 0; i < nx; i++)
			any |= rows[px[i]][s].ran && !rows[px[i]][s].failed;
		if (any)
			sides[ns] = s, names[ns++] = side_names[s];
	}
	for (size_t k = 0; k < ns; k++)
		for (size_t i = 0; i < nx; i++) {
			const struct row *w = &rows[px[i]][sides[k]];
			bool ok = w->ran && !w->failed;

			y[0][k][i] = ok ? w->time_s : -1;
			y[1][k][i] = ok ? w->peak_resident / MIB : -1;
			y[2][k][i] = ok ? w->total / MIB : -1;
		}
	snprintf(title, sizeof(title), "zmem runbench: limit %.0f%% of the plain peak, %s",
		 100 * o->fraction, o->codec);
	f = plot_begin(e->o->plot, 70 + 3 * (260 + 75) + 20, title);
	if (!f)
		return -errno;
	plot_legend(f, 50, names, ns);
	for (int k = 0; k < 3; k++) {
		static const struct plot_axes ax[3] = {
			{ .title = "wall time", .xtitle = "program", .ytitle = "time (s)",
			  .dots = 1 },
			{ .title = "peak resident memory", .xtitle = "program",
			  .ytitle = "memory (MiB)", .dots = 1 },
			{ .title = "total memory (resident + compressed + metadata)",
			  .xtitle = "program", .ytitle = "memory (MiB)", .dots = 1 },
		};

		for (size_t i = 0; i < ns; i++)
			sr[i] = (struct plot_series){ names[i], y[k][i] };
		plot_panel_axes(f, 100 + k * 335, 260, &ax[k], x, nx, sr, ns);
	}
	return plot_end(f);
}

/* ---- options ---------------------------------------------------------- */

static int parse_names(const char *s, const char *const *names, int n, bool *on,
		       const char *what)
{
	char buf[128], *save, *tok;

	if (strlen(s) >= sizeof(buf))
		return cli_usage("runbench", "--%s: too long", what);
	strcpy(buf, s);
	memset(on, 0, sizeof(bool) * (size_t)n);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k;

		if (!strcmp(tok, "all")) {
			for (k = 0; k < n; k++)
				on[k] = true;
			continue;
		}
		for (k = 0; k < n && strcmp(tok, names[k]); k++)
			;
		if (k == n)
			return cli_usage("runbench", "unknown %s '%s'", what, tok);
		on[k] = true;
	}
	return 0;
}

static int parse(int argc, char **argv, struct opts *o, char *prog_dir, size_t pdl)
{
	static const char *const pnames[NPROGS] = { "python", "node", "c" };
	const char *tmp = getenv("TMPDIR"), *programs = "all", *sides = "all";
	char exe[512];
	ssize_t n;
	int rc;
	const struct opt table[] = {
		O_STR("programs", 'p', &programs, "LIST", "of python,node,c", "all"),
		O_STR("sides", 's', &sides, "LIST",
		      "of zmem,zram,zswap (plain always runs)", "all"),
		O_DOUBLE("fraction", 'f', &o->fraction, "F",
			 "L, the limit: F x the plain run's peak RSS", "0.25", 0, 1, .open = OPEN),
		O_STR("codec", 'c', &o->codec, "NAME", "zmem run's and the kernel's codec", "lz4"),
		O_FLAG("quick", 'Q', &o->quick, "small sizes: well under a second a run"),
		O_STR("prog-dir", 'd', &o->prog_dir, "DIR",
		      "where the programs are (built by make)", "bench/run beside zmem"),
		O_STR("dir", 'D', &o->dir, "DIR", "where zswap's swap file goes (removed after)",
		      "$TMPDIR or /var/tmp"),
		O_STR("plot", 'P', &o->plot, "FILE.svg", "time, peak and total memory by program",
		      "none"),
		O_FLAG("json", 'j', &o->json, "one JSON document on stdout instead of the table"),
		O_FLAG("wide", 0, &o->wide, "every column of the table (about 115)"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"runbench", "[OPTIONS]",
		"Programs (Python, Node, C) plain, under zmem run --resident L, and in a\n"
		"memory cgroup limited to L with the kernel's zram or zswap as swap (root):\n"
		"wall time, peak resident and total memory, outputs compared.",
		table,
		"Exit status 1: a run failed or its output differs from the plain run's;\n"
		"77: neither zmem run nor the kernel's sides can run here.\n",
	};

	memset(o, 0, sizeof(*o));
	o->codec = "lz4";
	o->fraction = 0.25;
	o->dir = tmp && *tmp ? tmp : "/var/tmp";
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc;
	if (parse_names(programs, pnames, NPROGS, o->progs, "program"))
		return CLI_USAGE;
	{
		static const char *const snames[NSIDES] = { "plain", "zmem", "zram", "zswap" };

		if (parse_names(sides, snames, NSIDES, o->sides, "side"))
			return CLI_USAGE;
	}
	o->sides[S_PLAIN] = true;
	/* a --prog-dir given must be there; without it, each program missing
	 * from the build's is named with "make" as it runs */
	if (o->prog_dir && cli_check_input("runbench", "--prog-dir", o->prog_dir))
		return CLI_FAIL;
	if (!o->prog_dir) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n < 0)
			return cli_fail("runbench", "/proc/self/exe: %s", strerror(errno));
		exe[n] = 0;
		*strrchr(exe, '/') = 0;
		snprintf(prog_dir, pdl, "%s/bench/run", exe);
		o->prog_dir = prog_dir;
	}
	return 0;
}

static void remove_tmp(const char *dir)
{
	char cmd[300];

	if (snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) < (int)sizeof(cmd))
		(void)!system(cmd);
}

int cmd_runbench(int argc, char **argv)
{
	static char prog_dir[600];
	static struct env e;
	const char *tmpdir = getenv("TMPDIR");
	struct opts o;
	int status, bad = 0;
	ssize_t n;

	status = parse(argc, argv, &o, prog_dir, sizeof(prog_dir));
	if (status)
		return status < 0 ? CLI_OK : status;
	/* what cannot end well fails now, not after the run (check.h) */
	if (cli_check_dir("runbench", "--dir", o.dir))
		return CLI_FAIL;
	if ((status = cli_check_plot("runbench", o.plot, o.json)))
		return status;
	memset(&e, 0, sizeof(e));
	e.o = &o;
	n = readlink("/proc/self/exe", e.self, sizeof(e.self) - 1);
	if (n < 0)
		return cli_fail("runbench", "/proc/self/exe: %s", strerror(errno));
	e.self[n] = 0;
	snprintf(e.tmp, sizeof(e.tmp), "%.200s/zmem-runbench.XXXXXX",
		 tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!mkdtemp(e.tmp))
		return cli_fail("runbench", "mkdtemp %s: %s", e.tmp, strerror(errno));
	setenv("PYTHONHASHSEED", "0", 1);
	probe_zmem(&e);
	probe_kernel(&e);
	if (!e.zmem_ok && o.sides[S_ZMEM])
		cli_notice("zmem run: skipped: %s", e.zmem_why);
	if (!e.kernel_ok && (o.sides[S_ZRAM] || o.sides[S_ZSWAP]))
		cli_notice("the kernel's sides: skipped: %s", e.kernel_why);
	if (!(e.zmem_ok && o.sides[S_ZMEM]) &&
	    !(e.kernel_ok && (o.sides[S_ZRAM] || o.sides[S_ZSWAP]))) {
		fprintf(stderr, "zmem runbench: neither zmem run (%s) nor the kernel's sides (%s) "
			"can run here: nothing to compare\n", e.zmem_why, e.kernel_why);
		remove_tmp(e.tmp);
		return EXIT_SKIP;
	}
	if (o.progs[P_PYTHON])
		find_python(&e);
	for (int p = 0; p < NPROGS; p++) {
		const char *need = progs[p].interp;
		uint64_t limit, swap;

		if (!o.progs[p])
			continue;
		if (need && !have_prog(need)) {
			for (int s = 0; s < NSIDES; s++)
				set_note(&rows[p][s], "n/a: %s is not installed", need);
			cli_notice("%s: skipped: %s is not installed", progs[p].name, need);
			continue;
		}
		cli_progress("%s: plain", progs[p].name);
		run_plain(&e, p, &rows[p][S_PLAIN]);
		if (!rows[p][S_PLAIN].ran || rows[p][S_PLAIN].failed) {
			cli_progress_done();
			cli_notice("%s: plain run failed: %s", progs[p].name, rows[p][S_PLAIN].note);
			for (int s = S_ZMEM; s < NSIDES; s++)
				set_note(&rows[p][s], "n/a: %s", "no plain run to compare with");
			bad++;
			continue;
		}
		limit = (uint64_t)(o.fraction * (double)rows[p][S_PLAIN].rss_peak) / PAGE * PAGE;
		if (limit < MIN_LIMIT)
			limit = MIN_LIMIT;
		/* twice the peak: slots held by pages in the swap cache too, and
		 * a full swap would end in the cgroup's out-of-memory killer */
		swap = 2 * rows[p][S_PLAIN].rss_peak + ((uint64_t)64 << 20);
		for (int s = S_ZMEM; s < NSIDES; s++) {
			struct row *w = &rows[p][s];

			if (!o.sides[s])
				continue;
			cli_progress("%s: %s, limit %.1f MiB", progs[p].name, side_names[s],
				     (double)limit / MIB);
			if (s == S_ZMEM)
				run_zmem(&e, p, limit, w);
			else
				run_kernel(&e, p, s, limit, swap, w);
			/* the kernel's out-of-memory killer is a result, not a
			 * failure of the benchmark */
			if (w->ran && s >= S_ZRAM && w->status == 128 + SIGKILL)
				continue;
			if (w->ran && (w->failed || !w->output_equal)) {
				cli_progress_done();
				fprintf(stderr, "zmem runbench: %s on %s: %s\n", progs[p].name,
					side_names[s], w->failed ? w->note :
					"the output differs from the plain run's");
				bad++;
			}
		}
	}
	cli_progress_done();
	if (o.json)
		print_json(&e);
	else
		print_table(&e);
	if (o.plot) {
		int rc = write_plot(&e);

		if (rc) {  /* the run asked for a plot it did not get: a failure */
			fprintf(stderr, "zmem runbench: writing %s: %s\n", o.plot, strerror(-rc));
			bad++;
		} else if (!o.json)
			printf("\nplot: %s\n", o.plot);
	}
	remove_tmp(e.tmp);
	return bad ? CLI_FAIL : CLI_OK;
}
