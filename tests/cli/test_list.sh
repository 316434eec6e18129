#!/bin/sh
# zmem list and zmem stats read as zramctl is read: columns as wide as
# their rows, -b, -o, -n, --raw, --json; "-" for the ratio of an empty
# disk; nothing when no server runs; 80 columns by default.  zmem stats
# HOST:PORT asks that server or refuses.  zmem ctl refuses a bad verb or
# argument itself (status 2, the verbs it knows).  zmem serve --run
# without --socket serves on a private socket beside a running default
# server.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
# our own default socket, registry and temporary files
zmem_test_env list
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2> /dev/null; wait "$p" 2> /dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
usage() { zmem_usage "$@"; }

# start NAME ARGS...: zmem serve -f ARGS in the background until its
# control socket NAME.ctl is there
start() {
    s=$1; shift
    "$ZMEM" serve -f "$@" 2>> "$T/serve.log" &
    PIDS="$PIDS $!"
    i=0
    while [ ! -S "$s.ctl" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ -S "$s.ctl" ]
}
# aligned FILE: every column of FILE's table lines up: each field of a row
# starts where the header's does (left-aligned columns) or ends where it
# does (right-aligned ones), and every line is at most 80 columns (with
# a NAME of 24)
aligned() {
    python3 - "$1" <<'PY'
import re, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
spans = [[m.span() for m in re.finditer(r"\S+", l)] for l in lines]
assert len(lines) >= 2, lines
assert all(len(s) == len(spans[0]) for s in spans), lines
for k in range(len(spans[0])):
    starts = {s[k][0] for s in spans}
    ends = {s[k][1] for s in spans}
    assert len(starts) == 1 or len(ends) == 1, (k, lines)
# 80 columns, a NAME as long as /run/user/1000/zmem.sock (24) counted
w0 = max(sp[0][1] for sp in spans) if lines[0].split()[0] == "NAME" else 0
assert all(len(l) - w0 + min(w0, 24) <= 80 for l in lines), [len(l) for l in lines]
PY
}

# ---- nothing runs: nothing printed, status 0 (as zramctl) ------------
empty() {
    "$ZMEM" list > "$T/out" 2> "$T/err" && [ ! -s "$T/out" ] && [ ! -s "$T/err" ] &&
    "$ZMEM" list -n > "$T/out" && [ ! -s "$T/out" ] &&
    "$ZMEM" list --json > "$T/doc.json" &&
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert list(d)[:2] == ["zmem", "command"] and d["command"] == "list", d
assert d["servers"] == [], d' "$T/doc.json"
}
check "list with no server: nothing (--json: no servers), status 0" empty

