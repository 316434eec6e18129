/*
 * zmem serve: a compressed RAM disk over NBD (src/serve/, docs/serve.md).
 * zmem stats, ctl, stop, list: a running server, through its control
 * socket, the way zram is read and driven through sysfs and zramctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmem/codec.h>
#include <zmem/common.h>
#include <zmem/pool.h>
#include "tool/check.h"
#include "cli/cli.h"
#include "tool/json.h"
#include "tool/opt.h"
#include "serve/serve.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* The largest disk: ZM_STORE_MAX_PAGES pages of the largest page size. */
#define SERVE_MAX_PAGE 65536
#define SERVE_MAX_SIZE ((double)ZM_STORE_MAX_PAGES * SERVE_MAX_PAGE)

static void list_names(char *buf, size_t n, const char *const *names)
{
	*buf = 0;
	for (int i = 0; names[i]; i++)
		snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? ", " : "", names[i]);
}

/* A duration into milliseconds: a number with ms, s, m or h after it,
 * seconds without; at least 1 ms and less than 49 days (it must fit the
 * store's unsigned milliseconds). */
int cli_check_duration(const char *cmd, const char *opt, const char *a, unsigned *ms)
{
	double t;

	if (!cli_duration(a, 1000, &t) && t >= 1 && t < (double)UINT32_MAX) {
		*ms = (unsigned)t;
		return 0;
	}
	return cli_usage(cmd, "invalid %s '%s' (a duration: 500ms, 30s, 10m, 1h, a bare "
			 "number is seconds; at least 1ms and under 49 days)", opt, a);
}

/* The backing file must be one we may read and write (or create) now:
 * told here, before the server forks, with the path.  A file made to
 * find out is removed again; the store makes its own. */
