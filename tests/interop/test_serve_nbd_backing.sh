#!/bin/sh
# zmem serve backed by another zmem serve (--backing nbd+unix://...): two
# servers on unix sockets of our own, the front one with a memory limit
# and the back one holding what the front writes back.  A corpus written
# with nbdcopy reads back byte for byte, with pages on the back server;
# then the back server is stopped mid-trace: reads of the front's disk
# fail (the pages that were there are gone with it) and writes at the
# limit get ENOSPC; it is started again, empty: the front reconnects,
# counts the pages lost (bd_lost), and a corpus written again reads back
# byte for byte, written back to the new back server.
. "$(dirname "$0")/interop.sh"
need nbdcopy qemu-io python3

MiB=1048576
BSOCK=$T/back.sock
BURI="nbd+unix:///?socket=$BSOCK"
BACK_PID=""

# back_start: the back server, no memory limit, on $BSOCK
back_start() {
    rm -f "$BSOCK"
    "$ZMEM" serve --foreground --socket "$BSOCK" --size 160M 2> "$T/back.log" &
    BACK_PID=$!
    i=0
    while [ $i -lt 600 ]; do
        [ -S "$BSOCK" ] && [ -S "$BSOCK.ctl" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    bad "the back server started"; diag < "$T/back.log"; return 1
}

back_kill() {
    kill -KILL "$BACK_PID"; wait "$BACK_PID" 2> /dev/null; BACK_PID=""
}

# json EXPR: a Python expression on the front's stats document d
json() {
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json" &&
    python3 - "$T/stats.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b, t, m, s = d["bd_stat"], d["tiering"], d["mm_stat"], d["store"]
ok = eval(sys.argv[2])
if not ok:
    print("false:", sys.argv[2]); print(json.dumps({k: d[k] for k in
          ("mm_stat", "bd_stat", "tiering", "store")}, indent=1))
sys.exit(0 if ok else 1)
PY
}

same_bytes() {
    nbdcopy "$URI" - 2> /dev/null | head -c "$1" | cmp -n "$1" - "$2"
}

# 24 MiB of text that compresses to about half: 12 MiB compressed into an
# 4 MiB memory limit
"$ZMEM" gen --kind text --size 24M --seed 1 -o "$T/corpus" > /dev/null 2>&1
"$ZMEM" gen --kind text --size 24M --seed 2 -o "$T/corpus2" > /dev/null 2>&1
SIZE=$(stat -c %s "$T/corpus")

back_start || finish
if ! serve_start --size 64M --mem-limit 4M --backing "$BURI"; then
    # a build without libnbd says so: that is a skip, not a failure
    grep -q "without libnbd" "$T/serve.log" && fail=$((fail - 1)) &&
        ok "zmem serve --backing nbd+unix:// # SKIP zmem built without libnbd"
    back_kill; finish
fi
check "nbdcopy 24 MiB into a 4 MiB memory limit, backed by NBD" nbdcopy "$T/corpus" "$URI"
check "read back byte-identical" same_bytes "$SIZE" "$T/corpus"
check "stats: pages on the export, none lost, memory within its limit" json \
    "b['bd_count'] > 0 and t['writeback_failures'] == 0 and t['bd_lost'] == 0 \
     and m['mem_used_total'] <= 4 << 20 and t['backing'].startswith('nbd+unix:')"
json "True" > /dev/null
ON=$(python3 -c "import json; print(json.load(open('$T/stats.json'))['bd_stat']['bd_count'])")

back_kill
# the front sees the connection gone at its next use
if nbdcopy "$URI" - > /dev/null 2>&1; then
    bad "reading the disk fails while the back server is away"
else
    ok "reading the disk fails while the back server is away"
fi
head -c 8M /dev/urandom > "$T/random"
if qemu-io -f raw -c "write -s $T/random 40M 8M" "$URI" > "$T/out" 2>&1 &&
   ! grep -qi "error\|space" "$T/out"; then
    bad "writes beyond the memory limit fail while it is away"; diag < "$T/out"
else
    ok "writes beyond the memory limit fail while it is away"
fi
check "stats: the pages still recorded on the export" json "b['bd_count'] == $ON"

back_start || { serve_stop; finish; }
sleep 1.2   # reconnections are tried at most once a second
check "the pages on the restarted (empty) export read as errors" sh -c \
    "! nbdcopy '$URI' - > /dev/null 2>&1"
check "stats: bd_lost counts the $ON pages that were on it" json "t['bd_lost'] == $ON"
check "nbdcopy another 24 MiB over them" nbdcopy "$T/corpus2" "$URI"
check "read back byte-identical" same_bytes "$SIZE" "$T/corpus2"
check "stats: written back to the new export, the lost pages freed" json \
    "b['bd_count'] > 0 and b['bd_writes'] > $ON and t['bd_lost'] == $ON \
     and m['mem_used_total'] <= 4 << 20"
serve_stop
kill -TERM "$BACK_PID"; wait "$BACK_PID"; rc=$?
[ $rc -eq 0 ] && ok "the back server stopped cleanly" || bad "the back server stopped cleanly"
finish
