/*
 * Smoke test of the benchmark commands: runs the zmem command that sits
 * next to this test's directory (or $ZMEM) with tiny sizes --
 *
 *   zmem bench --compare-2011 --size 8M --json
 *   zmem allocbench --sizes 64,2048 --count 2000 --reps 1 --min-ms 0 --json --plot F
 *   zmem allocbench --latency --rounds 1 --ms 50 --bytes 1M --json (and --trace 10)
 *   zmem worstcase --max-size 8M --json
 *   zmem churn --corpus F --size 512K --fraction 0.5 --json
 *   zmem tierbench --data text:0.5 --size 8M --ops 20000 --json --plot F
 *   zmem cachebench --mode all --size 2M --file-set 2M --budgets 256K,1M ... --json --plot F
 *
 * -- and checks that each prints well-formed JSON with a row for every
 * backend of zm_pool_backends() (for tierbench: every mode; for cachebench:
 * every mode, data set, policy and budget on every backend) and sane
 * figures.  Nothing here depends
 * on how fast the machine is: timings are only checked to be positive.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sys/stat.h>

#include <zmem/pool.h>
#include "testutil.h"

/* ---- a small JSON reader: the whole grammar, values kept as a tree -- */

enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jt t;
	double num;              /* J_NUM, J_BOOL (0/1) */
	char *str;               /* J_STR */
	struct jv *kid;          /* J_ARR, J_OBJ */
	char **key;              /* J_OBJ */
	size_t n;
};

static void jfree(struct jv *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jfree(&v->kid[i]);
		if (v->key)
			free(v->key[i]);
	}
	free(v->kid);
	free(v->key);
	free(v->str);
}

static void ws(const char **p)
{
	while (**p == ' ' || **p == '\n' || **p == '\r' || **p == '\t')
		(*p)++;
}

/* A string, kept as written (escapes and all: the keys and names here
 * have none). */
static int jstring(const char **p, char **out)
{
	const char *start = ++*p, *s = start;
	char *o;

	for (; *s != '"'; s++) {
		if ((unsigned char)*s < 0x20)
			return -1;
		if (*s == '\\') {
			s++;
			if (*s == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)s[i]))
						return -1;
				s += 4;
			} else if (!*s || !strchr("\"\\/bfnrt", *s)) {
				return -1;
			}
		}
	}
	o = malloc((size_t)(s - start) + 1);
	if (!o)
		return -1;
	memcpy(o, start, (size_t)(s - start));
	o[s - start] = 0;
	*out = o;
	*p = s + 1;
	return 0;
}

static int jvalue(const char **p, struct jv *v, int depth);

static int jpush(struct jv *v, const char **p, char *key, int depth)
{
	struct jv *k = realloc(v->kid, (v->n + 1) * sizeof(*k));

	if (!k)
		return -1;
	v->kid = k;
	if (v->t == J_OBJ) {
		char **kk = realloc(v->key, (v->n + 1) * sizeof(*kk));

		if (!kk)
			return -1;
		v->key = kk;
		v->key[v->n] = key;
	}
	memset(&v->kid[v->n], 0, sizeof(*k));
	v->n++;
	return jvalue(p, &v->kid[v->n - 1], depth + 1);
}

static int jvalue(const char **p, struct jv *v, int depth)
{
	memset(v, 0, sizeof(*v));
	ws(p);
	if (depth > 64)
		return -1;
	if (**p == '{' || **p == '[') {
		char close = **p == '{' ? '}' : ']';

		v->t = **p == '{' ? J_OBJ : J_ARR;
		(*p)++;
		ws(p);
		if (**p == close) {
			(*p)++;
			return 0;
		}
		for (;;) {
			char *key = NULL;

			ws(p);
			if (v->t == J_OBJ) {
				if (**p != '"' || jstring(p, &key))
					return -1;
				ws(p);
				if (**p != ':') {
					free(key);
					return -1;
				}
				(*p)++;
			}
			if (jpush(v, p, key, depth))
				return -1;
			ws(p);
			if (**p == ',') {
				(*p)++;
				continue;
			}
			if (**p != close)
				return -1;
			(*p)++;
			return 0;
		}
	}
	if (**p == '"') {
		v->t = J_STR;
		return jstring(p, &v->str);
	}
	if (!strncmp(*p, "true", 4) || !strncmp(*p, "false", 5)) {
		v->t = J_BOOL;
		v->num = **p == 't';
		*p += **p == 't' ? 4 : 5;
		return 0;
	}
	if (!strncmp(*p, "null", 4)) {
		*p += 4;
		return 0;
	}
	if (**p == '-' || isdigit((unsigned char)**p)) {
		const char *s = *p + (**p == '-');
		char *end;

		if (!isdigit((unsigned char)*s))
			return -1;
		v->t = J_NUM;
		v->num = strtod(*p, &end);
		for (const char *c = *p; c < end; c++)
			if (!strchr("0123456789+-.eE", *c))
				return -1;
		*p = end;
		return 0;
	}
	return -1;
}

