#!/bin/sh
# zmem serve as a user runs it: detached (URI and pid printed), captive
# (--run), tied to its parent; driven at run time by zmem ctl (the
# cold-data verbs too, on a server with nothing to tier to), stop, list
# and stats, by socket path, by default socket and by TCP port; bad
# options refused with their own messages; a quick restart on the same
# paths keeping the new server's pidfile.
. "$(dirname "$0")/interop.sh"
need nbdinfo nbdcopy
# the default paths (socket, registry) inside this test's folder
export XDG_RUNTIME_DIR=$T/run
mkdir -p "$XDG_RUNTIME_DIR"
DEF=$XDG_RUNTIME_DIR/zmem.sock

# a port nobody listens on, for the TCP cases
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

detached() {
    "$ZMEM" serve --size 64M > "$T/serve.out" || return 1
    cat "$T/serve.out"
    head -1 "$T/serve.out" | grep -qx "nbd+unix:///?socket=$DEF" &&
    sed -n 2p "$T/serve.out" | grep -q "^pid [0-9]*, control $DEF.ctl$" &&
    pid=$(sed -n 2p "$T/serve.out" | sed 's/^pid \([0-9]*\),.*/\1/') && kill -0 "$pid" &&
    [ "$(nbdinfo --size "nbd+unix:///?socket=$DEF")" = 67108864 ]
}
check "detached: URI and pid on stdout, serving" detached

drive() {
    head -c 8M /dev/urandom > "$T/rnd" && nbdcopy "$T/rnd" "nbd+unix:///?socket=$DEF" &&
    "$ZMEM" ctl compact | grep -q '^ok: compacted' &&
    "$ZMEM" ctl mem-limit 4M | grep -qx 'ok: mem-limit 4194304' &&
    "$ZMEM" stats --json | grep -q '"mem_limit_bytes": 4194304' &&
    ! nbdcopy "$T/rnd" "nbd+unix:///?socket=$DEF" 2> /dev/null &&    # over the limit now
    "$ZMEM" ctl "$DEF" mem-limit none | grep -qx 'ok: mem-limit 0' &&
    nbdcopy "$T/rnd" "nbd+unix:///?socket=$DEF" &&
    "$ZMEM" ctl reset-max | grep -q '^ok' &&
    "$ZMEM" ctl info | grep -q '"orig_data_size": 8388608'
}
check "ctl: compact, mem-limit (refusing writes, then lifted), reset-max" drive

unknown_verb() {
    ! "$ZMEM" ctl frobnicate 2> "$T/err" && grep -q "unknown verb 'frobnicate'" "$T/err" &&
    grep -q "mem-limit" "$T/err" &&
    ! "$ZMEM" ctl mem-limit -5M 2> "$T/err" && grep -q "takes a size" "$T/err"
}
check "ctl: an unknown verb and a bad size refused, naming the choices" unknown_verb

# the cold-data verbs on a server with neither --backing nor --recompress
tier_verbs() {
    "$ZMEM" ctl idle all | grep -Eqx 'ok: [0-9]+ pages idle' &&
    "$ZMEM" ctl idle 60 | grep -Eqx 'ok: [0-9]+ pages idle' &&
    ! "$ZMEM" ctl writeback idle 2> "$T/err" && grep -q "no backing file" "$T/err" &&
    ! "$ZMEM" ctl writeback page 0 2> "$T/err" && grep -q "no backing file" "$T/err" &&
    ! "$ZMEM" ctl recompress 2> "$T/err" && grep -q "no secondary codec" "$T/err" &&
    ! "$ZMEM" ctl writeback 2> "$T/err" && grep -q "takes a type" "$T/err" &&
    ! "$ZMEM" ctl recompress incompressible 2> "$T/err" && grep -q "type idle" "$T/err" &&
    "$ZMEM" ctl frobnicate 2>&1 | grep -q "verbs: .*writeback" &&
    "$ZMEM" stats --json | grep -q '"bd_stat": {"bd_count": 0, "bd_reads": 0, "bd_writes": 0}' &&
    "$ZMEM" stats | grep -Eqx 'bd_stat: +0 +0 +0'
}
check "ctl: idle works, writeback and recompress say what is missing" tier_verbs

list_servers() {
    "$ZMEM" serve --size 1G --port "$PORT" --codec zstd > /dev/null &&
    "$ZMEM" list > "$T/list" && cat "$T/list" &&
    grep -Eq "^$DEF +[0-9]+ +lz4 +64M +[0-9.]+M " "$T/list" &&
    grep -Eq "^127.0.0.1:$PORT +[0-9]+ +zstd +1G " "$T/list" &&
    "$ZMEM" stats "127.0.0.1:$PORT" | grep -q '^export: 1.0 GiB, zstd'
}
check "list shows both servers; stats HOST:PORT finds the TCP one" list_servers

stop_both() {
    "$ZMEM" stop | grep -q '^ok' && "$ZMEM" stop "$PORT" | grep -q '^ok' &&
    [ ! -e "$DEF" ] && [ ! -e "$DEF.ctl" ] &&
    [ -z "$("$ZMEM" list)" ] &&
    ! "$ZMEM" stats 2> /dev/null
}
check "stop: both gone, sockets removed, list empty" stop_both

# a control socket that never answers (it listens, never accepts): each
# command gives up after its --timeout, saying so
mute_server() {
    python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); time.sleep(30)' \
        "$T/mute.sock.ctl" &
    mp=$!
    i=0; while [ ! -S "$T/mute.sock.ctl" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    ok=0
    for c in "stats" "ctl" "stop" "list"; do
        start=$(date +%s%N)
        verb=; [ "$c" = ctl ] && verb=compact
        if [ "$c" = list ]; then  # a registry entry naming the mute socket
            mkdir -p "$XDG_RUNTIME_DIR/zmem.d" &&
            printf 'nbd+unix:///?socket=%s\n%s\n' "$T/mute.sock" "$T/mute.sock.ctl" \
                > "$XDG_RUNTIME_DIR/zmem.d/$mp"
            timeout 5 "$ZMEM" list --timeout 300ms > /dev/null 2> "$T/err"; st=$?
            rm -f "$XDG_RUNTIME_DIR/zmem.d/$mp"
            [ $st -eq 0 ] && st=1  # list goes on past a server, and says so
        else
            # shellcheck disable=SC2086
            timeout 5 "$ZMEM" $c --timeout 300ms "$T/mute.sock" $verb > /dev/null 2> "$T/err"
            st=$?
        fi
        ms=$(( ($(date +%s%N) - start) / 1000000 ))
        echo "zmem $c: status $st after $ms ms: $(cat "$T/err")"
        [ $st -eq 1 ] && [ $ms -lt 2000 ] &&
            grep -q "no answer from $T/mute.sock.ctl within 0.3 s" "$T/err" || ok=1
    done
    kill $mp; wait $mp 2> /dev/null
    rm -f "$T/mute.sock.ctl"
    return $ok
}
check "stats, ctl, stop, list against a server that never answers: --timeout, a message" \
    mute_server

# a server killed outright whose parent has not reaped it (its pid still
# there, a zombie): zmem list skips it without a word
zombie() {
    sh -c '"$0" serve -f --size 16M --socket "$1" 2> /dev/null & echo $! > "$2"; exec sleep 10' \
        "$ZMEM" "$T/zb.sock" "$T/zb.pid" &
    holder=$!
    i=0; while [ ! -S "$T/zb.sock.ctl" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    "$ZMEM" list | grep -q "zb.sock" || return 1
    kill -KILL "$(cat "$T/zb.pid")"; sleep 0.3
    "$ZMEM" list > "$T/list" 2> "$T/err"; st=$?
    cat "$T/list" "$T/err"
    kill $holder; wait $holder 2> /dev/null
    rm -f "$T/zb.sock" "$T/zb.sock.ctl"
    [ $st -eq 0 ] && [ ! -s "$T/err" ] && ! grep -q "zb.sock" "$T/list"
}
check "list skips a killed server not yet reaped, without a word" zombie

# the memory limit: one range for --mem-limit and ctl mem-limit, 0 (none)
# or at least a page; below that no write could get in
mem_limit_range() {
    "$ZMEM" serve -f --size 16M --socket "$T/m.sock" 2> /dev/null &
    mp=$!
    i=0; while [ ! -S "$T/m.sock.ctl" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    ok=0
    for v in 1 100 4095; do
        ! "$ZMEM" ctl "$T/m.sock" mem-limit $v 2> "$T/err" &&
            grep -q "mem-limit $v: less than a page (4096 bytes)" "$T/err" || { cat "$T/err"; ok=1; }
        "$ZMEM" serve --size 16M --socket "$T/m2.sock" --mem-limit $v 2> "$T/err" &&
            { ok=1; "$ZMEM" stop "$T/m2.sock"; }
        grep -q "mem-limit $v: less than a page (4096 bytes)" "$T/err" || { cat "$T/err"; ok=1; }
    done
    "$ZMEM" ctl "$T/m.sock" mem-limit 4K | grep -qx "ok: mem-limit 4096" || ok=1
    "$ZMEM" stop "$T/m.sock" > /dev/null; wait $mp
    return $ok
}
check "mem-limit: one range for --mem-limit and ctl, at least a page" mem_limit_range

captive() {
    "$ZMEM" serve --size 32M --run 'nbdinfo --size "$uri" > "'"$T/size"'"; [ -S "$socket" ] && exit 7'
    st=$?
    [ $st -eq 7 ] && [ "$(cat "$T/size")" = 33554432 ] && [ ! -e "$DEF" ]
}
check "--run: serves the command, exits with its status" captive

with_parent() {
    sh -c "'$ZMEM' serve --size 32M --exit-with-parent --socket '$T/p.sock' & sleep 1" &&
    i=0; while [ -e "$T/p.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    [ ! -e "$T/p.sock" ]
}
check "--exit-with-parent: gone when the parent is" with_parent

print_uri() {
    "$ZMEM" serve -f --print-uri --size 32M --socket "$T/u.sock" > "$T/uri" 2> /dev/null &
    p=$!
    i=0; while [ ! -s "$T/uri" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    kill -TERM $p; wait $p
    [ "$(cat "$T/uri")" = "nbd+unix:///?socket=$T/u.sock" ]
}
check "--print-uri in the foreground" print_uri

# bad options: each says what is wrong with which option; exit status 2
refused() {  # expected-message, args...
    msg=$1; shift
    "$ZMEM" serve "$@" > /dev/null 2> "$T/err"; st=$?
    [ $st -eq 2 ] || [ $st -eq 1 ] || return 1
    grep -q -- "$msg" "$T/err" || { cat "$T/err"; return 1; }
}
touch "$T/regular"
check "--size -1 refused" refused "invalid --size '-1'" --size -1
check "--size beyond the largest disk refused" refused "larger than the largest disk" --size 3T
check "a bad --codec lists the codecs" refused "choices: lz4, zstd" --size 1G --codec brotli
check "a bad --allocator lists the backends" refused "choices: zsmalloc" --size 1G --allocator slab
check "a --socket that is a regular file refused" refused "not a socket" --size 1G --socket "$T/regular"
check "a --control that is a regular file refused" refused "not a socket" --size 1G \
    --socket "$T/c.sock" --control "$T/regular"
check "a --pidfile in a missing folder refused" refused "No such file or directory" \
    --size 1G --socket "$T/d.sock" --pidfile "$T/nowhere/pid"
# cold data: durations, sizes, the backing file, and options that need another
check "--idle-after 5x refused" refused "invalid --idle-after '5x'" \
    --size 1G --recompress zstd --idle-after 5x
check "--idle-after 0 refused" refused "invalid --idle-after '0'" \
    --size 1G --recompress zstd --idle-after 0
check "--idle-after with nothing to do refused" refused "--idle-after needs --recompress" \
    --size 1G --idle-after 10m
check "--writeback-limit junk refused" refused "invalid --writeback-limit 'junk'" \
    --size 1G --backing "$T/z.img" --writeback-limit junk
check "--clean-rate junk refused" refused "invalid --clean-rate 'junk'" \
    --size 1G --backing "$T/z.img" --clean-rate junk
check "--writeback-limit below a page refused" refused "less than a page" \
    --size 1G --backing "$T/z.img" --writeback-limit 100
check "--writeback-limit without --backing refused" refused "needs --backing" \
    --size 1G --writeback-limit 64M
check "--readback without --backing refused" refused "needs --backing" --size 1G --readback
check "--backing in a missing folder refused" refused "--backing $T/nowhere/z.img: cannot open" \
    --size 1G --backing "$T/nowhere/z.img"
check "--backing a folder refused" refused "--backing $T: cannot open" --size 1G --backing "$T"
mkfifo "$T/fifo"
check "--backing a FIFO refused, naming why" refused \
    "--backing $T/fifo: not a regular file or block device (a FIFO)" --size 1G --backing "$T/fifo"
check "--backing /dev/null refused, naming why" refused \
    "--backing /dev/null: not a regular file or block device (a character device)" \
    --size 1G --backing /dev/null
check "... and no backing file left behind by the refusals" test ! -e "$T/z.img"
check "a bad --recompress lists the codecs" refused "--recompress brotli: unknown codec" \
    --size 1G --recompress brotli

# a quick restart on the same paths: the old server stops while holding
# data; the new one starts at once and keeps its pidfile and sockets
restart() {
    "$ZMEM" serve --size 256M --socket "$T/r.sock" --pidfile "$T/r.pid" > /dev/null &&
    old=$(cat "$T/r.pid") &&
    head -c 200M /dev/urandom > "$T/big" && nbdcopy "$T/big" "nbd+unix:///?socket=$T/r.sock" &&
    kill -TERM "$old" &&
    i=0; while [ -e "$T/r.sock" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i + 1)); done
    "$ZMEM" serve --size 64M --socket "$T/r.sock" --pidfile "$T/r.pid" > /dev/null || return 1
    i=0; while kill -0 "$old" 2> /dev/null && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
    new=$(cat "$T/r.pid")
    echo "old $old, new $new"
    [ "$new" != "$old" ] && kill -0 "$new" && [ -S "$T/r.sock" ] && [ -S "$T/r.sock.ctl" ] &&
    [ "$(nbdinfo --size "nbd+unix:///?socket=$T/r.sock")" = 67108864 ] &&
    "$ZMEM" stop "$T/r.sock" > /dev/null && [ ! -e "$T/r.pid" ]
}
check "restart on the same paths keeps the new pidfile and sockets" restart
rm -f "$T/big" "$T/rnd"
finish
