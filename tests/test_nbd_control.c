/*
 * zmem serve's control socket against clients that take their time: a
 * request line that arrives in pieces runs only once its newline is in,
 * a line beyond the documented maximum is refused whole, idle
 * connections delay nobody, a long verb (recompress with zstd at its
 * strongest level) neither holds up the reports nor the shutdown, and the
 * client side gives up on a server that never answers.
 *
 * The servers run in this process (nbdclient.h), so ASan sees both sides.
 */
#include <fcntl.h>
#include <poll.h>

#include "nbdclient.h"
#include "testutil.h"

/* The documented maximum of a request line, its newline included
 * (docs/serve.md). */
#define LINE_MAX_BYTES 1024

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The control socket; it may listen a moment after the data socket. */
static int ctl_connect(const struct test_server *t)
{
	char ctl[160];
	int fd = -1;

	snprintf(ctl, sizeof(ctl), "%s.ctl", t->path);
	for (int i = 0; i < 500 && fd < 0; i++) {
		fd = nc_connect_path(ctl);
		if (fd < 0)
			usleep(10000);
	}
	return fd;
}

/* Read fd until the server closes it, at most cap - 1 bytes, waiting at
 * most ms in all: the bytes read (NUL-terminated), or -1 on a timeout. */
static long ctl_read(int fd, char *buf, size_t cap, unsigned ms)
{
	uint64_t end = mono_ms() + ms;
	size_t got = 0;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = mono_ms();
		ssize_t n;

		if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0) {
			buf[got] = 0;
			return -1;
		}
		n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0 || got + (size_t)n == cap - 1) {
			got += n > 0 ? (size_t)n : 0;
			buf[got] = 0;
			return (long)got;
		}
		got += (size_t)n;
	}
}

/* One request (line as given: its newline is the caller's), the answer
 * into buf within ms: its length, or -1. */
static long ctl_ask(const struct test_server *t, const char *line, char *buf, size_t cap,
		    unsigned ms)
{
	int fd = ctl_connect(t);
	long n;

	if (fd < 0)
		return -1;
	if (send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line)) {
		close(fd);
		return -1;
	}
	n = ctl_read(fd, buf, cap, ms);
	close(fd);
	return n;
}

/* The memory limit the server reports (0: none, its null), or -1. */
static long long mem_limit(const struct test_server *t)
{
	static char buf[1 << 16];
	char *p;

	if (ctl_ask(t, "json\n", buf, sizeof(buf), 5000) < 0)
		return -1;
	p = strstr(buf, "\"mem_limit_bytes\": ");
	if (!p)
		return -1;
	p += strlen("\"mem_limit_bytes\": ");
	return strncmp(p, "null", 4) ? strtoll(p, NULL, 10) : 0;
}

/* A request whose line arrives in two pieces half a second apart runs
 * once, whole: "mem-limit 1" then "048576\n" sets 1 MiB, not 1 byte. */
static void test_partial_line(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = 16u << 20, .threads = 1 };
	char buf[512];
	int fd;

	(void)state;
	assert_int_equal(test_server_start(&t, &cfg, "part"), 0);
	fd = ctl_connect(&t);
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "mem-limit 1", 11, MSG_NOSIGNAL), 11);
	usleep(500000);
	assert_int_equal(send(fd, "048576\n", 7, MSG_NOSIGNAL), 7);
	assert_true(ctl_read(fd, buf, sizeof(buf), 5000) > 0);
	close(fd);
	printf("answer: %s", buf);
	assert_string_equal(buf, "ok: mem-limit 1048576\n");
	assert_int_equal(mem_limit(&t), 1048576);

	/* a line that ends without its newline (the client shut its side)
	 * is not run: "stop" does not stop the server */
	fd = ctl_connect(&t);
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "stop", 4, MSG_NOSIGNAL), 4);
	shutdown(fd, SHUT_WR);
	assert_true(ctl_read(fd, buf, sizeof(buf), 5000) > 0);
	close(fd);
	printf("answer: %s", buf);
	assert_true(!strncmp(buf, "error: ", 7));
	assert_int_equal(mem_limit(&t), 1048576);  /* still serving */
	assert_int_equal(test_server_stop(&t), 0);
}