/* Parse a whole document: 0, or -1 if it is not well-formed JSON. */
static int jparse(const char *text, struct jv *v)
{
	const char *p = text;

	if (jvalue(&p, v, 0))
		return -1;
	ws(&p);
	return *p ? -1 : 0;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
	if (o->t != J_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->key[i], key))
			return &o->kid[i];
	return NULL;
}

static const char *jstr(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && v->t == J_STR ? v->str : "";
}

static double jnum(const struct jv *o, const char *key)
{
	const struct jv *v = jget(o, key);

	return v && (v->t == J_NUM || v->t == J_BOOL) ? v->num : NAN;
}

/* ---- running zmem --------------------------------------------------- */

static char zmem_path[4096];
static char tmpdir[] = "/tmp/zmem-exp-XXXXXX";

/* Run "zmem ARGS" and return its standard output (caller frees). */
/* zmem ARGS in the test's directory, its output read whole (stdout, or
 * with redirect "2>&1 >/dev/null" its stderr); it must exit 0. */
static char *run_zmem_to(const char *args, const char *redirect)
{
	char cmd[8192];
	size_t len = 0, cap = 1 << 16;
	char *out = malloc(cap);
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "cd %s && '%s' %s %s", tmpdir, zmem_path, args, redirect);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(out);
	for (size_t got; (got = fread(out + len, 1, cap - len - 1, f)) > 0;) {
		len += got;
		if (cap - len < 4096) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
	}
	out[len] = 0;
	st = pclose(f);
	if (st != 0)
		fprintf(stderr, "zmem %s: exit status %d\n", args, st);
	assert_int_equal(st, 0);
	return out;
}

static char *run_zmem(const char *args)
{
	return run_zmem_to(args, "2>/dev/null");
}

static void parse_or_fail(const char *what, const char *text, struct jv *doc)
{
	if (jparse(text, doc)) {
		fprintf(stderr, "%s: not well-formed JSON:\n%.2000s\n", what, text);
		fail();
	}
	assert_int_equal(doc->t, J_OBJ);
}

/* Every --json of the zmem command starts with {"zmem": VERSION,
 * "command": NAME, ...}. */
static void common_keys(const struct jv *doc, const char *command)
{
	assert_true(doc->n >= 2);
	assert_string_equal(doc->key[0], "zmem");
	assert_string_equal(doc->key[1], "command");
	assert_string_equal(jstr(doc, "zmem"), zm_version_string());
	assert_string_equal(jstr(doc, "command"), command);
}

static const struct jv *results(const struct jv *doc)
{
	const struct jv *r = jget(doc, "results");

	assert_non_null(r);
	assert_int_equal(r->t, J_ARR);
	return r;
}

/* ---- the tests ------------------------------------------------------ */

/* zmem density's breakdown: every backend's parts of its metadata stay
 * within it, and zsmalloc's partly used zspages are at most one or two a
 * class after a fill (the newest of each class's shard). */
static void test_density(void **state)
{
	char args[1024];
	char *out;
	struct jv doc;
	const struct jv *r;
	double obj;
	int zs = 0;

	(void)state;
	snprintf(args, sizeof(args), "gen --kind text --ratio 0.5 --size 4M -o '%s/d.pages' "
		 ">/dev/null", tmpdir);
	free(run_zmem(args));
	snprintf(args, sizeof(args), "density --corpus '%s/d.pages' --size 1M --json", tmpdir);
	out = run_zmem(args);
	parse_or_fail("density", out, &doc);
	common_keys(&doc, "density");
	assert_non_null(jget(&doc, "corpus"));
	obj = jnum(&doc, "obj_bytes");
	assert_true(obj >= 1 << 20);
	r = results(&doc);
	assert_int_equal(r->n, 5);
	for (size_t i = 0; i < r->n; i++) {
		const struct jv *row = &r->kid[i];
		double meta = jnum(row, "meta_bytes"), pool = jnum(row, "pool_bytes");
		double parts = jnum(row, "handle_bytes") + jnum(row, "record_bytes") +
			       jnum(row, "pages_meta_bytes");

		assert_true(parts > 0 && parts <= meta);
		assert_true(pool + meta >= obj);
		assert_true(jnum(row, "slot_bytes") >= obj);
		if (!strcmp(jstr(row, "allocator"), "zsmalloc")) {
			zs = 1;
			assert_true(jnum(row, "partly_used_zspages") >= 1);
			assert_true(jnum(row, "partly_used_zspages") <= 2 * 128);
			assert_true(jnum(row, "handle_bytes") >= 8 * jnum(&doc, "objects"));
		}
	}
	assert_true(zs);
	jfree(&doc);
	free(out);
	snprintf(args, sizeof(args), "density --corpus '%s/d.pages' --size 1M -v", tmpdir);
	out = run_zmem(args);
	assert_non_null(strstr(out, "bytes per object beyond its own"));
	assert_non_null(strstr(out, "partly used zspages"));
	free(out);
	snprintf(args, sizeof(args), "%s/d.pages", tmpdir);
	unlink(args);
}

