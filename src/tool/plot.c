/*
 * Line charts in SVG, written by hand like bench_svg.c's bar charts:
 * evenly spaced labelled x points (sizes, thread counts, pool sizes), one
 * line per series with its own colour and marker shape, round ticks, a
 * linear y axis or, where the data span ten times or more, a logarithmic
 * one with labelled decades.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tool/plot.h"

#define MARGIN_L 80
#define MARGIN_R 20

static const char *const colors[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
	"#7f7f7f",
};
#define NCOLORS (sizeof(colors) / sizeof(colors[0]))
#define NSHAPES 8

static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

const char *plot_color(size_t i)
{
	return colors[i % NCOLORS];
}

void plot_text(FILE *f, double x, double y, const char *anchor, int size, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">", x, y,
		anchor, size);
	esc(f, s);
	fputs("</text>\n", f);
}

/* ---- ticks ---------------------------------------------------------- */

void plot_nice_ticks(double lo, double hi, int target, struct plot_ticks *t)
{
	static const double steps[] = { 1, 2, 2.5, 5, 10 };
	double raw, mag, step = 1, t0, t1;

	if (!isfinite(lo) || !isfinite(hi))
		lo = 0, hi = 1;
	if (lo > hi) {
		double x = lo;

		lo = hi, hi = x;
	}
	if (hi == lo) {
		double d = lo ? fabs(lo) * 0.1 : 1;

		lo = lo ? lo - d : 0;
		hi += d;
	}
	if (target < 1)
		target = 1;
	if (target > PLOT_MAX_TICKS - 2)
		target = PLOT_MAX_TICKS - 2;
	raw = (hi - lo) / target;
	mag = pow(10, floor(log10(raw)));
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		step = steps[i] * mag;
		if (step >= raw * (1 - 1e-9))
			break;
	}
	for (;;) {
		t0 = floor(lo / step + 1e-9) * step;
		t1 = ceil(hi / step - 1e-9) * step;
		t->n = (size_t)llround((t1 - t0) / step) + 1;
		if (t->n <= PLOT_MAX_TICKS)
			break;
		step *= 2;
	}
	if (t->n < 2)
		t->n = 2;
	for (size_t i = 0; i < t->n; i++) {
		double v = t0 + step * (double)i;

		/* no 1e-17 for 0, no 0.30000000000000004 */
		if (fabs(v) < step * 1e-9)
			v = 0;
		t->v[i] = v;
	}
	t->step = step;
}

