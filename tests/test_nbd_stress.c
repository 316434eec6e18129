/*
 * zmem serve under concurrent clients: several connections write 512-byte
 * sectors (unaligned to the 4 KiB pages, so every write is a
 * read-modify-write) interleaved over the same pages, each sector carrying
 * a cookie (writer, sector, generation); readers check every sector they
 * see holds a whole cookie some writer wrote there, never a mix.  At the
 * end each sector must hold its last writer's last cookie.  Seeded
 * (--seed N to replay); TSan runs it (test_*_stress).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "nbdclient.h"
#include "testutil.h"

#define SECTOR 512
#define NSECT 32                /* 16 KiB: 4 pages, so writers collide */
#define WRITERS 4
#define ROUNDS 2000
#define BATCH 4                 /* writes a writer keeps in flight */

static struct test_server srv;
static uint64_t seed;
/* last generation each writer put in each sector (writer w owns sectors
 * s with s % WRITERS == w, so pages are shared but sectors are not) */
static uint32_t last_gen[NSECT];
static int stop_readers;  /* atomic */

struct cookie {
	uint32_t magic, writer, sector, gen;
};
#define COOKIE_MAGIC 0x7a6d656du

static void fill_sector(uint8_t *p, uint32_t w, uint32_t s, uint32_t gen)
{
	struct cookie c = { COOKIE_MAGIC, w, s, gen };

	for (int i = 0; i < SECTOR; i += (int)sizeof(c)) {
		memcpy(p + i, &c, sizeof(c));
		c.gen ^= (uint32_t)i;  /* vary within the sector: a torn copy shows */
	}
}

/* 0: all zero (never written); 1: a whole cookie; -1: torn or foreign */
static int check_sector(const uint8_t *p, uint32_t s)
{
	struct cookie c;
	uint8_t want[SECTOR];

	memcpy(&c, p, sizeof(c));
	if (c.magic != COOKIE_MAGIC) {
		for (int i = 0; i < SECTOR; i++)
			if (p[i])
				return -1;
		return 0;
	}
	if (c.sector != s || c.writer != s % WRITERS)
		return -1;
	fill_sector(want, c.writer, s, c.gen);
	return memcmp(want, p, SECTOR) ? -1 : 1;
}

struct writer_arg {
	uint32_t w;
	struct rng rng;
	int failures;
};

static void *writer(void *arg)
{
	struct writer_arg *a = arg;
	struct nc c;
	uint8_t buf[SECTOR];

	if (nc_connect(&c, srv.path, a->w & 1)) {
		a->failures++;
		return NULL;
	}
	for (uint32_t r = 1; r <= ROUNDS; r++) {
		/* BATCH different sectors of this writer in flight at once, so
		 * that the server's workers run them side by side */
		uint32_t s[BATCH];

		for (int b = 0; b < BATCH; b++) {
			bool dup;

			do {
				s[b] = (uint32_t)rng_below(&a->rng, NSECT / WRITERS) * WRITERS + a->w;
				dup = false;
				for (int k = 0; k < b; k++)
					dup |= s[k] == s[b];
			} while (dup);
			fill_sector(buf, a->w, s[b], r);
			if (nc_request(&c, NBD_CMD_WRITE, 0, s[b], (uint64_t)s[b] * SECTOR, SECTOR,
				       buf, SECTOR))
				a->failures++;
		}
		for (int b = 0; b < BATCH; b++) {
			uint8_t h[NBD_SIMPLE_REPLY_SIZE];

			/* replies come in any order: the cookie is the sector */
			if (nc_recv(&c, h, sizeof(h)) || get_be32(h) != NBD_SIMPLE_REPLY_MAGIC ||
			    get_be32(h + 4) != 0) {
				a->failures++;
				break;
			}
			__atomic_store_n(&last_gen[get_be64(h + 8)], r, __ATOMIC_RELAXED);
		}
		if (a->failures)
			break;
	}
	nc_close(&c);
	return NULL;
}

static void *reader(void *arg)
{
	int *bad = arg;
	struct nc c;
	uint8_t *buf = malloc(NSECT * SECTOR);

	if (!buf || nc_connect(&c, srv.path, true)) {
		(*bad)++;
		free(buf);
		return NULL;
	}
	while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
		if (nc_pread(&c, buf, 0, NSECT * SECTOR)) {
			(*bad)++;
			break;
		}
		for (uint32_t s = 0; s < NSECT; s++)
			if (check_sector(buf + s * SECTOR, s) < 0)
				(*bad)++;
	}
	nc_close(&c);
	free(buf);
	return NULL;
}

