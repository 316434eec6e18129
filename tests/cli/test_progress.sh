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
# sizes in progress: under 1 MiB in KiB, never "0 MiB" (on a terminal,
# where every line shows, when script(1) can give one)
kib() {
    if [ "$1" = tty ]; then
        shift
        command -v script > /dev/null || { ok "zmem $1 # SKIP no script(1)"; return; }
        q=""; for a in "$ZMEM" "$@"; do q="$q '$a'"; done
        ZMEM_LOG=off script -qec "$q > /dev/null" /dev/null > "$T/err" 2>&1
        rc=$?; echo >> "$T/err"; (exit $rc)
    else
        ZMEM_LOG=off "$ZMEM" "$@" > /dev/null 2> "$T/err"
    fi
    if [ $? -eq 0 ] && grep -q "64 KiB" "$T/err" && ! grep -q "[^.0-9]0 MiB" "$T/err"; then
        ok "zmem $1 --size 64K: its progress in KiB"
    else
        bad "zmem $1 --size 64K: its progress in KiB"; head -3 "$T/err" | diag
    fi
}
kib bench --size 64K --reps 1 --data zero --allocator zsmalloc --no-plot
kib gen --kind zero --size 64K -o "$T/g.pages"
kib tty cachebench --mode frontswap --size 64K --data zero --allocators zsmalloc
kib tty cachebench --mode cleancache --size 1M --file-set 1M --cache 256K --budgets 64K \
    --reads 100 --allocators zsmalloc --dir "$T/tmp"
# -q: nothing at all
ZMEM_LOG=off "$ZMEM" worstcase --max-size 4M --sequence tiny -q > /dev/null 2> "$T/err"
check "worstcase -q: nothing on stderr" test ! -s "$T/err"
tap_end