/* A line up to the maximum is read whole (an unknown verb named in full);
 * a longer one is refused whole, also when it arrives in pieces. */
static void test_line_limit(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = 16u << 20, .threads = 1 };
	char line[3 * LINE_MAX_BYTES], buf[4096];
	int fd;

	(void)state;
	assert_int_equal(test_server_start(&t, &cfg, "long"), 0);
	/* the longest line: LINE_MAX_BYTES - 1 characters and the newline */
	memset(line, 'x', LINE_MAX_BYTES - 1);
	strcpy(line + LINE_MAX_BYTES - 1, "\n");
	assert_true(ctl_ask(&t, line, buf, sizeof(buf), 5000) > 0);
	assert_true(!strncmp(buf, "error: unknown command 'xxxx", 28));

	/* "mem-limit 1" and spaces beyond the maximum, then digits: refused
	 * whole, not cut into a line that would set the limit */
	memset(line, ' ', sizeof(line));
	memcpy(line, "mem-limit 2097152", 17);
	strcpy(line + LINE_MAX_BYTES, "0\n");
	assert_true(ctl_ask(&t, line, buf, sizeof(buf), 5000) > 0);
	printf("answer: %s", buf);
	assert_non_null(strstr(buf, "error: "));
	assert_non_null(strstr(buf, "longer than 1024 bytes"));
	assert_int_equal(mem_limit(&t), 0);

	/* the same in pieces */
	fd = ctl_connect(&t);
	assert_true(fd >= 0);
	for (size_t off = 0; off < LINE_MAX_BYTES + 2; off += 300) {
		size_t n = LINE_MAX_BYTES + 2 - off < 300 ? LINE_MAX_BYTES + 2 - off : 300;

		if (send(fd, line + off, n, MSG_NOSIGNAL) != (ssize_t)n)
			break;  /* the server may close once it has seen enough */
		usleep(20000);
	}
	assert_true(ctl_read(fd, buf, sizeof(buf), 5000) > 0);
	close(fd);
	assert_non_null(strstr(buf, "longer than 1024 bytes"));
	assert_int_equal(mem_limit(&t), 0);
	assert_int_equal(test_server_stop(&t), 0);
}

/* Sixty idle control connections (some with half a line) hold up
 * neither a report nor `stop`: each is answered at once and the server
 * is gone within a second and a half. */
static void test_idle_connections(void **state)
{
	enum { IDLE = 60 };
	struct test_server t;
	struct serve_config cfg = { .size = 16u << 20, .threads = 1 };
	int fd[IDLE];
	char buf[1 << 16];
	uint64_t t0;

	(void)state;
	assert_int_equal(test_server_start(&t, &cfg, "idle"), 0);
	for (int i = 0; i < IDLE; i++) {
		fd[i] = ctl_connect(&t);
		assert_true(fd[i] >= 0);
		if (i % 2)
			assert_int_equal(send(fd[i], "js", 2, MSG_NOSIGNAL), 2);
	}
	t0 = mono_ms();
	assert_true(ctl_ask(&t, "json\n", buf, sizeof(buf), 1000) > 0);
	assert_non_null(strstr(buf, "\"mm_stat\""));
	assert_true(ctl_ask(&t, "stop\n", buf, sizeof(buf), 1000) > 0);
	assert_string_equal(buf, "ok: stopping\n");
	pthread_join(t.thread, NULL);
	t0 = mono_ms() - t0;
	printf("%d idle control connections: stats and stop in %llu ms\n", IDLE,
	       (unsigned long long)t0);
	assert_int_equal(t.status, 0);
	assert_true(t0 < 5000);  /* 121 s before: 60 x 2 s */
	for (int i = 0; i < IDLE; i++)
		close(fd[i]);
}

/* Text-like pages: slow for zstd at level 19, smaller with it than lz4. */
static void fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)("etaoin shrdlu cmfwyp vbgkqj"[x % 27]);
	}
}

