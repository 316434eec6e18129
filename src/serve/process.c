/*
 * The server as a process among others: where its files go by default,
 * detaching from the caller, the pidfile, the registry that `zmem list`
 * reads, and the command a captive server (--run) serves.
 *
 * Default paths live in $XDG_RUNTIME_DIR when it is set (zmem.sock,
 * zmem-tcp-PORT.ctl, zmem.d/), else in the folder /tmp/zmem-UID/ under
 * the same names: the server makes it owner-only and refuses to put its
 * sockets in one that is not the user's own and private, so that another
 * user can neither plant files at the names nor reach the sockets.  The
 * registry is a folder with one file per running server, named by its
 * pid, holding its URI and its control socket's path; a server adds its
 * file once it listens and removes it first thing when it stops, and
 * readers skip files whose pid is gone (a server killed with SIGKILL).
 * The folder must be the user's own, writable by no one else, and files
 * are created without following links: in /tmp another user could
 * otherwise make the server write, or zmem list remove, files of theirs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve/serve.h"

static const char *private_dir_name(char *buf, size_t n)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (rt && *rt)
		snprintf(buf, n, "%s", rt);
	else
		snprintf(buf, n, "/tmp/zmem-%u", (unsigned)getuid());
	return buf;
}

void serve_default_path(char *buf, size_t n, const char *suffix)
{
	char dir[4096];

	snprintf(buf, n, "%s/zmem%s", private_dir_name(dir, sizeof(dir)), suffix);
}

int serve_private_dir(char *dir, size_t n, bool create)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	private_dir_name(dir, n);
	if (rt && *rt)
		return 0;  /* the session's own (0700, made by the login manager) */
	if (create && mkdir(dir, 0700) && errno != EEXIST)
		return -1;
	/* in /tmp another user could have made it first, or a link to
	 * somewhere: only a folder of our own that no one else may use */
	if (lstat(dir, &st))
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int serve_check_private(const struct serve_config *cfg)
{
	char dir[4096];
	size_t len;

	if (!serve_private_dir(dir, sizeof(dir), true))
		return 0;
	len = strlen(dir);
#define IN_DIR(p) ((p) && !strncmp((p), dir, len) && (p)[len] == '/')
	if (!IN_DIR(cfg->socket) && !IN_DIR(cfg->control) && !(cfg->port && !cfg->control))
		return 0;  /* nothing of ours goes there (the registry is skipped) */
#undef IN_DIR
	fprintf(stderr, "zmem serve: %s: %s; the default paths go there, and it must be a "
		"folder of this user's own that no one else may use: remove it, set "
		"XDG_RUNTIME_DIR, or give --socket and --control elsewhere\n", dir,
		errno == EPERM ? "not this user's private folder" : strerror(errno));
	return -1;
}

/* ---- detaching ------------------------------------------------------- */

/* The parent waits for the child's word: a status byte (0: listening),
 * then what to print on stdout (the URI and pid), then end of file.  What
 * it could not print is a write error and status 1, as coreutils say it;
 * the server runs on, and the message gives its pid. */
int serve_detach(int *ready_fd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0) {
		char c = 1, out[8192];
		ssize_t n;
		int err = 0;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		while (!c && !err && (n = read(p[0], out, sizeof(out))) > 0)
			if (fwrite(out, 1, (size_t)n, stdout) != (size_t)n)
				err = errno ? errno : EIO;
		if (fflush(stdout) && !err)
			err = errno ? errno : EIO;
		if (!c && err) {
			fprintf(stderr, "zmem serve: write error: %s (the server runs: pid %d)\n",
				strerror(err), (int)pid);
			_exit(1);
		}
		_exit(c);
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

void serve_ready(int fd, const char *announce)
{
	if (fd < 0)
		return;
	(void)!write(fd, "", 1);
	(void)!write(fd, announce, strlen(announce));
	close(fd);
}

void serve_not_ready(int fd)
{
	if (fd < 0)
		return;
	(void)!write(fd, "\1", 1);
	close(fd);
}

/* ---- the pidfile ------------------------------------------------------ */

/* A file created anew, for us: never through a link another user
 * planted, never an existing file of someone else's. */
static FILE *create_new(const char *path, mode_t mode)
{
	int fd;

	unlink(path);
	FILE *f;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f && fd >= 0)
		close(fd);
	return f;
}


