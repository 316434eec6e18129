/*
 * Sizes as people read them, for every table zmem prints as text: the
 * store's statistics, zmem serve's report, the zmem command's lines.
 * Machine-readable output (--json, zram's mm_stat line) keeps bytes.
 */
#ifndef ZM_BASE_UNITS_H
#define ZM_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* "512 B", "1.5 KiB", "64 MiB", "1.0 GiB" (units of 1024; one decimal
 * below 10) into buf; returns buf */
char *zmi_human_bytes(uint64_t bytes, char *buf, size_t len);

#endif
