/* The zmem command's options, sizes, messages and progress (opt.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/util.h"
#include "tool/opt.h"

/* ---- values --------------------------------------------------------- */

int cli_size(const char *s, uint64_t *v)
{
	uint64_t n = 0;
	unsigned shift = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -1;  /* empty, a sign, a space: strtoull would take them */
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && p[0] == 'i' && (p[1] == 'B' || p[1] == 'b'))
		p += 2;
	else if (*p == 'B' || *p == 'b')
		p++;
	if (*p || n > (UINT64_MAX >> shift))
		return -1;
	*v = n << shift;
	return 0;
}

int cli_double(const char *s, double *v)
{
	char *end;

	if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '+'))
		return -1;  /* no spaces, no "inf" or "nan" */
	errno = 0;
	*v = strtod(s, &end);
	return errno || end == s || *end || !isfinite(*v) ? -1 : 0;
}

int cli_duration(const char *s, unsigned unit_ms, double *ms)
{
	static const struct { const char *suffix; double ms; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	char *end;
	double v;

	if (!((*s >= '0' && *s <= '9') || *s == '.'))
		return -1;  /* no sign, no spaces, no "inf" */
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return -1;
	if (!*end) {
		*ms = v * unit_ms;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].suffix)) {
			*ms = v * units[i].ms;
			return 0;
		}
	return -1;
}

char *cli_size_text(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && bytes && bytes % 1024 == 0)
		bytes /= 1024, u++;
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, units[u]);
	return buf;
}

/* ---- messages ------------------------------------------------------- */

