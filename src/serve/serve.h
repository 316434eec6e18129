/*
 * zmem serve: a compressed RAM disk over NBD.  The front end of the store
 * (include/zmem/store.h) for block clients: qemu, nbdcopy, fio, libnbd
 * programs, the kernel's nbd client.  Uses only the public headers (and
 * src/base/units.h, header-only, for the sizes of its report).
 *
 *   disk.c       byte ranges on the store: unaligned reads and
 *                read-modify-write, zeroing, trimming, allocation status
 *   conn.c       a connection's byte stream (a socket, or a buffer for the
 *                fuzzer), big-endian packing
 *   handshake.c  the fixed newstyle option haggling
 *   transmit.c   requests: parse, check, execute, reply
 *   server.c     listening sockets, connections, the worker pool, shutdown
 *   process.c    default paths, detaching, the pidfile, the registry of
 *                running servers, a captive command (--run)
 *   control.c    the control socket: statistics (zmem stats, list) and
 *                run-time verbs (zmem ctl)
 *
 * Threads: the main thread accepts; each connection has a reader thread
 * that runs the handshake and reads requests; reads and writes are handed
 * to a pool of --threads workers (so one connection's requests overlap,
 * as qemu and fio send them), and replies leave under the connection's
 * send lock.  The control socket has its own thread.
 *
 * Lock order: server.lock (connection list, counters' totals) ->
 * conn.lock (in-flight count) -> server.budget_lock; conn.send_lock is
 * taken alone, and inside it only a read's disk access (a reply sent in
 * pieces); a disk stripe lock is taken alone, one at a time, by whoever
 * executes a request, and inside it only the store's own slot locks.
 */
#ifndef ZM_SERVE_H
#define ZM_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <zmem/store.h>

/* ---- disk.c ----------------------------------------------------------- */

/* Partial-page writes read, modify and write back a page; two such writes
 * to the same page, or one and a whole-page write, must not interleave.
 * A page's writers take one of DISK_STRIPES mutexes, by page number: 4096
 * stripes make two unrelated pages collide rarely with 2..64 writers and
 * cost 160 KiB. */
#define DISK_STRIPES 4096

/* Block status reports a run of pages that read as zeros (written zeros
 * or holes) shorter than this as data, and a run of holes shorter than
 * this inside a longer run of zeros as zeros (disk.c): clients walk
 * extents one by one, and real data's scattered zero pages made thousands
 * of them (docs/results/2026-12-04-block-status.md). */
#define SERVE_ZERO_RUN_MIN (64u << 10)

struct serve_disk {
	struct zm_store *store;
	uint64_t size;            /* bytes exported */
	size_t page_size;
	unsigned page_shift;
	uint64_t zero_run_pages;  /* SERVE_ZERO_RUN_MIN in pages, at least 1 */
	unsigned unit_shift;      /* log2 of the store's unit_pages: whole
				     pages of a write go to the store a unit
				     at a time, under the unit's stripe */
	pthread_mutex_t stripe[DISK_STRIPES];
};

int disk_init(struct serve_disk *d, struct zm_store *store, uint64_t size, unsigned unit_pages);
void disk_fini(struct serve_disk *d);
/* All return 0 or a negative errno from the store (-ENOSPC for the memory
 * limit, -EIO, -ENOMEM).  scratch: page_size bytes of the caller's. */
int disk_read(struct serve_disk *d, uint64_t off, uint32_t len, void *buf, void *scratch);
int disk_write(struct serve_disk *d, uint64_t off, uint32_t len, const void *buf, void *scratch);
/* Zero a range; whole pages (the disk's partial last page counts as
 * whole when zeroed from its start) become holes when may_hole (trim, or
 * write-zeroes without NO_HOLE), else zero-filled pages (which take no
 * pool memory either, but read back as allocated); a partial page left
 * all zeros becomes a hole when may_hole. */
int disk_zero(struct serve_disk *d, uint64_t off, uint64_t len, bool may_hole, void *scratch);

/* base:allocation extents from off, at most max of them, covering at most
 * len bytes: lengths and NBD_STATE_* flags into ext[2*i], ext[2*i+1].
 * Zero and hole runs shorter than SERVE_ZERO_RUN_MIN are reported as the
 * run around them.  Each extent runs as far as its status does (so with
 * max 1, NBD's REQ_ONE, the one extent still covers the whole run), and stretches
 * never written are skipped without a look at their pages: a sparse 1 TiB
 * disk answers in microseconds.  Returns how many (at least 1). */
