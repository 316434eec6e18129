/*
 * zmem serve against clients that hold on to what the server gives them:
 * a handshake trickled a byte at a time, writers that stop halfway
 * through their payloads, readers that never take their replies.  Each
 * must be cut off by the time limit while everyone else carries on, and
 * the memory they pin must stay within the budget.  Also: requests in
 * flight at SIGTERM get their replies, a payload still arriving too, and
 * TCP connections send without Nagle's delay.
 *
 * The servers run in this process with a short time limit in milliseconds
 * (serve_config.timeout_ms), so the limits are seen within a second
 * or two; each bound scales with its limit.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <dirent.h>

#include "nbdclient.h"
#include "testutil.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A server counter, from the control socket's JSON report. */
static long long counter(const struct test_server *t, const char *name)
{
	char ctl[160], key[64], *buf = malloc(1 << 20), *p;
	size_t got = 0;
	ssize_t n;
	long long v = -1;
	int fd;

	snprintf(ctl, sizeof(ctl), "%s.ctl", t->path);
	fd = nc_connect_path(ctl);
	if (fd < 0 || !buf || send(fd, "json\n", 5, MSG_NOSIGNAL) != 5) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return -1;
	}
	while (got < (1u << 20) - 1 && (n = recv(fd, buf + got, (1u << 20) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(fd);
	snprintf(key, sizeof(key), "\"%s\": ", name);
	p = strstr(buf, key);
	if (p)
		v = strtoll(p + strlen(key), NULL, 10);
	free(buf);
	return v;
}

/* Wait up to ms for counter name to reach at least want. */
static bool counter_reaches(const struct test_server *t, const char *name, long long want,
			    unsigned ms)
{
	uint64_t end = mono_ms() + ms;

	do {
		if (counter(t, name) >= want)
			return true;
		usleep(50000);
	} while (mono_ms() < end);
	return false;
}

/* The handshake's limit is on the whole handshake: a client that sends
 * one byte every 75 ms is dropped after the limit (500 ms), not kept
 * forever by a per-read timeout it keeps resetting. */
static void test_trickled_handshake(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = 1u << 20, .threads = 1, .timeout_ms = 500 };
	uint8_t greeting[18], opt[16];
	uint64_t t0;
	int fd, i;
	bool closed = false;

	assert_int_equal(test_server_start(&t, &cfg, "trickle"), 0);
	fd = nc_connect_path(t.path);
	assert_true(fd >= 0);
	t0 = mono_ms();
	{
		struct nc c = { .fd = fd };

		assert_int_equal(nc_recv(&c, greeting, sizeof(greeting)), 0);
	}
	/* client flags, then an INFO option with 1000 bytes of data, all a
	 * byte every 75 ms: each read finishes well within the limit */
	put_be32(opt, NBD_FLAG_C_FIXED_NEWSTYLE);
	assert_int_equal(send(fd, opt, 4, MSG_NOSIGNAL), 4);
	put_be64(opt, NBD_IHAVEOPT);
	put_be32(opt + 8, NBD_OPT_INFO);
	put_be32(opt + 12, 1000);
	for (i = 0; i < 40 && !closed; i++) {
		uint8_t b, z = 0;

		if (send(fd, i < 16 ? opt + i : &z, 1, MSG_NOSIGNAL) != 1)
			closed = true;
		usleep(75000);
		closed = closed || recv(fd, &b, 1, MSG_DONTWAIT) == 0;
	}
	t0 = mono_ms() - t0;
	printf("trickling client dropped after %llu ms (limit 500 ms)\n", (unsigned long long)t0);
	assert_true(closed);
	assert_true(t0 >= 475 && t0 < 2000);
	assert_true(counter_reaches(&t, "timeouts", 1, 2000));
	close(fd);
	assert_int_equal(test_server_stop(&t), 0);
}

/* A request header begun and not finished holds a reader and one of the
 * connections: it must come whole within the limit, though a client may
 * be idle between requests as long as it likes. */
static void test_partial_header(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = 1u << 20, .threads = 1, .timeout_ms = 500 };
	struct nc idle, part;
	uint8_t h[NBD_REQUEST_SIZE] = { 0 };
	uint64_t t0;

	assert_int_equal(test_server_start(&t, &cfg, "part"), 0);
	assert_int_equal(nc_connect(&idle, t.path, false), 0);
	assert_int_equal(nc_connect(&part, t.path, false), 0);
	put_be32(h, NBD_REQUEST_MAGIC);
	t0 = mono_ms();
	assert_int_equal(nc_send(&part, h, 10), 0);
	assert_true(nc_closed(&part));  /* waits up to 5 s */
	t0 = mono_ms() - t0;
	printf("a header stopped after 10 bytes: dropped after %llu ms (limit 500 ms)\n",
	       (unsigned long long)t0);
	assert_true(t0 >= 475 && t0 < 2000);
	/* the idle one, silent all along, is still served */
	{
		uint8_t b[512];

		assert_int_equal(nc_pread(&idle, b, 0, sizeof(b)), 0);
	}
	nc_close(&part);
	nc_close(&idle);
	assert_int_equal(test_server_stop(&t), 0);
}