void plot_tick_label(char *buf, size_t len, double v, double step)
{
	static const struct { double div; const char *suf; } si[] = {
		{ 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" },
	};
	const char *suf = "";
	double a = fabs(v) > step ? fabs(v) : step;
	int dec;

	for (size_t i = 0; i < sizeof(si) / sizeof(si[0]); i++)
		if (a >= 1e4 && a >= si[i].div) {
			v /= si[i].div, step /= si[i].div, suf = si[i].suf;
			break;
		}
	if (v == 0) {
		snprintf(buf, len, "0");
		return;
	}
	if (step > 0 && step < 1e-3 && !*suf) {
		snprintf(buf, len, "%.3g", v);
		return;
	}
	/* decimals enough for the step: 0.25 needs two, 0.5 one */
	dec = 0;
	while (dec < 6 && fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-6)
		dec++;
	snprintf(buf, len, "%.*f%s", dec, v, suf);
}

/* ---- markers and legends ---------------------------------------------- */

void plot_marker(FILE *f, size_t i, double x, double y, const char *c, bool hollow,
		 const char *title)
{
	const double r = 4.5;
	char style[96];

	snprintf(style, sizeof(style), "fill=\"%s\" stroke=\"%s\" stroke-width=\"%s\"",
		 hollow ? "white" : c, c, hollow ? "2" : "1");
	switch (i % NSHAPES) {
	case 0:
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" %s>", x, y, r, style);
		break;
	case 1:
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" %s>",
			x - r * 0.85, y - r * 0.85, r * 1.7, r * 1.7, style);
		break;
	case 2: /* triangle up */
		fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" %s>", x, y - r * 1.2,
			x + r * 1.1, y + r * 0.8, x - r * 1.1, y + r * 0.8, style);
		break;
	case 3: /* diamond */
		fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" %s>", x,
			y - r * 1.25, x + r, y, x, y + r * 1.25, x - r, y, style);
		break;
	case 4: /* triangle down */
		fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" %s>", x, y + r * 1.2,
			x + r * 1.1, y - r * 0.8, x - r * 1.1, y - r * 0.8, style);
		break;
	case 5: /* triangle right */
		fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" %s>", x + r * 1.2, y,
			x - r * 0.8, y - r * 1.1, x - r * 0.8, y + r * 1.1, style);
		break;
	case 6: /* triangle left */
		fprintf(f, "<path d=\"M%.1f %.1fL%.1f %.1fL%.1f %.1fZ\" %s>", x - r * 1.2, y,
			x + r * 0.8, y - r * 1.1, x + r * 0.8, y + r * 1.1, style);
		break;
	default: /* pentagon */
		fputs("<path d=\"", f);
		for (int k = 0; k < 5; k++) {
			double a = -M_PI / 2 + 2 * M_PI * k / 5;

			fprintf(f, "%c%.1f %.1f", k ? 'L' : 'M', x + r * 1.15 * cos(a),
				y + r * 1.15 * sin(a));
		}
		fprintf(f, "Z\" %s>", style);
		break;
	}
	if (title) {
		fputs("<title>", f);
		esc(f, title);
		fputs("</title>", f);
	}
	switch (i % NSHAPES) {
	case 0: fputs("</circle>\n", f); break;
	case 1: fputs("</rect>\n", f); break;
	default: fputs("</path>\n", f); break;
	}
}

/* The standard output the plot keeps for itself (plot_take_stdout());
 * -1 until then. */
static int plot_fd = -1;

int plot_take_stdout(void)
{
	if (plot_fd >= 0)
		return 0;
	fflush(stdout);
	plot_fd = dup(STDOUT_FILENO);
	if (plot_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		return -errno;
	return 0;
}

FILE *plot_open(const char *path)
{
	int fd;
	FILE *f;

	if (strcmp(path, "-"))
		return fopen(path, "w");
	fd = plot_fd >= 0 ? plot_fd : dup(STDOUT_FILENO);
	if (fd < 0)
		return NULL;
	plot_fd = -1;
	f = fdopen(fd, "w");
	if (!f)
		close(fd);
	return f;
}

FILE *plot_begin(const char *path, int h, const char *title)
{
	FILE *f = plot_open(path);

	if (!f)
		return NULL;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", PLOT_W, h, PLOT_W, h);
	plot_text(f, PLOT_W / 2.0, 24, "middle", 17, title);
	return f;
}

int plot_end(FILE *f)
{
	fputs("</svg>\n", f);
	return fclose(f) ? -errno : 0;
}

/* An entry at x: a line with the marker on it, then the name; returns
 * the x of the next. */
static double legend_entry(FILE *f, double x, double y, size_t i, const char *c, bool hollow,
			   const char *name)
{
	if (c)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
			"stroke-width=\"2\"/>\n", x, y - 4, x + 28, y - 4, c);
	plot_marker(f, i, x + 14, y - 4, c ? c : "#333", hollow, NULL);
	plot_text(f, x + 34, y, "start", 12, name);
	return x + 34 + 7.0 * (double)strlen(name) + 22;
}

void plot_legend_capped(FILE *f, double y, const char *const *names, size_t n,
			const char *hollow_label)
{
	double x = MARGIN_L;

	for (size_t i = 0; i < n; i++)
		x = legend_entry(f, x, y, i, colors[i % NCOLORS], false, names[i]);
	if (hollow_label)
		legend_entry(f, x, y, 0, NULL, true, hollow_label);
}

