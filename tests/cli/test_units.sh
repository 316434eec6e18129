#!/bin/sh
# Multi-page units from the command line: --unit-pages of zmem serve,
# bench and tierbench refuse bad values with one line and status 2;
# zmem bench --unit-pages 1,4,16 gives one JSON document with a verified
# row per size and its ratios to unit 1; tierbench runs with units,
# verified; a served disk with units (zstd's default, and lz4 with
# --unit-pages 4) gives back what qemu-io and nbdcopy wrote -- unaligned
# sectors, single pages inside units, whole units and long runs -- and its
# zmem stats --json shows the unit size and the unit counters (with zstd,
# units formed).  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-units.XXXXXX)
SOCK=$T/zmem.sock
URI="nbd+unix:///?socket=$SOCK"
SERVE_PID=""
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
cleanup() {
    [ -n "$SERVE_PID" ] && { kill -TERM "$SERVE_PID"; wait "$SERVE_PID"; }
    rm -rf "$T"
}
trap cleanup EXIT
skip() { ok "$1 # SKIP $2"; }

usage() { zmem_usage "$@"; }   # tap.sh

usage serve --size 1G --unit-pages 3 -- "zmem serve: --unit-pages must be 1, 2, 4, 8 or 16, not 3"
usage serve --size 1G --unit-pages 0 -- "zmem serve: --unit-pages must be 1..16, not 0"
usage serve --size 1G --unit-pages 32 -- "zmem serve: --unit-pages must be 1..16, not 32"
usage serve --size 1G --unit-pages x -- "zmem serve: invalid --unit-pages 'x'"
usage serve --size 1G --page-size 32K --unit-pages 16 -- "a unit is at most 256 KiB"
usage bench --unit-pages 3 -- "zmem bench: --unit-pages '3': a list of 1, 2, 4, 8 or 16"
usage bench --unit-pages 1,4, -- "--unit-pages '1,4,': a list of 1, 2, 4, 8 or 16"
usage bench --unit-pages 1,x -- "--unit-pages '1,x': a list of 1, 2, 4, 8 or 16"
usage bench --unit-pages 1,32 -- "--unit-pages '1,32': a list of 1, 2, 4, 8 or 16"
usage bench --unit-pages 1,2,4,8,16,1 -- "--unit-pages lists at most 5 sizes"
usage bench --unit-pages 16 --page-size 32K -- "a unit is at most 256 KiB"
usage bench --unit-pages 1,4 --threads 2 -- "--unit-pages runs alone"
usage bench --unit-pages 1,4 --churn 0.5 -- "--unit-pages runs alone"
usage tierbench --unit-pages 6 -- "zmem tierbench: --unit-pages must be 1, 2, 4, 8 or 16, not 6"
usage tierbench --unit-pages 17 -- "zmem tierbench: --unit-pages must be 1..16, not 17"
usage tierbench --unit-pages 16 --page-size 64K -- "a unit is at most 256 KiB"

# zmem bench --unit-pages: a row per data set and size, verified; unit 1
# is the base of the ratios
"$ZMEM" bench --unit-pages 1,4,16 --codec zstd --size 2M --reps 1 -d text:0.4 -d random:0.5 \
    --json -q > "$T/bench.json" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "bench" and "zmem" in d, d
assert d["unit_pages"] == [1, 4, 16] and d["codec"] == "zstd", d
rows = {(r["data"], r["unit_pages"]): r for r in d["units"]}
assert len(rows) == len(d["units"]) == 6, sorted(rows)
for (data, unit), r in rows.items():
    assert r["verified"] and r["allocator"] == "zsmalloc", r
    assert r["pages"] == 512 and r["orig_data_size"] == 2 << 20, r
    assert 0 < r["compr_data_size"] < r["orig_data_size"], r
    assert r["fill_MBps"] > 0 and r["read_MBps"] > 0, r
    assert 0 < r["read_p50_ns"] <= r["read_p99_ns"], r
    v = r["vs_base"]
    assert v["unit_pages"] == 1, v
    if unit == 1:
        assert v["mem"] == 1 and v["read_p99"] == 1 and r["units"] == 0, (v, r)
    b = rows[(data, 1)]
    want = (r["mem_used_total"] + r["meta_bytes"]) / (b["mem_used_total"] + b["meta_bytes"])
    assert abs(v["mem"] - want) < 1e-3, (v, want)
    assert r["unit_pages_held"] <= r["pages"], r
PY
then ok "zmem bench --unit-pages 1,4,16 --json: verified rows, ratios to unit 1"
else bad "zmem bench --unit-pages 1,4,16 --json (status $rc)"; head -5 "$T/err" | diag
fi

"$ZMEM" bench --unit-pages 4,16 --size 1M --reps 1 -d text > "$T/table" 2> "$T/err"
check "zmem bench --unit-pages 4,16: a table, ratios to the first size" \
    sh -c "grep -q 'x1 = against unit 1' '$T/table' && [ \$(grep -c ' yes\$' '$T/table') -eq 2 ]"
check "zmem bench --unit-pages writes no plot" sh -c "[ ! -e zmem-bench.svg ] || [ zmem-bench.svg -ot '$T/table' ]"

"$ZMEM" tierbench --unit-pages 4 --size 4M --data text --modes none,writeback --dir "$T" \
    --json -q > "$T/tier.json" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['unit_pages'] == 4, d
" "$T/tier.json"; then ok "zmem tierbench --unit-pages 4: verified"
else bad "zmem tierbench --unit-pages 4 (status $rc)"; head -5 "$T/err" | diag
fi