/* A recompression with zstd at level 19 runs off the control thread:
 * reports are answered at once meanwhile, its client hears it is still
 * running, a second long verb is refused as busy, and a stop ends it:
 * the server is gone well within its 5 s. */
static void test_long_verb(void **state)
{
	enum { LEN = 1u << 20, MIB = 48 };
	struct test_server t;
	struct serve_config cfg = { .size = 64u << 20, .threads = 1, .recompress = "zstd:19" };
	uint8_t *data = malloc(LEN);
	char *buf = malloc(1 << 16), run[4096];
	struct nc c;
	uint64_t t0, t1;
	int fd;
	long n;

	(void)state;
	assert_non_null(data);
	assert_non_null(buf);
	assert_int_equal(test_server_start(&t, &cfg, "long"), 0);
	assert_int_equal(nc_connect(&c, t.path, false), 0);
	for (unsigned i = 0; i < MIB; i++) {
		fill_text(data, LEN, i + 1);
		assert_int_equal(nc_pwrite(&c, data, (uint64_t)i * LEN, LEN), 0);
	}
	nc_close(&c);
	fd = ctl_connect(&t);
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "recompress all\n", 15, MSG_NOSIGNAL), 15);
	usleep(300000);
	t0 = mono_ms();
	assert_true(ctl_ask(&t, "json\n", buf, 1 << 16, 1000) > 0);
	assert_non_null(strstr(buf, "\"recompress_tried\""));
	assert_true(ctl_ask(&t, "info\n", buf, 1 << 16, 1000) > 0);
	assert_true(ctl_ask(&t, "compact\n", buf, 1 << 16, 1000) > 0);
	printf("during the recompression: %s", buf);
	assert_non_null(strstr(buf, "busy, recompress has been running"));
	t1 = mono_ms() - t0;
	printf("reports during a recompression with zstd:19: %llu ms\n", (unsigned long long)t1);
	assert_true(t1 < 4000);  /* before: until the whole recompression ended */

	/* still running, and saying so */
	n = recv(fd, run, sizeof(run) - 1, MSG_DONTWAIT);
	assert_true(n > 0);
	run[n] = 0;
	assert_true(!strncmp(run, "# recompress: running", 21));
	assert_null(strstr(run, "ok: "));

	t0 = mono_ms();
	assert_true(ctl_ask(&t, "stop\n", buf, 1 << 16, 1000) > 0);
	assert_string_equal(buf, "ok: stopping\n");
	pthread_join(t.thread, NULL);
	t1 = mono_ms() - t0;
	printf("stop during a recompression with zstd:19: server gone in %llu ms\n",
	       (unsigned long long)t1);
	assert_int_equal(t.status, 0);
	assert_true(t1 < 5000);  /* the drain's 5 s; 70 s before */
	n = ctl_read(fd, run, sizeof(run), 1000);
	close(fd);
	assert_true(n > 0);
	printf("the recompression's client: %s", strrchr(run, '#') ? strchr(strrchr(run, '#'),
	       '\n') + 1 : run);
	assert_non_null(strstr(run, "error: recompress: interrupted"));
	free(data);
	free(buf);
}

/* The client side: a control socket that never answers (it listens and
 * never accepts) is given up after the timeout, with a message. */
static void test_client_timeout(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char path[108];
	uint64_t t0;
	int rc;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/zmem-test-%d-mute.sock.ctl", (int)getpid());
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 1), 0);
	for (int i = 0; i < 4; i++) {  /* past the queue: connect must wait too */
		t0 = mono_ms();
		rc = control_send("stats", path, "text", stdout, 200);
		t0 = mono_ms() - t0;
		printf("a server that never answers: given up after %llu ms\n",
		       (unsigned long long)t0);
		assert_int_equal(rc, 1);
		assert_true(t0 >= 190 && t0 < 2000);  /* before: no timeout */
	}
	close(lfd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_partial_line),
		cmocka_unit_test(test_line_limit),
		cmocka_unit_test(test_idle_connections),
		cmocka_unit_test(test_long_verb),
		cmocka_unit_test(test_client_timeout),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
