/*
 * The zmem command's shared pieces, without running it: the JSON writer
 * (awkward strings written and parsed back, numbers that are not finite,
 * the document's shape), the size and number parsers, the option
 * table (values, limits, messages' exit statuses), and the plots' tick
 * chooser (round steps covering the data).
 */
#include <math.h>

#include "testutil.h"
#include "tool/json.c"
#include "tool/opt.c"
#include "tool/util.c"
#include "tool/plot.c"
#include "tool/check.c"

/* ---- a strict JSON string reader ------------------------------------ */

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	return 0;
}

static size_t put_utf8(char *o, unsigned c)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | c >> 6);
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | c >> 12);
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | c >> 18);
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* Decode the JSON string that is all of text into out: 0, or -1 if it is
 * not exactly one well-formed string (raw control characters, bad escapes
 * and bytes that are not UTF-8 are errors). */
static int decode(const char *text, char *out)
{
	const char *s = text;
	size_t n = 0;

	if (*s++ != '"')
		return -1;
	while (*s != '"') {
		unsigned char c = (unsigned char)*s;

		if (!c || c < 0x20)
			return -1;
		if (c == '\\') {
			unsigned u, lo;

			s++;
			switch (*s) {
			case '"': out[n++] = '"'; break;
			case '\\': out[n++] = '\\'; break;
			case '/': out[n++] = '/'; break;
			case 'b': out[n++] = '\b'; break;
			case 'f': out[n++] = '\f'; break;
			case 'n': out[n++] = '\n'; break;
			case 'r': out[n++] = '\r'; break;
			case 't': out[n++] = '\t'; break;
			case 'u':
				if (hex4(s + 1, &u))
					return -1;
				s += 4;
				if (u >= 0xd800 && u < 0xdc00) {
					if (s[1] != '\\' || s[2] != 'u' || hex4(s + 3, &lo) ||
					    lo < 0xdc00 || lo > 0xdfff)
						return -1;
					u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
					s += 6;
				}
				n += put_utf8(out + n, u);
				break;
			default:
				return -1;
			}
			s++;
			continue;
		}
		if (c >= 0x80) {
			int len = utf8_len((const unsigned char *)s);

			if (!len)
				return -1;
			memcpy(out + n, s, (size_t)len);
			n += (size_t)len, s += len;
			continue;
		}
		out[n++] = *s++;
	}
	out[n] = 0;
	return s[1] ? -1 : 0;
}

static char *written(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	json_write_string(f, s);
	fclose(f);
	return buf;
}