unsigned disk_extents(struct serve_disk *d, uint64_t off, uint32_t len, uint32_t *ext,
		      unsigned max);

/* ---- conn.c --------------------------------------------------------- */

/* Buffers a connection keeps for reuse, and the most bytes they may hold
 * together: 16 requests of nbdcopy's 256 KiB fit.  Buffers above
 * CONN_BUF_MAX_ONE are never kept.  The cache goes when the connection
 * closes. */
#define CONN_BUFS 16
#define CONN_BUF_BYTES (4u << 20)
#define CONN_BUF_MAX_ONE (1u << 20)

struct serve_server;

/* A connection's transport: a socket, or (fuzzing) callbacks. */
struct nbd_io {
	/* read exactly n bytes: 0, or -1 on EOF or error */
	int (*recv)(void *ctx, void *buf, size_t n);
	/* write every byte of the vector: 0, or -1 */
	int (*send)(void *ctx, const struct iovec *iov, int n);
	void *ctx;
};

struct nbd_conn {
	struct serve_server *srv;
	struct nbd_io io;
	int fd;                   /* -1 when io is not a socket */
	unsigned id;
	/* negotiated */
	bool structured;          /* NBD_OPT_STRUCTURED_REPLY acknowledged */
	bool meta_alloc;          /* base:allocation selected */
	uint16_t tflags;          /* transmission flags sent */
	/* time limits (conn.c): set by the reader thread, read by its recv;
	 * tx_deadline_ns under send_lock */
	uint64_t rx_deadline_ns;  /* the handshake, or a payload, must be in by
				     then; 0: none */
	unsigned rx_idle_ms;      /* a payload may pause this long; 0: forever */
	unsigned rx_rest_idle_ms; /* once a read has begun, the rest may pause
				     this long (a request header); 0: forever */
	uint64_t tx_deadline_ns;  /* a reply sent in pieces ends by then; 0:
				     each send gets the time limit */
	unsigned rx_stop;         /* what a read may give up when the server
				     stops (RX_STOP_*) */
	bool timed_out;           /* a limit ended the connection (atomic: the
				     reader and a worker may both set it) */
	/* state */
	pthread_mutex_t lock;     /* inflight */
	pthread_cond_t idle;      /* inflight fell */
	unsigned inflight;
	size_t inflight_bytes;
	size_t budget_held;       /* of the server's budget (budget_lock) */
	unsigned queued;          /* of those, in the worker pool */
	pthread_mutex_t send_lock;
	bool dead;                /* a send failed: no more replies (send_lock) */
	bool finished;            /* the reader has ended (atomic): join it */
	/* payload buffers kept for reuse (buf_lock): a fresh malloc of
	 * 256 KiB is a fresh mmap, and filling it costs a page fault per
	 * 4 KiB -- most of the server's time under nbdcopy before this */
	pthread_mutex_t buf_lock;
	unsigned nbufs;
	size_t buf_bytes;
	void *buf[CONN_BUFS];
	size_t buf_cap[CONN_BUFS];
	pthread_t thread;
	struct nbd_conn *next, *prev;  /* server list; server.lock */
};

/* A reader blocked between requests wakes this often (its socket's
 * receive timeout) to see whether the server stops: a poll on a stop
 * pipe there would cost every request two system calls more. */
#define SERVE_STOP_CHECK_MS 100

/* nbd_conn.rx_stop: a read never gives up for the server's stop midway
 * through a request, whose payload the client may still be sending (a
 * request taken is answered); it gives up between requests and in the
 * handshake. */
enum {
	RX_STOP_NEVER,            /* a request's header begun, or its payload */
	RX_STOP_IDLE,             /* until the first byte (a request header) */
	RX_STOP_ANY,              /* the handshake */
};

/* Set up and tear down a connection's locks and buffer cache. */
void conn_init(struct nbd_conn *c, struct serve_server *srv, struct nbd_io io, int fd);
void conn_fini(struct nbd_conn *c);
/* A buffer of at least len bytes (*cap gets its size), from the cache or
 * malloc; and back.  NULL when memory ran out. */
void *conn_buf_get(struct nbd_conn *c, size_t len, size_t *cap);
void conn_buf_put(struct nbd_conn *c, void *buf, size_t cap);
/* Free the cached buffers (the connection is done with requests). */
void conn_buf_drop(struct nbd_conn *c);

/* A socket's transport; ctx is the connection (its fd and time limits). */
int conn_sock_recv(void *ctx, void *buf, size_t n);
int conn_sock_send(void *ctx, const struct iovec *iov, int n);
uint64_t serve_now_ns(void);
/* discard n bytes of input */
int conn_skip(struct nbd_conn *c, uint64_t n);