static void test_compare_2011(void **state)
{
	char *out = run_zmem("bench --compare-2011 --size 8M --json");
	struct jv doc;
	const struct jv *r;

	parse_or_fail("compare-2011", out, &doc);
	common_keys(&doc, "bench");
	r = results(&doc);
	for (const char *const *b = zm_pool_backends(); *b; b++) {
		double eff[2] = { NAN, NAN };

		for (size_t i = 0; i < r->n; i++) {
			const struct jv *row = &r->kid[i];
			const char *data = jstr(row, "data");
			double e = jnum(row, "effective"), em = jnum(row, "effective_with_meta");
			int text = !strcmp(data, "text:0.75");

			if (strcmp(jstr(row, "allocator"), *b))
				continue;
			assert_true(text || !strcmp(data, "zero"));
			assert_true(jnum(row, "pages") == 2048);
			assert_true(jnum(row, "pool_pages") > 0);
			assert_true(jnum(row, "meta_bytes") >= 0);
			assert_true(jget(row, "descriptors") != NULL);
			assert_true(jnum(row, "verified") == 1);
			if (!(e > 0 && e < 1.2 && em >= e * 0.99 && em < 1.3)) {
				fprintf(stderr, "%s %s: effective %f, with metadata %f\n", *b, data,
					e, em);
				fail();
			}
			eff[text] = e;
		}
		if (isnan(eff[0]) || isnan(eff[1])) {
			fprintf(stderr, "compare-2011: no %s row for %s\n",
				isnan(eff[0]) ? "zero" : "text", *b);
			fail();
		}
		assert_true(eff[0] < eff[1]);
		/* text compressing to 75%: what is stored is close to that */
		assert_true(eff[1] > 0.70);
		if (!strcmp(*b, "zsmalloc"))
			assert_true(eff[1] < 0.80);
	}
	jfree(&doc);
	free(out);
}

static void test_allocbench(void **state)
{
	static const char *const pats[] = { "all-free", "one-one", "random" };
	char args[512], svg[256], head[64] = "";
	char *out, *tail;
	struct jv doc;
	const struct jv *r;
	struct stat sb;
	FILE *f;

	snprintf(svg, sizeof(svg), "%s/allocbench.svg", tmpdir);
	snprintf(args, sizeof(args), "allocbench --sizes 64,2048 --count 2000 --bytes 1M "
		 "--reps 1 --min-ms 0 --threads 2 --json --plot '%s'", svg);
	out = run_zmem(args);
	parse_or_fail("allocbench", out, &doc);
	common_keys(&doc, "allocbench");
	r = results(&doc);
	for (const char *const *b = zm_pool_backends(); *b; b++)
		for (int p = 0; p < 3; p++)
			for (int size = 0; size <= 2048; size = size ? size * 32 : 64) {
				int found = 0;

				if (size == 0 && p != 2)
					continue;  /* the mix: random only */
				for (size_t i = 0; i < r->n; i++) {
					const struct jv *row = &r->kid[i];

					if (strcmp(jstr(row, "allocator"), *b) ||
					    strcmp(jstr(row, "pattern"), pats[p]) ||
					    jnum(row, "size_bytes") != size)
						continue;
					found++;
					assert_true(jnum(row, "ns_per_op") > 0);
					assert_true(jnum(row, "threads") >= 1);
					assert_true(jnum(row, "failed_allocs") == 0);
					assert_true(jnum(row, "passes") == 1);  /* --min-ms 0 */
				}
				if (found != 2) {
					fprintf(stderr, "allocbench: %d rows for %s %s %d (want 2)\n",
						found, *b, pats[p], size);
					fail();
				}
			}
	jfree(&doc);
	free(out);
	/* each thread its own pool and pages instance: the same rows */
	out = run_zmem("allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K "
		       "--reps 1 --min-ms 0 --threads 2 --apart all --json");
	parse_or_fail("allocbench --apart", out, &doc);
	common_keys(&doc, "allocbench");
	assert_string_equal(jstr(&doc, "apart"), "all");
	r = results(&doc);
	assert_int_equal(r->n, 2 * 4);  /* 3 patterns and the mix, 1 and 2 threads */
	for (size_t i = 0; i < r->n; i++) {
		assert_true(jnum(&r->kid[i], "ns_per_op") > 0);
		assert_true(jnum(&r->kid[i], "failed_allocs") == 0);
	}
	jfree(&doc);
	free(out);
	/* the plot: an SVG document */
	assert_int_equal(stat(svg, &sb), 0);
	assert_true(sb.st_size > 1000);
	f = fopen(svg, "r");
	assert_non_null(f);
	assert_non_null(fgets(head, sizeof(head), f));
	fclose(f);
	assert_true(!strncmp(head, "<?xml", 5));
	out = malloc((size_t)sb.st_size + 1);
	assert_non_null(out);
	f = fopen(svg, "r");
	assert_int_equal(fread(out, 1, (size_t)sb.st_size, f), (size_t)sb.st_size);
	fclose(f);
	out[sb.st_size] = 0;
	tail = strstr(out, "</svg>");
	assert_non_null(tail);
	for (const char *const *b = zm_pool_backends(); *b; b++)
		assert_non_null(strstr(out, *b));
	free(out);
	unlink(svg);
}