int serve_pidfile_write(const char *path, ino_t *ino)
{
	char tmp[4200];
	struct stat st;
	FILE *f;

	/* through a new file renamed over the old: a reader never sees it
	 * half written, and its inode is ours alone */
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	f = create_new(tmp, 0644);
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	if (fclose(f) || stat(tmp, &st) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		errno = e;
		return -1;
	}
	*ino = st.st_ino;
	return 0;
}

void serve_pidfile_remove(const char *path, ino_t ino)
{
	struct stat st;

	if (ino && !stat(path, &st) && st.st_ino == ino)
		unlink(path);
}

/* ---- the registry ---------------------------------------------------- */

int serve_registry_dir(char *dir, size_t n, bool create)
{
	struct stat st;

	/* its parent too, when reading: in a /tmp/zmem-UID of another
	 * user's, entries could be planted that name their servers */
	if (serve_private_dir(dir, n, create))
		return -1;
	serve_default_path(dir, n, ".d");
	if (create && mkdir(dir, 0700) && errno != EEXIST)
		return -1;
	/* in /tmp another user could have made it first, or a link to one
	 * of ours: only a folder of our own that no one else may write */
	if (lstat(dir, &st))
		return -1;  /* ENOENT: no server has registered yet */
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int serve_register(const char *uri, const char *ctl, char *entry, size_t n)
{
	char dir[4096];
	FILE *f;

	entry[0] = 0;
	if (serve_registry_dir(dir, sizeof(dir), true))
		return -1;
	snprintf(entry, n, "%s/%d", dir, (int)getpid());
	f = create_new(entry, 0600);
	if (!f) {
		entry[0] = 0;
		return -1;
	}
	fprintf(f, "%s\n%s\n", uri, ctl);
	if (fclose(f)) {
		unlink(entry);
		entry[0] = 0;
		return -1;
	}
	return 0;
}

void serve_unregister(const char *entry)
{
	if (entry[0])
		unlink(entry);
}

/* ---- a captive command ----------------------------------------------- */

/* Does env entry e set one of the variables a captive command gets? */
static int ours(const char *e)
{
	static const char *const names[] = { "uri=", "nbd=", "socket=", "unixsocket=", "port=" };

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strncmp(e, names[i], strlen(names[i])))
			return 1;
	return 0;
}

pid_t serve_run_captive(const char *cmd, const char *uri, const char *sock, const char *host,
			int port, const sigset_t *blocked)
{
	extern char **environ;
	char v_uri[4200], v_nbd[4200], v_sock[4200], v_usock[4200], v_port[32], **envp;
	bool v6 = !sock && strchr(host, ':');
	size_t n = 0, k = 0;
	pid_t pid;

	/* the environment is built before fork: the child of a threaded
	 * process may only make async-signal-safe calls until it execs */
	snprintf(v_uri, sizeof(v_uri), "uri=%s", uri);
	if (sock) {
		snprintf(v_nbd, sizeof(v_nbd), "nbd=nbd:unix:%s", sock);
		snprintf(v_sock, sizeof(v_sock), "socket=%s", sock);
		/* nbdkit's name for it */
		snprintf(v_usock, sizeof(v_usock), "unixsocket=%s", sock);
	} else {
		snprintf(v_nbd, sizeof(v_nbd), "nbd=nbd:%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "",
			 port);
		snprintf(v_port, sizeof(v_port), "port=%d", port);
	}
	while (environ[n])
		n++;
	envp = calloc(n + 5, sizeof(char *));
	if (!envp)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!ours(environ[i]))
			envp[k++] = environ[i];
	envp[k++] = v_uri;
	envp[k++] = v_nbd;
	envp[k++] = sock ? v_sock : v_port;
	if (sock)
		envp[k++] = v_usock;
	pid = fork();
	if (pid == 0) {  /* the caller's signals back, then a shell */
		sigprocmask(SIG_UNBLOCK, blocked, NULL);
		signal(SIGPIPE, SIG_DFL);
		execle("/bin/sh", "sh", "-c", cmd, (char *)NULL, envp);
		_exit(127);
	}
	free(envp);
	return pid;
}
