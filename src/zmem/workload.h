/*
 * The workload calls' old public name.  They left libzmem for
 * libzmem-workload.a and their header is src/workload/workload.h; the
 * zmem command's sources still include them as <zmem/workload.h>, which
 * -Isrc finds here now that include/zmem/ no longer has it.  Remove this
 * file once they include "workload/workload.h".
 */
#include "workload/workload.h"