static void vmsg(const char *cmd, const char *fmt, va_list ap)
{
	cli_progress_done();
	fprintf(stderr, "zmem%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, fmt, ap);
	va_end(ap);
	return CLI_USAGE;
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg(cmd, fmt, ap);
	va_end(ap);
	return CLI_FAIL;
}

/* ---- parsing -------------------------------------------------------- */

static void limit_text(const struct opt *o, double v, char *buf, size_t len)
{
	if (o->kind == OPT_SIZE)
		cli_size_text((uint64_t)v, buf, len);
	else
		snprintf(buf, len, "%.15g", v);
}

/* "1..64", "at least 4K", "" */
static void range_text(const struct opt *o, char *buf, size_t len)
{
	char a[32], b[32];

	*buf = 0;
	if (o->kind != OPT_SIZE && o->kind != OPT_INT && o->kind != OPT_U64 &&
	    o->kind != OPT_DOUBLE && o->kind != OPT_DURATION)
		return;
	limit_text(o, o->lo, a, sizeof(a));
	limit_text(o, o->hi, b, sizeof(b));
	if (o->hi > 0 && !o->open)
		snprintf(buf, len, "%s..%s", a, b);
	else if (o->hi > 0)
		snprintf(buf, len, "%s %s and %s %s", o->open & OPEN_LO ? "more than" : "at least",
			 a, o->open & OPEN_HI ? "less than" : "at most", b);
	else if (o->lo > 0 || (o->open & OPEN_LO))
		snprintf(buf, len, "%s %s", o->open & OPEN_LO ? "more than" : "at least", a);
}

static int set_value(const struct opt_cmd *c, const struct opt *o, const char *v)
{
	uint64_t u = 0;
	double d = 0;
	char range[96];

	switch (o->kind) {
	case OPT_FLAG:
		*(int *)o->dst = 1;
		return 0;
	case OPT_STRING:
		if (o->choices) {
			size_t i;

			for (i = 0; o->choices[i] && strcmp(o->choices[i], v); i++)
				;
			if (!o->choices[i]) {
				char list[256] = "";

				for (i = 0; o->choices[i]; i++)
					snprintf(list + strlen(list), sizeof(list) - strlen(list),
						 "%s%s", i ? ", " : "", o->choices[i]);
				return cli_usage(c->name, "invalid --%s '%s' (one of: %s)", o->name,
						 v, list);
			}
		}
		*(const char **)o->dst = v;
		return 0;
	case OPT_LIST:
		if (*o->count >= o->cap)
			return cli_usage(c->name, "--%s given more than %zu times", o->name, o->cap);
		((const char **)o->dst)[(*o->count)++] = v;
		return 0;
	case OPT_SIZE:
		if (cli_size(v, &u) || u > SIZE_MAX)
			return cli_usage(c->name, "invalid --%s '%s' (a size: bytes or K, M, G, T)",
					 o->name, v);
		d = (double)u;
		break;
	case OPT_INT:
	case OPT_U64:
		if (cli_parse_u64(v, &u) || (o->kind == OPT_INT && u > INT_MAX))
			return cli_usage(c->name, "invalid --%s '%s' (a count)", o->name, v);
		d = (double)u;
		break;
	case OPT_DOUBLE:
		if (cli_double(v, &d))
			return cli_usage(c->name, "invalid --%s '%s' (a number)", o->name, v);
		break;
	case OPT_DURATION: {
		const char *unit = o->unit_ms == 1000 ? "seconds" : "ms";

		if (cli_duration(v, o->unit_ms, &d))
			return cli_usage(c->name, "invalid --%s '%s' (a duration: 500ms, 30s, "
					 "10m, 1h; a bare number is %s)", o->name, v, unit);
		d /= o->unit_ms;
		if (fabs(d - round(d)) > 1e-9 * (d > 1 ? d : 1))
			return cli_usage(c->name, "--%s is a whole number of %s, not %s",
					 o->name, unit, v);
		d = round(d);
		break;
	}
	}
	if ((o->open & OPEN_LO ? d <= o->lo : d < o->lo) ||
	    (o->hi > 0 && (o->open & OPEN_HI ? d >= o->hi : d > o->hi))) {
		range_text(o, range, sizeof(range));
		return cli_usage(c->name, "--%s must be %s, not %s", o->name, range, v);
	}
	switch (o->kind) {
	case OPT_SIZE: *(size_t *)o->dst = (size_t)u; break;
	case OPT_INT: *(int *)o->dst = (int)u; break;
	case OPT_DURATION: *(int *)o->dst = (int)d; break;
	case OPT_U64: *(uint64_t *)o->dst = u; break;
	case OPT_DOUBLE: *(double *)o->dst = d; break;
	default: break;
	}
	return 0;
}

int opt_parse(const struct opt_cmd *c, int argc, char **argv, int *nargs)
{
	int n = 0, only_operands = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL, *eq = NULL;
		const struct opt *o = NULL;
		size_t len;

		if (only_operands || a[0] != '-' || !a[1]) {
			if (!nargs)
				return cli_usage(c->name, "unexpected argument '%s' (zmem %s --help)",
						 a, c->name);
			argv[1 + n++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			only_operands = 1;
			continue;
		}
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			opt_help(c, stdout);
			return -1;
		}
		/* --choices --OPTION (hidden, for the bash completion): the
		 * values OPTION accepts, one a line, none when it takes any */
		if (!strcmp(a, "--choices") && i + 1 < argc) {
			for (const struct opt *q = c->opts; q->name; q++)
				if (!strncmp(argv[i + 1], "--", 2) && !strcmp(q->name, argv[i + 1] + 2))
					for (size_t k = 0; q->choices && q->choices[k]; k++)
						printf("%s\n", q->choices[k]);
			return -1;
		}
		if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			cli_quiet(1);
			continue;
		}
		if (a[1] == '-') {
			eq = strchr(a + 2, '=');
			len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			for (o = c->opts; o->name; o++)
				if (strlen(o->name) == len && !strncmp(o->name, a + 2, len))
					break;
		} else {
			for (o = c->opts; o->name; o++)
				if (o->short_name && o->short_name == a[1])
					break;
			if (o->name && a[2]) {
				if (o->kind == OPT_FLAG)
					o = NULL;   /* no bundling of flags */
				else
					v = a + 2;  /* -t4 */
			}
		}
		if (!o || !o->name)
			return cli_usage(c->name, "unknown option '%s' (zmem %s --help)", a, c->name);
		if (o->kind == OPT_FLAG) {
			if (eq)
				return cli_usage(c->name, "--%s takes no value", o->name);
		} else if (eq) {
			v = eq + 1;
		} else if (!v) {
			if (i + 1 >= argc)
				return cli_usage(c->name, "--%s needs a value (%s)", o->name,
						 o->arg ? o->arg : "VALUE");
			v = argv[++i];
		}
		if (set_value(c, o, v))
			return CLI_USAGE;
		if (o->seen)
			*o->seen = 1;
	}
	if (nargs)
		*nargs = n;
	return CLI_OK;
}

