#!/bin/sh
# zmem regionbench, small: every trace on plain memory and on regions
# (auto and FIFO), one JSON document with a row per trace, side and
# thread count (--threads 1,2, with the ratios), each row's pages ending
# as plain memory's; the table trace, and its lookups failing loudly on a
# damaged table; --fault-cost's rows; bad input.
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

usage() { zmem_usage regionbench "$@"; }   # tap.sh
usage --trace nope -- "unknown trace 'nope'"
usage --hot 80/100 -- "invalid --hot '80/100'"
usage --policy lru -- "--policy"
usage --size 8M --resident 8M -- "--resident must be less than --size"
usage --threads 0 -- "--threads must be"
usage --threads 1,x -- "--threads must be"
usage --threads 1,65 -- "--threads must be"
usage --data bogus -- "unknown data set 'bogus'"

# the traces: one document, a row for every trace, side and thread
# count, verified; the counts' ratios
SMALL="--size 8M --resident 2M --accesses 20000"
"$ZMEM" regionbench $SMALL --threads 2,1 --json -q > "$T/doc.json" 2> "$T/err"
rc=$?
if [ $rc -eq 77 ]; then
    skip "regionbench traces" "no userfaultfd here: $(head -1 "$T/err")"
    skip "regionbench table trace" "no userfaultfd here"
    skip "regionbench table trace, damaged" "no userfaultfd here"
    skip "regionbench --fault-cost" "no userfaultfd here"
    tap_end
    exit
fi
if [ $rc -eq 0 ] && python3 - "$T/doc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "regionbench" and "zmem" in d, d
assert d["threads"] == [1, 2] and d["threads_base"] == 1, d
assert d["threads_target"] == 1.6, d
rows = {(r["trace"], r["side"], r["threads"]): r for r in d["results"]}
assert len(rows) == len(d["results"]) == 5 * 3 * 2, sorted(rows)
for t in ("seq", "random", "hot", "heap", "table"):
    for s in ("plain", "region-auto", "region-fifo"):
        for n in (1, 2):
            r = rows[(t, s, n)]
            assert r["verified"] and r["ops"] >= 20000 and r["time_s"] > 0, r
            if s != "plain":
                assert 0 < r["peak_resident_bytes"] <= 8 << 20, r
                assert r["total_bytes"] > 0, r
        one, two = rows[(t, s, 1)], rows[(t, s, 2)]
        assert "threads_ratio" not in one, one
        want = two["ops_per_s"] / one["ops_per_s"]
        assert abs(two["threads_ratio"] - want) <= 0.01 * want + 0.002, (two, want)
        if s != "plain":
            p = rows[(t, "plain", 2)]["threads_ratio"]
            assert two["threads_ratio_plain"] == p, two
            assert two["threads_target_ratio"] == round(min(1.6, p), 3), two
            assert two["threads_target_met"] == \
                (two["threads_ratio"] >= two["threads_target_ratio"]), two
    assert rows[(t, "region-auto", 1)]["faults"] > 0 or t == "heap"
assert "faults_vs_fifo" in rows[("hot", "region-auto", 1)]
# the region compressed something: the limit is a quarter of the pages
assert rows[("random", "region-auto", 1)]["faults"] > 0
assert rows[("table", "region-auto", 2)]["lookups_wrong"] == 0
PY
then ok "regionbench --threads 2,1: every trace, side and count, verified, the ratios"
else bad "regionbench traces (status $rc)"; { head -c 400 "$T/doc.json"; echo; } | diag; diag < "$T/err"
fi

# the table trace alone, and its table: the target lines
"$ZMEM" regionbench $SMALL --trace table --threads 1,2 -q > "$T/table.txt" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^table  region auto    2 ' "$T/table.txt" &&
   grep -q '^Targets (threads: ' "$T/table.txt" &&
   grep -q '^  table  2 threads: plain [0-9.]*x, target >= [0-9.]*x:$' "$T/table.txt" &&
   grep -q '^        region auto [0-9.]*x (m' "$T/table.txt" &&
   ! grep -q '^seq\|^hot' "$T/table.txt"; then
    ok "regionbench --trace table --threads 1,2: its rows and the threads target"
else bad "regionbench --trace table (status $rc)"; diag < "$T/table.txt"; diag < "$T/err"
fi

# a damaged table: the lookups find it, the run fails and says where
"$ZMEM" regionbench $SMALL --trace table --policy auto --test-corrupt-table -q \
    > "$T/out" 2> "$T/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'table on region auto, 1 thread: [0-9]* lookups* found a wrong record; the first: thread 0, record' "$T/err"; then
    ok "regionbench table trace: a damaged table fails the run"
else bad "regionbench damaged table: want status 1 and the record, got $rc"; diag < "$T/err"
fi

"$ZMEM" regionbench --fault-cost --size 4M --resident 1M --json -q > "$T/fc.json" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && python3 - "$T/fc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["side"]: r for r in d["results"]}
for s in ("region", "region-zero", "plain-first-touch"):
    assert rows[s]["touches"] > 0 and rows[s]["p50_us"] > 0, rows[s]
assert rows["region"]["touches"] == 768, rows["region"]
PY
then ok "regionbench --fault-cost: the rows and their touches"
else bad "regionbench --fault-cost (status $rc)"; { head -c 400 "$T/fc.json"; echo; } | diag; diag < "$T/err"
fi
tap_end
