/* Charts in hand-written SVG for the benchmarks (allocbench,
 * worstcase, tierbench; cachebench and bench_svg.c share the pieces):
 * one x axis of labelled points, one line per series with its own colour
 * and marker shape (or, for categories, a group of bars per point), a
 * panel per figure, stacked down the page or side by side.  No
 * dependencies. */
#ifndef ZM_TOOL_PLOT_H
#define ZM_TOOL_PLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define PLOT_W 960
#define PLOT_MAX_TICKS 32

struct plot_series {
	const char *name;
	const double *y;      /* one value per x point; < 0 = no value */
};

/* What a panel says about itself: every field may be NULL but title. */
struct plot_axes {
	const char *title;    /* above the panel */
	const char *xtitle;   /* below the x labels, with the unit */
	const char *ytitle;   /* beside the y axis, with the unit */
	int logy;             /* 1: log if the data span 10x or more, else
			       * linear over the data; 0: linear from 0 */
	const bool *const *hollow; /* NULL, or [series][point]: drawn hollow
				    * (a capped cell) */
	double x0, w;         /* the panel's left edge and width on the
			       * page, for panels side by side; w 0: the
			       * page's width */
	const char *const *xnotes; /* NULL, or a line under each x label */
	const bool *xalert;   /* NULL, or [point]: its note in red */
	bool dots;            /* x points are categories (programs,
			       * traces): markers side by side, no line
			       * joins them */
	double ref;           /* plot_bars(): > 0 draws a dashed line at
			       * this value (a limit), labelled ref_label */
	const char *ref_label;
};

/* Round ticks ("nice numbers": steps of 1, 2, 2.5 or 5 x 10^k) covering
 * lo..hi in about `target` intervals: v[0] <= lo, v[n-1] >= hi, n >= 2.
 * lo == hi gets a range around the value.  n is the count. */
struct plot_ticks {
	double v[PLOT_MAX_TICKS], step;
	size_t n;
};
void plot_nice_ticks(double lo, double hi, int target, struct plot_ticks *t);
/* A tick's label: as many decimals as the step needs, k/M/G past 10^4. */
void plot_tick_label(char *buf, size_t len, double v, double step);

/* Series colour i (cycling), and SVG text at (x, y) with anchor "start",
 * "middle" or "end", escaped: shared with bench_svg.c. */
const char *plot_color(size_t i);
void plot_text(FILE *f, double x, double y, const char *anchor, int size, const char *s);
/* Marker shape i (cycling: circle, square, triangles, diamond, ...) at
 * (x, y) in colour c, filled or hollow; title (may be NULL) as tooltip. */
void plot_marker(FILE *f, size_t i, double x, double y, const char *c, bool hollow,
		 const char *title);

/* "--plot -": the plot is the only thing on standard output.
 * plot_take_stdout(), called before any output, keeps standard output
 * for the plot and points file descriptor 1 at standard error, so that
 * what the command prints (its table, its notes) goes there: 0 or
 * -errno.  plot_open() opens path for writing, "-" being that kept
 * standard output (or standard output itself, if not taken): NULL and
 * errno on error. */
int plot_take_stdout(void);
FILE *plot_open(const char *path);

/* Start a document of height h with a title, at path as plot_open()
 * takes it; NULL and errno on error. */
FILE *plot_begin(const char *path, int h, const char *title);
/* Close it: 0 or -errno. */
int plot_end(FILE *f);

/* A legend row at y: series i's line, colour and marker before names[i];
 * plot_legend_capped() adds a last entry, a hollow marker, "capped". */
void plot_legend(FILE *f, double y, const char *const *names, size_t n);
void plot_legend_capped(FILE *f, double y, const char *const *names, size_t n,
			const char *hollow_label);

/* One panel of height h at y0 (and 40 below it for the x labels and
 * title): x points evenly spaced, labelled; series drawn as lines with
 * markers (a value < 0 breaks the line).  Series i takes colour and
 * marker i, as in plot_legend(). */
void plot_panel_axes(FILE *f, double y0, double h, const struct plot_axes *a,
		     const char *const *xlabels, size_t nx, const struct plot_series *s,
		     size_t ns);
/* A bar panel: for each x point a group of bars, one per series
 * (colour i; a value < 0 draws no bar), on a linear axis from 0 that
 * reaches a->ref too; a->ref > 0 is drawn as a dashed red line.  Each
 * group is <g class="bars" data-x="LABEL">; the line is
 * <line class="limit">, ref_label its tooltip.  The legend for it:
 * plot_legend_bars(), a swatch per name from x, then (if not NULL) the
 * dashed line and ref_label, where it hides no bar. */
void plot_bars(FILE *f, double y0, double h, const struct plot_axes *a,
	       const char *const *xlabels, size_t nx, const struct plot_series *s, size_t ns);
void plot_legend_bars(FILE *f, double x, double y, const char *const *names, size_t n,
		      const char *ref_label);
/* The same without an x title; a ylabel ending " (log)" loses it when
 * the axis turns out linear. */
void plot_panel(FILE *f, double y0, double h, const char *title, const char *ylabel,
		const char *const *xlabels, size_t nx, const struct plot_series *s,
		size_t ns, int logy);

#endif
