/*
 * zmem serve: a compressed RAM disk over NBD (src/serve/, docs/serve.md).
 * zmem stats: what a running server holds, through its control socket.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve/serve.h"

static void serve_usage(FILE *f)
{
	fprintf(f,
		"usage: zmem serve --size SIZE [OPTIONS]\n"
		"A compressed RAM disk over NBD: qemu, nbdcopy, fio, nbdinfo, nbd-client.\n\n"
		"  --size SIZE        size of the disk (4096, 64M, 4G, ...); required\n"
		"  --codec NAME       lz4 (default), zstd[:LEVEL], lzo, none\n"
		"  --allocator NAME   pool backend (default zsmalloc)\n"
		"  --page-size N      the unit compressed: 4096 (default) .. 65536; larger\n"
		"                     pages compress better, smaller writes cost more\n"
		"  --mem-limit SIZE   memory the store may hold; writes beyond get ENOSPC\n"
		"  --read-only        refuse writes (EPERM)\n"
		"  --threads N        worker threads for reads and writes (default: CPUs;\n"
		"                     0 = each connection's own thread does its requests)\n"
		"  --socket PATH      Unix socket to listen on (default $XDG_RUNTIME_DIR/zmem.sock,\n"
		"                     else /tmp/zmem-UID.sock); the control socket is PATH.ctl\n"
		"  --port PORT        listen on TCP instead, on 127.0.0.1 unless --bind\n"
		"  --bind ADDR        TCP address to bind\n"
		"  --control PATH     control socket for zmem stats (default SOCKET.ctl)\n"
		"  --foreground, -f   stay in the foreground (default: detach once listening)\n"
		"  --pidfile FILE     write the server's pid there\n"
		"  -v, --verbose      log connections to stderr\n\n"
		"Socket activation (LISTEN_FDS/LISTEN_PID) is used when present, as in\n"
		"  nbdinfo -- [ zmem serve --size 1G ]\n"
		"Clients: nbd+unix:///?socket=PATH (libnbd, qemu), nbd://127.0.0.1:PORT\n");
}

int cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "codec", required_argument, NULL, 'c' },
		{ "allocator", required_argument, NULL, 'a' },
		{ "page-size", required_argument, NULL, 'g' },
		{ "mem-limit", required_argument, NULL, 'm' },
		{ "read-only", no_argument, NULL, 'r' },
		{ "threads", required_argument, NULL, 't' },
		{ "socket", required_argument, NULL, 'S' },
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "control", required_argument, NULL, 'C' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "pidfile", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct zmi_serve_config cfg = { .threads = (unsigned)cli_ncpus() };
	char defsock[256];
	int o;

	while ((o = getopt_long(argc, argv, "fvh", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			cfg.size = cli_parse_size(optarg);
			if (!cfg.size) {
				fprintf(stderr, "zmem serve: bad --size '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c': cfg.codec = optarg; break;
		case 'a': cfg.allocator = optarg; break;
		case 'g':
			cfg.page_size = cli_parse_size(optarg);
			if (cfg.page_size < 4096 || cfg.page_size > 65536 ||
			    (cfg.page_size & (cfg.page_size - 1))) {
				fprintf(stderr, "zmem serve: --page-size must be a power of two "
					"in 4096..65536\n");
				return 2;
			}
			break;
		case 'm':
			cfg.mem_limit = cli_parse_size(optarg);
			if (!cfg.mem_limit) {
				fprintf(stderr, "zmem serve: bad --mem-limit '%s'\n", optarg);
				return 2;
			}
			break;
		case 'r': cfg.read_only = true; break;
		case 't': {
			char *end;
			long n = strtol(optarg, &end, 10);

			if (*end || n < 0 || n > 256) {
				fprintf(stderr, "zmem serve: --threads takes 0..256\n");
				return 2;
			}
			cfg.threads = (unsigned)n;
			break;
		}
		case 'S': cfg.socket = optarg; break;
		case 'p': {
			char *end;
			long n = strtol(optarg, &end, 10);

			if (*end || n < 1 || n > 65535) {
				fprintf(stderr, "zmem serve: bad --port '%s'\n", optarg);
				return 2;
			}
			cfg.port = (int)n;
			break;
		}
		case 'b': cfg.bind = optarg; break;
		case 'C': cfg.control = optarg; break;
		case 'f': cfg.foreground = true; break;
		case 'P': cfg.pidfile = optarg; break;
		case 'v': cfg.verbose = true; break;
		case 'h': serve_usage(stdout); return 0;
		default: serve_usage(stderr); return 2;
		}
	}
	if (optind < argc || !cfg.size) {
		serve_usage(stderr);
		return 2;
	}
	if (cfg.bind && !cfg.port) {
		fprintf(stderr, "zmem serve: --bind needs --port\n");
		return 2;
	}
	if (!cfg.socket) {
		const char *rt = getenv("XDG_RUNTIME_DIR");

		if (rt && *rt)
			snprintf(defsock, sizeof(defsock), "%s/zmem.sock", rt);
		else
			snprintf(defsock, sizeof(defsock), "/tmp/zmem-%u.sock", (unsigned)getuid());
		cfg.socket = defsock;
	}
	return serve_main(&cfg);
}

int cmd_stats(int argc, char **argv)
{
	bool json = false;
	const char *path = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zmem stats [--json] SOCKET\n"
			       "The statistics of the zmem serve listening on SOCKET (through\n"
			       "SOCKET.ctl): zram's mm_stat, the store, the per-class table,\n"
			       "connections, requests and errors.\n");
			return 0;
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			fprintf(stderr, "usage: zmem stats [--json] SOCKET\n");
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: zmem stats [--json] SOCKET\n");
		return 2;
	}
	return control_query(path, json);
}