static inline void put_be16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static inline void put_be32(uint8_t *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}
static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}
static inline uint16_t get_be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)get_be16(p) << 16 | get_be16(p + 2);
}
static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* ---- handshake.c / transmit.c --------------------------------------- */

/* Most bytes one request may carry or ask for: 32 MiB, the protocol's
 * customary maximum (advertised in NBD_INFO_BLOCK_SIZE). */
#define NBD_MAX_PAYLOAD (32u << 20)

/* Returns 0 to go on to transmission, -1 to close the connection. */
int nbd_handshake(struct nbd_conn *c);
/* The request loop; returns when the client leaves or breaks the
 * protocol, after every request it sent has been answered. */
void nbd_transmit(struct nbd_conn *c);

/* ---- server.c ------------------------------------------------------- */

/* zmem serve's pages with zstd unless --page-size or --unit-pages says
 * otherwise: 4 KiB pages in units of this many (a random 4 KiB write
 * costs a 4 KiB page's, a sequential copy gets a unit's density); 4 KiB
 * pages alone with the other codecs (docs/serve.md). */
#define SERVE_ZSTD_UNIT_PAGES 16

struct serve_config {
	uint64_t size;            /* bytes */
	const char *codec;        /* NULL = lz4 */
	const char *allocator;    /* NULL = zsmalloc */
	size_t page_size;         /* store page; 0 = 4096 */
	unsigned unit_pages;      /* the store's unit_pages; 0 = 1 */
	size_t mem_limit;         /* 0 = none */
	bool read_only;
	unsigned threads;         /* workers; 0 = run requests in the reader */
	const char *socket;       /* Unix socket path */
	const char *control;      /* control socket path; NULL = socket + ".ctl" */
	unsigned socket_mode;     /* the Unix socket's permissions; 0 = 0600
				     (the control socket is always 0600) */
	const char *bind;         /* TCP address (with port) */
	int port;                 /* TCP port; 0 = Unix socket */
	bool foreground;
	const char *pidfile;
	bool verbose;
	unsigned timeout_s;       /* the time limit; 0 = SERVE_TIMEOUT_S */
	unsigned timeout_ms;      /* the time limit in ms, if not 0 (the tests';
				     zmem serve's --timeout is whole seconds) */
	bool print_uri;           /* print the URI on stdout once listening */
	const char *run;          /* captive: serve until this command exits */
	bool exit_with_parent;    /* stop when the parent process exits */
	/* cold data (the store's config of the same names) */
	const char *backing;      /* backing file for writeback, or an NBD
				     URI (serve_backing_is_uri); NULL = none */
	uint64_t writeback_limit; /* pages that may go to it; 0 = no limit */
	const char *recompress;   /* secondary codec, name[:LEVEL]; NULL = none */
	unsigned idle_after_ms;   /* automatic tiering after this idle time;
				     0 = only when asked (zmem ctl) */
	bool readback;            /* a read of a page on file brings it back */
	uint64_t clean_rate;      /* the packed file's automatic cleaner,
				     bytes a second (file_clean_rate); 0 = off */
};

/* Counters shown by zmem stats; atomics. */
enum serve_counter {
	SC_CONNECTIONS,           /* accepted, ever */
	SC_ACTIVE,                /* open now */
	SC_HANDSHAKE_FAILS,
	SC_REQUESTS,
	SC_READS, SC_WRITES, SC_FLUSHES, SC_TRIMS, SC_ZEROES, SC_CACHES, SC_STATUS,
	SC_BYTES_READ, SC_BYTES_WRITTEN,
	SC_ERRORS,                /* requests answered with an error */
	SC_PROTOCOL_ERRORS,       /* connections dropped for breaking the protocol */
	SC_TIMEOUTS,              /* connections dropped by a time limit */
	SC_STREAMED,              /* writes and reads that found no room in the
				     budget: done a page at a time outside it */
	SC_NR
};

/* One request, from its header to its reply (transmit.c). */
struct serve_job {
	struct nbd_conn *c;
	uint16_t flags, type;
	uint64_t cookie, offset;
	uint32_t len;
	uint8_t *data;            /* a write's payload (conn_buf_get) */
	size_t data_cap;
	size_t charged;           /* payload bytes counted in flight */
	bool offloaded;           /* runs in the worker pool */
	struct serve_job *next;   /* server queue */
};