# ---- a served disk with units --------------------------------------
serve_start() {
    rm -f "$SOCK"
    "$ZMEM" serve --foreground --socket "$SOCK" "$@" 2> "$T/serve.log" &
    SERVE_PID=$!
    i=0
    while [ $i -lt 600 ]; do
        [ -S "$SOCK" ] && [ -S "$SOCK.ctl" ] && return 0
        kill -0 "$SERVE_PID" 2> /dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    bad "zmem serve $* started"; diag < "$T/serve.log"; SERVE_PID=""
    return 1
}
serve_stop() {
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID"; rc=$?
    SERVE_PID=""
    check "zmem serve stopped cleanly" [ $rc -eq 0 ]
}

if ! command -v qemu-io > /dev/null 2>&1 || ! command -v nbdcopy > /dev/null 2>&1; then
    skip "served disks with units" "qemu-io or nbdcopy missing"
    tap_end
    exit
fi

# the corpus: text, a zero stretch, random bytes, the system's binaries
"$ZMEM" gen --kind text --size 6M --seed 3 -o "$T/a" > /dev/null 2>&1
head -c 1M /dev/zero > "$T/z"
head -c 1M /dev/urandom > "$T/r"
cat /usr/bin/* 2> /dev/null | head -c 4M > "$T/b"
cat "$T/a" "$T/z" "$T/r" "$T/b" > "$T/corpus"
SIZE=$(stat -c %s "$T/corpus")

# io: qemu-io writes with patterns: unaligned sectors across a unit's
# edge, single 4K pages inside units, whole units, a long run; then
# reads them back with the same patterns
io() {
    qemu-io -f raw "$URI" \
        -c "write -P 0x11 0 256K" -c "write -P 0x22 8K 4K" -c "write -P 0x33 65024 1024" \
        -c "write -P 0x44 128K 64K" -c "write -P 0x55 100000 3000" -c "discard 192K 4K" \
        -c "write -P 0x66 1M 1M" -c "write -P 0x77 1052672 4096" \
        -c "read -P 0x11 0 8K" -c "read -P 0x22 8K 4K" -c "read -P 0x11 12K 52736" \
        -c "read -P 0x33 65024 1024" -c "read -P 0x11 66048 33952" \
        -c "read -P 0x55 100000 3000" -c "read -P 0x11 103000 28072" \
        -c "read -P 0x44 128K 64K" -c "read -P 0 192K 4K" -c "read -P 0x11 196K 60K" \
        -c "read -P 0x66 1M 4K" -c "read -P 0x77 1052672 4096" -c "read -P 0x66 1056768 1040384" \
        > "$T/io" 2>&1 && ! grep -q "Pattern verification failed\|error" "$T/io"
}

for args in "--codec zstd" "--codec lz4 --unit-pages 4" "--codec zstd --unit-pages 16 --threads 0"; do
    serve_start --size 64M $args || continue
    if io; then ok "serve $args: qemu-io writes read back (sectors, pages, units)"
    else bad "serve $args: qemu-io writes read back"; tail -20 "$T/io" | diag; fi
    check "serve $args: nbdcopy in" nbdcopy -C 2 --requests 8 "$T/corpus" "$URI"
    check "serve $args: nbdcopy out, 4 KiB requests" \
        nbdcopy -C 1 --request-size 4096 "$URI" "$T/back"
    check "serve $args: the copy is byte-identical" \
        sh -c "head -c $SIZE '$T/back' | cmp - '$T/corpus'"
    # rewrite single pages inside units, then the whole copy again
    qemu-io -f raw "$URI" -c "write -P 0x99 4K 4K" -c "write -P 0x98 1M 512" \
        -c "read -P 0x99 4K 4K" -c "read -P 0x98 1M 512" > "$T/io2" 2>&1
    check "serve $args: pages rewritten inside units" \
        sh -c "! grep -q 'Pattern verification failed\|error' '$T/io2'"
    nbdcopy "$URI" "$T/back2"
    python3 - "$T/corpus" "$T/back2" <<'PY' > "$T/cmp" 2>&1
import sys
a, b = open(sys.argv[1], "rb").read(), bytearray(open(sys.argv[2], "rb").read())
want = bytearray(a)
want[4096:8192] = b"\x99" * 4096
want[1 << 20:(1 << 20) + 512] = b"\x98" * 512
assert b[:len(want)] == want, "differs"
PY
    check "serve $args: their neighbours are intact" [ $? -eq 0 ]
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json"
    check "serve $args: zmem stats --json shows units" python3 - "$T/stats.json" "$args" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = 4 if "--unit-pages 4" in sys.argv[2] else 16
assert d["export"]["page_size"] == 4096 and d["export"]["unit_pages"] == want, d["export"]
s = d["store"]
for k in ("units", "unit_pages", "unit_bytes", "unit_saved", "units_formed",
          "units_declined", "unit_splits"):
    assert k in s and s[k] >= 0, (k, s)
assert s["unit_pages"] <= s["pages_stored"], s
# nbdcopy's 256 KiB writes of text: zstd keeps some of them as units
if "zstd" in sys.argv[2]:
    assert s["units_formed"] > 0 and s["unit_saved"] > 0, s
assert s["pool_errors"] == 0 and s["failed_reads"] == 0, s
PY
    check "serve $args: zmem stats shows the unit size" \
        sh -c "'$ZMEM' stats '$SOCK' | grep -q '^export: .*4096-byte pages in units of up to'"
    serve_stop
done

# --page-size alone keeps pages alone, as before
serve_start --size 8M --codec zstd --page-size 32K && {
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json"
    check "serve --codec zstd --page-size 32K: 32 KiB pages, no units" python3 -c "
import json, sys
e = json.load(open(sys.argv[1]))['export']
assert e['page_size'] == 32768 and e['unit_pages'] == 1, e
" "$T/stats.json"
    serve_stop
}

tap_end
