#!/bin/sh
# zmem run: the launcher, with a stand-in for the preload library
# (run-fake.so, tests/run/fake_preload.c: it speaks the board and
# compresses nothing): options checked before the command runs (status 2,
# the command never started), exit statuses as a shell's (the command's,
# 128+N, 127, 126), the environment the command gets, signals passed on,
# --stats and --stats-file, and zmem list, stats, ctl and stop on a run.
# Then real programs under the real library (libzmem-run.so beside zmem),
# each at --resident 25%, their output compared with a plain run's and
# evictions > 0 in --stats-file: python3 (a dict of strings), node (an
# array of objects), sqlite3 (an in-memory database and a query), a C
# program of large malloc arrays and one that forks workers
# (tests/run/malloc_work.c).  They are skipped when the library is not
# built, a program is missing, or this process can have no userfaultfd.
# Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
B=$(dirname "$ZMEM")
FAKE=$B/tests/run-fake.so
CPROG=$B/tests/run-malloc
T=$(mktemp -d /tmp/zmem-run.XXXXXX)
# our own registry and folders: other tests' runs and servers are not ours
export XDG_RUNTIME_DIR=$T/rt TMPDIR=$T
mkdir -m 700 "$T/rt"
trap 'rm -rf "$T"' EXIT
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
skip() { ok "$1 # SKIP $2"; }

# usage ARGS... -- WANT: zmem run ARGS exits 2 with one line containing
# WANT, and the command (touch $T/ran) never ran
usage() {
    args=""
    while [ "$1" != "--" ]; do args="$args '$1'"; shift; done
    want=$2
    rm -f "$T/ran"
    eval "ZMEM_LOG=off ZMEM_RUN_LIB=\"\$FAKE\" timeout 5 \"\$ZMEM\" run $args -- touch \"\$T/ran\"" \
        > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && [ ! -e "$T/ran" ] &&
       grep -qF -- "$want" "$T/err"; then
        ok "zmem run$args: $want"
    else
        bad "zmem run$args: want status 2, '$want' and the command not run; got $rc"
        cat "$T/err" "$T/out" | head -5 | diag
    fi
}

usage --resident 1Q -- "invalid --resident '1Q'"
usage --resident 0 -- "invalid --resident '0'"
usage --resident 150% -- "invalid --resident '150%'"
usage --resident 0% -- "invalid --resident '0%'"
usage --resident 12.345% -- "invalid --resident '12.345%'"
usage --codec nope -- "--codec nope: unknown codec"
usage --recompress zstd:99 -- "--recompress zstd:99"
usage --allocator nope -- "--allocator nope: unknown; choices:"
usage --backing "$T/nodir/img" -- "its folder $T/nodir does not exist"
usage --idle-after 1s -- "--idle-after needs --recompress CODEC"
usage --idle-after 0 --recompress zstd -- "invalid --idle-after '0'"
usage --stats-file "$T/nodir/s.json" -- "--stats-file $T/nodir/s.json"
usage --frobnicate -- "unknown option '--frobnicate'"

ZMEM_RUN_LIB=$FAKE "$ZMEM" run > "$T/out" 2> "$T/err"
rc=$?
check "zmem run without a command: status 2" [ $rc -eq 2 ]
check "... and says a command is required" grep -q "a command to run is required" "$T/err"

# ---- exit statuses -------------------------------------------------------
status_is() {  # NAME WANT CMD...
    name=$1 want=$2; shift 2
    ZMEM_RUN_LIB=$FAKE timeout 10 "$ZMEM" run "$@" > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq "$want" ]; then ok "$name: status $want"
    else bad "$name: want status $want, got $rc"; diag < "$T/err"; fi
}
status_is "the command's status" 3 -- sh -c 'exit 3'
status_is "a command ended by SIGTERM" 143 -- sh -c 'kill -TERM $$'
status_is "a command ended by SIGKILL" 137 -- sh -c 'kill -KILL $$'
status_is "a command not found" 127 -- "$T/no-such-command"
check "... is named" grep -q "no-such-command: command not found" "$T/err"
printf 'echo hi\n' > "$T/noexec"
status_is "a command not executable" 126 -- "$T/noexec"
status_is "options without --" 0 --resident 1G true
ZMEM_RUN_LIB=$T/nothing timeout 10 "$ZMEM" run -- touch "$T/ran2" 2> "$T/err"
rc=$?
check "no preload library: status 125, the command not run" \
    [ $rc -eq 125 -a ! -e "$T/ran2" ]