void plot_legend(FILE *f, double y, const char *const *names, size_t n)
{
	plot_legend_capped(f, y, names, n, NULL);
}

/* ---- panels ------------------------------------------------------------ */

/* Where a panel's plot area lies across the page: left edge x, width pw. */
static void across(const struct plot_axes *a, double *x, double *pw)
{
	double x0 = a->w > 0 ? a->x0 : 0, w = a->w > 0 ? a->w : PLOT_W;

	*x = x0 + MARGIN_L;
	*pw = w - MARGIN_L - MARGIN_R;
}

static void ytitle(FILE *f, double x, double y0, double h, const char *s)
{
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
		"transform=\"rotate(-90 %.1f %.1f)\">", x, y0 + h / 2, x, y0 + h / 2);
	esc(f, s);
	fputs("</text>\n", f);
}

static void grid(FILE *f, double x, double y, double pw, const char *lab, bool major)
{
	if (lab)
		plot_text(f, x - 6, y + 4, "end", 11, lab);
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
		x, y, x + pw, y, major ? "#ccc" : "#eee");
}

/* The title, frame, x labels (and notes) and x title of a panel. */
static void frame(FILE *f, double y0, double h, const struct plot_axes *a,
		  const char *const *xlabels, size_t nx)
{
	double x, pw, step;

	across(a, &x, &pw);
	step = nx > 1 ? pw / (double)nx : pw;
	plot_text(f, x + pw / 2, y0 - 10, "middle", 14, a->title);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"#999\"/>\n", x, y0, pw, h);
	for (size_t k = 0; k < nx; k++) {
		plot_text(f, x + step * ((double)k + 0.5), y0 + h + 15, "middle", 11, xlabels[k]);
		if (a->xnotes && a->xnotes[k]) {
			bool alert = a->xalert && a->xalert[k];

			fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
				"font-size=\"10\" fill=\"%s\"%s>", x + step * ((double)k + 0.5),
				y0 + h + 28, alert ? "#c00" : "#555",
				alert ? " font-weight=\"bold\"" : "");
			esc(f, a->xnotes[k]);
			fputs("</text>\n", f);
		}
	}
	if (a->xtitle)
		plot_text(f, x + pw / 2, y0 + h + (a->xnotes ? 44 : 32), "middle", 12, a->xtitle);
}

/* Series i's x at point k: the point's centre or, for a->dots, moved
 * aside so that the series' markers at one category do not hide each
 * other. */
static double xpos(const struct plot_axes *a, double px, double step, size_t k, size_t i,
		   size_t ns)
{
	double x = px + step * ((double)k + 0.5), d = step * 0.5 / (double)(ns ? ns : 1);

	if (!a->dots || ns < 2)
		return x;
	if (d > 14)
		d = 14;
	return x + d * ((double)i - (double)(ns - 1) / 2);
}