struct serve_server {
	struct serve_config cfg;   /* timeout_ms filled in */
	struct zm_store *store;
	struct serve_disk disk;
	uint64_t counter[SC_NR];
	uint64_t started_ns;
	/* workers */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct serve_job *qhead, *qtail;
	unsigned qlen;            /* jobs queued (qlock) */
	unsigned idle;            /* workers waiting for a job (qlock) */
	uint64_t *send_since;     /* per worker: when its reply's send began,
				     0 when not in one (atomic) */
	unsigned worker_ids;      /* handed to workers as they start (atomic) */
	bool stopping;
	pthread_t *workers;
	unsigned nworkers;
	/* payload and reply bytes held over all connections (budget_lock) */
	pthread_mutex_t budget_lock;
	size_t budget_used;
	/* connections */
	pthread_mutex_t lock;
	bool stopping_conns;      /* readers take no new request (atomic) */
	struct nbd_conn *conns;
	unsigned next_id;
	/* what zmem list and ctl show; set before the control thread starts */
	char uri[4200];
	int stop_fd;              /* written to stop the server (ctl stop); -1 */
	int drain_fd[2];          /* a pipe, written once the connections
				     stop taking requests: handshakes see
				     it; -1 when none */
};

/* The time limit from now, as a deadline for conn.c. */
static inline uint64_t serve_deadline(const struct serve_server *s)
{
	return serve_now_ns() + (uint64_t)s->cfg.timeout_ms * 1000000ull;
}

/* A deadline moves a second later for every SERVE_MIN_RATE bytes that
 * do get through (conn.c): a slow but steady link finishes a 32 MiB
 * transfer, while a trickle cannot hold one open much past the limit,
 * nor a client that takes nothing at all. */
#define SERVE_MIN_RATE (1u << 20)

static inline void serve_count(struct serve_server *s, enum serve_counter c, uint64_t n)
{
	__atomic_fetch_add(&s->counter[c], n, __ATOMIC_RELAXED);
}

/* Create the store and disk (no sockets, no threads): for zmem serve and
 * for the fuzzer.  0 or a negative errno. */
int server_init(struct serve_server *s, const struct serve_config *cfg);
void server_fini(struct serve_server *s);
/* Most bytes of request payloads and read replies held over all
 * connections.  A connection may hold at most a fair share of it, the
 * budget over the connections open (and never more than its own limit,
 * transmit.c); a request that finds no room does not wait for it but is
 * done in pieces through one page-sized buffer outside the budget, so no
 * client holding its share, stalled or not, can stop another's progress.
 * Memory for requests is thus at most the budget plus, a connection, a
 * page (or a DF read of up to 64 KiB) and its buffer cache (CONN_BUF_BYTES).
 * With 64 MiB a connection, four clients at their limit fit. */
#define SERVE_PAYLOAD_BUDGET ((size_t)256 << 20)
/* Take bytes for connection c if they fit the budget and c's share:
 * true, and c->budget_held grows; false, and nothing is taken. */
bool server_budget_try(struct serve_server *s, struct nbd_conn *c, size_t bytes);
void server_budget_put(struct serve_server *s, struct nbd_conn *c, size_t bytes);

/* The time limit (--timeout, cfg.timeout_s or timeout_ms): a client that does not take
 * a whole reply within it is dropped (so that it cannot hold a worker or
 * a buffer); one that does not finish the handshake within it, from its
 * first byte to its last, too (so that idle sockets cannot use up the
 * connections); one whose request payload stops arriving for that long
 * too.  Between requests a client may be idle as long as it likes. */
#define SERVE_TIMEOUT_S 30

/* Queue a job for the workers, or run it here when there are none, or
 * when some are held in a send (a client that does not take its reply
 * holds its worker up to the time limit) and the others have a job queued
 * each already: no client's write waits for a worker another client
 * holds. */
void server_submit(struct serve_server *s, struct serve_job *job);
/* A worker in a send this long is taken to be held by its client. */
#define SEND_STUCK_NS 2000000ull
/* Around a reply's send: marks the calling worker as sending (nothing
 * for other threads). */
void serve_send_begin(void);
void serve_send_end(void);
void serve_job_run(struct serve_job *job);
/* Free the calling thread's page buffer (at thread exit). */
void serve_scratch_free(void);

/* zmem serve: parse nothing, run until SIGINT/SIGTERM.  Exit status. */
int serve_main(const struct serve_config *cfg);

/* ---- process.c ------------------------------------------------------ */

