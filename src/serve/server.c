/*
 * zmem serve's process: the store, the listening sockets, a thread per
 * connection, the worker pool, and an orderly shutdown.
 *
 * Listening: a Unix socket (the default), TCP on 127.0.0.1 (or --bind)
 * when --port is given, or the sockets systemd-style socket activation
 * hands over (LISTEN_PID is us and LISTEN_FDS >= 1: fds 3, 4, ...), which
 * is how `nbdinfo -- [ zmem serve ... ]` and `nbdcopy -- [ ... ]` start a
 * server.  Without --foreground the server detaches once its socket
 * listens, so that a script may connect as soon as `zmem serve` returns.
 *
 * SIGINT, SIGTERM and SIGHUP stop it, the same way.  First it lets go of
 * its names -- the socket files are removed before their sockets close
 * and the pidfile if it is still the one this server wrote -- so that a
 * server started on the same paths meanwhile keeps them.  Then every
 * connection stops taking requests -- one begun is read whole, payload
 * included, and answered -- and gets the replies to those it sent (for
 * up to DRAIN_S seconds; a client not sending or not taking them is then
 * cut off), the workers leave and the store is destroyed, so a run under
 * valgrind or ASan ends with nothing leaked.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve.h"

/* Most connections at once; more are accepted and closed at once. */
#define MAX_CONNS 256
#define MAX_LISTEN 8
/* At shutdown, how long connections get to answer the requests they
 * have in flight. */
#define DRAIN_S 5

int server_init(struct serve_server *s, const struct serve_config *cfg)
{
	struct zm_store_config sc = { 0 };
	int rc;

	memset(s, 0, sizeof(*s));
	s->cfg = *cfg;
	s->stop_fd = -1;
	s->drain_fd[0] = s->drain_fd[1] = -1;
	if (!s->cfg.timeout_s)
		s->cfg.timeout_s = SERVE_TIMEOUT_S;
	if (!s->cfg.timeout_ms)
		s->cfg.timeout_ms = s->cfg.timeout_s * 1000u;
	if (!cfg->size)
		return -EINVAL;
	sc.page_size = cfg->page_size ? cfg->page_size : 4096;
	sc.nr_pages = (cfg->size + sc.page_size - 1) / sc.page_size;
	sc.unit_pages = cfg->unit_pages;
	sc.codec = cfg->codec;
	sc.allocator = cfg->allocator;
	sc.limit_bytes = cfg->mem_limit;
	/* the store takes an exclusive lock on it: a second server given
	 * the same file gets -EBUSY, as the kernel refuses a backing_dev
	 * that is in use */
	if (serve_backing_is_uri(cfg->backing))
		sc.backing_uri = cfg->backing;   /* another server's export */
	else
		sc.backing_path = cfg->backing;
	sc.writeback_limit = cfg->writeback_limit;
	sc.recompress_codec = cfg->recompress;
	sc.idle_after_ms = cfg->idle_after_ms;
	sc.backing_readback = cfg->readback;
	sc.file_clean_rate = cfg->clean_rate;
	rc = zm_store_create(&sc, &s->store);
	if (rc)
		return rc;
	disk_init(&s->disk, s->store, cfg->size, cfg->unit_pages);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);
	pthread_mutex_init(&s->budget_lock, NULL);
	s->started_ns = serve_now_ns();
	return 0;
}

bool server_budget_try(struct serve_server *s, struct nbd_conn *c, size_t bytes)
{
	size_t open = __atomic_load_n(&s->counter[SC_ACTIVE], __ATOMIC_RELAXED);
	size_t share = SERVE_PAYLOAD_BUDGET / (open ? open : 1);
	bool ok;

	pthread_mutex_lock(&s->budget_lock);
	/* within the budget and the share; a connection holding nothing may
	 * always take one request while nobody else holds anything */
	ok = (s->budget_used + bytes <= SERVE_PAYLOAD_BUDGET && c->budget_held + bytes <= share) ||
	     !s->budget_used;
	if (ok) {
		s->budget_used += bytes;
		c->budget_held += bytes;
	}
	pthread_mutex_unlock(&s->budget_lock);
	return ok;
}

void server_budget_put(struct serve_server *s, struct nbd_conn *c, size_t bytes)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&s->budget_lock);
	s->budget_used -= bytes;
	c->budget_held -= bytes;
	pthread_mutex_unlock(&s->budget_lock);
}