# ---- the environment ----------------------------------------------------
LD_PRELOAD= ZMEM_RUN_LIB=$FAKE "$ZMEM" run --resident 25% --codec zstd -- \
    sh -c 'echo "$LD_PRELOAD|$ZMEM_RUN_RESIDENT|$ZMEM_RUN_CODEC|$ZMEM_RUN_BOARD"' > "$T/env"
IFS='|' read -r pre res codec board < "$T/env"
check "LD_PRELOAD names the library" [ "$pre" = "$(realpath "$FAKE")" ]
check "ZMEM_RUN_RESIDENT, ZMEM_RUN_CODEC set" [ "$res" = "25%" -a "$codec" = zstd ]
check "the board is in a private folder, removed at the end" \
    [ -n "$board" -a ! -e "$board" -a ! -e "$(dirname "$board")" ]
LD_PRELOAD=/nonexistent.so ZMEM_RUN_LIB=$FAKE "$ZMEM" run -- sh -c 'echo "$LD_PRELOAD"' \
    > "$T/env" 2> /dev/null
check "the user's LD_PRELOAD is kept after ours" \
    [ "$(cat "$T/env")" = "$(realpath "$FAKE"):/nonexistent.so" ]
ZMEM_RUN_LIB=$FAKE "$ZMEM" run --resident 1G -- sh -c 'echo "$ZMEM_RUN_RESIDENT"' > "$T/env"
check "a size goes as bytes" [ "$(cat "$T/env")" = 1073741824 ]

# ---- --stats and --stats-file (the stand-in's numbers) -------------------
ZMEM_RUN_LIB=$FAKE "$ZMEM" run --resident 25% --stats --stats-file "$T/s.json" -- \
    sh -c 'sleep 0.3; exit 5' > "$T/out" 2> "$T/err"
rc=$?
check "--stats: the command's status" [ $rc -eq 5 ]
check "--stats: the summary on stderr" grep -q "exit status 5" "$T/err"
check "--stats: per process" grep -q "sleep$" "$T/err"
check "--stats: nothing on stdout" [ ! -s "$T/out" ]
if python3 -c 'import json' 2> /dev/null; then
    python3 - "$T/s.json" > "$T/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "run" and "zmem" in d, d
assert d["status"] == 5 and d["signal"] is None and not d["running"]
assert d["processes"] >= 2, d["processes"]          # sh and sleep
assert d["total"]["evictions"] == 1000 * d["processes"]
assert any(p["comm"] == "sleep" and p["state"] == "exited" for p in d["process"])
assert d["argv"] == ["sh", "-c", "sleep 0.3; exit 5"]
PY
    rc=$?
    check "--stats-file: one JSON document with the processes" [ $rc -eq 0 ]
    [ $rc -eq 0 ] || diag < "$T/py"
else
    skip "--stats-file: one JSON document" "no python3"
fi

# ---- a running run: list, stats, ctl, stop -------------------------------
ZMEM_RUN_LIB=$FAKE "$ZMEM" run --resident 25% -- sleep 20 > /dev/null 2> "$T/bg.err" &
L=$!
for i in $(seq 50); do
    "$ZMEM" list 2> /dev/null | grep -q "^run:$L " && break
    sleep 0.1
done
check "zmem list shows the run as run:PID and its command" \
    sh -c "'$ZMEM' list -o NAME,PID,COMMAND | grep -q '^run:$L *$L sleep 20'"
"$ZMEM" stats run > "$T/stats" 2>&1
check "zmem stats run: the report" grep -q "sleep 20 (pid .*run:$L), .*running" "$T/stats"
"$ZMEM" stats --json "run:$L" > "$T/stats.json" 2>&1
check "zmem stats --json run:PID: the document" grep -q '"command": "run"' "$T/stats.json"
"$ZMEM" ctl "run:$L" mem-limit 25% > "$T/ctl" 2>&1
check "zmem ctl run mem-limit 25%: applied" grep -q "ok: mem-limit: applied by 1 process" "$T/ctl"
"$ZMEM" ctl run info > "$T/info" 2>&1
check "... the process took it (a quarter of its heap)" \
    grep -q '"resident_limit_bytes": 16777216' "$T/info"
