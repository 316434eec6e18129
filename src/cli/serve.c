/*
 * zmem serve: a compressed RAM disk over NBD (src/serve/, docs/serve.md).
 * zmem stats, ctl, stop, list: a running server, through its control
 * socket, the way zram is read and driven through sysfs and zramctl.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/pool.h>
#include "cli/cli.h"
#include "cli/opt.h"
#include "serve/serve.h"

static void serve_usage(FILE *f)
{
	fprintf(f,
		"usage: zmem serve --size SIZE [OPTIONS]\n"
		"A compressed RAM disk over NBD: qemu, nbdcopy, fio, nbdinfo, nbd-client.\n\n"
		"  --size SIZE        size of the disk (4096, 64M, 4G, 1T, ...); required; at\n"
		"                     most %llu pages (2 TiB of 4 KiB pages)\n"
		"  --codec NAME       lz4 (default), zstd[:LEVEL], lzo, none\n"
		"  --allocator NAME   pool backend (default zsmalloc)\n"
		"  --page-size N      the unit compressed, 4096 .. 65536 (default 4096, and\n"
		"                     32768 with zstd); larger pages compress better and\n"
		"                     stream faster, small random writes cost more\n"
		"  --mem-limit SIZE   memory the store may hold; writes beyond get ENOSPC (with\n"
		"                     --backing: pages go to the file to make room)\n"
		"  --read-only        refuse writes (EPERM)\n"
		"  --threads N        worker threads for reads and writes, 0..256 (default:\n"
		"                     CPUs; 0 = each connection's own thread does its requests)\n"
		"  --timeout S        time limit on a handshake, a reply and a stalled\n"
		"                     payload, 1..3600 seconds (default %d)\n"
		"  --socket PATH      Unix socket to listen on (default $XDG_RUNTIME_DIR/zmem.sock,\n"
		"                     else /tmp/zmem-UID.sock); the control socket is PATH.ctl\n"
		"  --port PORT        listen on TCP instead, on 127.0.0.1 unless --bind; the\n"
		"                     control socket is then zmem-tcp-PORT.ctl beside the default\n"
		"  --bind ADDR        TCP address to bind\n"
		"  --control PATH     control socket for zmem stats and ctl\n"
		"  --foreground, -f   stay in the foreground (default: detach once listening,\n"
		"                     printing the URI, pid and control socket on stdout)\n"
		"  --print-uri        print the URI on stdout once listening\n"
		"  --run CMD          captive: serve until the shell command CMD exits, with\n"
		"                     $uri, $nbd and $socket (or $port) set; its exit status\n"
		"  --exit-with-parent stop when the process that started zmem serve exits\n"
		"  --pidfile FILE     write the server's pid there\n"
		"  -v, --verbose      log connections to stderr\n"
		"cold data (zram's writeback and recompression; zmem ctl idle, writeback,\n"
		"recompress drive them by hand):\n"
		"  --backing FILE     backing file for pages written back (created if missing;\n"
		"                     what it held is lost); without --mem-limit only zmem ctl\n"
		"                     writeback fills it\n"
		"  --writeback-limit SIZE  most data ever written to the backing file (zram's\n"
		"                     writeback_limit, counted in pages); then ENOSPC\n"
		"  --recompress CODEC[:LEVEL]  the secondary codec for idle or huge pages\n"
		"                     (zstd, zstd:19, ...)\n"
		"  --idle-after DURATION  automatic tiering: pages not read or written for\n"
		"                     this long are recompressed (--recompress) and are the first\n"
		"                     written back at the memory limit (--backing); 500ms, 30s,\n"
		"                     10m, 1h (a bare number is seconds)\n"
		"  --readback         a read of a page on the file brings it back into memory\n"
		"                     while the memory limit allows\n\n"
		"SIGINT, SIGTERM and SIGHUP stop it: requests in flight are answered first.\n"
		"Socket activation (LISTEN_FDS/LISTEN_PID) is used when present, as in\n"
		"  nbdinfo -- [ zmem serve --size 1G ]\n"
		"Clients: nbd+unix:///?socket=PATH (libnbd, qemu), nbd://127.0.0.1:PORT\n",
		(unsigned long long)ZM_STORE_MAX_PAGES, SERVE_TIMEOUT_S);
}

/* A number in lo..hi, or complain naming the option: 0 or 2. */
static int parse_uint(const char *opt, const char *a, long lo, long hi, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(a, &end, 10);
	if (errno || end == a || *end || *v < lo || *v > hi) {
		fprintf(stderr, "zmem serve: %s takes a number in %ld..%ld, not '%s'\n", opt, lo,
			hi, a);
		return 2;
	}
	return 0;
}