void server_fini(struct serve_server *s)
{
	disk_fini(&s->disk);
	zm_store_destroy(s->store);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->qcond);
	pthread_mutex_destroy(&s->budget_lock);
	s->store = NULL;
	for (int i = 0; i < 2; i++) {
		if (s->drain_fd[i] >= 0)
			close(s->drain_fd[i]);
		s->drain_fd[i] = -1;
	}
}

/* ---- the worker pool ------------------------------------------------- */

/* A worker's reply can wait on its client for up to the time limit.  The
 * time each worker's send began (0: not sending), so that a job is not
 * queued behind workers that a client holds. */
static __thread uint64_t *tl_send_since;

void serve_send_begin(void)
{
	if (tl_send_since)
		__atomic_store_n(tl_send_since, serve_now_ns(), __ATOMIC_RELAXED);
}

void serve_send_end(void)
{
	if (tl_send_since)
		__atomic_store_n(tl_send_since, 0, __ATOMIC_RELAXED);
}

/* Workers in a send for longer than SEND_STUCK_NS. */
static unsigned workers_stuck(struct serve_server *s)
{
	uint64_t now = 0;
	unsigned n = 0;

	for (unsigned i = 0; i < s->nworkers; i++) {
		uint64_t t = __atomic_load_n(&s->send_since[i], __ATOMIC_RELAXED);

		if (t && !now)
			now = serve_now_ns();
		n += t && now - t > SEND_STUCK_NS;
	}
	return n;
}

void server_submit(struct serve_server *s, struct serve_job *job)
{
	unsigned stuck = workers_stuck(s);

	job->next = NULL;
	pthread_mutex_lock(&s->qlock);
	if (!s->nworkers || (stuck && s->qlen >= s->nworkers - stuck)) {
		/* no worker, or the free ones have work enough: run it here */
		pthread_mutex_unlock(&s->qlock);
		serve_job_run(job);
		return;
	}
	s->qlen++;
	if (s->qtail)
		s->qtail->next = job;
	else
		s->qhead = job;
	s->qtail = job;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
}

static void *worker(void *arg)
{
	struct serve_server *s = arg;

	tl_send_since = &s->send_since[__atomic_fetch_add(&s->worker_ids, 1, __ATOMIC_RELAXED)];
	pthread_mutex_lock(&s->qlock);
	for (;;) {
		struct serve_job *j = s->qhead;

		if (!j) {
			if (s->stopping)
				break;
			s->idle++;
			pthread_cond_wait(&s->qcond, &s->qlock);
			s->idle--;
			continue;
		}
		s->qlen--;
		s->qhead = j->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_mutex_unlock(&s->qlock);
		serve_job_run(j);
		pthread_mutex_lock(&s->qlock);
	}
	pthread_mutex_unlock(&s->qlock);
	serve_scratch_free();
	return NULL;
}

static int workers_start(struct serve_server *s)
{
	if (!s->cfg.threads)
		return 0;
	s->workers = calloc(s->cfg.threads, sizeof(pthread_t));
	s->send_since = calloc(s->cfg.threads, sizeof(uint64_t));
	if (!s->workers || !s->send_since)
		return -ENOMEM;
	for (unsigned i = 0; i < s->cfg.threads; i++) {
		if (pthread_create(&s->workers[i], NULL, worker, s))
			break;
		s->nworkers++;
	}
	return s->nworkers ? 0 : -EAGAIN;
}

