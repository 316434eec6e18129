#!/bin/sh
# Who may drive a server: both sockets owner-only whatever the umask
# (--socket-mode opens the data socket to a group), the control socket
# refuses a peer of another user (not root) even when its file lets it
# connect, and the default paths without XDG_RUNTIME_DIR are in a
# private folder, so a file another user plants at the old names
# (/tmp/zmem-UID.sock.ctl) does not stop the server, and a folder of
# theirs at the new name is refused by name.  The other user is `nobody`
# (the tests run as root); without root the cases that need it are skipped.
. "$(dirname "$0")/interop.sh"
need python3 stat

mode() { stat -c %a "$1"; }
skip() { ok "$1 # SKIP"; }

# serve_modes SOCK [OPTION...]: a server on SOCK under umask 000; sets m
# and mc to its data and control sockets' modes
serve_modes() {
    sock=$1; shift
    (umask 000; exec "$ZMEM" serve -f --size 16M --socket "$sock" "$@" 2> "$sock.log") &
    pid=$!
    i=0; while [ ! -S "$sock.ctl" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    m=$(mode "$sock"); mc=$(mode "$sock.ctl")
    kill -TERM $pid; wait $pid
    echo "modes $m $mc"
}
umask_000() {
    serve_modes "$T/a.sock" && [ "$m" = 600 ] && [ "$mc" = 600 ]
}
check "umask 000: both sockets 0600" umask_000

group_mode() {
    serve_modes "$T/g.sock" --socket-mode 0660 && [ "$m" = 660 ] && [ "$mc" = 600 ]
}
check "--socket-mode 0660: the data socket 0660, the control socket 0600" group_mode

bad_mode() {
    for m in 0777 0700 0400 abc 6; do
        ! "$ZMEM" serve -f --size 16M --socket "$T/b.sock" --socket-mode $m 2> "$T/err" &&
        grep -q -- "--socket-mode" "$T/err" || { echo "mode $m"; cat "$T/err"; return 1; }
    done
}
check "--socket-mode refuses execute bits, no owner access, junk" bad_mode

if [ "$(id -u)" != 0 ] || ! command -v setpriv > /dev/null 2>&1; then
    skip "another user's control connection refused (needs root and setpriv)"
    skip "a file planted at the old default path does not stop the server"
    finish
fi
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
chmod 755 "$T"

serve_start --size 16M || finish
other_user() {
    chmod 666 "$SOCK.ctl"   # the file lets anyone connect: the server must say no
    ! as_nobody "$ZMEM" ctl "$SOCK" info > "$T/out" 2> "$T/err" &&
    cat "$T/err" && grep -q "refused" "$T/err" && ! grep -q '"pid"' "$T/out" &&
    ! as_nobody "$ZMEM" ctl "$SOCK" stop 2> "$T/err" &&
    sleep 0.3 && kill -0 "$SERVE_PID" &&
    "$ZMEM" ctl "$SOCK" info | grep -q '"pid"'
}
check "another user's control connection refused, the server runs on" other_user
serve_stop

# nobody's default paths: /tmp/zmem-65534/ now, /tmp/zmem-65534.sock and
# .ctl before; root plays the other user
NUID=$(id -u nobody)
PRIV=/tmp/zmem-$NUID
OLD=/tmp/zmem-$NUID.sock.ctl
if [ -e "$PRIV" ] || [ -e "$OLD" ]; then
    skip "$PRIV or $OLD exists already: not touched"
    finish
fi
squat() {
    touch "$OLD" && mkdir -m 0777 "$PRIV" &&
    ! as_nobody env -u XDG_RUNTIME_DIR "$ZMEM" serve -f --size 16M 2> "$T/err" &&
    cat "$T/err" && grep -q "$PRIV" "$T/err" &&
    rmdir "$PRIV" &&
    (cd / && exec setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env -u XDG_RUNTIME_DIR "$ZMEM" serve -f --size 16M 2> "$T/n.log") &
    pid=$!
    i=0; while [ ! -S "$PRIV/zmem.sock.ctl" ] && [ $i -lt 100 ]; do
        kill -0 $pid 2> /dev/null || break; sleep 0.1; i=$((i + 1)); done
    ok=0
    [ "$(stat -c '%a %U' "$PRIV")" = "700 nobody" ] &&
        [ -S "$PRIV/zmem.sock" ] && [ -f "$OLD" ] &&
        as_nobody env -u XDG_RUNTIME_DIR "$ZMEM" ctl info | grep -q '"pid"' &&
        as_nobody env -u XDG_RUNTIME_DIR "$ZMEM" list | grep -q "$PRIV/zmem.sock" || ok=1
    kill -TERM $pid 2> /dev/null; wait $pid; cat "$T/n.log"
    return $ok
}
check "a planted file at the old default path does not stop the server" squat
rm -rf "$PRIV" "$OLD"
# a registry in a /tmp/zmem-UID of another user's is not read: entries
# there could name that user's servers as this one's
planted() {
    mkdir -m 0755 "$PRIV" && mkdir -m 0700 "$PRIV/zmem.d" && chown nobody "$PRIV/zmem.d" ||
        return 1
    as_nobody env -u XDG_RUNTIME_DIR "$ZMEM" list > "$T/out" 2> "$T/err"
    st=$?
    cat "$T/err"
    rm -rf "$PRIV"
    [ $st -eq 0 ] && grep -q "$PRIV is not a folder of this user's own" "$T/err"
}
check "zmem list reads no registry in another user's folder" planted
finish
