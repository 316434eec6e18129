/*
 * Sizes as people read them, for every table zmem prints as text: the
 * store's statistics, zmem serve's report, the zmem command's lines.
 * Machine-readable output (--json, zram's mm_stat line) keeps bytes.
 * Header-only, so that the front ends that use only the public headers
 * otherwise (src/serve) need nothing more of the library for it.
 */
#ifndef ZM_BASE_UNITS_H
#define ZM_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "512 B", "1.5 KiB", "64 MiB", "1.0 GiB" (units of 1024; one decimal
 * below 10) into buf; returns buf */
static inline char *zmi_human_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 6)
		v /= 1024, u++;
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, v < 10 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

#endif