/* A payload trickled a byte every 100 ms never pauses for the limit
 * (500 ms), but it is not in by the deadline: dropped, though each pause
 * is short. */
static void test_trickled_payload(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = 4u << 20, .threads = 1, .timeout_ms = 500 };
	struct nc c;
	uint64_t t0;
	bool closed = false;

	assert_int_equal(test_server_start(&t, &cfg, "drip"), 0);
	assert_int_equal(nc_connect(&c, t.path, false), 0);
	t0 = mono_ms();
	assert_int_equal(nc_request(&c, NBD_CMD_WRITE, 0, 3, 0, 1u << 20, "z", 1), 0);
	for (int i = 0; i < 40 && !closed; i++) {
		uint8_t b;

		usleep(100000);
		closed = send(c.fd, "z", 1, MSG_NOSIGNAL) != 1 ||
			 recv(c.fd, &b, 1, MSG_DONTWAIT) == 0;
	}
	t0 = mono_ms() - t0;
	printf("a payload trickled a byte every 100 ms: dropped after %llu ms (limit 500 ms)\n",
	       (unsigned long long)t0);
	assert_true(closed);
	assert_true(t0 >= 475 && t0 < 2000);
	nc_close(&c);
	assert_int_equal(test_server_stop(&t), 0);
}

/* Eight clients each start a 32 MiB write, send one byte of it and stop:
 * between them they hold the whole payload budget.  A ninth client's
 * writes and reads must still go through at once (done in pieces,
 * outside the budget), well before the eight are dropped by the
 * payload's time limit (2 s). */
