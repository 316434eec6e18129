#!/bin/sh
# Run test binaries and record their counts.
#
#   run.sh [-j N] RESULTS [WRAPPER...] -- TEST...
#                            run each TEST (under WRAPPER), N at a time
#                            (default ZM_TEST_JOBS, else 1); append "name
#                            passed failed seconds" to RESULTS
#   run.sh --total RESULTS   print where each failed test failed (the
#                            failure lines of its log, at most 40), the
#                            tests that failed, one a line, then "N
#                            passed, N failed"; status 1 if anything
#                            failed or nothing ran
#   run.sh --times RESULTS   the tests' seconds, slowest first, and their sum
#
# The test binaries use cmocka, whose summary lines give the counts; the
# shell tests (*.sh) report in TAP (tests/tap.sh), whose "ok N" and
# "not ok N" lines are counted; a libFuzzer harness (*/fuzz_*) runs for
# FUZZ_SECONDS (30) and counts one pass if it found nothing.  A binary
# that dies without a summary (crash, sanitizer abort), a shell test that
# stops before its plan ("1..N"), a test that fails with no failure
# counted, and a test that was not built, count one failure each; any
# failure makes the status 1.
#
# Tests run N at a time, each with its output in TEST.log, printed whole
# and in the order given once it is done (with its seconds), whatever
# order they finish in (each test's report whole, whatever other run.sh
# print beside it).  Every running test holds a slot, a lock file in
# ZM_TEST_SLOTS (a folder; a private one if unset): run.sh processes that
# name the same folder and the same N share N slots, so that stages run
# side by side still run N tests at a time in all.  A test named (by its
# file name) in ZM_TESTS_ALONE holds every slot: nothing else runs beside
# it (the tests that time themselves or measure memory).
set -u
if [ "$1" = "--total" ]; then
    [ -f "$2" ] || { echo "0 passed, 1 failed"; exit 1; }
    # what each failed test said where it failed (its log's failure
    # lines, else its end), so that the run's last lines tell why
    for t in $(awk '$3 > 0 { print $1 }' "$2"); do
        [ -f "$t.log" ] || continue
        echo "-- $t.log, where it failed:"
        { grep -n -B2 -A6 -E '^\[  (ERROR|FAILED) +\]|^not ok |ERROR: [A-Za-z]*Sanitizer|runtime error|Assertion|failure|: error: ' \
              "$t.log" || tail -20 "$t.log"; } | head -40
    done
    awk '$3 > 0 { bad = bad "  failed: " $1 " (" $3 ")\n" }
         { p += $2; f += $3 }
         END { printf "%s%d passed, %d failed\n", bad, p, f; exit (f > 0 || p == 0) }' "$2"
    exit $?
fi
if [ "$1" = "--times" ]; then
    [ -f "$2" ] || exit 1
    awk 'NF >= 4 { printf "%8.1f s  %s\n", $4, $1; s += $4 } END { printf "%8.1f s  in all\n", s }' \
        "$2" | sort -rn
    exit 0
fi
jobs=${ZM_TEST_JOBS:-1}
# ZM_TEST_TAG names a second run of the same binaries (memcheck's of the
# debug build's): its logs are TEST.TAG.log and its results TEST.TAG, so
# that it may run beside the first.
tag=${ZM_TEST_TAG:+.$ZM_TEST_TAG}
if [ "$1" = "-j" ]; then jobs=$2; shift 2; fi
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
results=$1; shift
wrap=""
while [ "$1" != "--" ]; do wrap="$wrap $1"; shift; done
shift
mkdir -p "$(dirname "$results")"
slots=${ZM_TEST_SLOTS:-}
own_slots=""
if [ -z "$slots" ]; then slots=$(mktemp -d /tmp/zmem-slots.XXXXXX); own_slots=$slots; fi
mkdir -p "$slots"
trap '[ -n "$own_slots" ] && rm -rf "$own_slots"' EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }

alone() {
    for a in ${ZM_TESTS_ALONE:-}; do [ "$a" = "$(basename "$1")" ] && return 0; done
    return 1
}