/* --trace: a header and a line every MS ms of the "on" side's loop on
 * stderr (stdout is sent away here), times rising up to the loop's
 * length, counts that only grow, and pages out of the pages layer. */
static void test_allocbench_latency_trace(void **state)
{
	char *out = run_zmem_to("allocbench --latency --rounds 1 --ms 60 --bytes 1M --trace 10",
				"2>&1 >/dev/null");
	double last_ms = 0, last[5] = { 0 };
	int lines = 0, header = 0;

	(void)state;
	for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
		double ms, v[7];

		if (strstr(l, "in_use") && strstr(l, "in_calls"))
			header++;
		if (sscanf(l, "%lf %lf %lf %lf %lf %lf %lf %lf", &ms, &v[0], &v[1], &v[2], &v[3],
			   &v[4], &v[5], &v[6]) != 8)
			continue;
		assert_true(header == 1);
		/* a late wake-up takes the next line at once: the same
		 * tenth of a ms can repeat */
		assert_true(ms >= last_ms);
		assert_true(v[0] > 0);  /* the pool's pages are out */
		for (int k = 0; k < 5; k++) {
			assert_true(v[2 + k] >= last[k]);
			last[k] = v[2 + k];
		}
		last_ms = ms;
		lines++;
	}
	/* 60 ms in steps of 10: a late wake-up makes the next sleep shorter */
	assert_int_equal(lines, 6);
	assert_true(last_ms >= 55);
	free(out);
}

/* The latency mode: a row for each op and side (on, off, hog),
 * percentiles in order, the compactor seen moving objects on its side
 * only (a mass free of 75% is what arms it), background CPU measured
 * there and copied by the hog side in timed steps, every map reading
 * back what was written, and the lock records there in a debug build
 * (the tests' builds are). */