int cli_check_backing(const char *cmd, const char *path)
{
	struct stat st = { 0 };
	/* O_NONBLOCK: a FIFO must not wait here for a writer */
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
	bool made = false;

	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		made = fd >= 0;
	}
	if (fd < 0)
		return cli_fail(cmd, "--backing %s: cannot open it for reading and "
				"writing: %s", path, strerror(errno));
	if (fstat(fd, &st) || (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))) {
		close(fd);
		return cli_fail(cmd, "--backing %s: not a regular file or block device "
				"(%s)", path, S_ISFIFO(st.st_mode) ? "a FIFO"
				: S_ISCHR(st.st_mode) ? "a character device"
				: S_ISSOCK(st.st_mode) ? "a socket" : "not a file");
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
static int check_tiering(struct serve_config *cfg, size_t wb_limit, size_t page)
{
	const char *alone = !cfg->backing && wb_limit ? "--writeback-limit"
			    : !cfg->backing && cfg->readback ? "--readback" : NULL;

	if (alone)
		return cli_usage("serve", "%s needs --backing FILE", alone);
	if (cfg->idle_after_ms && !cfg->recompress && !cfg->backing)
		return cli_usage("serve", "--idle-after needs --recompress CODEC (idle pages are "
				 "recompressed) or --backing FILE (idle pages are written back "
				 "first)");
	if (wb_limit && wb_limit < page)
		return cli_usage("serve", "--writeback-limit %zu is less than a page (%zu bytes)",
				 wb_limit, page);
	cfg->writeback_limit = wb_limit / page;
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	struct serve_config cfg = { 0 };
	const char *idle_after = NULL, *sock_mode = NULL;
	char defsock[4096], tmp[4000] = "", why[128];
	size_t size = 0, page = 0, wb_limit = 0, clean_rate = ZM_STORE_CLEAN_RATE;
	char clean_def[32];
	int threads = cli_ncpus(), timeout = SERVE_TIMEOUT_S, port = 0, units = 0, units_set = 0;
	int read_only = 0, fg = 0, print_uri = 0, ewp = 0, verbose = 0, readback = 0;
	int rc;
	const struct opt table[] = {
		O_SIZE("size", 0, &size, "SIZE",
		       "size of the disk; required; at most\n2^29 pages: 2T of 4K pages, 32T "
		       "of 64K", NULL, 1, SERVE_MAX_SIZE),
		O_STR("codec", 0, &cfg.codec, "NAME", "lz4, zstd[:LEVEL], lzo, none", "lz4"),
		O_STR("allocator", 0, &cfg.allocator, "NAME", "the pool backend", "zsmalloc"),
		O_SIZE("page-size", 0, &page, "SIZE",
		       "the store's page, a power of two;\nlarger pages compress better and "
		       "stream\nfaster, small random writes cost more", "4K", 4096,
		       SERVE_MAX_PAGE),
		O_INT("unit-pages", 0, &units, "N",
		      "1, 2, 4, 8 or 16: a write's adjacent\npages are compressed together, "
		      "up to N\n(at most 256K), where that saves memory;\na page is still "
		      "read and written alone", "16 with zstd, else 1", 1,
		      (int)ZM_STORE_UNIT_MAX, .seen = &units_set),
		O_SIZE("mem-limit", 0, &cfg.mem_limit, "SIZE",
		       "memory the store may hold; writes beyond\nget ENOSPC, or with --backing "
		       "pages go\nto the file to make room; 0 or at\nleast a page", "none", 0, 0),
		O_FLAG("read-only", 0, &read_only, "refuse writes (EPERM)"),
		O_INT("threads", 0, &threads, "N",
		      "worker threads for reads and writes; 0:\neach connection's thread does "
		      "its own", "CPUs", 0, 256),
		O_DUR("timeout", 0, &timeout, "DURATION",
		      "time limit on a handshake, a reply and a\nstalled payload (bare: seconds)",
		      STR(SERVE_TIMEOUT_S), 1000, 1, 3600),
		O_STR("socket", 0, &cfg.socket, "PATH",
		      "Unix socket to listen on; the control\nsocket is PATH.ctl; without "
		      "$XDG_RUNTIME_DIR\n/tmp/zmem-UID/zmem.sock; - (as --run\nwithout "
		      "--socket): zmem.sock in a new\nfolder in $TMPDIR, removed at exit\n"
		      "(so in the foreground)",
		      "$XDG_RUNTIME_DIR/zmem.sock"),
		O_INT("port", 0, &port, "PORT",
		      "listen on TCP instead, on 127.0.0.1\nunless --bind; the control socket is "
		      "then\nzmem-tcp-PORT.ctl beside the default one", NULL, 1, 65535),
		O_STR("bind", 0, &cfg.bind, "ADDR", "TCP address to bind (with --port)",
		      "127.0.0.1"),
		O_STR("control", 0, &cfg.control, "PATH", "control socket for zmem stats and ctl",
		      "SOCKET.ctl"),
		O_STR("socket-mode", 0, &sock_mode, "MODE",
		      "the Unix socket's permissions, octal:\n0660 lets its group use the "
		      "disk; the\ncontrol socket stays 0600 and takes only\nits user and "
		      "root", "0600"),
		O_FLAG("foreground", 'f', &fg,
		       "stay in the foreground (default: detach\nonce listening, printing the "
		       "URI, pid and\ncontrol socket on stdout)"),
		O_FLAG("print-uri", 0, &print_uri, "print the URI on stdout once listening"),
		O_STR("run", 0, &cfg.run, "CMD",
		      "captive: serve until the shell command\nCMD exits, with $uri, $nbd and "
		      "$socket\n($unixsocket; or $port) set; exit with its\nstatus; on a "
		      "private socket (--socket -)\nunless --socket or --port", NULL),
		O_FLAG("exit-with-parent", 0, &ewp,
		       "stop when the process that started zmem\nserve exits"),
		O_STR("pidfile", 0, &cfg.pidfile, "FILE", "write the server's pid there", NULL),
		O_FLAG("verbose", 'v', &verbose, "log connections to stderr"),
		O_STR("backing", 0, &cfg.backing, "FILE|URI",
		      "cold data: backing file for pages written\nback (created if missing; what "
		      "it held is\nlost), or an NBD export's URI (nbd://HOST/\nNAME, "
		      "nbd+unix:///NAME?socket=PATH);\nwithout --mem-limit only zmem ctl\n"
		      "writeback fills it",
		      "none"),
		O_SIZE("writeback-limit", 0, &wb_limit, "SIZE",
		       "most data ever written to the backing\nfile (zram's writeback_limit, "
		       "counted in\npages); then ENOSPC", "no limit", 0, 0),
		O_STR("recompress", 0, &cfg.recompress, "CODEC",
		      "the secondary codec for idle or huge\npages: zstd, zstd:19, ...", "none"),
		O_STR("idle-after", 0, &idle_after, "DURATION",
		      "automatic tiering: pages not read or\nwritten this long are recompressed "
		      "and\nthe first written back at the memory\nlimit; 500ms, 30s, 10m, 1h (a "
		      "bare\nnumber is seconds; 1ms up to 49 days)", "only zmem ctl idle"),
		O_SIZE("clean-rate", 0, &clean_rate, "RATE",
		       "the backing file's automatic cleaner:\nbytes a second it may move "
		       "out of\nsparse blocks once they pass 1.2x the\nlive bytes; 0 = "
		       "off (zmem ctl\ncompact-file only)", clean_def, 0, 0),
		O_FLAG("readback", 0, &readback,
		       "a read of a page on the file brings it\nback into memory while the "
		       "memory limit\nallows"),
		O_END,
	};
	const struct opt_cmd cmd = {
		"serve", "--size SIZE [OPTIONS]",
		"A compressed RAM disk over NBD: qemu, nbdcopy, fio, nbdinfo, nbd-client.",
		table,
		"Cold data (zram's writeback and recompression): --backing, --writeback-limit,\n"
		"--recompress, --idle-after, --readback; zmem ctl idle, writeback and\n"
		"recompress drive them by hand.\n\n"
		"SIGINT, SIGTERM and SIGHUP stop it: requests in flight are answered first.\n"
		"Socket activation (LISTEN_FDS/LISTEN_PID) is used when present, as in\n"
		"  nbdinfo -- [ zmem serve --size 1G ]\n"
		"Clients: nbd+unix:///?socket=PATH (libnbd, qemu), nbd://127.0.0.1:PORT\n",
	};

	snprintf(clean_def, sizeof(clean_def), "%lluM",
		 (unsigned long long)(ZM_STORE_CLEAN_RATE >> 20));
	rc = opt_parse(&cmd, argc, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	cfg.clean_rate = clean_rate;
	if (!size)
		return cli_usage("serve", "--size is required (zmem serve --help)");
	if (page && (page & (page - 1)))
		return cli_usage("serve", "--page-size must be a power of two in 4K..64K, not %zu",
				 page);
	if (units_set && (units & (units - 1)))
		return cli_usage("serve", "--unit-pages must be 1, 2, 4, 8 or 16, not %d", units);
	if (units_set && (size_t)units * (page ? page : 4096) > ZM_STORE_UNIT_MAX_BYTES)
		return cli_usage("serve", "--unit-pages %d of %zu-byte pages: a unit is at most "
				 "%zu KiB", units, page ? page : 4096,
				 ZM_STORE_UNIT_MAX_BYTES >> 10);
	if ((cfg.codec && (rc = cli_check_codec("serve", "--codec", cfg.codec))) ||
	    (cfg.allocator && (rc = cli_check_allocator("serve", "--allocator", cfg.allocator))) ||
	    (cfg.recompress && (rc = cli_check_codec("serve", "--recompress", cfg.recompress))) ||
	    (idle_after && (rc = cli_check_duration("serve", "--idle-after", idle_after,
						    &cfg.idle_after_ms))) ||
	    (cfg.backing && !serve_backing_is_uri(cfg.backing) &&
	     (rc = cli_check_backing("serve", cfg.backing))))
		return rc;
	if (sock_mode) {
		char *end;
		unsigned long m = strtoul(sock_mode, &end, 8);

		if (!*sock_mode || *end || (m & ~0666ul) || (m & 0600) != 0600)
			return cli_usage("serve", "--socket-mode %s: an octal mode with read and "
					 "write for the owner and no execute bits: 0600, "
					 "0660, 0666", sock_mode);
		cfg.socket_mode = (unsigned)m;
	}
	cfg.page_size = page;
	cfg.read_only = read_only;
	cfg.threads = (unsigned)threads;
	cfg.timeout_s = (unsigned)timeout;
	cfg.port = port;
	cfg.foreground = fg;
	cfg.print_uri = print_uri;
	cfg.exit_with_parent = ewp;
	cfg.verbose = verbose;
	cfg.readback = readback;
	/* zstd's default: 4 KiB pages in units, which a sequential copy fills
	 * with neighbours compressed together (a large page's density) while
	 * a random 4 KiB write stays a 4 KiB page's (docs/serve.md has the
	 * figures); --page-size alone keeps pages alone */
	cfg.unit_pages = (unsigned)units;
	if (!units_set && !cfg.page_size && cfg.codec && !strncmp(cfg.codec, "zstd", 4))
		cfg.unit_pages = SERVE_ZSTD_UNIT_PAGES;
	page = cfg.page_size ? cfg.page_size : 4096;
	if ((size + page - 1) / page > ZM_STORE_MAX_PAGES) {
		char a[32], b[32], c[32];

		return cli_usage("serve", "--size %s is larger than the largest disk of %s pages, "
				 "%s (2^29 pages); a larger --page-size allows more",
				 cli_size_text(size, a, sizeof(a)),
				 cli_size_text(page, b, sizeof(b)),
				 cli_size_text(ZM_STORE_MAX_PAGES * page, c, sizeof(c)));
	}
	cfg.size = size;
	if (serve_check_mem_limit(cfg.mem_limit, page, why, sizeof(why)))
		return cli_usage("serve", "--mem-limit %zu: %s", cfg.mem_limit, why);
	rc = check_tiering(&cfg, wb_limit, page);
	if (rc)
		return rc;
	if (cfg.bind && !cfg.port)
		return cli_usage("serve", "--bind needs --port");
	if (cli_check_output("serve", "--pidfile", cfg.pidfile))
		return CLI_FAIL;
	if (cfg.socket && !strcmp(cfg.socket, "-") && cfg.port)
		return cli_usage("serve", "--socket - and --port: one or the other");
	/* as nbdkit's -U -: a captive server (or --socket -) listens in a
	 * folder of its own, beside any server on the default socket */
	if (cfg.socket ? !strcmp(cfg.socket, "-") : cfg.run && !cfg.port) {
		const char *t = getenv("TMPDIR");

		snprintf(tmp, sizeof(tmp), "%s/zmem-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(tmp))
			return cli_fail("serve", "cannot make a private folder in %s: %s",
					t && *t ? t : "/tmp", strerror(errno));
		snprintf(defsock, sizeof(defsock), "%s/zmem.sock", tmp);
		cfg.socket = defsock;
		cfg.foreground = 1;  /* this process removes the folder */
	} else if (!cfg.socket) {
		serve_default_path(defsock, sizeof(defsock), ".sock");
		cfg.socket = defsock;
	}
	rc = serve_main(&cfg);
	if (tmp[0]) {
		char left[4200];

		unlink(defsock);  /* normally gone already */
		snprintf(left, sizeof(left), "%s.ctl", defsock);
		unlink(left);
		if (rmdir(tmp))
			fprintf(stderr, "zmem serve: cannot remove %s: %s\n", tmp, strerror(errno));
	}
	return rc;
}

/* ---- the running servers --------------------------------------------- */

/* Does one of host's addresses equal one of bound's, or, bound a
 * wildcard (0.0.0.0, ::), is host an address of this machine's (one a
 * socket may bind)?  0, or a gai error (host unknown), or 1: no. */
static int same_host(const char *host, const char *bound)
{
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM }, *h, *b = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &h);

	if (rc)
		return rc;
	hints.ai_flags = AI_NUMERICHOST;
	if (getaddrinfo(bound, NULL, &hints, &b)) {
		freeaddrinfo(h);
		return 1;
	}
	rc = 1;
	for (struct addrinfo *x = h; x && rc; x = x->ai_next) {
		for (struct addrinfo *y = b; y && rc; y = y->ai_next) {
			const void *xa, *ya;
			size_t len;
			int fd;

			if (x->ai_family != y->ai_family)
				continue;
			xa = x->ai_family == AF_INET
			     ? (const void *)&((struct sockaddr_in *)x->ai_addr)->sin_addr
			     : (const void *)&((struct sockaddr_in6 *)x->ai_addr)->sin6_addr;
			ya = y->ai_family == AF_INET
			     ? (const void *)&((struct sockaddr_in *)y->ai_addr)->sin_addr
			     : (const void *)&((struct sockaddr_in6 *)y->ai_addr)->sin6_addr;
			len = x->ai_family == AF_INET ? 4 : 16;
			if (!memcmp(xa, ya, len)) {
				rc = 0;
			} else if (!strcmp(bound, "0.0.0.0") || !strcmp(bound, "::")) {
				fd = socket(x->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
				if (fd >= 0 && !bind(fd, x->ai_addr, x->ai_addrlen))
					rc = 0;
				if (fd >= 0)
					close(fd);
			}
		}
	}
	freeaddrinfo(h);
	freeaddrinfo(b);
	return rc;
}

/* HOST:PORT or PORT names the TCP server listening there.  Its control
 * socket is found by port, on this machine; the server must be there,
 * and for HOST:PORT its URI's host must be HOST (or a wildcard HOST is
 * local to): never another server.  0, or -1 after the message. */
static int check_tcp(const char *cmd, const char *arg, const char *host, const char *ctl,
		     unsigned ms)
{
	char info[4096] = "", uri[4200], *bound, *end;
	FILE *mem;
	size_t got;
	int rc;

	if (control_probe(ctl)) {
		cli_fail(cmd, "%s: no zmem serve --port listens there (no control socket %s)",
			 arg, ctl);
		return -1;
	}
	if (!host)
		return 0;
	if (!(mem = fmemopen(info, sizeof(info) - 1, "w")))
		return -1;
	rc = control_send(cmd, ctl, "info", mem, ms);
	got = (size_t)ftell(mem);
	fclose(mem);
	if (rc)
		return -1;
	info[got] = 0;
	bound = strstr(info, "\"uri\": \"nbd://");
	if (!bound) {
		cli_fail(cmd, "%s: the server at %s is not a TCP server", arg, ctl);
		return -1;
	}
	bound += strlen("\"uri\": \"nbd://");
	snprintf(uri, sizeof(uri), "%.*s", (int)strcspn(bound, "/\""), bound);
	bound = uri;
	if (*bound == '[') {  /* [v6]:PORT */
		end = strchr(++bound, ']');
	} else {
		end = strrchr(bound, ':');
	}
	if (end)
		*end = 0;
	rc = same_host(host, bound);
	if (rc > 0)
		cli_fail(cmd, "%s: the server on port %s listens on %s, not on %s", arg,
			 strrchr(arg, ':') + 1, bound, host);
	else if (rc)
		cli_fail(cmd, "%s: %s", arg, gai_strerror(rc));
	return rc ? -1 : 0;
}

/* The control socket of what the user named: nothing (the default
 * socket), a socket path, HOST:PORT / PORT of a TCP server (whose
 * control socket has a default name by port, checked by check_tcp), or
 * a zmem run ("run", "run:PID", found in the registry).  NULL when what
 * was named is not there (said on stderr). */
static const char *target(const char *cmd, const char *arg, char *buf, size_t n, unsigned ms)
{
	const char *colon;
	char *end;
	long port;

	if (run_is_target(arg))
		return run_target(cmd, arg, buf, n) ? NULL : buf;
	if (!arg) {
		serve_default_path(buf, n, ".sock");
		return buf;
	}
	colon = strrchr(arg, ':');
	if (!strchr(arg, '/') && (colon || (arg[0] >= '0' && arg[0] <= '9'))) {
		port = strtol(colon ? colon + 1 : arg, &end, 10);
		if (!*end && port > 0 && port < 65536) {
			char suffix[32], host[256] = "";

			snprintf(suffix, sizeof(suffix), "-tcp-%ld.ctl", port);
			serve_default_path(buf, n, suffix);
			if (colon) {  /* [v6]:PORT too */
				const char *h = arg[0] == '[' ? arg + 1 : arg;
				size_t len = (size_t)(colon - h) - (arg[0] == '[');

				snprintf(host, sizeof(host), "%.*s", (int)len, h);
			}
			return check_tcp(cmd, arg, colon ? host : NULL, buf, ms) ? NULL : buf;
		}
	}
	return arg;
}

/* The one operand of stats and stop, SOCKET or HOST:PORT, if given:
 * 0 and *where (NULL: none), or a usage error. */
static int parse_target(const struct opt_cmd *cmd, int argc, char **argv, const char **where)
{
	int n = 0, rc = opt_parse(cmd, argc, argv, &n);

	if (rc)
		return rc;
	if (n > 1)
		return cli_usage(cmd->name, "unexpected argument '%s' (zmem %s --help)", argv[2],
				 cmd->name);
	*where = n ? argv[1] : NULL;
	return 0;
}

int cli_client_timeout(const char *cmd, const char *arg, unsigned *ms)
{
	*ms = CONTROL_CLIENT_TIMEOUT_MS;
	return arg ? cli_check_duration(cmd, "--timeout", arg, ms) : 0;
}

#define TARGET_ARGS "[OPTIONS] [SOCKET | HOST:PORT | run[:PID]]"
#define TARGET_MORE \
	"SOCKET is a server's socket (its control socket is SOCKET.ctl, or the\n" \
	"one its --control names); HOST:PORT or PORT a TCP server's.  Without\n" \
	"it, the server on the default socket.  run:PID is the zmem run of that\n" \
	"pid (zmem list shows them), run alone the only one running.\n"

int cmd_stats(int argc, char **argv)
{
	const char *where = NULL, *tmo = NULL;
	char buf[4200];
	int json = 0, wide = 0, rc;
	unsigned ms;
	const struct opt table[] = {
		O_FLAG("json", 'j', &json, "one JSON document, sizes in bytes"),
		O_FLAG("wide", 0, &wide, "the class table's every column (past 80)"),
		O_TIMEOUT(&tmo),
		O_END,
	};
	const struct opt_cmd cmd = {
		"stats", TARGET_ARGS,
		"The statistics of a running zmem serve, through its control socket:\n"
		"zram's mm_stat and bd_stat (in zram's formats: bytes and pages), the\n"
		"store (sizes in KiB, MiB, ...), the cold data (recompression, the\n"
		"backing file), the per-class table, connections, requests and errors.",
		table, TARGET_MORE,
	};

	rc = parse_target(&cmd, argc, argv, &where);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if ((rc = cli_client_timeout("stats", tmo, &ms)))
		return rc;
	if (!(where = target("stats", where, buf, sizeof(buf), ms)))
		return CLI_FAIL;
	return control_send("stats", where, json ? "json" : wide ? "text wide" : "text", stdout,
			    ms) ? CLI_FAIL : CLI_OK;
}

/* zmem ctl's verbs: a server's, then a run's (run.c checks its
 * arguments).  The control protocol's own requests (text, json: zmem
 * stats) are not verbs of ctl. */
static const char *const server_verbs[] = {
	"compact", "compact-file", "mem-limit", "reset-max", "idle", "writeback",
	"recompress", "stop", "info", NULL,
};
static const char *const run_verbs[] = {
	"reclaim", "mem-limit", "untrack", "stop", "info", NULL,
};

static bool in(const char *const *list, const char *a)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(a, list[i]))
			return true;
	return false;
}

