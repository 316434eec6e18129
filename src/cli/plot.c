/*
 * Line charts in SVG, written by hand like bench_svg.c's bar charts:
 * evenly spaced labelled x points (sizes, thread counts, pool sizes), one
 * coloured line per series, linear or logarithmic y.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "cli/plot.h"

#define MARGIN_L 80
#define MARGIN_R 20

static const char *const colors[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
	"#7f7f7f",
};
#define NCOLORS (sizeof(colors) / sizeof(colors[0]))

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

FILE *plot_begin(const char *path, int h, const char *title)
{
	FILE *f = fopen(path, "w");

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

void plot_legend(FILE *f, double y, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		double x = MARGIN_L + 130.0 * (double)i;

		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
			x, y - 10, colors[i % NCOLORS]);
		plot_text(f, x + 16, y, "start", 12, names[i]);
	}
}

static void fmt(char *buf, size_t len, double v)
{
	if (v >= 100 || v == floor(v))
		snprintf(buf, len, "%.0f", v);
	else if (v >= 1)
		snprintf(buf, len, "%.1f", v);
	else
		snprintf(buf, len, "%.3g", v);
}

void plot_panel(FILE *f, double y0, double h, const char *title, const char *ylabel,
		const char *const *xlabels, size_t nx, const struct plot_series *s,
		size_t ns, int logy)
{
	double pw = PLOT_W - MARGIN_L - MARGIN_R, lo = INFINITY, hi = 0;
	double step = nx > 1 ? pw / (double)nx : pw;
	char lab[32];
	int ticks = 4;

	for (size_t i = 0; i < ns; i++)
		for (size_t k = 0; k < nx; k++)
			if (s[i].y[k] > 0) {
				lo = s[i].y[k] < lo ? s[i].y[k] : lo;
				hi = s[i].y[k] > hi ? s[i].y[k] : hi;
			}
	if (hi <= 0)
		lo = hi = 1;
	if (logy) {
		lo = pow(10, floor(log10(lo)));
		hi = pow(10, ceil(log10(hi * 1.0001)));
		ticks = (int)lround(log10(hi / lo));
		if (ticks < 1)
			ticks = 1;
	} else {
		lo = 0;
		hi *= 1.1;
	}
	plot_text(f, PLOT_W / 2.0, y0 - 10, "middle", 14, title);
	fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
		"stroke=\"#999\"/>\n", MARGIN_L, y0, pw, h);
	fprintf(f, "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
		"transform=\"rotate(-90 18 %.1f)\">", y0 + h / 2, y0 + h / 2);
	esc(f, ylabel);
	fputs("</text>\n", f);
	for (int t = 0; t <= ticks; t++) {
		double v = logy ? lo * pow(10, t) : lo + (hi - lo) * t / ticks;
		double y = y0 + h - h * t / ticks;

		fmt(lab, sizeof(lab), v);
		plot_text(f, MARGIN_L - 6, y + 4, "end", 11, lab);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			MARGIN_L, y, MARGIN_L + pw, y);
	}
	for (size_t k = 0; k < nx; k++)
		plot_text(f, MARGIN_L + step * ((double)k + 0.5), y0 + h + 15, "middle", 11, xlabels[k]);
	for (size_t i = 0; i < ns; i++) {
		const char *c = colors[i % NCOLORS];
		int open = 0;

		for (size_t k = 0; k < nx; k++) {
			double v = s[i].y[k], x = MARGIN_L + step * ((double)k + 0.5), y;

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
					"points=\"", c);
			fprintf(f, "%.1f,%.1f ", x, y);
			open = 1;
		}
		if (open)
			fputs("\"/>\n", f);
		for (size_t k = 0; k < nx; k++) {
			double v = s[i].y[k], x = MARGIN_L + step * ((double)k + 0.5), y;

			if (!(v > 0))
				continue;
			y = logy ? (log10(v) - log10(lo)) / (log10(hi) - log10(lo))
				 : (v - lo) / (hi - lo);
			fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>",
				x, y0 + h - h * y, c);
			esc(f, s[i].name);
			fmt(lab, sizeof(lab), v);
			fprintf(f, " %s: %s</title></circle>\n", xlabels[k], lab);
		}
	}
}
