/*
 * zmem bench: the plot, an SVG file written by hand (no dependencies).
 *
 *   1. overhead = (pool + metadata) / compressed bytes, a bar per allocator
 *      for each data set (the axis starts at 1: no overhead);
 *   2. effective compression = (pool + metadata) / original bytes, the
 *      figure of xcfmalloc's 2011 table, on the same layout;
 *   3. the histogram of compressed sizes of each data set (the pages that
 *      went to the pool), the zcache statistic.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "tool/plot.h"

#define W        960
#define MARGIN_L 70
#define MARGIN_R 20
#define PANEL_H  260
#define HIST_H   150
#define GAP      60


struct layout {
	const char *data[BENCH_MAX_DATA];
	const char *alloc[BENCH_MAX_ROWS];
	size_t ndata, nalloc;
};

static size_t index_of(const char **v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(v[i], s))
			return i;
	v[*n] = s;
	return (*n)++;
}

/* -1 where undefined (nothing compressed: all pages same-filled) */
static double overhead(const struct bench_row *r)
{
	return r->compr_bytes ? (double)(r->pool_bytes + r->meta_bytes) /
				(double)r->compr_bytes : -1;
}

static double effective(const struct bench_row *r)
{
	return r->orig_bytes ? (double)(r->pool_bytes + r->meta_bytes) /
			       (double)r->orig_bytes : -1;
}

/* A grouped bar chart of value(row) at y0, axis from lo to hi. */
static void bars(FILE *f, const struct bench_row *rows, size_t nrows,
		 const struct layout *L, double y0, double lo, double hi,
		 double (*value)(const struct bench_row *), const char *title,
		 const char *ytitle, int percent)
{
	double pw = W - MARGIN_L - MARGIN_R, gw = pw / (double)L->ndata;
	double bw = gw * 0.8 / (double)L->nalloc;
	char lab[64];
	struct plot_ticks t;

	plot_text(f, W / 2.0, y0 - 12, "middle", 15, title);
	fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
		"stroke=\"#999\"/>\n", MARGIN_L, y0, pw, PANEL_H);
	fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
		"transform=\"rotate(-90 16 %.1f)\">%s</text>\n", y0 + PANEL_H / 2.0,
		y0 + PANEL_H / 2.0, ytitle);
	/* round ticks from lo, the axis ending at the last */
	plot_nice_ticks(lo * (percent ? 100 : 1), hi * (percent ? 100 : 1), 5, &t);
	lo = t.v[0] / (percent ? 100 : 1);
	hi = t.v[t.n - 1] / (percent ? 100 : 1);
	for (size_t k = 0; k < t.n; k++) {
		double y = y0 + PANEL_H - PANEL_H * (double)k / (double)(t.n - 1);

		plot_tick_label(lab, sizeof(lab), t.v[k], t.step);
		if (percent)
			strcat(lab, "%");
		plot_text(f, MARGIN_L - 6, y + 4, "end", 11, lab);
		fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
			MARGIN_L, y, MARGIN_L + pw, y);
	}
	for (size_t d = 0; d < L->ndata; d++)
		plot_text(f, MARGIN_L + gw * ((double)d + 0.5), y0 + PANEL_H + 16, "middle", 12,
		     L->data[d]);
	for (size_t i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];
		size_t d, a;
		double v = value(r), x, h;

		for (d = 0; d < L->ndata && strcmp(L->data[d], r->data); d++)
			;
		for (a = 0; a < L->nalloc && strcmp(L->alloc[a], r->allocator); a++)
			;
		if (d == L->ndata || a == L->nalloc)
			continue;
		x = MARGIN_L + gw * (double)d + gw * 0.1 + bw * (double)a;
		if (v < 0) {
			plot_text(f, x + bw / 2, y0 + PANEL_H - 4, "middle", 10, "n/a");
			continue;
		}
		h = (v - lo) / (hi - lo) * PANEL_H;
		if (h < 1)
			h = v > lo ? 1 : 0;
		if (h > PANEL_H)
			h = PANEL_H;
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"%s\"/>\n", x + 1, y0 + PANEL_H - h, bw - 2, h,
			plot_color(a));
		if (percent)
			snprintf(lab, sizeof(lab), "%.1f%%", v * 100);
		else
			snprintf(lab, sizeof(lab), "%.3f", v);
		plot_text(f, x + bw / 2, y0 + PANEL_H - h - 3, "middle", 10, lab);
	}
}

static void legend(FILE *f, const struct layout *L, double y)
{
	for (size_t a = 0; a < L->nalloc; a++) {
		double x = MARGIN_L + 150.0 * (double)a;

		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n",
			x, y - 10, plot_color(a));
		plot_text(f, x + 16, y, "start", 12, L->alloc[a]);
	}
}