void plot_panel_axes(FILE *f, double y0, double h, const struct plot_axes *a,
		     const char *const *xlabels, size_t nx, const struct plot_series *s,
		     size_t ns)
{
	double px, pw, lo = INFINITY, hi = 0, step;
	char lab[48];
	bool logy = false;
	struct plot_ticks t;

	across(a, &px, &pw);
	step = nx > 1 ? pw / (double)nx : pw;
	for (size_t i = 0; i < ns; i++)
		for (size_t k = 0; k < nx; k++)
			if (s[i].y[k] > 0) {
				lo = s[i].y[k] < lo ? s[i].y[k] : lo;
				hi = s[i].y[k] > hi ? s[i].y[k] : hi;
			}
	if (hi <= 0)
		lo = hi = 1;
	frame(f, y0, h, a, xlabels, nx);
	if (a->logy && hi / lo >= 10) {
		int d0 = (int)floor(log10(lo) + 1e-9), d1 = (int)ceil(log10(hi) - 1e-9);
		bool minor_labels = d1 - d0 <= 3 && h >= 160;

		logy = true;
		lo = pow(10, d0);
		hi = pow(10, d1);
		for (int d = d0; d <= d1; d++) {
			double v = pow(10, d);

			plot_tick_label(lab, sizeof(lab), v, v);
			grid(f, px, y0 + h - h * (d - d0) / (double)(d1 - d0), pw, lab, true);
			for (int m = 2; m <= 9 && d < d1; m++) {
				double yy = y0 + h - h * (d - d0 + log10(m)) / (double)(d1 - d0);

				if (minor_labels && (m == 2 || m == 5)) {
					plot_tick_label(lab, sizeof(lab), m * v, v);
					grid(f, px, yy, pw, lab, false);
				} else if (d1 - d0 <= 6) {
					grid(f, px, yy, pw, NULL, false);
				}
			}
		}
	} else {
		if (a->logy)
			plot_nice_ticks(lo, hi, h >= 160 ? 5 : 3, &t);
		else
			plot_nice_ticks(0, hi, h >= 160 ? 5 : 3, &t);
		lo = t.v[0];
		hi = t.v[t.n - 1];
		for (size_t k = 0; k < t.n; k++) {
			plot_tick_label(lab, sizeof(lab), t.v[k], t.step);
			grid(f, px, y0 + h - h * (t.v[k] - lo) / (hi - lo), pw, lab, true);
		}
	}
	if (a->ytitle) {
		char buf[160];

		/* about 6.5 px a character at 12 px: the short form where the
		 * long one would run past the panel */
		bool room = (double)(strlen(a->ytitle) + 12) * 6.5 <= h;

		snprintf(buf, sizeof(buf), "%s%s", a->ytitle,
			 !logy ? "" : room ? " (log scale)" : " (log)");
		ytitle(f, px - MARGIN_L + 18, y0, h, buf);
	}
	/* categories (a->dots) are not joined: no line between them */
	for (size_t i = 0; i < ns && !a->dots; i++) {
		const char *c = colors[i % NCOLORS];
		int open = 0;

		for (size_t k = 0; k < nx; k++) {
			double v = s[i].y[k], x = px + step * ((double)k + 0.5), y;

			if (!(v > 0)) {
				if (open)
					fputs("\"/>\n", f);
				open = 0;
				continue;
			}
			y = logy ? (log10(v) - log10(lo)) / (log10(hi) - log10(lo))
				 : (v - lo) / (hi - lo);
			y = y0 + h - h * y;
			if (!open)
				fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
					"stroke-opacity=\"0.8\" points=\"", c);
			fprintf(f, "%.1f,%.1f ", x, y);
			open = 1;
		}
		if (open)
			fputs("\"/>\n", f);
	}
	/* the markers over every line */
	for (size_t i = 0; i < ns; i++)
		for (size_t k = 0; k < nx; k++) {
			double v = s[i].y[k], x = xpos(a, px, step, k, i, ns), y;
			bool hollow = a->hollow && a->hollow[i] && a->hollow[i][k];
			char tip[160];

			if (!(v > 0))
				continue;
			y = logy ? (log10(v) - log10(lo)) / (log10(hi) - log10(lo))
				 : (v - lo) / (hi - lo);
			snprintf(lab, sizeof(lab), v >= 100 ? "%.0f" : "%.3g", v);
			snprintf(tip, sizeof(tip), "%s %s: %s%s", s[i].name, xlabels[k], lab,
				 hollow ? " (capped)" : "");
			plot_marker(f, i, x, y0 + h - h * y, colors[i % NCOLORS], hollow, tip);
		}
}

