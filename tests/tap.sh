# shellcheck shell=sh
# The shell tests' report, in TAP (the Test Anything Protocol): each check
# prints "ok N - NAME" or "not ok N - NAME", details of a failure follow
# as "# " comment lines, and tap_end prints the plan "1..N" last with a
# line "# N passed, N failed".  tests/run.sh counts those lines; a test
# that stops before its plan counts one failure more.
#
# Sourced by the tests: beside them in a build's tests/, one folder up
# from them in the tree.
pass=0
fail=0
ok()  { pass=$((pass + 1)); echo "ok $((pass + fail)) - $1"; }
bad() { fail=$((fail + 1)); echo "not ok $((pass + fail)) - $1"; }
# check NAME COMMAND...: ok if the command succeeds
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# diag: standard input as comment lines, for the details of a failure
diag() { sed 's/^/# /'; }
# zmem_usage ARGS... -- WANT: "$ZMEM" ARGS exits 2 within USAGE_TIMEOUT
# seconds (5) with exactly one line on standard error, which contains
# WANT, and nothing on standard output (files in "$T").  The library's
# own log is off: the debug builds also warn of bad input there.
zmem_usage() {
    args=""
    while [ "$1" != "--" ]; do args="$args '$1'"; shift; done
    want=$2
    eval "ZMEM_LOG=off timeout ${USAGE_TIMEOUT:-5} \"\$ZMEM\" $args" > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && [ ! -s "$T/out" ] &&
       grep -qF -- "$want" "$T/err"; then
        ok "zmem$args: $want"
    else
        bad "zmem$args: want status 2 and '$want', got $rc:"
        cat "$T/err" "$T/out" | head -5 | diag
    fi
}
# zmem_test_env NAME: $T, a new folder /tmp/zmem-NAME.XXXXXX removed at
# exit, with the test's own XDG_RUNTIME_DIR and TMPDIR in it (its default
# socket, registry and temporary files meet no other test's)
zmem_test_env() {
    T=$(mktemp -d "/tmp/zmem-$1.XXXXXX")
    XDG_RUNTIME_DIR=$T/run
    TMPDIR=$T/tmp
    export XDG_RUNTIME_DIR TMPDIR
    mkdir -m 0700 "$XDG_RUNTIME_DIR" "$TMPDIR"
    trap 'rm -rf "$T"' EXIT
}
# tap_end: the plan and the counts; false if a check failed
tap_end() {
    echo "1..$((pass + fail))"
    echo "# $pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