static bool is_verb(const char *a)
{
	return in(server_verbs, a) || in(run_verbs, a);
}

/* The cold-data verbs take up to two words. */
static bool takes_words(const char *verb)
{
	return !strcmp(verb, "idle") || !strcmp(verb, "writeback") ||
	       !strcmp(verb, "recompress") || !strcmp(verb, "compact-file");
}

/* A plain decimal count (at least 1 if positive), or NULL. */
static bool count_ok(const char *a, bool positive)
{
	uint64_t v;

	return !a || (!cli_parse_u64(a, &v) && (!positive || v));
}

static bool one_of(const char *a, const char *const *list)
{
	return a && in(list, a);
}

/* A server verb's arguments, as the server would refuse them: 0, or
 * CLI_USAGE after the message.  (The server checks them again, and what
 * only it knows: a page index against the disk's size.) */
static int check_args(const char *verb, const char *arg, const char *arg2)
{
	static const char *const wb_types[] = { "idle", "huge", "huge_idle", "incompressible",
						"all", NULL };
	static const char *const rc_types[] = { "idle", "huge", "huge_idle", "all", NULL };
	uint64_t v;

	if (!strcmp(verb, "idle")) {
		double ms;

		/* a duration as --idle-after's and --timeout's; 0 as before */
		if (arg2)
			return cli_usage("ctl", "unexpected argument '%s' (zmem ctl --help)", arg2);
		if (!arg || (strcmp(arg, "all") && (cli_duration(arg, 1000, &ms) ||
						    ms >= (double)UINT32_MAX)))
			return cli_usage("ctl", "idle takes all or a DURATION (250ms, 30s, 10m, 1h; "
					 "a bare number is SECONDS; under 49 days), not '%s'",
					 arg ? arg : "");
	} else if (!strcmp(verb, "writeback")) {
		if (!arg)
			return cli_usage("ctl", "writeback takes a type: idle, huge, huge_idle, "
					 "incompressible, all, or page INDEX");
		if (!strcmp(arg, "page")) {
			if (!arg2 || cli_parse_u64(arg2, &v))
				return cli_usage("ctl", "writeback page takes a page INDEX, not "
						 "'%s'", arg2 ? arg2 : "");
		} else if (!one_of(arg, wb_types)) {
			return cli_usage("ctl", "writeback: type idle, huge, huge_idle, "
					 "incompressible or all, not '%s'", arg);
		} else if (!count_ok(arg2, true)) {
			return cli_usage("ctl", "writeback: MAX_PAGES is a number of pages, at "
					 "least 1, not '%s'", arg2);
		}
	} else if (!strcmp(verb, "recompress")) {
		if (arg && !one_of(arg, rc_types))
			return cli_usage("ctl", "recompress: type idle, huge, huge_idle or all, "
					 "not '%s'", arg);
		if (!count_ok(arg2, true))
			return cli_usage("ctl", "recompress: MAX_PAGES is a number of pages, at "
					 "least 1, not '%s'", arg2);
	} else if (!strcmp(verb, "compact-file")) {
		if (arg2 || !count_ok(arg, false))
			return cli_usage("ctl", "compact-file: MAX_BYTES is a number of bytes, "
					 "not '%s'", arg2 ? arg2 : arg);
	}
	return 0;
}