# take_slots TEST: called in the test's subshell; its locks go with it.
# One slot, the first free (polling, so a test waiting for all of them
# gets each as it frees), or all of them in order (blocking) when alone.
take_slots() {
    if alone "$1"; then
        k=0
        while [ $k -lt "$jobs" ]; do
            eval "exec $((3 + k))>>\"\$slots/slot.$k\""
            flock $((3 + k))
            k=$((k + 1))
        done
        return
    fi
    while :; do
        k=0
        while [ $k -lt "$jobs" ]; do
            eval "exec 3>>\"\$slots/slot.$k\""
            flock -n 3 && return
            exec 3>&-
            k=$((k + 1))
        done
        sleep 0.05
    done
}

# start I TEST: run it in the background; TEST.done gets "status ms"
start() {
    if [ ! -x "$2" ]; then eval "notbuilt_$1=1"; return; fi
    rm -f "$2$tag.done"
    (
        take_slots "$2"
        t0=$(now_ms)
        case $2 in
        */fuzz_*)
            # shellcheck disable=SC2086
            $wrap "$2" -max_total_time="${FUZZ_SECONDS:-30}" -print_final_stats=1 \
                > "$2$tag.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
            ;;
        *)
            # shellcheck disable=SC2086
            $wrap "$2" > "$2$tag.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
            ;;
        esac
        rc=$?
        echo "$rc $(($(now_ms) - t0))" > "$2$tag.done.tmp" && mv "$2$tag.done.tmp" "$2$tag.done"
    ) &
}

# report I TEST: print its log and count it
report() {
    t=$2
    eval "nb=\${notbuilt_$1:-0}"
    if [ "$nb" = 1 ] || [ ! -x "$t" ]; then
        echo "== $t"
        echo "$t: not built (see the build's errors above)"
        echo "$t 0 1 0" >> "$results"
        status=1
        return
    fi
    read -r rc ms < "$t$tag.done"
    rm -f "$t$tag.done"
    secs=$(awk -v ms="$ms" 'BEGIN { printf "%.1f", ms / 1000 }')
    echo "== $t$tag ($secs s)"
    case $t in
    */fuzz_*) tail -3 "$t$tag.log" ;;
    *) cat "$t$tag.log" ;;
    esac
    case $t in
    *.sh)
        p=$(grep -c '^ok [0-9][0-9]* - ' "$t$tag.log")
        f=$(grep -c '^not ok [0-9][0-9]* - ' "$t$tag.log")
        plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$t$tag.log" | tail -1)
        if [ -z "$plan" ] || [ "$plan" -ne $((p + f)) ]; then f=$((f + 1)); fi
        ;;
    */fuzz_*)
        if [ "$rc" -eq 0 ]; then p=1; f=0; else p=0; f=1; tail -40 "$t$tag.log"; fi
        ;;
    *)
        p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$t$tag.log" | awk '{s+=$1} END {print s+0}')
        f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$t$tag.log" | awk '{s+=$1} END {print s+0}')
        ;;
    esac
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    echo "$t$tag $p $f $secs" >> "$results"
    if [ "$rc" -ne 0 ] || [ "$f" -gt 0 ]; then status=1; fi
}

# The tests by number: t_1 .. t_n, up to $jobs of them running (an alone
# one waits in its subshell for every slot).
status=0
n=0
for t in "$@"; do n=$((n + 1)); eval "t_$n=\$t"; done
next=1      # the next to start
shown=1     # the next to print
while [ $shown -le $n ]; do
    running=0
    k=$shown
    while [ $k -lt $next ]; do
        eval "t=\$t_$k; nb=\${notbuilt_$k:-0}"
        [ "$nb" = 1 ] || [ -f "$t$tag.done" ] || running=$((running + 1))
        k=$((k + 1))
    done
    started=0
    while [ $next -le $n ] && [ $running -lt "$jobs" ]; do
        eval "t=\$t_$next"
        start $next "$t"
        next=$((next + 1)); running=$((running + 1)); started=1
    done
    printed=0
    while [ $shown -lt $next ]; do
        eval "t=\$t_$shown"
        eval "nb=\${notbuilt_$shown:-0}"
        [ "$nb" = 1 ] || [ -f "$t$tag.done" ] || break
        # whole, under a lock: other stages' run.sh print beside us
        report $shown "$t" > "$slots/report.$$"
        flock "$slots/print.lock" cat "$slots/report.$$"
        rm -f "$slots/report.$$"
        shown=$((shown + 1)); printed=1
    done
    [ $started -eq 0 ] && [ $printed -eq 0 ] && sleep 0.1
done
wait
exit $status