static void test_allocbench_latency(void **state)
{
	static const char *const ops[] = { "alloc", "free", "map+unmap", "empty" };
	char *out = run_zmem("allocbench --latency --rounds 1 --ms 50 --bytes 1M --json");
	const struct jv *r, *sides, *ratio;
	double bg_on = -1;
	struct jv doc;

	parse_or_fail("allocbench --latency", out, &doc);
	common_keys(&doc, "allocbench");
	assert_string_equal(jstr(&doc, "mode"), "latency");
	assert_true(jnum(&doc, "timer_ns") > 0);
	r = results(&doc);
	static const char *const side_names[3] = { "on", "off", "hog" };

	assert_int_equal(r->n, 3 * 4);
	for (int o = 0; o < 4; o++)
		for (int side = 0; side < 3; side++) {
			int found = 0;

			for (size_t i = 0; i < r->n; i++) {
				const struct jv *row = &r->kid[i];

				if (strcmp(jstr(row, "op"), ops[o]) ||
				    strcmp(jstr(row, "compaction"), side_names[side]))
					continue;
				found++;
				assert_true(jnum(row, "ops") > 0);
				assert_true(jnum(row, "p50_ns") > 0);
				assert_true(jnum(row, "p50_ns") <= jnum(row, "p99_ns"));
				assert_true(jnum(row, "p99_ns") <= jnum(row, "p999_ns"));
				assert_true(jnum(row, "p999_ns") <= jnum(row, "max_ns"));
			}
			assert_int_equal(found, 1);
		}
	ratio = jget(&doc, "ratio_p999");
	assert_non_null(ratio);
	for (int o = 0; o < 3; o++)
		assert_true(jnum(ratio, ops[o]) > 0);
	ratio = jget(&doc, "ratio_p999_hog");
	assert_non_null(ratio);
	for (int o = 0; o < 3; o++)
		assert_true(jnum(ratio, ops[o]) > 0);
	sides = jget(&doc, "sides");
	assert_non_null(sides);
	assert_int_equal(sides->n, 3);
	for (size_t i = 0; i < 3; i++)
		if (!strcmp(jstr(&sides->kid[i], "compaction"), "on"))
			bg_on = jnum(&sides->kid[i], "background_cpu");
	for (size_t i = 0; i < 3; i++) {
		const struct jv *sd = &sides->kid[i], *lh = jget(sd, "lock_hold");
		int on = !strcmp(jstr(sd, "compaction"), "on");
		int hog = !strcmp(jstr(sd, "compaction"), "hog");

		/* a share of the wall time; the hog spins only if the on
		 * side used CPU beside its timed threads, and only it does */
		assert_true(jnum(sd, "background_cpu") >= 0 && jnum(sd, "background_cpu") <= 2);
		if (!hog) {
			assert_true(jnum(sd, "hog_burst_us") == 0);
			assert_true(jnum(sd, "hog_steps") == 0);
		} else {
			assert_true((jnum(sd, "hog_burst_us") > 0) == (bg_on > 0));
			/* its work is timed steps: a step takes some time,
			 * and no more steps are over 100 us than there are */
			assert_true((jnum(sd, "hog_steps") > 0) == (bg_on > 0));
			assert_true((jnum(sd, "hog_step_max_ns") > 0) == (jnum(sd, "hog_steps") > 0));
			assert_true(jnum(sd, "hog_steps_over_100us") <= jnum(sd, "hog_steps"));
		}

		assert_true(jnum(sd, "failed_allocs") == 0);
		assert_true(jnum(sd, "bad_reads") == 0);
		if (!on)
			assert_true(jnum(sd, "objects_moved") == 0 && jnum(sd, "pages_trimmed") == 0);
		assert_non_null(lh);
#if ZM_DEBUG >= 1
		assert_int_equal(lh->t, J_ARR);
		assert_int_equal(lh->n, 4);
		/* every alloc and free takes a class lock */
		assert_string_equal(jstr(&lh->kid[0], "kind"), "class");
		assert_true(jnum(&lh->kid[0], "max_ns") > 0);
#else
		assert_int_equal(lh->t, J_NULL);
#endif
	}
	jfree(&doc);
	free(out);
}

/* zmem churn: a row for every backend (malloc: the C library's there)
 * and for zsmalloc without compaction, the fraction asked for, overheads
 * of at least the live bytes, and zsmalloc's compaction bringing its
 * overhead down, never up, while zsmalloc-off's stays. */
static void test_churn(void **state)
{
	char args[1024];
	char *out;
	struct jv doc;
	const struct jv *a, *c;
	int off;

	(void)state;
	snprintf(args, sizeof(args), "gen --kind text --ratio 0.5 --size 2M -o '%s/c.pages' "
		 ">/dev/null", tmpdir);
	free(run_zmem(args));
	snprintf(args, sizeof(args), "churn --corpus '%s/c.pages' --size 512K --fraction 0.5 "
		 "--json", tmpdir);
	out = run_zmem(args);
	parse_or_fail("churn", out, &doc);
	common_keys(&doc, "churn");
	assert_true(jnum(&doc, "fraction") == 0.5);
	assert_true(jnum(&doc, "objects") > 0);
	assert_true(jnum(&doc, "obj_bytes") >= 512 << 10);
	assert_non_null(jget(&doc, "corpus"));
	a = jget(&doc, "results");
	assert_non_null(a);
	assert_int_equal(a->t, J_ARR);
	for (size_t i = 0; i < a->n; i++) {
		const char *name = jstr(&a->kid[i], "allocator");
		double after, at_1s;

		c = jget(&a->kid[i], "churn");
		assert_non_null(c);
		after = jnum(c, "overhead_after_free");
		at_1s = jnum(c, "overhead_1s");
		assert_true(jnum(c, "fraction") == 0.5);
		if (!(after >= 0.99 && at_1s >= 0.99 && after < 100)) {
			fprintf(stderr, "churn %s: overhead %f after the free, %f at 1 s\n", name,
				after, at_1s);
			fail();
		}
		if (!strcmp(name, "zsmalloc")) {
			assert_true(at_1s <= after);
			assert_true(jnum(&a->kid[i], "objects_moved") >= 0);
			assert_true(jnum(&a->kid[i], "objects_moved_bound") >= 0);
		} else if (!strcmp(name, "zsmalloc-off")) {
			assert_true(at_1s == after);
			assert_true(jnum(&a->kid[i], "objects_moved") == 0);
		}
	}
	for (const char *const *b = zm_pool_backends(); *b; b++) {
		const char *want = *b;  /* malloc: the C library's row */
		int found = 0;

		for (size_t i = 0; i < a->n; i++)
			found += !strcmp(jstr(&a->kid[i], "allocator"), want);
		if (found != 1) {
			fprintf(stderr, "churn: %d rows for %s (want 1)\n", found, want);
			fail();
		}
	}
	off = 0;
	for (size_t i = 0; i < a->n; i++)
		off += !strcmp(jstr(&a->kid[i], "allocator"), "zsmalloc-off");
	assert_int_equal(off, 1);
	jfree(&doc);
	free(out);
	snprintf(args, sizeof(args), "%s/c.pages", tmpdir);
	unlink(args);
}