static void test_concurrent_unaligned_writers(void **state)
{
	struct serve_config cfg = { .size = NSECT * SECTOR, .threads = 4 };
	pthread_t wt[WRITERS], rt;
	struct writer_arg wa[WRITERS];
	int bad = 0;
	struct nc c;
	uint8_t *buf = malloc(NSECT * SECTOR);

	assert_non_null(buf);
	assert_int_equal(test_server_start(&srv, &cfg, "stress"), 0);
	__atomic_store_n(&stop_readers, 0, __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&rt, NULL, reader, &bad), 0);
	for (uint32_t w = 0; w < WRITERS; w++) {
		wa[w] = (struct writer_arg){ .w = w };
		rng_seed(&wa[w].rng, seed + w);
		assert_int_equal(pthread_create(&wt[w], NULL, writer, &wa[w]), 0);
	}
	for (uint32_t w = 0; w < WRITERS; w++) {
		pthread_join(wt[w], NULL);
		assert_int_equal(wa[w].failures, 0);
	}
	__atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
	pthread_join(rt, NULL);
	assert_int_equal(bad, 0);
	/* every sector holds its writer's last cookie */
	assert_int_equal(nc_connect(&c, srv.path, false), 0);
	assert_int_equal(nc_pread(&c, buf, 0, NSECT * SECTOR), 0);
	for (uint32_t s = 0; s < NSECT; s++) {
		struct cookie k;

		if (!last_gen[s]) {
			assert_int_equal(check_sector(buf + s * SECTOR, s), 0);
			continue;
		}
		assert_int_equal(check_sector(buf + s * SECTOR, s), 1);
		memcpy(&k, buf + s * SECTOR, sizeof(k));
		assert_int_equal(k.gen, last_gen[s]);
	}
	nc_close(&c);
	free(buf);
	assert_int_equal(test_server_stop(&srv), 0);
}

/* Many clients at once, each on its own range, through connect, I/O and
 * disconnect, while others come and go. */
static void *churn_client(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	uint8_t buf[8192], got[8192];
	int bad = 0;

	for (int round = 0; round < 20; round++) {
		struct nc c;
		uint64_t off = id * sizeof(buf);

		if (nc_connect(&c, srv.path, round & 1)) {
			bad++;
			continue;
		}
		memset(buf, (int)(id * 31 + (uintptr_t)round), sizeof(buf));
		if (nc_pwrite(&c, buf, off, sizeof(buf)) || nc_pread(&c, got, off, sizeof(got)) ||
		    memcmp(buf, got, sizeof(buf)))
			bad++;
		nc_close(&c);
	}
	return (void *)(uintptr_t)bad;
}

static void test_many_connections(void **state)
{
	struct serve_config cfg = { .size = 1u << 20, .threads = 2 };
	pthread_t t[16];

	assert_int_equal(test_server_start(&srv, &cfg, "many"), 0);
	for (uintptr_t i = 0; i < 16; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn_client, (void *)i), 0);
	for (int i = 0; i < 16; i++) {
		void *r;

		pthread_join(t[i], &r);
		assert_int_equal((uintptr_t)r, 0);
	}
	assert_int_equal(test_server_stop(&srv), 0);
}

/* The same race without the network in between: threads call disk_write
 * straight on two pages, 512 bytes at a time, so read-modify-writes of one
 * page collide often; each thread owns its sectors, and at the end every
 * sector holds its owner's last cookie. */
#define DISK_THREADS 4
#define DISK_ROUNDS 20000

struct disk_arg {
	struct serve_disk *d;
	uint32_t w;
	uint32_t last[16];
};

static void *disk_writer(void *arg)
{
	struct disk_arg *a = arg;
	uint8_t buf[SECTOR], *scratch = malloc(4096);

	for (uint32_t r = 1; r <= DISK_ROUNDS && scratch; r++) {
		uint32_t s = (r % 4) * DISK_THREADS + a->w;  /* 16 sectors: two pages */

		fill_sector(buf, a->w % WRITERS, s, r);
		if (disk_write(a->d, (uint64_t)s * SECTOR, SECTOR, buf, scratch))
			break;
		a->last[s] = r;
	}
	free(scratch);
	return NULL;
}

static void test_disk_read_modify_write_race(void **state)
{
	struct serve_server s;
	struct serve_config cfg = { .size = 8192 };
	struct disk_arg a[DISK_THREADS];
	pthread_t t[DISK_THREADS];
	uint8_t page[8192], scratch[4096];

	assert_int_equal(server_init(&s, &cfg), 0);
	for (uint32_t w = 0; w < DISK_THREADS; w++) {
		a[w] = (struct disk_arg){ .d = &s.disk, .w = w };
		assert_int_equal(pthread_create(&t[w], NULL, disk_writer, &a[w]), 0);
	}
	for (uint32_t w = 0; w < DISK_THREADS; w++)
		pthread_join(t[w], NULL);
	assert_int_equal(disk_read(&s.disk, 0, sizeof(page), page, scratch), 0);
	for (uint32_t sec = 0; sec < 16; sec++) {
		uint8_t want[SECTOR];
		uint32_t w = sec % DISK_THREADS;

		assert_int_not_equal(a[w].last[sec], 0);
		fill_sector(want, w % WRITERS, sec, a[w].last[sec]);
		assert_memory_equal(page + sec * SECTOR, want, SECTOR);
	}
	assert_int_equal(zm_store_check(s.store), 0);
	server_fini(&s);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_unaligned_writers),
		cmocka_unit_test(test_many_connections),
		cmocka_unit_test(test_disk_read_modify_write_race),
	};

	test_args(argc, argv, &seed, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