"$ZMEM" ctl run reclaim 1M > "$T/ctl" 2>&1
check "zmem ctl run reclaim 1M" grep -q "ok: reclaim: applied by 1" "$T/ctl"
"$ZMEM" ctl run untrack > "$T/ctl" 2>&1
check "zmem ctl run untrack" grep -q "ok: untrack: applied by 1" "$T/ctl"
"$ZMEM" ctl run info > "$T/info" 2>&1
check "... no limit after untrack" grep -q '"resident_limit_bytes": null,' "$T/info"
"$ZMEM" ctl run mem-limit 1Q > /dev/null 2> "$T/ctl"
check "zmem ctl run mem-limit 1Q: status 2" [ $? -eq 2 ]
"$ZMEM" ctl run frob > /dev/null 2> "$T/ctl"
rc=$?
grep -q "unknown verb 'frob'; verbs of a run: reclaim, .*untrack" "$T/ctl"
check "zmem ctl run frob: status 2, the verbs named" [ $rc -eq 2 -a $? -eq 0 ]
"$ZMEM" stats run:1 > /dev/null 2> "$T/ctl"
rc=$?
grep -q "no such run" "$T/ctl"
check "zmem stats run:1: no such run, status 1" [ $rc -eq 1 -a $? -eq 0 ]
"$ZMEM" stop "run:$L" > "$T/ctl" 2>&1
check "zmem stop run:PID" grep -q "ok: stopping" "$T/ctl"
wait $L
check "... the run ends with the command's SIGTERM: 143" [ $? -eq 143 ]
check "... its registry entry is gone" [ ! -e "$XDG_RUNTIME_DIR/zmem.d/$L" ]
"$ZMEM" stats run > /dev/null 2> "$T/ctl"
rc=$?
grep -q "no zmem run" "$T/ctl"
check "zmem stats run with none running: status 1" [ $rc -eq 1 -a $? -eq 0 ]

# signals sent to zmem run go on to the command
ZMEM_RUN_LIB=$FAKE "$ZMEM" run -- sleep 20 2> /dev/null &
L=$!
sleep 0.5
kill -USR1 $L
wait $L
check "SIGUSR1 to zmem run ends the command with it: 138" [ $? -eq 138 ]

# ---- real programs under libzmem-run.so ---------------------------------
LIB=$B/libzmem-run.so
uffd_ok() {
    [ "$(id -u)" -eq 0 ] || [ -r /dev/userfaultfd ] ||
        [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2> /dev/null)" = 1 ]
}
# real NAME PROGRAM CMD...: CMD's output plain and under zmem run
# --resident 25% are the same, and the run evicted pages
real() {
    name=$1 prog=$2; shift 2
    if [ -n "${ZM_SAN:-}" ]; then skip "$name" "the sanitizers' runtime replaces malloc"; return; fi
    if [ ! -f "$LIB" ]; then skip "$name" "no $LIB (not built)"; return; fi
    if ! command -v "$prog" > /dev/null 2>&1; then skip "$name" "no $prog here"; return; fi
    if ! uffd_ok; then skip "$name" "no userfaultfd for this process"; return; fi
    if ! "$@" > "$T/plain" 2>&1; then
        bad "$name: the plain run failed"; diag < "$T/plain"; return
    fi
    rm -f "$T/r.json"
    timeout 300 "$ZMEM" run --resident 25% --stats-file "$T/r.json" -- "$@" \
        > "$T/zr" 2> "$T/zr.err"
    rc=$?
    if [ $rc -ne 0 ]; then
        bad "$name: zmem run: status $rc"; diag < "$T/zr.err"; return
    fi
    if ! cmp -s "$T/plain" "$T/zr"; then
        bad "$name: the output differs from a plain run's"
        diff "$T/plain" "$T/zr" | head -5 | diag; return
    fi
    ev=$(sed -n 's/.*"total": {[^}]*"evictions": \([0-9]*\).*/\1/p' "$T/r.json")
    if [ "${ev:-0}" -gt 0 ]; then
        ok "$name: the same output at --resident 25%, $ev pages evicted"
    else
        bad "$name: the same output, but no eviction (evictions '${ev:-}')"
        head -c 2000 "$T/r.json" | diag
    fi
}
real "python3: a dict of strings" python3 python3 -c '
d = {}
for i in range(400000):
    d["key%d" % i] = "value %d " % i * 8
print(len(d), sum(len(v) for v in d.values()), d["key12345"][:20])'
real "node: an array of objects" node node -e '
const a = [];
for (let i = 0; i < 400000; i++) a.push({ id: i, name: "item " + i, tags: ["a" + (i % 7), "b"] });
let s = 0; for (const o of a) s += o.id + o.name.length + o.tags.length;
console.log(a.length, s);'
real "sqlite3: an in-memory database and a query" sqlite3 sqlite3 :memory: "
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300000)
INSERT INTO t SELECT i, 'key' || (i % 1000), printf('%.200c', 'x') || i FROM c;
SELECT k, count(*), sum(length(v)) FROM t GROUP BY k ORDER BY k LIMIT 5;
SELECT count(*), sum(id) FROM t;"
real "C: large malloc arrays" "$CPROG" "$CPROG" 128
real "C: a program that forks workers" "$CPROG" "$CPROG" 96 3

tap_end