/* One histogram per data set, side by side, from its first row. */
static void histograms(FILE *f, const struct bench_row *rows, size_t nrows,
		       const struct layout *L, double y0, size_t ps)
{
	double pw = W - MARGIN_L - MARGIN_R, cw = pw / (double)L->ndata;
	char lab[64];
	struct plot_ticks t;

	plot_text(f, W / 2.0, y0 - 12, "middle", 15,
	     "Compressed sizes of the pages in the pool (share of pages, 64 buckets)");
	fprintf(f, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" "
		"transform=\"rotate(-90 16 %.1f)\">share of pages (%%)</text>\n",
		y0 + HIST_H / 2.0, y0 + HIST_H / 2.0);
	for (size_t d = 0; d < L->ndata; d++) {
		const struct bench_row *r = NULL;
		double x0 = MARGIN_L + cw * (double)d + 20, w = cw - 30, bw, top;
		uint64_t max = 0, total = 0;

		for (size_t i = 0; i < nrows && !r; i++)
			if (!strcmp(rows[i].data, L->data[d]) && !rows[i].kernel)
				r = &rows[i];
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" "
			"fill=\"none\" stroke=\"#999\"/>\n", x0, y0, w, HIST_H);
		snprintf(lab, sizeof(lab), "%s: compressed size (bytes)", L->data[d]);
		plot_text(f, x0 + w / 2, y0 + HIST_H + 28, "middle", 12, lab);
		plot_nice_ticks(0, (double)ps, 4, &t);
		for (size_t k = 0; k < t.n && t.v[k] <= (double)ps; k++) {
			double x = x0 + w * t.v[k] / (double)ps;

			plot_tick_label(lab, sizeof(lab), t.v[k], t.step);
			plot_text(f, x, y0 + HIST_H + 13, k ? "middle" : "start", 10, lab);
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				"stroke=\"#999\"/>\n", x, y0 + HIST_H, x, y0 + HIST_H + 3);
		}
		if (!r)
			continue;
		for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++) {
			total += r->hist[b];
			if (r->hist[b] > max)
				max = r->hist[b];
		}
		if (!max) {
			plot_text(f, x0 + w / 2, y0 + HIST_H / 2.0, "middle", 11,
			     "no pages in the pool");
			continue;
		}
		/* the y scale: round shares, 0 to the largest bucket's */
		plot_nice_ticks(0, 100.0 * (double)max / (double)total, 4, &t);
		top = t.v[t.n - 1];
		for (size_t k = 0; k < t.n; k++) {
			double y = y0 + HIST_H - HIST_H * t.v[k] / top;

			plot_tick_label(lab, sizeof(lab), t.v[k], t.step);
			plot_text(f, x0 - 3, y + 4, "end", 10, lab);
			fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
				"stroke=\"#ddd\"/>\n", x0, y, x0 + w, y);
		}
		bw = w / ZM_STORE_HIST_BUCKETS;
		for (int b = 0; b < ZM_STORE_HIST_BUCKETS; b++) {
			double h = 100.0 * (double)r->hist[b] / (double)total / top * HIST_H;

			if (!r->hist[b])
				continue;
			fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
				"fill=\"#555\"/>\n", x0 + bw * b, y0 + HIST_H - h, bw, h);
		}
		snprintf(lab, sizeof(lab), "max %.1f%%", 100.0 * (double)max / (double)total);
		plot_text(f, x0 + 4, y0 + 12, "start", 10, lab);
	}
}

int bench_svg(const char *path, const struct bench_row *rows, size_t nrows,
	      const char *codec, size_t ps)
{
	struct layout L = { .ndata = 0 };
	double omax = 1.1, emax = 0.2;
	int height = 3 * GAP + 2 * PANEL_H + HIST_H + 2 * 40 + 40;
	char title[160];
	FILE *f;

	for (size_t i = 0; i < nrows; i++) {
		index_of(L.data, &L.ndata, rows[i].data);
		index_of(L.alloc, &L.nalloc, rows[i].allocator);
		if (overhead(&rows[i]) * 1.05 > omax)
			omax = overhead(&rows[i]) * 1.05;
		if (effective(&rows[i]) * 1.1 > emax)
			emax = effective(&rows[i]) * 1.1;
	}
	if (!L.ndata)
		return -EINVAL;
	f = plot_open(path);
	if (!f)
		return -errno;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, height, W, height);
	snprintf(title, sizeof(title), "zmem bench: codec %s, %zu-byte pages", codec, ps);
	plot_text(f, W / 2.0, 24, "middle", 17, title);
	legend(f, &L, 48);
	bars(f, rows, nrows, &L, 40 + GAP, 1.0, omax, overhead,
	     "Overhead: (pool + metadata) / compressed bytes  (1 = none; lower is better)",
	     "overhead (x compressed bytes)", 0);
	bars(f, rows, nrows, &L, 40 + 2 * GAP + PANEL_H + 20, 0, emax, effective,
	     "Effective compression: (pool + metadata) / original bytes  (lower is better)",
	     "memory (% of original)", 1);
	histograms(f, rows, nrows, &L, 40 + 3 * GAP + 2 * PANEL_H + 40, ps);
	fputs("</svg>\n", f);
	return fclose(f) ? -errno : 0;
}