static void list_names(const char *const *names)
{
	for (int i = 0; names[i]; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", names[i]);
	fprintf(stderr, "\n");
}

/* The codec and allocator are tried here, so that a bad name is told
 * with the choices, before the server forks or listens. */
static int check_codec(const char *opt, const char *name)
{
	struct zm_codec *c;
	int rc = zm_codec_create(name, 0, &c);

	if (!rc) {
		zm_codec_destroy(c);
		return 0;
	}
	if (rc == -EOPNOTSUPP)
		fprintf(stderr, "zmem serve: %s %s: not in this build; choices: ", opt, name);
	else
		fprintf(stderr, "zmem serve: %s %s: unknown codec or bad level; choices: ", opt,
			name);
	list_names(zm_codec_list());
	fprintf(stderr, "  (a level follows a colon, as the codec takes it: zstd:3, zstd:19)\n");
	return 2;
}

static int check_allocator(const char *name)
{
	const char *const *b = zm_pool_backends();

	for (int i = 0; b[i]; i++)
		if (!strcmp(b[i], name))
			return 0;
	fprintf(stderr, "zmem serve: --allocator %s: unknown; choices: ", name);
	list_names(b);
	return 2;
}

static int check_size(const char *opt, const char *a, size_t *v)
{
	uint64_t u = 0;
	int bad = cli_size(a, &u) || !u || u > SIZE_MAX;

	*v = bad ? 0 : (size_t)u;
	if (bad) {
		fprintf(stderr, "zmem serve: %s takes a size such as 4096, 64M, 4G or 1T, not '%s'\n",
			opt, a);
		return 2;
	}
	return 0;
}

/* A duration into milliseconds: a number with ms, s, m or h after it,
 * seconds without; more than 0 and less than 49 days (it must fit the
 * store's unsigned milliseconds). */
static int check_duration(const char *opt, const char *a, unsigned *ms)
{
	static const struct { const char *suffix; double ms; } units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	char *end = NULL;
	double v;

	errno = 0;
	v = (a[0] >= '0' && a[0] <= '9') || a[0] == '.' ? strtod(a, &end) : -1;
	for (size_t i = 0; !errno && v >= 0 && i < sizeof(units) / sizeof(units[0]); i++) {
		double t = v * units[i].ms;

		if (strcmp(end, units[i].suffix))
			continue;
		if (t >= 1 && t < (double)UINT32_MAX) {
			*ms = (unsigned)t;
			return 0;
		}
		break;
	}
	fprintf(stderr, "zmem serve: %s takes a duration such as 500ms, 30s, 10m or 1h (a bare "
		"number is seconds), at least 1ms and under 49 days, not '%s'\n", opt, a);
	return 2;
}

/* The backing file must be one we may read and write (or create) now:
 * told here, before the server forks, with the path.  A file made to
 * find out is removed again; the store makes its own. */
static int check_backing(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	bool made = false;

	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		made = fd >= 0;
	}
	if (fd < 0) {
		fprintf(stderr, "zmem serve: --backing %s: cannot open it for reading and "
			"writing: %s\n", path, strerror(errno));
		return 2;
	}
	close(fd);
	if (made)
		unlink(path);
	return 0;
}

/* The cold-data options that need another: each alone would do nothing,
 * which a zram user would not expect to pass in silence.  --idle-after
 * needs something to do with idle pages: recompress them, or (with a
 * memory limit) write them back first.  --writeback-limit becomes pages
 * of the disk's page size, as zram counts it. */