static void workers_stop(struct serve_server *s)
{
	pthread_mutex_lock(&s->qlock);
	s->stopping = true;
	pthread_cond_broadcast(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	for (unsigned i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	free(s->send_since);
	s->workers = NULL;
	s->send_since = NULL;
	s->nworkers = 0;
}

/* ---- connections ----------------------------------------------------- */

static void *conn_thread(void *arg)
{
	struct nbd_conn *c = arg;
	struct serve_server *s = c->srv;

	/* the whole handshake within the time limit, however it trickles */
	c->rx_deadline_ns = serve_deadline(s);
	c->rx_stop = RX_STOP_ANY;
	if (nbd_handshake(c) == 0) {
		c->rx_deadline_ns = 0;
		nbd_transmit(c);
	} else {
		serve_count(s, SC_HANDSHAKE_FAILS, 1);
	}
	if (__atomic_load_n(&c->timed_out, __ATOMIC_RELAXED))
		serve_count(s, SC_TIMEOUTS, 1);
	serve_scratch_free();
	conn_buf_drop(c);  /* every job is done: give the memory back now */
	shutdown(c->fd, SHUT_RDWR);
	if (s->cfg.verbose)
		fprintf(stderr, "zmem serve: connection %u closed\n", c->id);
	__atomic_fetch_sub(&s->counter[SC_ACTIVE], 1, __ATOMIC_RELAXED);
	return NULL;
}

static void conn_free(struct nbd_conn *c)
{
	close(c->fd);
	conn_fini(c);
	free(c);
}

/* Join connections whose thread has ended (all, when stopping: every one
 * is shut down first, so that none waits on another's stuck client). */
static void conns_reap(struct serve_server *s, bool all)
{
	pthread_mutex_lock(&s->lock);
	if (all)
		for (struct nbd_conn *c = s->conns; c; c = c->next)
			shutdown(c->fd, SHUT_RDWR);
	for (struct nbd_conn *c = s->conns, *next; c; c = next) {
		next = c->next;
		if (!all && !__atomic_load_n(&c->finished, __ATOMIC_ACQUIRE))
			continue;
		pthread_join(c->thread, NULL);
		if (c->prev)
			c->prev->next = c->next;
		else
			s->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		conn_free(c);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Stop reading requests on every connection and wait, up to DRAIN_S,
 * for each to answer what it has in flight and end; then end the rest. */
static void conns_drain(struct serve_server *s)
{
	uint64_t deadline = serve_now_ns() + DRAIN_S * 1000000000ull;
	bool left = true;

	/* readers waiting between requests see stopping_conns (within
	 * SERVE_STOP_CHECK_MS), handshakes the pipe, and end; one
	 * within a request reads the rest of it first (its payload may still
	 * be arriving), answers, then sees stopping_conns.  Shutting the
	 * sockets' read side instead would refuse the rest of a payload
	 * whose header was taken. */
	__atomic_store_n(&s->stopping_conns, true, __ATOMIC_SEQ_CST);
	if (s->drain_fd[1] < 0 || write(s->drain_fd[1], "", 1) != 1) {
		pthread_mutex_lock(&s->lock);
		for (struct nbd_conn *c = s->conns; c; c = c->next)
			shutdown(c->fd, SHUT_RD);  /* no pipe: EOF, replies still go */
		pthread_mutex_unlock(&s->lock);
	}
	while (left && serve_now_ns() < deadline) {
		left = false;
		pthread_mutex_lock(&s->lock);
		for (struct nbd_conn *c = s->conns; c; c = c->next)
			left |= !__atomic_load_n(&c->finished, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&s->lock);
		if (left)
			usleep(10000);
	}
	conns_reap(s, true);
}

static void *conn_thread_main(void *arg)
{
	struct nbd_conn *c = arg;

	conn_thread(c);
	__atomic_store_n(&c->finished, true, __ATOMIC_RELEASE);  /* join me */
	return NULL;
}

static void conn_accept(struct serve_server *s, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	struct nbd_conn *c;

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			usleep(100000);  /* out of descriptors: do not spin on poll */
		return;
	}
	if (__atomic_load_n(&s->counter[SC_ACTIVE], __ATOMIC_RELAXED) >= MAX_CONNS ||
	    !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	{
		/* TCP: replies leave at once, not when the last one is acked
		 * (Nagle held small replies back for a delayed ack); on a Unix
		 * socket this fails and means nothing */
		int one = 1;
		/* a reader blocked between requests wakes this often to see
		 * whether the server stops (conn.c) */
		struct timeval tv = { 0, SERVE_STOP_CHECK_MS * 1000 };

		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	conn_init(c, s, (struct nbd_io){ conn_sock_recv, conn_sock_send, NULL }, fd);
	c->io.ctx = c;
	pthread_mutex_lock(&s->lock);
	c->id = ++s->next_id;
	serve_count(s, SC_CONNECTIONS, 1);
	serve_count(s, SC_ACTIVE, 1);
	if (pthread_create(&c->thread, NULL, conn_thread_main, c)) {
		serve_count(s, SC_ACTIVE, (uint64_t)-1);
		pthread_mutex_unlock(&s->lock);
		conn_free(c);
		return;
	}
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	pthread_mutex_unlock(&s->lock);
	if (s->cfg.verbose)
		fprintf(stderr, "zmem serve: connection %u\n", c->id);
}

/* ---- listening ------------------------------------------------------- */

static int bind_private(int fd, const struct sockaddr_un *a)
{
	/* the file gets 0777 & ~umask: owner-only whatever the caller's
	 * umask, from the start (a chmod after would leave a window) */
	mode_t old = umask(0177);
	int rc = bind(fd, (const struct sockaddr *)a, sizeof(*a));
	int err = errno;

	umask(old);
	errno = err;
	return rc;
}

int serve_listen_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "zmem serve: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind_private(fd, &a)) {
		/* a stale socket file: remove it only if nobody answers on it */
		int err = errno, probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct stat st;
		bool in_use = err == EADDRINUSE;
		bool sock = !stat(path, &st) && S_ISSOCK(st.st_mode);
		bool stale = in_use && sock && probe >= 0 &&
			     connect(probe, (struct sockaddr *)&a, sizeof(a));

		if (probe >= 0)
			close(probe);
		if (!stale || unlink(path) || bind_private(fd, &a)) {
			fprintf(stderr, "zmem serve: %s: %s\n", path,
				in_use && !sock ? "exists and is not a socket (not replaced)"
				: in_use ? "in use by a running server"
				: strerror(err));
			close(fd);
			return -1;
		}
	}
	if (listen(fd, 64)) {
		fprintf(stderr, "zmem serve: listen %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int listen_tcp(const char *bind_addr, int port, int *fds, int max)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	char ps[16];
	int n = 0, rc;

	snprintf(ps, sizeof(ps), "%d", port);
	rc = getaddrinfo(bind_addr ? bind_addr : "127.0.0.1", ps, &hints, &res);
	if (rc) {
		fprintf(stderr, "zmem serve: %s: %s\n", bind_addr, gai_strerror(rc));
		return 0;
	}
	for (ai = res; ai && n < max; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		int one = 1;

		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
			fprintf(stderr, "zmem serve: port %d: %s\n", port, strerror(errno));
			close(fd);
			continue;
		}
		fds[n++] = fd;
	}
	freeaddrinfo(res);
	return n;
}

/* systemd's protocol: LISTEN_PID = our pid, LISTEN_FDS = count from fd 3 */
static int listen_activated(int *fds, int max)
{
	const char *pid = getenv("LISTEN_PID"), *nfds = getenv("LISTEN_FDS");
	int n;

	if (!pid || !nfds || strtol(pid, NULL, 10) != getpid())
		return 0;
	n = (int)strtol(nfds, NULL, 10);
	if (n < 1)
		return 0;
	if (n > max)
		n = max;
	for (int i = 0; i < n; i++) {
		fds[i] = 3 + i;
		fcntl(fds[i], F_SETFD, FD_CLOEXEC);
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return n;
}

/* ---- the process ----------------------------------------------------- */

/* The URI clients use, the control socket's path (a default for a Unix
 * socket, SOCKET.ctl, and for TCP), and what a detaching server prints. */
static void names(const struct serve_config *cfg, const char *sockpath, bool activated,
		  char *uri, size_t un, char *ctl, size_t cn)
{
	const char *host = cfg->bind ? cfg->bind : "127.0.0.1";
	bool v6 = strchr(host, ':') != NULL;

	if (sockpath[0])
		snprintf(uri, un, "nbd+unix:///?socket=%s", sockpath);
	else if (!activated)
		snprintf(uri, un, "nbd://%s%s%s:%d/", v6 ? "[" : "", host, v6 ? "]" : "", cfg->port);
	else
		snprintf(uri, un, "(socket activation)");
	if (cfg->control) {
		snprintf(ctl, cn, "%s", cfg->control);
	} else if (sockpath[0]) {
		snprintf(ctl, cn, "%s.ctl", sockpath);
	} else if (!activated) {
		char suffix[32];

		snprintf(suffix, sizeof(suffix), "-tcp-%d.ctl", cfg->port);
		serve_default_path(ctl, cn, suffix);
	} else {
		ctl[0] = 0;
	}
}

static int listen_all(struct serve_config *cfg, int *lfd, char *sockpath, size_t n,
		      bool *activated)
{
	int nl = listen_activated(lfd, MAX_LISTEN);

	*activated = nl > 0;
	if (*activated)
		return nl;
	if (cfg->port)
		return listen_tcp(cfg->bind, cfg->port, lfd, MAX_LISTEN);
	if (cfg->socket[0] == '/')
		snprintf(sockpath, n, "%s", cfg->socket);
	else if (getcwd(sockpath, n - 2))
		snprintf(sockpath + strlen(sockpath), n - strlen(sockpath), "/%s", cfg->socket);
	lfd[0] = serve_listen_unix(sockpath);
	if (lfd[0] >= 0 && cfg->socket_mode && chmod(sockpath, cfg->socket_mode)) {
		fprintf(stderr, "zmem serve: chmod %s: %s\n", sockpath, strerror(errno));
		close(lfd[0]);
		unlink(sockpath);
		return 0;
	}
	return lfd[0] >= 0;
}

/* Serve until a signal, `zmem ctl stop`, the captive command's end or
 * the parent's.  The exit status: the captive command's, else 0. */
static int serve_loop(struct serve_server *s, int *lfd, int nl, int sfd, int stop_rd,
		      pid_t captive)
{
	int status = 0;

	for (;;) {
		struct pollfd pf[MAX_LISTEN + 2];
		bool stop = false;

		for (int i = 0; i < nl; i++)
			pf[i] = (struct pollfd){ .fd = lfd[i], .events = POLLIN };
		pf[nl] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pf[nl + 1] = (struct pollfd){ .fd = stop_rd, .events = POLLIN };
		if (poll(pf, (nfds_t)nl + 2, 1000) < 0 && errno != EINTR)
			break;
		if (pf[nl].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo == SIGCHLD) {
				int st;

				/* only the captive command's end stops us */
				if (captive > 0 && waitpid(captive, &st, WNOHANG) == captive) {
					status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
					stop = true;
				}
			} else {
				stop = true;
			}
		}
		if (stop || pf[nl + 1].revents)
			break;
		for (int i = 0; i < nl; i++)
			if (pf[i].revents & POLLIN)
				conn_accept(s, lfd[i]);
		conns_reap(s, false);
	}
	return status;
}

int serve_main(const struct serve_config *cfg_in)
{
	struct serve_config cfg = *cfg_in;
	struct serve_server *s;
	int lfd[MAX_LISTEN], nl, ready = -1, sfd = -1, rc, stop[2] = { -1, -1 };
	int status = 1;
	char sockpath[4096] = "", ctlpath[4200], uri[4200], entry[4200] = "";
	char announce[8600];
	struct serve_control *ctl = NULL;
	sigset_t mask;
	bool activated;
	ino_t pid_ino = 0;
	pid_t captive = 0;

	if (cfg.run || cfg.exit_with_parent)
		cfg.foreground = true;  /* tied to a process: never detach */
	if (serve_check_private(&cfg))
		return 1;
	nl = listen_all(&cfg, lfd, sockpath, sizeof(sockpath), &activated);
	if (!nl)
		return 1;  /* the listeners said why */
	if (activated)
		cfg.foreground = true;
	names(&cfg, sockpath, activated, uri, sizeof(uri), ctlpath, sizeof(ctlpath));

	/* fork before any thread exists (the store starts its compactor):
	 * a child keeps only the thread that forked */
	if (!cfg.foreground && serve_detach(&ready)) {
		fprintf(stderr, "zmem serve: fork: %s\n", strerror(errno));
		goto out_names;
	}
	if (cfg.exit_with_parent) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1) {  /* the parent left before the line above */
			s = NULL;
			status = 0;
			goto out_names;
		}
	}
	/* request buffers above 128 KiB are mmapped and unmapped on free:
	 * glibc's sliding threshold would otherwise keep a big client's
	 * buffers in its heaps after the client left */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* every thread from here on inherits the blocked signals; only the
	 * signalfd below sees them */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (cfg.run)
		sigaddset(&mask, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	s = malloc(sizeof(*s));
	rc = s ? server_init(s, &cfg) : -ENOMEM;
	if (rc) {
		if (cfg.backing && rc == -EBUSY)
			fprintf(stderr, "zmem serve: the backing file %s is in use by another "
				"server\n", cfg.backing);
		else if (cfg.backing)
			fprintf(stderr, "zmem serve: cannot create the store with the backing "
				"%s %s: %s\n", serve_backing_is_uri(cfg.backing) ? "export" : "file",
				cfg.backing, strerror(-rc));
		else
			fprintf(stderr, "zmem serve: cannot create the store: %s\n",
				strerror(-rc));
		free(s);
		s = NULL;
		goto out_names;
	}
	snprintf(s->uri, sizeof(s->uri), "%s", uri);
	if (cfg.pidfile && serve_pidfile_write(cfg.pidfile, &pid_ino)) {
		fprintf(stderr, "zmem serve: cannot write the pidfile %s: %s\n", cfg.pidfile,
			strerror(errno));
		goto out_store;
	}
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (sfd < 0 || pipe2(stop, O_CLOEXEC)) {
		fprintf(stderr, "zmem serve: cannot start: %s\n", strerror(errno));
		goto out_store;
	}
	s->stop_fd = stop[1];
	if (pipe2(s->drain_fd, O_CLOEXEC)) {
		fprintf(stderr, "zmem serve: cannot start: %s\n", strerror(errno));
		goto out_store;
	}
	if (workers_start(s)) {
		fprintf(stderr, "zmem serve: cannot start its workers: %s\n", strerror(errno));
		goto out_workers;
	}
	if (ctlpath[0] && control_start(s, ctlpath, &ctl))
		goto out_workers;  /* it said why */
	if (!activated)
		serve_register(uri, ctlpath, entry, sizeof(entry));
	if (cfg.verbose || (cfg.foreground && !cfg.run))
		fprintf(stderr, "zmem serve: %s (%llu bytes, %zu-byte pages, %s, %s)%s%s\n", uri,
			(unsigned long long)cfg.size, zm_store_page_size(s->store),
			cfg.codec ? cfg.codec : "lz4",
			cfg.allocator ? cfg.allocator : "zsmalloc", ctlpath[0] ? ", control " : "",
			ctlpath);
	if (ready < 0 && cfg.print_uri) {
		printf("%s\n", uri);
		fflush(stdout);
	}
	if (ready >= 0) {
		/* the caller prints the URI, then what to stop it by */
		snprintf(announce, sizeof(announce), "%s\npid %d, control %s\n", uri,
			 (int)getpid(), ctlpath[0] ? ctlpath : "none");
		int devnull = open("/dev/null", O_RDWR);

		if (devnull >= 0) {  /* let go of the caller's terminal or pipe */
			dup2(devnull, 0);
			dup2(devnull, 1);
			if (!cfg.verbose)
				dup2(devnull, 2);
			close(devnull);
		}
		serve_ready(ready, announce);
		ready = -1;
	}
	if (cfg.run) {
		captive = serve_run_captive(cfg.run, uri, sockpath[0] ? sockpath : NULL,
					    cfg.bind ? cfg.bind : "localhost", cfg.port, &mask);
		if (captive < 0)
			fprintf(stderr, "zmem serve: cannot run '%s': %s\n", cfg.run,
				strerror(errno));
	}
	status = captive < 0 ? 1 : serve_loop(s, lfd, nl, sfd, stop[0], captive);

	/* shutdown: the names first, each file removed before its socket
	 * closes, so that a new server binding the path meanwhile keeps it */
	serve_unregister(entry);
	if (cfg.pidfile)
		serve_pidfile_remove(cfg.pidfile, pid_ino);
	pid_ino = 0;
	if (sockpath[0])
		unlink(sockpath);
	sockpath[0] = 0;
	for (int i = 0; i < nl; i++)
		close(lfd[i]);
	nl = 0;
	if (ctl) {
		unlink(ctlpath);
		control_stop(ctl);
	}
	conns_drain(s);
	if (captive > 0)  /* still running if a signal stopped us */
		waitpid(captive, NULL, WNOHANG);
out_workers:
	workers_stop(s);
out_store:
	server_fini(s);
	free(s);
out_names:
	if (cfg.pidfile)
		serve_pidfile_remove(cfg.pidfile, pid_ino);
	if (sockpath[0])
		unlink(sockpath);
	for (int i = 0; i < nl; i++)
		close(lfd[i]);
	if (sfd >= 0)
		close(sfd);
	for (int i = 0; i < 2; i++)
		if (stop[i] >= 0)
			close(stop[i]);
	serve_not_ready(ready);
	return status;
}
