#!/bin/sh
# Progress on stderr when it is not a terminal: at most about one line a
# second, notes (the lines that stay, such as a result per backend)
# included, so a pipe or a log file gets a readable trace and not every
# step.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env progress

# rate NAME ARGS...: zmem ARGS with stderr into a file prints at most
# one line a second it ran, and one more (the first)
rate() {
    name=$1; shift
    t0=$(date +%s)
    ZMEM_LOG=off "$ZMEM" "$@" > /dev/null 2> "$T/err"
    rc=$?
    t1=$(date +%s)
    lines=$(wc -l < "$T/err")
    most=$((t1 - t0 + 2))
    if [ $rc -eq 0 ] && [ "$lines" -le "$most" ]; then
        ok "$name: $lines lines on stderr in $((t1 - t0)) s"
    else
        bad "$name: status $rc, $lines lines on stderr in $((t1 - t0)) s (at most $most)"
        head -5 "$T/err" | diag
    fi
}
# worstcase notes each backend's result: 26 lines in half a second
rate "worstcase's notes" worstcase --max-size 4M
rate "worstcase's notes, one sequence" worstcase --max-size 4M --sequence tiny
# -q: nothing at all
ZMEM_LOG=off "$ZMEM" worstcase --max-size 4M --sequence tiny -q > /dev/null 2> "$T/err"
check "worstcase -q: nothing on stderr" test ! -s "$T/err"
tap_end