static void test_stalled_writers(void **state)
{
	enum { STALLED = 8 };
	struct test_server t;
	struct serve_config cfg = { .size = 64u << 20, .threads = 2, .timeout_ms = 2000 };
	struct nc bad[STALLED], good;
	struct timeval rt = { 20, 0 };
	uint8_t *buf = malloc(1u << 20), *back = malloc(1u << 20);
	uint64_t t0;

	assert_non_null(buf);
	assert_non_null(back);
	assert_int_equal(test_server_start(&t, &cfg, "stall"), 0);
	for (int i = 0; i < STALLED; i++) {
		assert_int_equal(nc_connect(&bad[i], t.path, false), 0);
		assert_int_equal(nc_request(&bad[i], NBD_CMD_WRITE, 0, 1, 0, NBD_MAX_PAYLOAD, "x", 1),
				 0);
	}
	usleep(200000);  /* let their readers take the budget */
	assert_int_equal(nc_connect(&good, t.path, true), 0);
	setsockopt(good.fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
	for (unsigned i = 0; i < (1u << 20); i++)
		buf[i] = (uint8_t)(i * 31 + (i >> 12));
	t0 = mono_ms();
	assert_int_equal(nc_pwrite(&good, buf, 12345, 1u << 20), 0);
	assert_int_equal(nc_pread(&good, back, 12345, 1u << 20), 0);
	assert_memory_equal(buf, back, 1u << 20);
	t0 = mono_ms() - t0;
	printf("healthy client beside %d stalled writers: 1 MiB written and read in %llu ms\n",
	       STALLED, (unsigned long long)t0);
	/* well before the stalled ones' payloads time out */
	assert_true(t0 < 1600);
	assert_true(counter(&t, "streamed") >= 1);
	/* then the limit drops them */
	assert_true(counter_reaches(&t, "timeouts", STALLED, 25000));
	for (int i = 0; i < STALLED; i++) {
		assert_true(nc_closed(&bad[i]));
		nc_close(&bad[i]);
	}
	nc_close(&good);
	assert_int_equal(test_server_stop(&t), 0);
	free(buf);
	free(back);
}

/* Two clients each send a slow write (zstd -19, 1 MiB), which goes to a
 * worker, then a 32 MiB read, and take nothing: the read's reply fills
 * the socket holding the connection's send lock, and the worker waits on
 * it to reply to the write, up to the time limit.  Both workers are held
 * so; a third client's large write must not wait for them. */
static void test_held_workers(void **state)
{
	enum { LEN = 1u << 20 };
	struct test_server t;
	struct serve_config cfg = { .size = 64u << 20, .threads = 2, .timeout_s = 10,
					.codec = "zstd:19" };
	struct nc bad[2], good;
	uint8_t *buf = malloc(LEN);
	uint64_t x = 99, t0;

	assert_non_null(buf);
	for (unsigned i = 0; i < LEN; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)("etaoin shrdlu cmfwyp"[x % 20]);
	}
	assert_int_equal(test_server_start(&t, &cfg, "held"), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(nc_connect(&bad[i], t.path, false), 0);
		assert_int_equal(nc_request(&bad[i], NBD_CMD_WRITE, 0, 1, (uint64_t)i * LEN, LEN, buf,
					    LEN), 0);
		assert_int_equal(nc_request(&bad[i], NBD_CMD_READ, 0, 2, 32u << 20, NBD_MAX_PAYLOAD,
					    NULL, 0), 0);
	}
	usleep(1500000);  /* the slow writes done, their workers waiting */
	assert_int_equal(nc_connect(&good, t.path, false), 0);
	t0 = mono_ms();
	assert_int_equal(nc_pwrite(&good, buf, 8u << 20, LEN), 0);
	t0 = mono_ms() - t0;
	printf("a 1 MiB write beside 2 clients holding the workers: %llu ms (limit 10 s)\n",
	       (unsigned long long)t0);
	assert_true(t0 < 6000);
	nc_close(&good);
	for (int i = 0; i < 2; i++)
		nc_close(&bad[i]);
	assert_int_equal(test_server_stop(&t), 0);
	free(buf);
}

/* Clients that ask for 32 MiB reads and never read the replies: each
 * holds one piece of a reply (256 KiB), not the whole of it, and is
 * dropped when the reply has not left within the time limit, however the
 * socket drains. */
static void test_unread_replies(void **state)
{
	enum { READERS = 16, ASKS = 4 };
	struct test_server t;
	struct serve_config cfg = { .size = 256u << 20, .threads = 2, .timeout_ms = 1500 };
	struct nc r[READERS], slow;
	size_t before, after;
	uint64_t t0;

	assert_int_equal(test_server_start(&t, &cfg, "unread"), 0);
	before = test_rss_bytes();
	t0 = mono_ms();
	for (int i = 0; i < READERS; i++) {
		assert_int_equal(nc_connect(&r[i], t.path, i % 2), 0);
		for (int k = 0; k < ASKS; k++)
			assert_int_equal(nc_request(&r[i], NBD_CMD_READ, 0, (uint64_t)k,
						    (uint64_t)k * NBD_MAX_PAYLOAD, NBD_MAX_PAYLOAD,
						    NULL, 0), 0);
	}
	/* and one that takes its reply a byte every 100 ms: the limit is on
	 * the whole reply, so this one goes at the limit too */
	assert_int_equal(nc_connect(&slow, t.path, false), 0);
	assert_int_equal(nc_request(&slow, NBD_CMD_READ, 0, 9, 0, NBD_MAX_PAYLOAD, NULL, 0), 0);
	for (int k = 0; k < 10; k++) {
		uint8_t b;

		usleep(100000);
		(void)!recv(slow.fd, &b, 1, MSG_DONTWAIT);
	}
	after = test_rss_bytes();
	printf("%d clients asking %d x 32 MiB each, reading nothing: +%.1f MiB resident\n",
	       READERS, ASKS, (double)(after - before) / 1048576);
	/* a whole reply each would be 512 MiB and more */
	assert_true(after < before + (64u << 20));
	for (int k = 0; k < 40 && counter(&t, "timeouts") < READERS + 1; k++) {
		uint8_t b;

		usleep(100000);
		(void)!recv(slow.fd, &b, 1, MSG_DONTWAIT);
	}
	assert_true(counter_reaches(&t, "timeouts", READERS + 1, 15000));
	t0 = mono_ms() - t0;
	printf("all dropped %llu ms after asking (limit 1500 ms), the slow reader too\n",
	       (unsigned long long)t0);
	assert_true(t0 < 3000);
	for (int i = 0; i < READERS; i++)
		nc_close(&r[i]);
	nc_close(&slow);
	assert_int_equal(test_server_stop(&t), 0);
}

