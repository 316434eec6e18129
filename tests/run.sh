#!/bin/sh
# Run test binaries and record their counts.
#
#   run.sh RESULTS [WRAPPER...] -- TEST...   run each TEST (under WRAPPER),
#                                            append "name passed failed" to RESULTS
#   run.sh --total RESULTS                   print the tests that failed, one a
#                                            line, then "N passed, N failed";
#                                            status 1 if anything failed or
#                                            nothing ran
#
# The test binaries use cmocka, whose summary lines give the counts; the
# shell tests (*.sh) report in TAP (tests/tap.sh), whose "ok N" and
# "not ok N" lines are counted.  A binary that dies without a summary
# (crash, sanitizer abort), a shell test that stops before its plan
# ("1..N"), a test that fails with no failure counted, and a test that
# was not built, count one failure each; any failure makes the status 1.
set -u
if [ "$1" = "--total" ]; then
    [ -f "$2" ] || { echo "0 passed, 1 failed"; exit 1; }
    awk '$3 > 0 { bad = bad "  failed: " $1 " (" $3 ")\n" }
         { p += $2; f += $3 }
         END { printf "%s%d passed, %d failed\n", bad, p, f; exit (f > 0 || p == 0) }' "$2"
    exit $?
fi
results=$1; shift
wrap=""
while [ "$1" != "--" ]; do wrap="$wrap $1"; shift; done
shift
mkdir -p "$(dirname "$results")"
status=0
for t in "$@"; do
    log="$t.log"
    echo "== $t"
    if [ ! -x "$t" ]; then
        echo "$t: not built (see the build's errors above)"
        echo "$t 0 1" >> "$results"
        status=1
        continue
    fi
    # shellcheck disable=SC2086
    $wrap "$t" > "$log" 2>&1
    rc=$?
    cat "$log"
    case $t in
    *.sh)
        p=$(grep -c '^ok [0-9][0-9]* - ' "$log")
        f=$(grep -c '^not ok [0-9][0-9]* - ' "$log")
        plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$log" | tail -1)
        if [ -z "$plan" ] || [ "$plan" -ne $((p + f)) ]; then f=$((f + 1)); fi
        ;;
    *)
        p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
        f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
        ;;
    esac
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    echo "$t $p $f" >> "$results"
    if [ "$rc" -ne 0 ] || [ "$f" -gt 0 ]; then status=1; fi
done
exit $status