# ---- one default server, empty ---------------------------------------
start "$XDG_RUNTIME_DIR/zmem.sock" --size 4M || bad "a default server started"
DEF=$XDG_RUNTIME_DIR/zmem.sock
one() {
    "$ZMEM" list > "$T/out" && cat "$T/out" && [ "$(wc -l < "$T/out")" -eq 2 ] &&
    head -1 "$T/out" | grep -Eq '^ *NAME +PID +ALGORITHM +DISKSIZE +DATA +COMPR +TOTAL +RATIO *$' &&
    grep -Eq "^$DEF +[0-9]+ +lz4 +4M +0B +0B +[0-9.]+[BKM] +- *$" "$T/out" && aligned "$T/out"
}
check "list: zramctl's columns, NAME the socket, '-' for an empty disk's ratio" one
options() {
    "$ZMEM" list -o NAME,DISKSIZE -n > "$T/out" && [ "$(cat "$T/out")" = "$DEF 4M" ] &&
    "$ZMEM" list --output=DISKSIZE,RATIO --bytes --noheadings > "$T/out" &&
    [ "$(tr -s ' ' < "$T/out")" = "4194304 -" ] &&
    "$ZMEM" list -b --raw -o NAME,DISKSIZE,URI > "$T/out" &&
    [ "$(cat "$T/out")" = "NAME DISKSIZE URI
$DEF 4194304 nbd+unix:///?socket=$DEF" ] &&
    "$ZMEM" list -o +ALLOCATOR | head -1 | grep -Eq 'RATIO +ALLOCATOR *$' &&
    "$ZMEM" list --wide | head -1 | grep -q 'MEM-LIMIT.*URI'
}
check "list: -o (and +COL), -n, -b, --raw, --wide" options
list_json() {
    "$ZMEM" list -j > "$T/doc.json" && python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert list(d)[:2] == ["zmem", "command"] and d["command"] == "list", d
s, = d["servers"]
assert s["name"] == sys.argv[2] and s["disksize_bytes"] == 4194304, s
assert s["data_bytes"] == 0 and s["ratio"] is None and s["mem_limit_bytes"] is None, s
assert s["algorithm"] == "lz4" and s["uri"].startswith("nbd+unix://"), s' "$T/doc.json" "$DEF"
}
check "list --json (-j): the servers, sizes in bytes, null ratio when empty" list_json
usage list -o NAME,BOGUS -- "zmem list: -o: unknown column 'BOGUS'; columns: NAME,"
usage list -o '' -- "zmem list: -o: unknown column ''"
usage list --raw --json -- "zmem list: --raw and --json"

# ---- a long name and a large size do not break the columns -------------
LONG=$T/a-socket-path-long-enough-to-push-every-column-right.sock
start "$LONG" --size 2T --socket "$LONG" || bad "a server on a long path started"
widths() {
    "$ZMEM" list > "$T/out" && cat "$T/out" && [ "$(wc -l < "$T/out")" -eq 3 ] &&
    grep -q "^$LONG " "$T/out" && aligned "$T/out" &&
    "$ZMEM" list -b -o DISKSIZE,DATA,ALGORITHM,PID > "$T/out" && cat "$T/out" &&
    grep -q '^2199023255552 ' "$T/out" && aligned "$T/out"
}
check "list: a long name and a 13-digit size widen their columns" widths

# ---- stats: 80 columns, the mixed zspages' row, HOST:PORT ------------------
"$ZMEM" gen --kind text --ratio 0.5 --size 2M -o "$T/c.pages" -q || bad "gen a corpus"
stats_table() {
    command -v nbdcopy > /dev/null || { echo "no nbdcopy"; return 0; }
    nbdcopy "$T/c.pages" "nbd+unix:///?socket=$DEF" 2>&1 || true  # 1M of it: ENOSPC
    "$ZMEM" stats > "$T/out" && cat "$T/out" &&
    # (mm_stat's line is zram's format, for scripts: not a table)
    [ "$(grep -v '^mm_stat: ' "$T/out" | awk 'length > 80' | wc -l)" -eq 0 ] &&
    grep -Eq '^ *class +size ' "$T/out" &&
    grep -Eq '^ *mixed ' "$T/out" && grep -q '^mixed: ' "$T/out" &&
    "$ZMEM" stats --wide | grep -q '91-99' &&
    "$ZMEM" stats -j | python3 -c 'import json, sys; json.load(sys.stdin)'
}
check "stats: 80 columns, the mixed zspages' row labelled, --wide, -j" stats_table
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
PORT=$(free_port)
tcp() {
    start "$XDG_RUNTIME_DIR/zmem-tcp-$PORT" --size 1M --port "$PORT" || return 1
    "$ZMEM" stats "127.0.0.1:$PORT" | grep -q '^export: 1.0 MiB' &&
    "$ZMEM" stats "localhost:$PORT" | grep -q '^export: 1.0 MiB' || return 1
    # the server listens on 127.0.0.1 only: 127.0.0.2 is not it
    "$ZMEM" stats "127.0.0.2:$PORT" > "$T/out" 2> "$T/err"; st=$?
    cat "$T/out" "$T/err"
    [ $st -eq 1 ] && [ ! -s "$T/out" ] && grep -q "^zmem stats: 127.0.0.2:$PORT: " "$T/err"
}
check "stats HOST:PORT asks the server listening there, and refuses another host" tcp
nobody_there() {
    p=$(free_port)
    for a in "127.0.0.1:$p" "$p" "nosuchhost.invalid:$p"; do
        "$ZMEM" stats "$a" > "$T/out" 2> "$T/err"; st=$?
        cat "$T/err"
        [ $st -eq 1 ] && [ ! -s "$T/out" ] && grep -q "^zmem stats: $a: " "$T/err" || return 1
    done
}
check "stats HOST:PORT with nothing there: refused, never the local server" nobody_there

# ---- ctl: verbs and their arguments checked here ---------------------
usage ctl frobnicate -- "zmem ctl: unknown verb 'frobnicate'; verbs: compact,"
usage ctl "$DEF" frobnicate -- "zmem ctl: unknown verb 'frobnicate'"
usage ctl text -- "zmem ctl: unknown verb 'text'"
usage ctl json -- "zmem ctl: unknown verb 'json'"
usage ctl idle -- "zmem ctl: idle takes all or a DURATION"
usage ctl idle soon -- "zmem ctl: idle takes all or a DURATION (250ms, 30s, 10m, 1h; a bare number is SECONDS; under 49 days), not 'soon'"
usage ctl idle -5s -- "not '-5s'"
usage ctl idle 5x -- "not '5x'"
usage ctl idle 50d -- "not '50d'"
usage ctl idle 1200h -- "not '1200h'"
usage ctl idle 5s 6s -- "zmem ctl: unexpected argument '6s'"
# idle takes a duration as --idle-after and --timeout do, a bare number
# still seconds
idle_durations() {
    for d in all 250ms 5s 1.5s 1m 2h 60 0; do
        "$ZMEM" ctl "$DEF" idle "$d" > "$T/out" 2> "$T/err" || { cat "$T/err"; return 1; }
        grep -Eqx 'ok: [0-9]+ pages idle' "$T/out" || { cat "$T/out"; return 1; }
    done
}
check "ctl idle DURATION: 250ms, 5s, 1m, 2h, bare seconds, all" idle_durations
usage ctl writeback -- "zmem ctl: writeback takes a type"
usage ctl writeback sometimes -- "zmem ctl: writeback: type idle, huge, huge_idle"
usage ctl writeback idle many -- "zmem ctl: writeback: MAX_PAGES"
usage ctl writeback page -- "zmem ctl: writeback page takes a page INDEX"
usage ctl recompress incompressible -- "zmem ctl: recompress: type idle, huge, huge_idle or all"
usage ctl compact-file lots -- "zmem ctl: compact-file: MAX_BYTES"
usage ctl run:1 frobnicate -- "zmem ctl: unknown verb 'frobnicate'; verbs of a run: reclaim,"
verbs_listed() {
    "$ZMEM" ctl frobnicate 2> "$T/err"
    [ $? -eq 2 ] && for v in compact compact-file mem-limit reset-max idle writeback \
        recompress stop info; do grep -q " $v[ ,]" "$T/err" || return 1; done &&
    ! grep -Eq ' (text|json|stats)[ ,]' "$T/err"
}
check "ctl: the verbs it knows are listed, not the protocol's own" verbs_listed

# ---- serve --run beside the running default server -------------------
# shellcheck disable=SC2016
run_private() {
    for s in "" "--socket -"; do
        rm -f "$T/sock"
        # shellcheck disable=SC2086
        "$ZMEM" serve --size 1M $s --run 'echo "$unixsocket" > "$RUNARG"; echo "$socket" >> "$RUNARG";
            "$ZMEM" stats "$socket" > /dev/null' > "$T/out" 2> "$T/err" || {
            cat "$T/err"; return 1; }
        cat "$T/sock"
        sock=$(head -1 "$T/sock")
        [ -n "$sock" ] && [ "$(sed -n 2p "$T/sock")" = "$sock" ] &&
            [ "$sock" != "$DEF" ] && [ ! -e "$(dirname "$sock")" ] &&
            case $sock in "$TMPDIR"/*) ;; *) false;; esac || return 1
    done
    # the default server is still there
    "$ZMEM" stats "$DEF" > /dev/null
}
# $ZMEM and the file for the --run command
RUNARG=$T/sock
export ZMEM RUNARG
check "serve --run (and --socket -) beside a default server: a private folder, gone after" \
    run_private

tap_end
