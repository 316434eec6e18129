#!/bin/sh
# zmem runbench, small (--quick): one JSON document with a row for every
# program and side, each either run (its figures, its output compared
# with the plain run's) or n/a with the reason; the table's rows; the
# plot; bad input.  Where neither zmem run nor the kernel's sides (root,
# zram) can run, runbench exits 77 and the runs are skipped; a program
# not installed (python3, node) is n/a in its rows.  Reports in TAP
# (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-runbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
skip() { ok "$1 # SKIP $2"; }

usage() { zmem_usage runbench "$@"; }   # tap.sh
usage --programs ruby -- "unknown program 'ruby'"
usage --sides zfs -- "unknown side 'zfs'"
usage --fraction 1.5 -- "--fraction"
usage --fraction 0 -- "--fraction"

TMPDIR=$T "$ZMEM" runbench --quick --json --plot "$T/plot.svg" -q > "$T/doc.json" 2> "$T/err"
rc=$?
if [ $rc -eq 77 ]; then
    skip "runbench --quick --json" "$(tail -1 "$T/err")"
    skip "runbench --quick: the table" "nothing can run here"
    tap_end
    exit
fi
if [ $rc -eq 0 ] && python3 - "$T/doc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["command"] == "runbench" and "zmem" in d and d["quick"] is True, d
assert d["fraction"] == 0.25, d
assert [p["name"] for p in d["programs"]] == ["python", "node", "c"], d["programs"]
rows = {(r["program"], r["side"]): r for r in d["results"]}
sides = ("plain", "zmem-run", "kernel-zram", "kernel-zswap")
assert len(rows) == len(d["results"]) == 3 * 4, sorted(rows)
ran = 0
for p in ("python", "node", "c"):
    plain = rows[(p, "plain")]
    if not plain["ran"]:
        assert plain["note"].startswith("n/a: "), plain
        continue
    assert plain["exit_status"] == 0 and plain["output_equal"], plain
    assert plain["output"].startswith(("entries ", "objects ", "arrays ")), plain
    assert plain["time_s"] > 0 and plain["peak_resident_bytes"] > 0, plain
    assert plain["total_bytes"] == plain["rss_peak_bytes"], plain
    for s in sides[1:]:
        r = rows[(p, s)]
        assert r["limit_bytes"] >= 16 << 20, r
        assert r["limit_bytes"] >= plain["rss_peak_bytes"] // 4 - 4096, (r, plain)
        if not r["ran"]:
            assert r["note"].startswith("n/a: "), r
            continue
        ran += 1
        assert r["time_s"] > 0 and "time_vs_plain" in r, r
        if r["exit_status"] == 137 and s != "zmem-run":
            assert "out-of-memory" in r["note"], r   # the kernel's result
            continue
        assert r["exit_status"] == 0 and r["output_equal"], r
        assert r["output"] == plain["output"], (r, plain)
        assert 0 < r["peak_resident_bytes"], r
        assert r["total_bytes"] >= r["peak_resident_bytes"], r
        if s == "kernel-zram":
            assert r["cgroup_peak_bytes"] <= r["limit_bytes"] + (1 << 20), r
            assert r["zram_mem_used_max_bytes"] > 0, r   # it did swap
        if s == "zmem-run":
            assert r["compressed_bytes"] > 0, r          # it did compress
assert ran > 0, "no side but plain ran"
PY
then ok "runbench --quick --json: a row per program and side, outputs as plain's"
else bad "runbench --quick --json (status $rc)"; { head -c 600 "$T/doc.json"; echo; } | diag; diag < "$T/err"
fi
if grep -q '^<svg ' "$T/plot.svg" 2>/dev/null && grep -q 'wall time' "$T/plot.svg" &&
   grep -q '</svg>' "$T/plot.svg"; then
    ok "runbench --plot: an SVG"
else bad "runbench --plot: no SVG"
fi

# the table: its rows, n/a with a reason where a side cannot run
TMPDIR=$T "$ZMEM" runbench --quick --programs c -q > "$T/table.txt" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^program side ' "$T/table.txt" &&
   grep -q '^c       plain  *- *[0-9.]* ' "$T/table.txt" &&
   grep -q '^c       zmem run ' "$T/table.txt" &&
   grep -q '^c       kernel zram ' "$T/table.txt" &&
   ! grep -q '^python\|^node' "$T/table.txt" &&
   ! grep -q 'DIFFERENT' "$T/table.txt"; then
    ok "runbench --quick --programs c: the table's rows"
else bad "runbench --quick --programs c (status $rc)"; diag < "$T/table.txt"; diag < "$T/err"
fi
tap_end