static void test_worstcase(void **state)
{
	static const char *const seqs[] = { "3k-empty", "classes-half", "over-half", "tiny",
					    "mixed-churn" };
	char *out = run_zmem("worstcase --max-size 8M --json");
	struct jv doc;
	const struct jv *r, *g;

	parse_or_fail("worstcase", out, &doc);
	common_keys(&doc, "worstcase");
	r = results(&doc);
	g = jget(&doc, "growth");
	assert_non_null(g);
	assert_int_equal(g->t, J_ARR);
	for (const char *const *b = zm_pool_backends(); *b; b++)
		for (size_t q = 0; q < sizeof(seqs) / sizeof(seqs[0]); q++) {
			int found = 0, grown = 0;

			for (size_t i = 0; i < r->n; i++) {
				const struct jv *row = &r->kid[i];
				double w = jnum(row, "waste");

				if (strcmp(jstr(row, "allocator"), *b) ||
				    strcmp(jstr(row, "sequence"), seqs[q]))
					continue;
				found++;
				assert_true(jnum(row, "size_bytes") == 4 << 20 ||
					    jnum(row, "size_bytes") == 8 << 20);
				assert_true(jnum(row, "ns_per_op") > 0);
				assert_true(jnum(row, "live_bytes") > 0);
				/* pool + metadata hold at least the live bytes, and
				 * even the worst fit wastes less than a page per
				 * 16-byte object */
				if (!(w >= 0.99 && w < 300)) {
					fprintf(stderr, "worstcase %s on %s: waste %f\n", seqs[q], *b, w);
					fail();
				}
			}
			for (size_t i = 0; i < g->n; i++)
				if (!strcmp(jstr(&g->kid[i], "allocator"), *b) &&
				    !strcmp(jstr(&g->kid[i], "sequence"), seqs[q]))
					grown = jnum(&g->kid[i], "ns_growth") > 0;
			if (found != 2 || !grown) {
				fprintf(stderr, "worstcase: %d rows for %s on %s (want 2), growth %s\n",
					found, seqs[q], *b, grown ? "yes" : "missing");
				fail();
			}
		}
	jfree(&doc);
	free(out);
}

