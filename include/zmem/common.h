/*
 * zmem: what every public header shares: the export marker, the version,
 * and where the library's messages go.
 */
#ifndef ZMEM_COMMON_H
#define ZMEM_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the calls libzmem exports; everything else in the shared library
 * is hidden.  Applications never need to use it. */
#if defined(__GNUC__)
#define ZM_API __attribute__((visibility("default")))
#else
#define ZM_API
#endif

/* The headers' version; zm_version() gives the library's at run time. */
#define ZMEM_VERSION_MAJOR 0
#define ZMEM_VERSION_MINOR 2
#define ZMEM_VERSION_PATCH 0
#define ZMEM_VERSION_NUMBER \
	(ZMEM_VERSION_MAJOR * 10000 + ZMEM_VERSION_MINOR * 100 + ZMEM_VERSION_PATCH)

/* The library's ZMEM_VERSION_NUMBER, e.g. 200 for 0.2.0, and as "0.2.0". */
ZM_API unsigned zm_version(void);
ZM_API const char *zm_version_string(void);

/*
 * Messages.  The library says something only when it finds a problem: a
 * bad call (in ZM_DEBUG builds), a checker's findings, objects still live
 * at destroy.  By default each goes to stderr as one line "zmem: TEXT".
 *
 * zm_set_log(fn, arg) sends them to fn instead (text without the prefix
 * or a newline); zm_set_log(NULL, NULL) silences them; zm_set_log_stderr()
 * restores the default.  The environment variable ZMEM_LOG=off silences
 * them too, until zm_set_log() is called.  fn may be called from any
 * thread, with library locks held: it must not call back into zmem.
 * Not thread-safe against itself: set it before the threads start.
 */
enum zm_log_level {
	ZM_LOG_ERROR = 0,    /* a checker found corruption */
	ZM_LOG_WARNING = 1,  /* bad input, or memory still in use at destroy */
};
typedef void zm_log_fn(void *arg, enum zm_log_level level, const char *msg);
ZM_API void zm_set_log(zm_log_fn *fn, void *arg);
ZM_API void zm_set_log_stderr(void);

#ifdef __cplusplus
}
#endif
#endif