static void test_json_strings(void **state)
{
	static const char *const same[] = {
		"", "plain", "a \"quoted\" word", "back\\slash", "\\\"", "tab\there",
		"line\nbreak\r\n", "\b\f\x01\x1f\x7f", "file:/tmp/a\"b\\c",
		"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "</script>",
	};
	char out[256];

	(void)state;
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		char *w = written(same[i]);

		if (decode(w, out) || strcmp(out, same[i])) {
			fprintf(stderr, "string %zu written as %s\n", i, w);
			fail();
		}
		free(w);
	}
	/* not UTF-8: a lone continuation byte, a cut sequence, an overlong
	 * slash, a surrogate, a byte that is never UTF-8 */
	{
		static const struct { const char *in, *want; } bad[] = {
			{ "a\x80z", "a\xef\xbf\xbdz" },
			{ "\xc3", "\xef\xbf\xbd" },
			{ "\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
			{ "\xff", "\xef\xbf\xbd" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *w = written(bad[i].in);

			if (decode(w, out) || strcmp(out, bad[i].want)) {
				fprintf(stderr, "bad string %zu written as %s\n", i, w);
				fail();
			}
			free(w);
		}
	}
}

static void test_json_document(void **state)
{
	char *buf = NULL, want[512];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct json j;

	(void)state;
	assert_non_null(f);
	json_begin(&j, f, "te\"st");
	json_num(&j, "nan", NAN);
	json_num(&j, "inf", INFINITY);
	json_fixed(&j, "minf", -INFINITY, 2);
	json_num(&j, "half", 0.5);
	json_fixed(&j, "fixed", 2.0 / 3, 3);
	json_uint(&j, "big", UINT64_MAX);
	json_int(&j, "neg", -5);
	json_bool(&j, "yes", true);
	json_null(&j, "none");
	json_str(&j, "nostr", NULL);
	json_array(&j, "list");
	json_uint(&j, NULL, 1);
	json_object(&j, NULL);
	json_array(&j, "empty");
	json_array_end(&j);
	json_object_end(&j);
	json_array_end(&j);
	json_object(&j, "left open");
	json_array(&j, "also");
	json_end(&j);  /* closes what is still open */
	fclose(f);
	snprintf(want, sizeof(want),
		 "{\"zmem\": \"%s\", \"command\": \"te\\\"st\", \"nan\": null, \"inf\": null, "
		 "\"minf\": null, \"half\": 0.5, \"fixed\": 0.667, "
		 "\"big\": 18446744073709551615, \"neg\": -5, \"yes\": true, \"none\": null, "
		 "\"nostr\": null, \"list\": [1, {\"empty\": []}], "
		 "\"left open\": {\"also\": []}}\n", zm_version_string());
	assert_string_equal(buf, want);
	free(buf);
}

static void test_sizes(void **state)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "0", 0 }, { "4096", 4096 }, { "4K", 4096 }, { "4k", 4096 }, { "4KiB", 4096 },
		{ "4KB", 4096 }, { "64M", 64ull << 20 }, { "1G", 1ull << 30 }, { "2T", 2ull << 40 },
		{ "512B", 512 }, { "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = {
		"", "-1", "+1", " 1", "1 ", "1Q", "1KK", "K", "1.5M", "0x10", "16777216T",
		"18446744073709551616", "99999999999999999999999", "1iB", "nan",
	};
	uint64_t v;
	double d;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 1;
		assert_int_equal(cli_size(good[i].s, &v), 0);
		assert_true(v == good[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (cli_size(bad[i], &v) == 0) {
			fprintf(stderr, "size '%s' taken as %llu\n", bad[i], (unsigned long long)v);
			fail();
		}
	assert_int_equal(cli_double("0.25", &d), 0);
	assert_true(d == 0.25);
	assert_int_equal(cli_double("-2e3", &d), 0);
	assert_true(d == -2000);
	assert_int_equal(cli_double("nan", &d), -1);
	assert_int_equal(cli_double("inf", &d), -1);
	assert_int_equal(cli_double("1e999", &d), -1);
	assert_int_equal(cli_double("1x", &d), -1);
	assert_int_equal(cli_double("", &d), -1);
	assert_int_equal(cli_double(" 1", &d), -1);
	{
		char buf[32];

		assert_string_equal(zmi_human_bytes(512, buf, sizeof(buf)), "512 B");
		assert_string_equal(zmi_human_bytes(1536, buf, sizeof(buf)), "1.5 KiB");
		assert_string_equal(zmi_human_bytes(64ull << 20, buf, sizeof(buf)), "64 MiB");
		assert_string_equal(zmi_human_bytes(1ull << 30, buf, sizeof(buf)), "1.0 GiB");
		assert_string_equal(cli_size_text(4096, buf, sizeof(buf)), "4K");
		assert_string_equal(cli_size_text(1ull << 20, buf, sizeof(buf)), "1M");
		assert_string_equal(cli_size_text(4097, buf, sizeof(buf)), "4097");
	}
}

static int parse_args(const struct opt_cmd *c, const char *line, int *nargs)
{
	static char copy[256];
	char *argv[32];
	int argc = 0;

	snprintf(copy, sizeof(copy), "cmd %s", line);
	for (char *t = strtok(copy, " "); t && argc < 31; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	return opt_parse(c, argc, argv, nargs);
}

static void test_options(void **state)
{
	size_t size = 7, nlist = 0;
	int threads = 1, flag = 0, seen = 0, nargs = 0;
	uint64_t count = 0;
	double frac = 0;
	const char *str = "dflt", *list[2], *mode = "a";
	static const char *const modes[] = { "a", "b", NULL };
	const struct opt table[] = {
		O_SIZE("size", 's', &size, "SIZE", "a size", "7", 4096, 65536, .seen = &seen),
		O_INT("threads", 't', &threads, "N", "threads", "1", 1, 64),
		O_U64("count", 0, &count, "N", "a count", "0", 0, 0),
		O_DOUBLE("frac", 0, &frac, "F", "a fraction", NULL, 0, 1, .open = OPEN),
		O_FLAG("flag", 'f', &flag, "a flag"),
		O_STR("str", 0, &str, "S", "a string", "dflt"),
		O_STR("mode", 0, &mode, "M", "a mode", "a", .choices = modes),
		O_LIST("item", 'i', list, "X", "an item", NULL, &nlist, 2),
		O_END,
	};
	const struct opt_cmd c = { "test", NULL, "a test", table, NULL };

	(void)state;
	assert_int_equal(parse_args(&c, "--size 8K -t4 --count=18446744073709551615 --frac 0.5 "
				    "-f --str x --mode b -i one --item two", NULL), 0);
	assert_true(size == 8192 && seen && threads == 4 && count == UINT64_MAX);
	assert_true(frac == 0.5 && flag && !strcmp(str, "x") && !strcmp(mode, "b"));
	assert_true(nlist == 2 && !strcmp(list[0], "one") && !strcmp(list[1], "two"));
	nlist = 0;
	assert_int_equal(parse_args(&c, "a --flag b -- --size", &nargs), 0);
	assert_int_equal(nargs, 3);
	/* every fault: a usage error */
	static const char *const bad[] = {
		"--size -1", "--size 1Q", "--size 4095", "--size 128K", "--size", "--threads 0",
		"--threads 65", "--threads 1x", "--threads 99999999999", "--count -1",
		"--frac 0", "--frac 1", "--frac nan", "--flag=1", "--nope", "-x", "-fz",
		"--mode c", "-i a -i b -i c", "operand",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		nlist = 0;
		if (parse_args(&c, bad[i], NULL) != CLI_USAGE) {
			fprintf(stderr, "'%s' was taken\n", bad[i]);
			fail();
		}
	}
}

/* ---- the plots' ticks ------------------------------------------------ */

/* step is 1, 2, 2.5 or 5 times a power of ten, ticks cover lo..hi */
static void check_ticks(double lo, double hi, double step, double first, double last)
{
	struct plot_ticks t;
	double m;

	plot_nice_ticks(lo, hi, 5, &t);
	assert_true(t.n >= 2 && t.n <= PLOT_MAX_TICKS);
	m = t.step / pow(10, floor(log10(t.step)));
	assert_true(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 2.5) < 1e-9 ||
		    fabs(m - 5) < 1e-9);
	assert_true(t.v[0] <= fmin(lo, hi) && t.v[t.n - 1] >= fmax(lo, hi));
	for (size_t i = 1; i < t.n; i++)
		assert_true(fabs(t.v[i] - t.v[i - 1] - t.step) < t.step * 1e-6);
	assert_true(fabs(t.step - step) < step * 1e-9);
	assert_true(fabs(t.v[0] - first) < step * 1e-9);
	assert_true(fabs(t.v[t.n - 1] - last) < step * 1e-9);
}

static void test_ticks(void **state)
{
	struct plot_ticks t;
	char lab[32];

	(void)state;
	check_ticks(1.0, 2.1, 0.25, 1.0, 2.25);
	check_ticks(0, 1e9, 2e8, 0, 1e9);
	check_ticks(0.0001, 0.0009, 0.0002, 0, 0.001);
	check_ticks(-3, 7, 2, -4, 8);
	check_ticks(7, -3, 2, -4, 8);            /* reversed */
	check_ticks(-0.5, 0.5, 0.2, -0.6, 0.6);
	/* a single value: a range around it, the value inside */
	plot_nice_ticks(42, 42, 5, &t);
	assert_true(t.n >= 2 && t.v[0] < 42 && t.v[t.n - 1] > 42);
	plot_nice_ticks(0, 0, 5, &t);
	assert_true(t.n >= 2 && t.v[0] == 0 && t.v[t.n - 1] > 0);
	/* no -0 or 1e-17 at zero */
	plot_nice_ticks(-0.3, 0.3, 6, &t);
	for (size_t i = 0; i < t.n; i++)
		assert_true(t.v[i] != 0 || !signbit(t.v[i]));
	/* labels: the step's decimals, k/M/G for large values */
	plot_tick_label(lab, sizeof(lab), 1.25, 0.25);
	assert_string_equal(lab, "1.25");
	plot_tick_label(lab, sizeof(lab), 1.5, 0.5);
	assert_string_equal(lab, "1.5");
	plot_tick_label(lab, sizeof(lab), 0, 0.25);
	assert_string_equal(lab, "0");
	plot_tick_label(lab, sizeof(lab), 4e8, 2e8);
	assert_string_equal(lab, "400M");
	plot_tick_label(lab, sizeof(lab), 2.5e4, 2.5e3);
	assert_string_equal(lab, "25.0k");
	plot_tick_label(lab, sizeof(lab), 0.0004, 0.0002);
	assert_string_equal(lab, "0.0004");
	plot_tick_label(lab, sizeof(lab), -4, 2);
	assert_string_equal(lab, "-4");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_strings),
		cmocka_unit_test(test_json_document),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_ticks),
	};

	(void)argc, (void)argv;
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
