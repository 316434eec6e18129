/* The zmem command's JSON writer (json.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include <zmem/common.h>
#include "tool/check.h"
#include "tool/json.h"

/* the length of the UTF-8 sequence at s, or 0 if it is not one */
static int utf8_len(const unsigned char *s)
{
	int n;
	uint32_t c;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, c = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, c = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, c = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800) || (n == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return n;
}

void json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	fputc('"', f);
	while (*s) {
		int n = utf8_len(s);

		if (n == 0) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, (size_t)n, f);
			s += n;
			continue;
		}
		switch (*s) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		default:
			if (*s < 0x20 || *s == 0x7f)
				fprintf(f, "\\u%04x", *s);
			else
				fputc(*s, f);
		}
		s++;
	}
	fputc('"', f);
}

/* the separator and the key of the next value */
static void next(struct json *j, const char *key)
{
	if (j->more[j->depth])
		fputs(", ", j->f);
	j->more[j->depth] = true;
	if (key) {
		json_write_string(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_(struct json *j, const char *key, char c)
{
	next(j, key);
	fputc(c, j->f);
	if (j->depth < JSON_DEPTH - 1)
		j->depth++;
	j->closer[j->depth] = c == '{' ? '}' : ']';
	j->more[j->depth] = false;
}

static void close_(struct json *j, char c)
{
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
}

void json_begin(struct json *j, FILE *f, const char *command)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	fputc('{', f);
	j->depth = 1;
	json_str(j, "zmem", zm_version_string());
	json_str(j, "command", command);
}

void json_end(struct json *j)
{
	while (j->depth > 1)
		close_(j, j->closer[j->depth]);  /* whatever is still open */
	fputs("}\n", j->f);
	j->depth = 0;
	if (fflush(j->f))
		cli_write_failed(j->f, errno);
}

void json_object(struct json *j, const char *key)
{
	open_(j, key, '{');
}

void json_object_end(struct json *j)
{
	close_(j, '}');
}

void json_array(struct json *j, const char *key)
{
	open_(j, key, '[');
}

void json_array_end(struct json *j)
{
	close_(j, ']');
}

void json_str(struct json *j, const char *key, const char *s)
{
	next(j, key);
	if (s)
		json_write_string(j->f, s);
	else
		fputs("null", j->f);
}

void json_num(struct json *j, const char *key, double v)
{
	next(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.10g", v);
	else
		fputs("null", j->f);
}

void json_fixed(struct json *j, const char *key, double v, int decimals)
{
	next(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.*f", decimals, v);
	else
		fputs("null", j->f);
}

void json_uint(struct json *j, const char *key, uint64_t v)
{
	next(j, key);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_int(struct json *j, const char *key, int64_t v)
{
	next(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	next(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	next(j, key);
	fputs("null", j->f);
}