/* A default path: $XDG_RUNTIME_DIR/zmem SUFFIX, else /tmp/zmem-UID/zmem
 * SUFFIX (".sock", ".d", "-tcp-PORT.ctl"). */
void serve_default_path(char *buf, size_t n, const char *suffix);
/* The folder of the default paths into dir, made (0700) if create when
 * it is /tmp/zmem-UID: 0, or -1 (errno; EPERM when it is not a folder of
 * the user's own that no one else may use).  $XDG_RUNTIME_DIR is taken
 * as it is. */
int serve_private_dir(char *dir, size_t n, bool create);
/* Before listening: -1 (said on stderr) when a socket of cfg's would go
 * into a default folder that is not private. */
int serve_check_private(const struct serve_config *cfg);
/* Fork; the parent exits when the child calls serve_ready (status 0,
 * printing the announcement on its stdout) or serve_not_ready (1).  In
 * the child: 0 and *ready_fd; -1 if fork failed. */
int serve_detach(int *ready_fd);
void serve_ready(int ready_fd, const char *announce);
void serve_not_ready(int ready_fd);
/* Write our pid to path (atomically) and remember its inode; remove it
 * only if it is still that file.  0 or -1 (errno). */
int serve_pidfile_write(const char *path, ino_t *ino);
void serve_pidfile_remove(const char *path, ino_t ino);
/* The registry's folder into dir, made if create: 0, or -1 (errno) when
 * it is not a folder of the user's own that only they may write. */
int serve_registry_dir(char *dir, size_t n, bool create);
/* Add this server to the registry (entry gets the file's path) and take
 * it out.  0 or -1. */
int serve_register(const char *uri, const char *ctl, char *entry, size_t n);
void serve_unregister(const char *entry);
/* Run cmd with sh -c, $uri, $nbd (qemu's nbd:unix:SOCK or nbd:HOST:PORT)
 * and $socket or $port set, the signals in blocked unblocked.  The
 * child's pid, or -1. */
pid_t serve_run_captive(const char *cmd, const char *uri, const char *sock, const char *host,
			int port, const sigset_t *blocked);

/* ---- control.c ------------------------------------------------------ */

/* The memory limit's one range, for --mem-limit and zmem ctl mem-limit:
 * 0 (none) or at least a page of the disk's page size (below that no
 * write gets in, whatever room a backing file has).  0, or -1 and the
 * reason into why. */
int serve_check_mem_limit(uint64_t bytes, size_t page_size, char *why, size_t n);

/* The longest request line the control socket takes, its newline
 * included (docs/serve.md); a longer one is refused whole. */
#define CONTROL_LINE_MAX 1024

/* The control socket at path and its thread: 0 and *ctl, or -1 (said on
 * stderr).  control_stop closes it (path is the caller's to remove). */
struct serve_control;
int control_start(struct serve_server *s, const char *path, struct serve_control **ctl);
void control_stop(struct serve_control *ctl);
/* A listening Unix socket at path, created 0600 whatever the umask; a
 * stale socket file there (nobody answers) is replaced, anything else is
 * left alone.  fd or -1. */
int serve_listen_unix(const char *path);
/* peer.c: may the peer on a control connection drive the server?  Its
 * user must be the server's, or root: true; otherwise false, and the
 * refusal (one line) into why. */
bool serve_peer_allowed(int fd, char *why, size_t n);

/* Is --backing's value an NBD URI (the store's backing_uri) rather than
 * a file's path: nbd://, nbds://, nbd+unix://, nbds+unix://, nbd+vsock://? */
static inline bool serve_backing_is_uri(const char *v)
{
	return v && (!strncmp(v, "nbd://", 6) || !strncmp(v, "nbds://", 7) ||
		     !strncmp(v, "nbd+", 4) || !strncmp(v, "nbds+", 5));
}
/* The client side: send one line to the control socket at path (or, for
 * a data socket's path, path.ctl) and copy the answer to out.  Exit
 * status: 0, 1 when the server answered an error or could not be
 * reached or did not answer within timeout_ms (said on stderr as
 * "zmem CMD: ...", cmd the command asking). */
int control_send(const char *cmd, const char *path, const char *line, FILE *out,
		 unsigned timeout_ms);
/* How long the zmem commands wait for a server (zmem stats --timeout):
 * to connect, and then for each piece of its answer. */
#define CONTROL_CLIENT_TIMEOUT_MS 10000
/* Does a control socket answer at path (or path.ctl)?  0 if one does;
 * else -1 and errno (ECONNREFUSED, ENOENT: nobody listens there). */
int control_probe(const char *path);

#endif