void plot_legend_bars(FILE *f, double x, double y, const char *const *names, size_t n,
		      const char *ref_label)
{
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
			x, y - 10, colors[i % NCOLORS]);
		plot_text(f, x + 17, y, "start", 12, names[i]);
		x += 17 + 7.0 * (double)strlen(names[i]) + 22;
	}
	if (ref_label) {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" "
			"stroke-width=\"2\" stroke-dasharray=\"8 4\"/>\n", x, y - 4, x + 28, y - 4);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"start\" font-size=\"12\" "
			"fill=\"#c00\">", x + 34, y);
		esc(f, ref_label);
		fputs("</text>\n", f);
	}
}

void plot_bars(FILE *f, double y0, double h, const struct plot_axes *a,
	       const char *const *xlabels, size_t nx, const struct plot_series *s, size_t ns)
{
	double px, pw, step, hi = a->ref > 0 ? a->ref : 0, lo, bw, y;
	char lab[48], tip[160];
	struct plot_ticks t;

	across(a, &px, &pw);
	step = nx ? pw / (double)nx : pw;
	bw = ns ? step * 0.8 / (double)ns : 0;
	for (size_t i = 0; i < ns; i++)
		for (size_t k = 0; k < nx; k++)
			hi = s[i].y[k] > hi ? s[i].y[k] : hi;
	frame(f, y0, h, a, xlabels, nx);
	plot_nice_ticks(0, hi > 0 ? hi : 1, h >= 160 ? 5 : 3, &t);
	lo = t.v[0];
	hi = t.v[t.n - 1];
	for (size_t k = 0; k < t.n; k++) {
		plot_tick_label(lab, sizeof(lab), t.v[k], t.step);
		grid(f, px, y0 + h - h * (t.v[k] - lo) / (hi - lo), pw, lab, true);
	}
	if (a->ytitle)
		ytitle(f, px - MARGIN_L + 18, y0, h, a->ytitle);
	for (size_t k = 0; k < nx; k++) {
		double gx = px + step * (double)k + step * 0.1;

		fputs("<g class=\"bars\" data-x=\"", f);
		esc(f, xlabels[k]);
		fputs("\">\n", f);
		for (size_t i = 0; i < ns; i++) {
			double v = s[i].y[k], bh;

			if (v < 0)
				continue;
			bh = h * (v - lo) / (hi - lo);
			snprintf(lab, sizeof(lab), v >= 100 ? "%.0f" : "%.3g", v);
			snprintf(tip, sizeof(tip), "%s %s: %s", s[i].name, xlabels[k], lab);
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				"fill=\"%s\"><title>", gx + bw * (double)i, y0 + h - bh, bw - 1,
				bh, colors[i % NCOLORS]);
			esc(f, tip);
			fputs("</title></rect>\n", f);
		}
		fputs("</g>\n", f);
	}
	if (a->ref > 0) {
		y = y0 + h - h * (a->ref - lo) / (hi - lo);
		fprintf(f, "<line class=\"limit\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
			"stroke=\"#c00\" stroke-width=\"2\" stroke-dasharray=\"8 4\">", px, y,
			px + pw, y);
		/* its label is in the legend (plot_legend_bars()): over the
		 * bars it would hide one */
		if (a->ref_label) {
			fputs("<title>", f);
			esc(f, a->ref_label);
			fputs("</title>", f);
		}
		fputs("</line>\n", f);
	}
}

void plot_panel(FILE *f, double y0, double h, const char *title, const char *ylabel,
		const char *const *xlabels, size_t nx, const struct plot_series *s,
		size_t ns, int logy)
{
	char yl[160];
	size_t n = ylabel ? strlen(ylabel) : 0;
	struct plot_axes a = { .title = title, .ytitle = ylabel, .logy = logy };

	/* " (log)" is said by the axis itself now */
	if (n > 6 && n < sizeof(yl) && !strcmp(ylabel + n - 6, " (log)")) {
		memcpy(yl, ylabel, n - 6);
		yl[n - 6] = 0;
		a.ytitle = yl;
	}
	plot_panel_axes(f, y0, h, &a, xlabels, nx, s, ns);
}
