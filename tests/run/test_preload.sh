#!/bin/sh
# The preload library, libzmem-run.so, under programs that check their own
# heap (tests/run/heap.c) with a resident limit of 2 MiB, so that what they
# check has been compressed and brought back: malloc & co, mmap & co,
# system calls and stdio on compressed buffers, threads, fork.  The board
# shows that pages really were evicted.  Reports in TAP (tests/tap.sh).
# Skipped in the sanitizer builds (their runtime replaces malloc itself)
# and without userfaultfd.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/tap.sh"
LIB=${LIB:-$here/../libzmem-run.so}
HEAP=$here/run/heap
BOARD=$here/run/board
T=$(mktemp -d "${TMPDIR:-/tmp}/zmem-preload.XXXXXX")
trap 'rm -rf "$T"' EXIT

if [ -n "${ZM_SAN:-}" ]; then
    ok "the preload library # SKIP the sanitizers' runtime replaces malloc (ZM_SAN=$ZM_SAN)"
    tap_end
    exit 0
fi

# run CASE...: the heap program under the library, on a board of its own
run() {
    "$BOARD" create "$T/board" &&
    timeout 300 env LD_PRELOAD="$LIB" ZMEM_RUN_RESIDENT=2M ZMEM_RUN_BOARD="$T/board" \
        "$HEAP" "$@" > "$T/out" 2> "$T/err"
}
evicted() {
    "$BOARD" show "$T/board" > "$T/slots" && awk '$4 > 0 { n++ } END { exit !n }' "$T/slots"
}

if ! env LD_PRELOAD="$LIB" ZMEM_RUN_RESIDENT=2M "$HEAP" 2>&1 | grep -q "no userfaultfd"; then :; else
    ok "the preload library # SKIP no userfaultfd here"
    tap_end
    exit 0
fi

# each but align (a few hundred KiB) has its pages evicted while it runs
for c in malloc calloc realloc align mmap foreign io threads; do
    if run "$c" && grep -qx "ok $c" "$T/out" && { evicted || [ "$c" = align ]; }; then
        ok "$c ($(head -1 "$T/out" | sed 's/^# //'), evictions $(awk '{print $4}' "$T/slots" | sort -n | tail -1))"
    else
        bad "$c"; cat "$T/out" "$T/err" "$T/slots" 2>/dev/null | diag
    fi
done

# The child of fork keeps a working copy of the heap (ZM_REGION_INHERIT).
if run fork && grep -qx "ok fork" "$T/out"; then
    n=$("$BOARD" show "$T/board" | wc -l) # env and heap are one process
    if [ "$n" -ge 2 ]; then ok "fork (parent and child on the board)"; else
        bad "fork: $n slots on the board"; "$BOARD" show "$T/board" | diag; fi
else
    bad "fork"; cat "$T/out" "$T/err" | diag
fi

# A shell forking command substitutions under a locale, with a 3 MB
# string in its heap at the smallest limit, three times: each child's
# threads start and read the locale's tables, which must not be region
# memory only they could bring back.  With the C library's own
# allocations in the region this hung in 2 runs of 3.
n=0
for i in 1 2 3; do
    "$BOARD" create "$T/board" &&
    timeout 60 env LD_PRELOAD="$LIB" ZMEM_RUN_RESIDENT=256K ZMEM_RUN_BOARD="$T/board" \
        LC_ALL=C.UTF-8 bash -c 'big=$(head -c 3000000 /dev/zero | tr "\0" x); a="";
        for i in $(seq 1 30); do a="$a$(printf "%s-" "$i")";
        x=$(echo "${big:0:10}" | tr - " "); done; echo "${#a}"' > "$T/out" 2> "$T/err" &&
    [ "$(cat "$T/out")" = 81 ] && n=$((n + 1))
done
if [ $n -eq 3 ]; then
    ok "bash: forks under a locale at a 256 KiB limit, 3 of 3"
else
    bad "bash: forks under a locale: $n of 3 ended right"; cat "$T/out" "$T/err" | diag
fi

# A bad setting: one line naming it, and the program runs uncompressed.
if env LD_PRELOAD="$LIB" ZMEM_RUN_RESIDENT=lots "$HEAP" malloc > "$T/out" 2> "$T/err" &&
   grep -qx "ok malloc" "$T/out" && grep -q "ZMEM_RUN_RESIDENT=lots" "$T/err" &&
   [ "$(wc -l < "$T/err")" -eq 1 ]; then
    ok "a bad ZMEM_RUN_RESIDENT: one line, the program runs"
else
    bad "a bad ZMEM_RUN_RESIDENT"; cat "$T/out" "$T/err" | diag
fi
# Only the interposed calls are exported: no libzmem symbol.
if ! nm -D --defined-only "$LIB" | awk '{print $3}' | grep -q '^zm'; then
    ok "no zm symbol exported"
else
    bad "zm symbols exported"; nm -D --defined-only "$LIB" | grep ' zm' | diag
fi
tap_end