static int unknown_verb(const char *verb, bool run)
{
	const char *const *v = run ? run_verbs : server_verbs;
	char list[256];

	list_names(list, sizeof(list), v);
	return cli_usage("ctl", "unknown verb '%s'; verbs%s: %s (zmem ctl --help)", verb,
			 run ? " of a run" : "", list);
}

/* zmem ctl info and json: the server's object in the envelope of every
 * --json (docs/json.md), {"zmem", "command": "ctl", "verb", ...} */
static int ctl_document(const char *where, const char *verb, const char *line, unsigned ms)
{
	char *doc = NULL, *p;
	size_t len = 0;
	FILE *mem = open_memstream(&doc, &len);
	int rc;

	if (!mem)
		return cli_fail("ctl", "%s", strerror(errno));
	rc = control_send("ctl", where, line, mem, ms);
	fclose(mem);
	for (p = doc; p && (*p == ' ' || *p == '\n'); p++)
		;
	if (rc || !p || *p != '{') {
		if (doc)
			fputs(doc, stdout);
		free(doc);
		return rc ? CLI_FAIL : CLI_OK;
	}
	for (p++; *p == ' ' || *p == '\n'; p++)
		;
	printf("{\"zmem\": ");
	json_write_string(stdout, zm_version_string());
	printf(", \"command\": \"ctl\", \"verb\": ");
	json_write_string(stdout, verb);
	printf("%s%s", *p == '}' ? "" : ", ", p);
	free(doc);
	return CLI_OK;
}

