#!/bin/sh
# One name for one thing across the zmem commands: the C library's
# malloc is "malloc" everywhere ("glibc" an accepted alias), and every
# option that takes a duration takes the same syntax: a number with ms,
# s, m or h after it (a bare number in the option's own unit, which its
# --help names).  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env names

# takes ARGS...: zmem ARGS --no-such-option stops at that option, so the
# options before it were taken
takes() {
    ZMEM_LOG=off "$ZMEM" "$@" --no-such-option > "$T/out" 2> "$T/err"
    if [ $? -eq 2 ] && grep -q "unknown option '--no-such-option'" "$T/err"; then
        ok "zmem $* taken"
    else
        bad "zmem $* taken"; diag < "$T/err"
    fi
}

# the allocator: malloc, as bench, allocbench and the pool call it
for c in bench worstcase churn; do takes "$c" --allocator malloc; done
takes churn --allocator glibc
"$ZMEM" gen --kind text --ratio 0.5 --size 256K -o "$T/c.pages" -q || bad "gen a corpus"
for a in malloc glibc; do
    ZMEM_LOG=off "$ZMEM" churn --corpus "$T/c.pages" --size 64K --allocator "$a" --json \
        > "$T/out" 2> "$T/err"
    if grep -q '"allocator": *"malloc"' "$T/out" && ! grep -q glibc "$T/out"; then
        ok "zmem churn --allocator $a: its row is malloc"
    else
        bad "zmem churn --allocator $a: its row is malloc"; head -c 300 "$T/out" | diag
    fi
done

# an allocator not in this build: one message, with the choices, from
# every command that takes one of the pool's backends
for c in bench allocbench worstcase regionbench "serve --size 1M"; do
    # shellcheck disable=SC2086
    zmem_usage $c --allocator slab -- \
        "zmem ${c%% *}: --allocator slab: unknown; choices: zsmalloc, malloc, "
done
zmem_usage run --allocator slab true -- "zmem run: --allocator slab: unknown; choices: zsmalloc, "
zmem_usage cachebench --allocators zsmalloc,slab -- \
    "zmem cachebench: --allocators slab: unknown; choices: zsmalloc, malloc, "

# the allocator option repeats, as bench's and allocbench's do (and
# cachebench's takes a list too): each one given is run
"$ZMEM" cachebench --mode speed --size 1M --speed-size 256K --allocator zsmalloc \
    --allocators zbud,malloc -q -j > "$T/out" 2> "$T/err"
if python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
got = sorted({r['allocator'] for r in d['results']})
sys.exit(0 if got == ['malloc', 'zbud', 'zsmalloc'] else 1)" "$T/out"; then
    ok "cachebench --allocator A --allocators B,C: all three run"
else
    bad "cachebench --allocator A --allocators B,C: all three run"; diag < "$T/err"
fi

# durations: the same suffixes wherever one is asked for
for d in 250ms 2s 1m; do
    takes tierbench --idle-after "$d"
    takes serve --idle-after "$d"
    takes stats --timeout "$d"
done
takes serve --timeout 2s
takes serve --timeout 1m
zmem_usage serve --timeout 250ms -- "--timeout is a whole number of seconds, not 250ms"
takes allocbench --min-ms 5ms
takes allocbench --latency --ms 1s --settle 100ms --trace 10ms
takes run --idle-after 2s
# a bare number keeps its unit; junk is refused, naming the syntax
takes tierbench --idle-after 500
takes serve --timeout 5
for o in "tierbench --idle-after" "serve --timeout" "allocbench --min-ms"; do
    # shellcheck disable=SC2086
    zmem_usage $o 5x -- "(a duration: "
done
tap_end
