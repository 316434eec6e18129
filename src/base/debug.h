/*
 * Debug levels, asserts and messages, under one knob: ZM_DEBUG.
 *
 *   0  release: no asserts; bad input still gets an error return.
 *   1  cheap asserts on our own invariants; bad input also gets a message
 *      on stderr naming the offending page or handle.
 *   2  as 1, plus whole-structure checks inside the library where noted;
 *      the tests build at this level and call the checkers after each step.
 *
 * Asserts are for our invariants only, never for caller input.
 */
#ifndef ZM_BASE_DEBUG_H
#define ZM_BASE_DEBUG_H

#include <stdio.h>
#include <stdlib.h>

#ifndef ZM_DEBUG
#define ZM_DEBUG 0
#endif

#define zmi_likely(x)   __builtin_expect(!!(x), 1)
#define zmi_unlikely(x) __builtin_expect(!!(x), 0)

#include <zmem/common.h>

/* A printf-style message to the log sink (zm_set_log; stderr by default). */
void zmi_log_at(enum zm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define zmi_log(...) zmi_log_at(ZM_LOG_WARNING, __VA_ARGS__)
#define zmi_log_error(...) zmi_log_at(ZM_LOG_ERROR, __VA_ARGS__)

/* The whole-structure checkers: print what is wrong and set the caller's
 * `bad`, then go on looking. */
#define ZM_CHECK_FAIL(...)              \
	do {                            \
		zmi_log_error(__VA_ARGS__); \
		bad = 1;                \
	} while (0)

/* A message about bad input, printed only when ZM_DEBUG >= 1. */
#if ZM_DEBUG >= 1
#define zmi_bad_input(...) zmi_log(__VA_ARGS__)
#else
#define zmi_bad_input(...) ((void)0)
#endif

#if ZM_DEBUG >= 1
#define ZM_ASSERT(c)                                                        \
	do {                                                                \
		if (zmi_unlikely(!(c))) {                                    \
			zmi_log("assertion failed: %s (%s:%d)", #c,          \
			       __FILE__, __LINE__);                         \
			abort();                                            \
		}                                                           \
	} while (0)
#else
#define ZM_ASSERT(c) ((void)0)
#endif

#endif
