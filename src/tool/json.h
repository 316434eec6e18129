/* The one JSON writer of the zmem command.  Every --json prints one
 * document of one shape,
 *
 *   {"zmem": "2.0.0", "command": "bench", ...}
 *
 * through these calls: strings are escaped (quotes, backslashes, control
 * characters; bytes that are not UTF-8 become U+FFFD), numbers that are
 * not finite are written null.  A key is given inside objects and NULL
 * inside arrays. */
#ifndef ZM_TOOL_JSON_H
#define ZM_TOOL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH 16

struct json {
	FILE *f;
	int depth;
	bool more[JSON_DEPTH];   /* something already written at that depth */
	char closer[JSON_DEPTH]; /* what ends that depth: '}' or ']' */
};

/* the document: "{"zmem": VERSION, "command": command" ... "}\n" */
void json_begin(struct json *j, FILE *f, const char *command);
void json_end(struct json *j);

void json_object(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array(struct json *j, const char *key);
void json_array_end(struct json *j);

void json_str(struct json *j, const char *key, const char *s);   /* NULL: null */
void json_num(struct json *j, const char *key, double v);        /* %.10g */
void json_fixed(struct json *j, const char *key, double v, int decimals);
void json_uint(struct json *j, const char *key, uint64_t v);
void json_int(struct json *j, const char *key, int64_t v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

/* a string's JSON form (quotes included) on f */
void json_write_string(FILE *f, const char *s);

#endif