/* ---- help ----------------------------------------------------------- */

#define HELP_COL 24

void opt_help(const struct opt_cmd *c, FILE *f)
{
	fprintf(f, "usage: zmem %s %s\n%s\n", c->name, c->args ? c->args : "[OPTIONS]",
		c->summary);
	fprintf(f, "\nOptions:\n");
	for (const struct opt *o = c->opts; o->name; o++) {
		char lead[8], head[96], range[96], tail[192] = "";
		const char *h = o->help;
		int w;

		if (o->hidden)
			continue;
		if (o->short_name)
			snprintf(lead, sizeof(lead), "  -%c, ", o->short_name);
		else
			snprintf(lead, sizeof(lead), "      ");
		w = snprintf(head, sizeof(head), "%s--%s%s%s", lead, o->name,
			     o->kind == OPT_FLAG ? "" : " ",
			     o->kind == OPT_FLAG ? "" : o->arg ? o->arg : "VALUE");
		fputs(head, f);
		if (w >= HELP_COL - 1)
			fprintf(f, "\n%*s", HELP_COL, "");
		else
			fprintf(f, "%*s", HELP_COL - w, "");
		for (; *h; h++) {
			fputc(*h, f);
			if (*h == '\n')
				fprintf(f, "%*s", HELP_COL, "");
		}
		range_text(o, range, sizeof(range));
		if (o->def && *range)
			snprintf(tail, sizeof(tail), "(default %s; %s)", o->def, range);
		else if (o->def)
			snprintf(tail, sizeof(tail), "(default %s)", o->def);
		else if (*range)
			snprintf(tail, sizeof(tail), "(%s)", range);
		if (*tail) {
			const char *last = strrchr(o->help, '\n');
			size_t col = HELP_COL + strlen(last ? last + 1 : o->help);

			/* a default may break its line too: up to its first break */
			if (col + 1 + strcspn(tail, "\n") > 79)
				fprintf(f, "\n%*s", HELP_COL, "");
			else
				fputc(' ', f);
			for (const char *t = tail; *t; t++) {
				fputc(*t, f);
				if (*t == '\n')
					fprintf(f, "%*s", HELP_COL, "");
			}
		}
		fputc('\n', f);
	}
	fprintf(f, "  -q, --quiet           no progress on stderr (errors still)\n"
		   "  -h, --help            this help, then exit\n");
	if (c->more)
		fprintf(f, "\n%s", c->more);
}

/* ---- progress ------------------------------------------------------- */

static int quiet, tty = -1, shown;
static uint64_t last_ns;

void cli_quiet(int on)
{
	quiet = on;
}

int cli_is_quiet(void)
{
	return quiet;
}

const char *cli_cmd = "";

/* kind: 0 progress, 1 a note, 2 a notice */
static void vprogress(const char *fmt, va_list ap, int kind)
{
	uint64_t now = cli_now_ns();
	int soon = last_ns && now - last_ns < 1000000000u;
	int stays = kind == 2 || (kind == 1 && !soon);

	if (quiet)
		return;
	if (tty < 0)
		tty = isatty(2);
	if (!tty && !stays && soon)
		return;
	last_ns = now;
	fprintf(stderr, "%szmem%s%s: ", tty ? "\r\033[K" : "", *cli_cmd ? " " : "", cli_cmd);
	vfprintf(stderr, fmt, ap);
	if (tty && !stays) {
		shown = 1;
	} else {
		fputc('\n', stderr);
		shown = 0;
	}
	fflush(stderr);
}

void cli_progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprogress(fmt, ap, 0);
	va_end(ap);
}

void cli_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprogress(fmt, ap, 1);
	va_end(ap);
}

void cli_notice(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprogress(fmt, ap, 2);
	va_end(ap);
}

void cli_progress_done(void)
{
	if (shown)
		fputs("\r\033[K", stderr);
	shown = 0;
}