/* Requests in flight when the server is told to stop get their replies
 * before it closes: slow writes (zstd at its strongest level) from eight
 * connections, SIGTERM while they are compressed, then every reply. */
static void test_sigterm_answers_requests(void **state)
{
	enum { CLIENTS = 8, LEN = 1u << 20 };
	struct test_server t;
	struct serve_config cfg = { .size = 64u << 20, .threads = 2, .codec = "zstd:19" };
	struct nc c[CLIENTS];
	uint8_t *buf = malloc(LEN);
	uint64_t x = 12345;
	int answered = 0;

	assert_non_null(buf);
	for (unsigned i = 0; i < LEN; i++) {  /* text-like: slow for zstd -19 */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)("etaoin shrdlu cmfwyp"[x % 20]);
	}
	assert_int_equal(test_server_start(&t, &cfg, "term"), 0);
	for (int i = 0; i < CLIENTS; i++) {
		assert_int_equal(nc_connect(&c[i], t.path, false), 0);
		assert_int_equal(nc_request(&c[i], NBD_CMD_WRITE, 0, 77, (uint64_t)i * LEN, LEN, buf,
					    LEN), 0);
	}
	usleep(100000);  /* every payload received; the writes are compressing */
	/* still compressing when told to stop, or the test proves nothing */
	assert_true(counter(&t, "bytes_written") < (long long)CLIENTS * LEN);
	pthread_kill(t.thread, SIGTERM);
	for (int i = 0; i < CLIENTS; i++) {
		struct timeval rt = { 30, 0 };

		setsockopt(c[i].fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
		answered += nc_simple_reply(&c[i], 77, NULL, 0) == 0;
		assert_true(nc_closed(&c[i]));  /* and then the server closes */
		nc_close(&c[i]);
	}
	assert_int_equal(answered, CLIENTS);
	pthread_join(t.thread, NULL);
	assert_int_equal(t.status, 0);
	free(buf);
}

/* 64 writes of 1 MiB in flight on one connection, SIGTERM while a
 * payload is still arriving: every request whose header the server took
 * is answered, and answered with success -- the one whose payload was
 * half in too, its second half sent after the signal -- then the
 * connection closes.  Requests sent after the stop began are not taken:
 * no reply, never an error. */
enum { BIG_WRITES = 64, BIG_LEN = 1u << 20, BIG_CUT = 8 };

struct big_sender {
	struct nc *c;
	uint8_t *buf;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stage;                /* 1: request BIG_CUT half sent; 2: signalled */
};

static void *big_send(void *arg)
{
	struct big_sender *b = arg;

	for (int i = 0; i < BIG_WRITES; i++) {
		uint32_t half = i == BIG_CUT ? BIG_LEN / 2 : BIG_LEN;

		if (nc_request(b->c, NBD_CMD_WRITE, 0, (uint64_t)i, (uint64_t)i * BIG_LEN, BIG_LEN,
			       b->buf, half))
			break;  /* the server closed: the rest were not taken */
		if (i != BIG_CUT)
			continue;
		pthread_mutex_lock(&b->lock);
		b->stage = 1;
		pthread_cond_broadcast(&b->cond);
		while (b->stage != 2)
			pthread_cond_wait(&b->cond, &b->lock);
		pthread_mutex_unlock(&b->lock);
		usleep(200000);  /* the drain has begun */
		if (nc_send(b->c, b->buf + half, BIG_LEN - half))
			break;
	}
	return NULL;
}