int cmd_ctl(int argc, char **argv)
{
	const char *where = NULL, *verb, *arg, *arg2, *tmo = NULL;
	char buf[4200], line[128];
	int i = 1, rc;
	unsigned ms;
	const struct opt table[] = { O_TIMEOUT(&tmo), O_END };
	const struct opt_cmd cmd = {
		"ctl", "[OPTIONS] [SOCKET | HOST:PORT | run[:PID]] VERB [ARG...]",
		"Drive a running zmem serve, as zram's sysfs files do.",
		table,
		"Verbs:\n"
		"  compact          compact the pool now\n"
		"  compact-file [MAX_BYTES]\n"
		"                   clean the --backing file now: pages moved out of blocks\n"
		"                   mostly dead, at most MAX_BYTES (bytes) of them\n"
		"  mem-limit SIZE   change the memory limit (64M, 1G, ...; 0 or none: no limit;\n"
		"                   a server started with --mem-limit may lower or restore it)\n"
		"  reset-max        start mem_used_max over from the memory used now\n"
		"  idle all|DURATION\n"
		"                   mark idle the pages not read or written for DURATION\n"
		"                   (250ms, 30s, 10m, 1h, a bare number is seconds; all:\n"
		"                   every page); answers how many are idle\n"
		"  writeback TYPE [MAX_PAGES]\n"
		"                   write pages back to the --backing file, at most MAX_PAGES;\n"
		"                   TYPE: idle, huge, huge_idle, incompressible or all\n"
		"  writeback page INDEX\n"
		"                   write back one page (INDEX counts pages of the disk's page\n"
		"                   size)\n"
		"  recompress [TYPE] [MAX_PAGES]\n"
		"                   recompress with the --recompress codec; TYPE: idle, huge,\n"
		"                   huge_idle or all (the default)\n"
		"  stop             stop the server (requests in flight are answered)\n"
		"  info             one line of JSON: URI, pid, size, codec, what is stored\n\n"
		"Verbs of a zmem run (run:PID):\n"
		"  reclaim [SIZE]   compress SIZE of each process's heap now (none: all)\n"
		"  mem-limit SIZE|PCT|none\n"
		"                   each process's resident limit: 512M, or 25% of its heap\n"
		"  untrack          stop compressing: no limit, new memory outside regions\n"
		"  stop             SIGTERM to the command; info, text, json as above\n\n"
		"Options come before SOCKET and VERB; what follows VERB is its arguments.\n"
		TARGET_MORE,
	};

	/* the options end at the first word that is not one, so that a
	 * verb's argument may start with '-' and be refused as a value */
	while (i < argc && argv[i][0] == '-' && argv[i][1] && strcmp(argv[i], "--"))
		i += !strcmp(argv[i], "--timeout") && i + 1 < argc ? 2 : 1;
	rc = opt_parse(&cmd, i, argv, NULL);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if ((rc = cli_client_timeout("ctl", tmo, &ms)))
		return rc;
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (argc - i > 1 && !is_verb(argv[i]))
		where = argv[i++];
	if (i >= argc)
		return cli_usage("ctl", "a VERB is required (zmem ctl --help)");
	verb = argv[i++];
	arg = i < argc ? argv[i++] : NULL;
	arg2 = i < argc && takes_words(verb) ? argv[i++] : NULL;
	if (i < argc)
		return cli_usage("ctl", "unexpected argument '%s' (zmem ctl --help)", argv[i]);
	if (!in(run_is_target(where) ? run_verbs : server_verbs, verb))
		return unknown_verb(verb, run_is_target(where));
	if (run_is_target(where)) {
		if ((rc = run_ctl_line(verb, arg, line, sizeof(line))))
			return rc;
	} else if (!strcmp(verb, "mem-limit")) {
		uint64_t u = 0;

		if (!arg || (strcmp(arg, "none") && (cli_size(arg, &u) || u > SIZE_MAX)))
			return cli_usage("ctl", "mem-limit takes a size (64M, 1G, ...), 0 or none, "
					 "not '%s'", arg ? arg : "");
		snprintf(line, sizeof(line), "mem-limit %zu", (size_t)u);
	} else if (takes_words(verb)) {
		double age;

		if ((rc = check_args(verb, arg, arg2)))
			return rc;
		/* the server takes idle's age in seconds or, with ms, in ms */
		if (!strcmp(verb, "idle") && strcmp(arg, "all") && !cli_duration(arg, 1000, &age))
			snprintf(line, sizeof(line), "idle %ums", (unsigned)age);
		else
			snprintf(line, sizeof(line), "%s%s%s%s%s", verb, arg ? " " : "", arg ? arg : "",
			 arg2 ? " " : "", arg2 ? arg2 : "");
	} else if (arg) {
		return cli_usage("ctl", "%s takes no argument, not '%s'", verb, arg);
	} else {
		snprintf(line, sizeof(line), "%s", verb);
	}
	if (!(where = target("ctl", where, buf, sizeof(buf), ms)))
		return CLI_FAIL;
	if (!strcmp(verb, "info") || !strcmp(verb, "json"))
		return ctl_document(where, verb, line, ms);
	return control_send("ctl", where, line, stdout, ms) ? CLI_FAIL : CLI_OK;
}

int cmd_stop(int argc, char **argv)
{
	char buf[4200];
	const char *where = NULL, *tmo = NULL;
	uint64_t end;
	unsigned ms;
	int rc;
	const struct opt table[] = { O_TIMEOUT(&tmo), O_END };
	const struct opt_cmd cmd = {
		"stop", TARGET_ARGS,
		"Stop a running zmem serve (as SIGTERM does; requests in flight are\n"
		"answered first).  Returns once the server has let go of its sockets.",
		table, TARGET_MORE,
	};

	rc = parse_target(&cmd, argc, argv, &where);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if ((rc = cli_client_timeout("stop", tmo, &ms)))
		return rc;
	if (!(where = target("stop", where, buf, sizeof(buf), ms)))
		return CLI_FAIL;
	if (control_send("stop", where, "stop", stdout, ms))
		return CLI_FAIL;
	/* done when the server has let go of its names (its first step), so
	 * that a new server may take them the moment this returns */
	end = serve_now_ns() + (uint64_t)ms * 1000000ull;
	do {
		if (control_probe(where))
			return CLI_OK;
		usleep(10000);
	} while (serve_now_ns() < end);
	return cli_fail("stop", "the server still answers after %.3g s (--timeout)",
			(double)ms / 1000);
}