static void test_tierbench(void **state)
{
	static const char *const modes[] = { "none", "recompress", "writeback", "both",
					     "lz4-only", "zstd-only", "wb-clean", "wb-sync" };
	static const char *const keys[] = { "ops", "MBps", "failed_writes", "pool_bytes",
					    "rss_bytes", "pages_in_memory", "pages_on_file",
					    "bd_writes", "bd_reads", "recompressed_pages",
					    "get_p99_us", "mismatches" };
	char args[512], svg[256];
	char *out;
	struct jv doc;
	const struct jv *r, *t;
	struct stat sb;
	double pages;

	/* data 4x the limit (2 MiB), text compressing to half: the tiered
	 * modes must move pages to the file or to the secondary codec */
	snprintf(svg, sizeof(svg), "%s/tierbench.svg", tmpdir);
	snprintf(args, sizeof(args), "tierbench --data text:0.5 --size 8M --ops 20000 "
		 "--idle-after 100 --dir '%s' --json --plot '%s'", tmpdir, svg);
	out = run_zmem(args);
	parse_or_fail("tierbench", out, &doc);
	common_keys(&doc, "tierbench");
	r = results(&doc);
	pages = jnum(&doc, "pages");
	assert_true(pages == 2048);
	assert_true(jnum(&doc, "limit_bytes") == 2 << 20);
	assert_true(jnum(&doc, "seed") >= 0);
	assert_int_equal(r->n, sizeof(modes) / sizeof(modes[0]));
	for (size_t i = 0; i < r->n; i++) {
		const struct jv *row = &r->kid[i];
		const char *mode = jstr(row, "mode");

		assert_string_equal(mode, modes[i]);
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (isnan(jnum(row, keys[k]))) {
				fprintf(stderr, "tierbench %s: no number '%s'\n", mode, keys[k]);
				fail();
			}
		assert_true(jnum(row, "ops") == 20000 - 20000 / 4);  /* after the warm-up */
		assert_true(jnum(row, "MBps") > 0);
		assert_true(jnum(row, "mismatches") == 0);
		assert_true(jnum(row, "errors") == 0);
		assert_true(jnum(row, "verified") == 1);
	}
	/* without tiering the limit refuses writes; with both, none fails and
	 * every page is somewhere */
	assert_true(jnum(&r->kid[0], "failed_writes") > 0);
	assert_true(jnum(&r->kid[3], "failed_writes") == 0);
	assert_true(jnum(&r->kid[3], "pages_on_file") > 0);
	assert_true(jnum(&r->kid[3], "pages_in_memory") + jnum(&r->kid[3], "pages_on_file") ==
		    pages);
	assert_true(jnum(&r->kid[4], "failed_writes") == 0);
	t = jget(&doc, "targets");
	assert_non_null(t);
	assert_true(jnum(t, "both_failed_writes") == 0);
	assert_true(jnum(t, "both_mismatches") == 0);
	assert_true(jget(t, "writeback_ns_per_page") != NULL);
	assert_true(jget(t, "pwrite_ns_per_page") != NULL);
	jfree(&doc);
	free(out);
	assert_int_equal(stat(svg, &sb), 0);
	assert_true(sb.st_size > 1000);
	unlink(svg);
}

static void test_cachebench(void **state)
{
	/* every row has every key; these are numbers in every row */
	static const char *const counts[] = { "budget_bytes", "puts", "puts_stored", "gets",
					      "hits", "evicted_objects", "evicted_pages",
					      "refused", "refused_zsize", "refused_mean",
					      "refused_share", "refused_full", "pages_stored",
					      "pool_pages", "pool_bytes", "meta_bytes", "mem_bytes",
					      "mismatches", "errors" };
	static const char *const keys[] = { "allocator", "kind", "pool_kind", "data", "policy",
					    "effective", "reference", "hit_ratio",
					    "pages_per_evicted", "ns_per_get", "ns_per_put",
					    "store_ns_per_put", "store_ns_per_get", "put_ratio",
					    "get_ratio" };
	static const char *const kinds[] = { "frontswap", "cleancache", "speed", "mixed" };
	char args[1024], svg[256];
	char *out;
	struct jv doc;
	const struct jv *r;
	struct stat sb;

	/* 512 pages into a RAM of 256; 2 MiB of files through a page cache
	 * of 64 pages into tmem budgets of 64 and 256 pages */
	snprintf(svg, sizeof(svg), "%s/cachebench.svg", tmpdir);
	snprintf(args, sizeof(args), "cachebench --mode all --size 2M --speed-size 1M "
		 "--file-set 2M --cache 256K --budgets 256K,1M --reads 4000 --dir '%s' --json "
		 "--plot '%s'", tmpdir, svg);
	out = run_zmem(args);
	parse_or_fail("cachebench", out, &doc);
	common_keys(&doc, "cachebench");
	assert_string_equal(jstr(&doc, "command"), "cachebench");
	assert_true(strlen(jstr(&doc, "zmem")) > 0);
	assert_true(jnum(&doc, "seed") >= 0);
	r = jget(&doc, "results");
	assert_non_null(r);
	assert_int_equal(r->t, J_ARR);
	for (size_t i = 0; i < r->n; i++) {
		const struct jv *row = &r->kid[i];

		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			if (isnan(jnum(row, counts[k]))) {
				fprintf(stderr, "cachebench row %zu: no number '%s'\n", i, counts[k]);
				fail();
			}
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!jget(row, keys[k])) {
				fprintf(stderr, "cachebench row %zu: no key '%s'\n", i, keys[k]);
				fail();
			}
		assert_true(jnum(row, "mismatches") == 0);
		assert_true(jnum(row, "errors") == 0);
	}
	for (const char *const *b = zm_pool_backends(); *b; b++) {
		int found[4] = { 0 };
		double eff_zero = NAN, eff_text = NAN;

		for (size_t i = 0; i < r->n; i++) {
			const struct jv *row = &r->kid[i];
			const char *kind = jstr(row, "kind");

			if (strcmp(jstr(row, "allocator"), *b))
				continue;
			if (!strcmp(kind, kinds[0])) {
				found[0]++;
				assert_string_equal(jstr(row, "pool_kind"), "persistent");
				assert_true(jnum(row, "pages_stored") + jnum(row, "refused") == 256);
				assert_true(jnum(row, "gets") >= jnum(row, "pages_stored"));
				assert_true(jnum(row, "hits") == jnum(row, "gets"));
				if (!strcmp(jstr(row, "policy"), "off")) {
					assert_true(jnum(row, "pages_stored") == 256);
					if (!strcmp(jstr(row, "data"), "zero"))
						eff_zero = jnum(row, "effective");
					else
						eff_text = jnum(row, "effective");
				}
			} else if (!strcmp(kind, kinds[1])) {
				double g = jnum(row, "gets"), h = jnum(row, "hits");

				found[1]++;
				assert_string_equal(jstr(row, "pool_kind"), "ephemeral");
				assert_true(jnum(row, "budget_bytes") == 256 << 10 ||
					    jnum(row, "budget_bytes") == 1 << 20);
				assert_true(g > 0 && h >= 0 && h <= g);
				assert_true(jnum(row, "pool_bytes") <= jnum(row, "budget_bytes"));
				assert_true(jnum(row, "ns_per_get") > 0);
				assert_true(jnum(row, "ns_per_put") > 0);
			} else if (!strcmp(kind, kinds[2])) {
				found[2]++;
				assert_true(jnum(row, "put_ratio") > 0);
				assert_true(jnum(row, "get_ratio") > 0);
			} else if (!strcmp(kind, kinds[3])) {
				/* persistent puts into the full cleancache: room comes
				 * from evicting ephemeral pages, every page stored
				 * came back (mismatches, checked above) */
				found[3]++;
				assert_string_equal(jstr(row, "pool_kind"), "persistent");
				assert_true(jnum(row, "puts") > 0);
				assert_true(jnum(row, "puts_stored") > 0);
				assert_true(jnum(row, "pool_bytes") <= jnum(row, "budget_bytes"));
			} else {
				fprintf(stderr, "cachebench: unknown kind '%s'\n", kind);
				fail();
			}
		}
		/* frontswap: 2 data sets x 2 policies; cleancache and mixed: 2
		 * budgets; speed: a persistent and an ephemeral pool */
		if (found[0] != 4 || found[1] != 2 || found[2] != 2 || found[3] != 2) {
			fprintf(stderr, "cachebench %s: %d frontswap, %d cleancache, %d speed, "
				"%d mixed rows\n", *b, found[0], found[1], found[2], found[3]);
			fail();
		}
		if (!(eff_zero > 0 && eff_zero < eff_text && eff_text < 1.2)) {
			fprintf(stderr, "cachebench %s: effective %f (zero), %f (text)\n", *b,
				eff_zero, eff_text);
			fail();
		}
	}
	jfree(&doc);
	free(out);
	assert_int_equal(stat(svg, &sb), 0);
	assert_true(sb.st_size > 1000);
	unlink(svg);
}

