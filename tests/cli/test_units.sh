#!/bin/sh
# Multi-page units from the command line: --unit-pages of zmem serve,
# bench and tierbench refuse bad values with one line and status 2;
# zmem bench --unit-pages 1,4,16 gives one JSON document with a verified
# row per size and its ratios to unit 1; tierbench runs with units,
# verified.  A served disk with units is tests/interop/test_serve_units.sh.
# Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-units.XXXXXX)
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
trap 'rm -rf "$T"' EXIT

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
rows = {(r["data"], r["unit_pages"]): r for r in d["results"]}
assert len(rows) == len(d["results"]) == 6, sorted(rows)
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

tap_end
