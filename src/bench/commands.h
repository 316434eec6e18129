/* The benchmark commands as the zmem command finds them: the one header
 * of src/bench/ that src/cli/ includes. */
#ifndef ZM_BENCH_COMMANDS_H
#define ZM_BENCH_COMMANDS_H

#include <stddef.h>

#include "tool/command.h"

/* The benchmark commands, in the order zmem help lists them; their
 * number in *n. */
const struct cli_command *bench_commands(size_t *n);

#endif