static void test_json_reader(void **state)
{
	struct jv v;

	assert_int_equal(jparse("{\"a\": [1, -2.5e3, true, null, \"x\\\"y\"], \"b\": {}}", &v), 0);
	assert_true(jnum(&v, "b") != jnum(&v, "b")); /* an object: NaN */
	jfree(&v);
	assert_int_equal(jparse("{\"a\": [1, 2,]}", &v), -1);
	jfree(&v);
	assert_int_equal(jparse("{\"a\": 1} x", &v), -1);
	jfree(&v);
	assert_int_equal(jparse("[1, 2", &v), -1);
	jfree(&v);
	assert_int_equal(jparse("{\"a\" 1}", &v), -1);
	jfree(&v);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_reader),
		cmocka_unit_test(test_compare_2011),
		cmocka_unit_test(test_allocbench),
		cmocka_unit_test(test_allocbench_latency),
		cmocka_unit_test(test_allocbench_latency_trace),
		cmocka_unit_test(test_worstcase),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_tierbench),
		cmocka_unit_test(test_cachebench),
		cmocka_unit_test(test_density),
	};
	const char *env = getenv("ZMEM");
	int rc;

	/* build/X/tests/test_benchmarks -> build/X/zmem */
	if (env && *env) {
		snprintf(zmem_path, sizeof(zmem_path), "%s", env);
	} else {
		char self[2048];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		char *slash;

		if (n <= 0)
			snprintf(self, sizeof(self), "%s", argv[0]);
		else
			self[n] = 0;
		slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		snprintf(zmem_path, sizeof(zmem_path), "%s/zmem", slash ? self : "..");
	}
	if (access(zmem_path, X_OK)) {
		fprintf(stderr, "test_benchmarks: no zmem at %s (set ZMEM)\n", zmem_path);
		return 1;
	}
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(tmpdir);
	return rc;
}