static int check_tiering(struct zmi_serve_config *cfg, size_t wb_limit, size_t page)
{
	const char *alone = !cfg->backing && wb_limit ? "--writeback-limit"
			    : !cfg->backing && cfg->readback ? "--readback" : NULL;

	if (alone) {
		fprintf(stderr, "zmem serve: %s needs --backing FILE\n", alone);
		return 2;
	}
	if (cfg->idle_after_ms && !cfg->recompress && !cfg->backing) {
		fprintf(stderr, "zmem serve: --idle-after needs --recompress CODEC (idle pages "
			"are recompressed) or --backing FILE (idle pages are written back "
			"first)\n");
		return 2;
	}
	if (wb_limit && wb_limit < page) {
		fprintf(stderr, "zmem serve: --writeback-limit %zu is less than a page (%zu "
			"bytes)\n", wb_limit, page);
		return 2;
	}
	cfg->writeback_limit = wb_limit / page;
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	enum { O_PRINT_URI = 256, O_RUN, O_EXIT_WITH_PARENT, O_TIMEOUT, O_BACKING,
	       O_WB_LIMIT, O_RECOMPRESS, O_IDLE_AFTER, O_READBACK };
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "codec", required_argument, NULL, 'c' },
		{ "allocator", required_argument, NULL, 'a' },
		{ "page-size", required_argument, NULL, 'g' },
		{ "mem-limit", required_argument, NULL, 'm' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "socket", required_argument, NULL, 'S' },
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "control", required_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "print-uri", no_argument, NULL, O_PRINT_URI },
		{ "run", required_argument, NULL, O_RUN },
		{ "exit-with-parent", no_argument, NULL, O_EXIT_WITH_PARENT },
		{ "pidfile", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "backing", required_argument, NULL, O_BACKING },
		{ "writeback-limit", required_argument, NULL, O_WB_LIMIT },
		{ "recompress", required_argument, NULL, O_RECOMPRESS },
		{ "idle-after", required_argument, NULL, O_IDLE_AFTER },
		{ "readback", no_argument, NULL, O_READBACK },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct zmi_serve_config cfg = { .threads = (unsigned)cli_ncpus() };
	char defsock[4096];
	size_t size = 0, page, wb_limit = 0;
	long n;
	int o, rc = 0;

	opterr = 0;
	while (!rc && (o = getopt_long(argc, argv, ":fvh", opts, NULL)) != -1) {
		switch (o) {
		case 's': rc = check_size("--size", optarg, &size); break;
		case 'c': cfg.codec = optarg; rc = check_codec("--codec", optarg); break;
		case 'a': cfg.allocator = optarg; rc = check_allocator(optarg); break;
		case 'g':
			rc = check_size("--page-size", optarg, &page);
			if (!rc && (page < 4096 || page > 65536 || (page & (page - 1)))) {
				fprintf(stderr, "zmem serve: --page-size must be a power of two "
					"in 4096..65536, not '%s'\n", optarg);
				rc = 2;
			}
			cfg.page_size = page;
			break;
		case 'm': rc = check_size("--mem-limit", optarg, &cfg.mem_limit); break;
		case 'r': cfg.read_only = true; break;
		case 't':
			rc = parse_uint("--threads", optarg, 0, 256, &n);
			cfg.threads = (unsigned)n;
			break;
		case O_TIMEOUT:
			rc = parse_uint("--timeout", optarg, 1, 3600, &n);
			cfg.timeout_s = (unsigned)n;
			break;
		case 'S': cfg.socket = optarg; break;
		case 'p':
			rc = parse_uint("--port", optarg, 1, 65535, &n);
			cfg.port = (int)n;
			break;
		case 'b': cfg.bind = optarg; break;
		case 'C': cfg.control = optarg; break;
		case 'f': cfg.foreground = true; break;
		case O_PRINT_URI: cfg.print_uri = true; break;
		case O_RUN: cfg.run = optarg; break;
		case O_EXIT_WITH_PARENT: cfg.exit_with_parent = true; break;
		case 'P': cfg.pidfile = optarg; break;
		case 'v': cfg.verbose = true; break;
		case O_BACKING: cfg.backing = optarg; rc = check_backing(optarg); break;
		case O_WB_LIMIT: rc = check_size("--writeback-limit", optarg, &wb_limit); break;
		case O_RECOMPRESS:
			cfg.recompress = optarg;
			rc = check_codec("--recompress", optarg);
			break;
		case O_IDLE_AFTER:
			rc = check_duration("--idle-after", optarg, &cfg.idle_after_ms);
			break;
		case O_READBACK: cfg.readback = true; break;
		case 'h': serve_usage(stdout); return 0;
		case ':':
			fprintf(stderr, "zmem serve: %s needs a value (zmem serve --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "zmem serve: unknown option '%s' (zmem serve --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (rc)
		return rc;
	if (optind < argc) {
		fprintf(stderr, "zmem serve: unexpected argument '%s' (zmem serve --help)\n",
			argv[optind]);
		return 2;
	}
	if (!size) {
		fprintf(stderr, "zmem serve: --size is required (zmem serve --help)\n");
		return 2;
	}
	/* zstd's default unit: 32 KiB pages, as nbdkit's zstd allocator.  On
	 * a Python heap capture zstd keeps 32 KiB pages in 13% less memory
	 * than 4 KiB ones and copies 1.4x faster; random 4 KiB writes cost a
	 * read-modify-write of 32 KiB (docs/serve.md, docs/results/) */
	if (!cfg.page_size && cfg.codec && !strncmp(cfg.codec, "zstd", 4))
		cfg.page_size = SERVE_ZSTD_PAGE_SIZE;
	page = cfg.page_size ? cfg.page_size : 4096;
	if ((size + page - 1) / page > ZM_STORE_MAX_PAGES) {
		fprintf(stderr, "zmem serve: --size %zu is larger than the largest disk, "
			"%llu pages of %zu bytes (%llu GiB); a larger --page-size allows more\n",
			size, (unsigned long long)ZM_STORE_MAX_PAGES, page,
			(unsigned long long)(ZM_STORE_MAX_PAGES * page >> 30));
		return 2;
	}
	cfg.size = size;
	rc = check_tiering(&cfg, wb_limit, page);
	if (rc)
		return rc;
	if (cfg.bind && !cfg.port) {
		fprintf(stderr, "zmem serve: --bind needs --port\n");
		return 2;
	}
	if (!cfg.socket) {
		serve_default_path(defsock, sizeof(defsock), ".sock");
		cfg.socket = defsock;
	}
	return serve_main(&cfg);
}

/* ---- the running servers --------------------------------------------- */

/* The control socket of what the user named: nothing (the default
 * socket), a socket path, or HOST:PORT / PORT of a TCP server (whose
 * control socket has a default name by port). */
static const char *target(const char *arg, char *buf, size_t n)
{
	const char *colon;
	char *end;
	long port;

	if (!arg) {
		serve_default_path(buf, n, ".sock");
		return buf;
	}
	colon = strrchr(arg, ':');
	if (!strchr(arg, '/') && (colon || (arg[0] >= '0' && arg[0] <= '9'))) {
		port = strtol(colon ? colon + 1 : arg, &end, 10);
		if (!*end && port > 0 && port < 65536) {
			char suffix[32];

			snprintf(suffix, sizeof(suffix), "-tcp-%ld.ctl", port);
			serve_default_path(buf, n, suffix);
			return buf;
		}
	}
	return arg;
}

int cmd_stats(int argc, char **argv)
{
	static const char usage[] = "usage: zmem stats [--json] [SOCKET | HOST:PORT]\n";
	bool json = false;
	const char *arg = NULL;
	char buf[4200];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("%s"
			       "The statistics of a running zmem serve, through its control socket\n"
			       "(SOCKET.ctl; for a TCP server, the one its port names): zram's\n"
			       "mm_stat and bd_stat, the store, the cold data (recompression,\n"
			       "the backing file), the per-class table, connections, requests\n"
			       "and errors.  Without an argument, the default socket's server.\n",
			       usage);
			return 0;
		} else if (!arg && argv[i][0] != '-') {
			arg = argv[i];
		} else {
			fprintf(stderr, "zmem stats: unexpected %s '%s' (zmem stats --help)\n",
				argv[i][0] == '-' ? "option" : "argument", argv[i]);
			return 2;
		}
	}
	return control_send(target(arg, buf, sizeof(buf)), json ? "json" : "text", stdout);
}

static const char ctl_usage[] =
	"usage: zmem ctl [SOCKET | HOST:PORT] VERB [ARG...]\n"
	"Drive a running zmem serve, as zram's sysfs files do:\n"
	"  compact          compact the pool now\n"
	"  mem-limit SIZE   change the memory limit (64M, 1G, ...; 0 or none: no limit)\n"
	"  reset-max        start mem_used_max over from the memory used now\n"
	"  idle all|SECONDS mark idle the pages not read or written for SECONDS (all:\n"
	"                   every page); answers how many are idle\n"
	"  writeback TYPE [MAX_PAGES]\n"
	"                   write pages back to the --backing file, at most MAX_PAGES;\n"
	"                   TYPE: idle, huge, huge_idle, incompressible or all\n"
	"  writeback page INDEX\n"
	"                   write back one page (INDEX counts pages of the disk's page size)\n"
	"  recompress [TYPE] [MAX_PAGES]\n"
	"                   recompress with the --recompress codec; TYPE: idle, huge,\n"
	"                   huge_idle or all (the default)\n"
	"  stop             stop the server (requests in flight are answered)\n"
	"  info             one line of JSON: URI, pid, size, codec, what is stored\n"
	"Without SOCKET, the default socket's server.\n";

static bool is_verb(const char *a)
{
	static const char *const verbs[] = { "compact", "mem-limit", "reset-max", "stop",
					     "info", "stats", "json", "text", "idle",
					     "writeback", "recompress", NULL };

	for (int i = 0; verbs[i]; i++)
		if (!strcmp(a, verbs[i]))
			return true;
	return false;
}

/* The cold-data verbs take up to two words, checked by the server. */
static bool takes_words(const char *verb)
{
	return !strcmp(verb, "idle") || !strcmp(verb, "writeback") ||
	       !strcmp(verb, "recompress");
}

int cmd_ctl(int argc, char **argv)
{
	const char *where = NULL, *verb, *arg, *arg2;
	char buf[4200], line[128];
	int i = 1;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(ctl_usage, stdout);
		return 0;
	}
	if (argc > 2 && !is_verb(argv[1]))
		where = argv[i++];
	if (i >= argc) {
		fprintf(stderr, "zmem ctl: a VERB is required (zmem ctl --help)\n");
		return 2;
	}
	verb = argv[i++];
	arg = i < argc ? argv[i++] : NULL;
	arg2 = i < argc && takes_words(verb) ? argv[i++] : NULL;
	if (i < argc) {
		fprintf(stderr, "zmem ctl: unexpected '%s'\n%s", argv[i], ctl_usage);
		return 2;
	}
	if (!strcmp(verb, "mem-limit")) {
		uint64_t u = 0;

		if (!arg || (strcmp(arg, "none") && (cli_size(arg, &u) || u > SIZE_MAX))) {
			fprintf(stderr, "zmem ctl: mem-limit takes a size (64M, 1G, ...) or 0, "
				"not '%s'\n", arg ? arg : "");
			return 2;
		}
		snprintf(line, sizeof(line), "mem-limit %zu", (size_t)u);
	} else if (takes_words(verb)) {
		if ((arg && (strlen(arg) > 40 || strpbrk(arg, " \t\r\n"))) ||
		    (arg2 && (strlen(arg2) > 40 || strpbrk(arg2, " \t\r\n")))) {
			fprintf(stderr, "zmem ctl: %s: bad argument\n%s", verb, ctl_usage);
			return 2;
		}
		snprintf(line, sizeof(line), "%s%s%s%s%s", verb, arg ? " " : "", arg ? arg : "",
			 arg2 ? " " : "", arg2 ? arg2 : "");
	} else if (arg) {
		fprintf(stderr, "zmem ctl: %s takes no argument\n", verb);
		return 2;
	} else {
		/* unknown verbs go too: the server names the ones it knows */
		snprintf(line, sizeof(line), "%.100s", verb);
	}
	return control_send(target(where, buf, sizeof(buf)), line, stdout);
}

