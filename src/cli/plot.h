/* Line charts in hand-written SVG for the benchmarks (allocbench,
 * worstcase): one x axis of labelled points, one line per series, a
 * panel per figure, stacked down the page.  No dependencies. */
#ifndef ZM_CLI_PLOT_H
#define ZM_CLI_PLOT_H

#include <stddef.h>
#include <stdio.h>

#define PLOT_W 960

struct plot_series {
	const char *name;
	const double *y;      /* one value per x point; < 0 = no value */
};

/* Series colour i (cycling), and SVG text at (x, y) with anchor "start",
 * "middle" or "end", escaped: shared with bench_svg.c. */
const char *plot_color(size_t i);
void plot_text(FILE *f, double x, double y, const char *anchor, int size, const char *s);

/* Start a document of height h with a title; NULL and errno on error. */
FILE *plot_begin(const char *path, int h, const char *title);
/* Close it: 0 or -errno. */
int plot_end(FILE *f);

/* A legend row at y: the colour of series i before names[i]. */
void plot_legend(FILE *f, double y, const char *const *names, size_t n);

/* One panel of height h at y0: x points evenly spaced, labelled; series
 * drawn as lines with markers (a value < 0 breaks the line); y from 0
 * (or, logy, a log scale over the values' decades).  Series i takes
 * colour i, as in plot_legend(). */
void plot_panel(FILE *f, double y0, double h, const char *title, const char *ylabel,
		const char *const *xlabels, size_t nx, const struct plot_series *s,
		size_t ns, int logy);

#endif
