#!/bin/sh
# zmem regionbench, small: every trace on plain memory and on regions
# (auto and FIFO), one JSON document with a row per trace and side, each
# row's pages ending as plain memory's; --fault-cost's rows; bad input.
# Where this process can have no userfaultfd, regionbench exits 77 and
# the runs are skipped.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-regionbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
skip() { ok "$1 # SKIP $2"; }

# usage ARGS... -- WANT: status 2, one line naming WANT
usage() {
    args=""
    while [ "$1" != "--" ]; do args="$args '$1'"; shift; done
    want=$2
    eval "ZMEM_LOG=off timeout 5 \"\$ZMEM\" regionbench $args" > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qF -- "$want" "$T/err"; then
        ok "regionbench$args: $want"
    else
        bad "regionbench$args: want status 2 and '$want', got $rc:"
        cat "$T/err" "$T/out" | head -5 | diag
    fi
}
usage --trace nope -- "unknown trace 'nope'"
usage --hot 80/100 -- "invalid --hot '80/100'"
usage --policy lru -- "--policy"
usage --size 8M --resident 8M -- "--resident must be less than --size"
usage --threads 0 -- "--threads must be"
usage --data bogus -- "unknown data set 'bogus'"

# the traces: one document, a row for every trace and side, verified
SMALL="--size 8M --resident 2M --accesses 20000"
"$ZMEM" regionbench $SMALL --threads 2 --json -q > "$T/doc.json" 2> "$T/err"
rc=$?
if [ $rc -eq 77 ]; then
    skip "regionbench traces" "no userfaultfd here: $(head -1 "$T/err")"
    skip "regionbench --fault-cost" "no userfaultfd here"
    tap_end
    exit
fi
if [ $rc -eq 0 ] && python3 - "$T/doc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "regionbench" and "zmem" in d, d
rows = {(r["trace"], r["side"]): r for r in d["rows"]}
for t in ("seq", "random", "hot", "heap"):
    for s in ("plain", "region-auto", "region-fifo"):
        r = rows[(t, s)]
        assert r["verified"] and r["ops"] >= 20000 and r["time_s"] > 0, r
        if s != "plain":
            assert 0 < r["peak_resident_bytes"] <= 8 << 20, r
            assert r["total_bytes"] > 0, r
assert "faults_vs_fifo" in rows[("hot", "region-auto")]
# the region compressed something: the limit is a quarter of the pages
assert rows[("random", "region-auto")]["faults"] > 0
PY
then ok "regionbench traces: one document, every trace and side, verified"
else bad "regionbench traces (status $rc)"; { head -c 400 "$T/doc.json"; echo; } | diag; diag < "$T/err"
fi

"$ZMEM" regionbench --fault-cost --size 4M --resident 1M --json -q > "$T/fc.json" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/fc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["side"]: r for r in d["rows"]}
for s in ("region", "region-zero", "plain-first-touch"):
    assert rows[s]["touches"] > 0 and rows[s]["p50_us"] > 0, rows[s]
assert rows["region"]["touches"] == 768, rows["region"]
PY
then ok "regionbench --fault-cost: the rows and their touches"
else bad "regionbench --fault-cost (status $rc)"; { head -c 400 "$T/fc.json"; echo; } | diag; diag < "$T/err"
fi
tap_end