static void test_sigterm_mid_payload(void **state)
{
	struct test_server t;
	struct serve_config cfg = { .size = BIG_WRITES * BIG_LEN, .threads = 2 };
	struct big_sender b = { .lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER };
	struct nc c;
	struct timeval rt = { 30, 0 };
	bool answered[BIG_WRITES] = { false };
	pthread_t th;
	int n = 0, errors = 0;

	b.c = &c;
	b.buf = malloc(BIG_LEN);
	assert_non_null(b.buf);
	for (unsigned i = 0; i < BIG_LEN; i++)
		b.buf[i] = (uint8_t)(i * 31 + (i >> 12));
	assert_int_equal(test_server_start(&t, &cfg, "midpay"), 0);
	assert_int_equal(nc_connect(&c, t.path, false), 0);
	setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
	assert_int_equal(pthread_create(&th, NULL, big_send, &b), 0);
	pthread_mutex_lock(&b.lock);
	while (b.stage != 1)
		pthread_cond_wait(&b.cond, &b.lock);
	usleep(100000);  /* the half payload is in the server's hands */
	pthread_kill(t.thread, SIGTERM);
	b.stage = 2;
	pthread_cond_broadcast(&b.cond);
	pthread_mutex_unlock(&b.lock);
	for (;;) {
		uint8_t h[NBD_SIMPLE_REPLY_SIZE];
		uint64_t ck;

		if (nc_recv(&c, h, sizeof(h)))
			break;  /* closed */
		assert_int_equal(get_be32(h), NBD_SIMPLE_REPLY_MAGIC);
		ck = get_be64(h + 8);
		assert_true(ck < BIG_WRITES);
		assert_false(answered[ck]);
		answered[ck] = true;
		errors += get_be32(h + 4) != 0;
		n++;
	}
	pthread_join(th, NULL);
	printf("%d of %d writes answered, %d with an error\n", n, BIG_WRITES, errors);
	assert_int_equal(errors, 0);
	for (int i = 0; i <= BIG_CUT; i++)
		assert_true(answered[i]);
	nc_close(&c);
	pthread_join(t.thread, NULL);
	assert_int_equal(t.status, 0);
	free(b.buf);
}

/* The accepted socket of a TCP client, found among our own descriptors
 * (the server runs in this process): local port `port`, connected. */
static int accepted_fd(int port, int client)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	while (d && (e = readdir(d)) && found < 0) {
		int fd = atoi(e->d_name);
		struct sockaddr_in a, p;
		socklen_t al = sizeof(a), pl = sizeof(p);

		if (fd == client || getsockname(fd, (struct sockaddr *)&a, &al) ||
		    a.sin_family != AF_INET || ntohs(a.sin_port) != port ||
		    getpeername(fd, (struct sockaddr *)&p, &pl))
			continue;
		found = fd;
	}
	if (d)
		closedir(d);
	return found;
}

/* TCP: replies are small and many; the server turns Nagle off so they do
 * not wait for the client's delayed acknowledgements. */
static void test_tcp_nodelay(void **state)
{
	struct test_server t = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int probe = socket(AF_INET, SOCK_STREAM, 0), fd = -1, on = 0, srv_fd = -1;
	socklen_t ol = sizeof(on);
	char ctl[128];

	/* a free port: bind to 0, read it back, let it go */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(probe, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(probe, (struct sockaddr *)&a, &al), 0);
	close(probe);
	snprintf(ctl, sizeof(ctl), "/tmp/zmem-test-%d-tcp.ctl", (int)getpid());
	t.cfg = (struct serve_config){ .size = 1u << 20, .threads = 1, .port = ntohs(a.sin_port),
					   .control = ctl, .foreground = true };
	assert_int_equal(pthread_create(&t.thread, NULL, test_server_main, &t), 0);
	for (int i = 0; i < 1000 && fd < 0; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			fd = -1;
			usleep(10000);
		}
	}
	assert_true(fd >= 0);
	for (int i = 0; i < 500 && srv_fd < 0; i++) {  /* until it is accepted */
		srv_fd = accepted_fd(ntohs(a.sin_port), fd);
		if (srv_fd < 0)
			usleep(10000);
	}
	assert_true(srv_fd >= 0);
	assert_int_equal(getsockopt(srv_fd, IPPROTO_TCP, TCP_NODELAY, &on, &ol), 0);
	assert_int_equal(on, 1);
	close(fd);
	pthread_kill(t.thread, SIGTERM);
	pthread_join(t.thread, NULL);
	assert_int_equal(t.status, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trickled_handshake),
		cmocka_unit_test(test_partial_header),
		cmocka_unit_test(test_trickled_payload),
		cmocka_unit_test(test_stalled_writers),
		cmocka_unit_test(test_held_workers),
		cmocka_unit_test(test_unread_replies),
		cmocka_unit_test(test_sigterm_answers_requests),
		cmocka_unit_test(test_sigterm_mid_payload),
		cmocka_unit_test(test_tcp_nodelay),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