int cmd_stop(int argc, char **argv)
{
	char buf[4200];
	const char *where;

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: zmem stop [SOCKET | HOST:PORT]\n"
		       "Stop a running zmem serve (as SIGTERM does; requests in flight are\n"
		       "answered first).  Without SOCKET, the default socket's server.\n");
		return 0;
	}
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "zmem stop: unexpected %s '%s' (zmem stop --help)\n",
			argc > 2 ? "argument" : "option", argv[argc > 2 ? 2 : 1]);
		return 2;
	}
	where = target(argc == 2 ? argv[1] : NULL, buf, sizeof(buf));
	if (control_send(where, "stop", stdout))
		return 1;
	/* done when the server has let go of its names (its first step), so
	 * that a new server may take them the moment this returns */
	for (int i = 0; i < 1000; i++) {
		if (control_probe(where))
			return 0;
		usleep(10000);
	}
	fprintf(stderr, "zmem stop: the server still answers after 10 s\n");
	return 1;
}

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
	if (*p == '"') {
		len = strcspn(++p, "\"");
	} else {
		len = strcspn(p, ",}");
	}
	snprintf(out, n, "%.*s", (int)len, p);
	return true;
}

static void human(char *out, size_t n, const char *bytes)
{
	static const char units[] = "BKMGTP";
	double v = strtod(bytes, NULL);
	int u = 0;

	while (v >= 1024 && u < 5)
		v /= 1024, u++;
	if (u == 0)
		snprintf(out, n, "%.0fB", v);
	else
		snprintf(out, n, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

int cmd_list(int argc, char **argv)
{
	char dir[4096];
	struct dirent *e;
	DIR *d;
	int shown = 0;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: zmem list\n"
		       "The zmem serve processes of this user, like zramctl: socket, pid,\n"
		       "disk size, codec, data stored, compressed, memory used, ratio.\n");
		return 0;
	}
	if (argc > 1) {
		fprintf(stderr, "zmem list: unexpected %s '%s' (zmem list --help)\n",
			argv[1][0] == '-' ? "option" : "argument", argv[1]);
		return 2;
	}
	d = serve_registry_dir(dir, sizeof(dir), false) ? NULL : opendir(dir);
	printf("%-40s %7s %7s %-8s %-9s %7s %7s %7s %6s\n", "URI", "PID", "DISKSIZE", "CODEC",
	       "ALLOC", "DATA", "COMPR", "TOTAL", "RATIO");
	while (d && (e = readdir(d))) {
		char path[4400], uri[4200] = "", ctl[4200] = "", info[4096] = "";
		char size[32], codec[64], alloc[32], orig[32], compr[32], total[32];
		char hs[16], ho[16], hc[16], ht[16];
		long pid = strtol(e->d_name, NULL, 10);
		FILE *f, *mem;
		size_t got;
		double ratio;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (kill((pid_t)pid, 0) && errno == ESRCH) {
			unlink(path);  /* a server that was killed outright */
			continue;
		}
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(uri, sizeof(uri), f) || !fgets(ctl, sizeof(ctl), f))
			ctl[0] = 0;
		fclose(f);
		uri[strcspn(uri, "\n")] = 0;
		ctl[strcspn(ctl, "\n")] = 0;
		if (!ctl[0] || !(mem = fmemopen(info, sizeof(info) - 1, "w")))
			continue;
		if (control_send(ctl, "info", mem)) {
			fclose(mem);
			continue;
		}
		got = (size_t)ftell(mem);
		fclose(mem);
		info[got] = 0;
		if (!field(info, "size", size, sizeof(size)) ||
		    !field(info, "codec", codec, sizeof(codec)) ||
		    !field(info, "allocator", alloc, sizeof(alloc)) ||
		    !field(info, "orig_data_size", orig, sizeof(orig)) ||
		    !field(info, "compr_data_size", compr, sizeof(compr)) ||
		    !field(info, "mem_used_total", total, sizeof(total)))
			continue;
		human(hs, sizeof(hs), size);
		human(ho, sizeof(ho), orig);
		human(hc, sizeof(hc), compr);
		human(ht, sizeof(ht), total);
		ratio = strtod(total, NULL) > 0 ? strtod(orig, NULL) / strtod(total, NULL) : 0;
		printf("%-40s %7ld %7s %-8s %-9s %7s %7s %7s %6.2f\n", uri, pid, hs, codec, alloc, ho,
		       hc, ht, ratio);
		shown++;
	}
	if (d)
		closedir(d);
	return 0;
}
