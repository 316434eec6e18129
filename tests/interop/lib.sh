# Shared by the interop tests: start and stop zmem serve and run checks,
# reported in TAP (tap.sh, copied beside them as this file is).
#
#   ZMEM     the zmem binary under test (default: the build's, beside us)
#   ZM_SAN   set when that binary is built with a sanitizer (no valgrind)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-interop.XXXXXX)
SOCK=$T/zmem.sock
URI="nbd+unix:///?socket=$SOCK"
SERVE_PID=""
. "$(dirname "$0")/tap.sh"

# check NAME COMMAND...: the command must succeed; its output goes to the
# log, and its last 20 lines to the report if it fails
check() {
    name=$1; shift
    if "$@" > "$T/out" 2>&1; then ok "$name"; else bad "$name"; tail -20 "$T/out" | diag; fi
}

# need CLIENT...: the setup installs them; missing is a failure, not a skip
need() {
    for c in "$@"; do
        command -v "$c" > /dev/null 2>&1 || { bad "client $c is installed"; finish; }
    done
}

# serve_start ARGS...: zmem serve in the foreground on $SOCK, waiting until
# it answers
serve_start() {
    rm -f "$SOCK"
    $SERVE_WRAP "$ZMEM" serve --foreground --socket "$SOCK" "$@" 2> "$T/serve.log" &
    SERVE_PID=$!
    i=0
    while [ $i -lt 600 ]; do
        [ -S "$SOCK" ] && [ -S "$SOCK.ctl" ] && return 0
        kill -0 "$SERVE_PID" 2> /dev/null || break
        sleep 0.1; i=$((i + 1))
    done
    bad "zmem serve started"; diag < "$T/serve.log"; SERVE_PID=""
    return 1
}

# serve_stop: SIGTERM, and the server must exit 0 (ASan reports leaks
# through the exit status) and remove its sockets
serve_stop() {
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID"
    wait "$SERVE_PID"; rc=$?
    SERVE_PID=""
    if [ $rc -eq 0 ] && [ ! -e "$SOCK" ]; then ok "zmem serve stopped cleanly"
    else bad "zmem serve stopped cleanly (status $rc)"; tail -40 "$T/serve.log" | diag; fi
}

finish() {
    [ -n "$SERVE_PID" ] && { kill -TERM "$SERVE_PID"; wait "$SERVE_PID"; }
    rm -rf "$T"
    tap_end
    exit $?
}
SERVE_WRAP=${SERVE_WRAP:-}
