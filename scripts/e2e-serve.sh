#!/bin/sh
# e2e-serve.sh: zmem serve with a memory limit and cold pages elsewhere,
# filled through nbdcopy, measured, read back and compared.
#
#   scripts/e2e-serve.sh [--size 4G] [--mem-limit 1G] [--reps 2]
#                        [--modes "file nbd"] [--settle 10] [--json FILE]
#
# For each repetition and mode it starts
#   file: zmem serve --size SIZE --mem-limit LIMIT --backing WORK/z.img
#   nbd:  zmem serve --size 2*SIZE (the back server, no limit), and
#         zmem serve --size SIZE --mem-limit LIMIT
#                    --backing 'nbd+unix:///?socket=BACK'
# copies SIZE bytes of mixed data into it with nbdcopy, and measures after
# the copy and again after --settle seconds: the server's resident memory
# (VmRSS), the pool (zmem stats --json), the backing file's bytes in the
# page cache (fincore), the file's allocated bytes (st_blocks * 512)
# against the live bytes on it, the pages on it, the back server's
# resident memory, and the machine's memory in use (MemTotal -
# MemAvailable) less what it was before the servers started (other
# programs on the machine move that one too).  Then it reads the whole
# disk back with nbdcopy and compares its SHA-256 with the input's.
#
# The input (WORK/input.img, made once and kept with --keep) is, in every
# 256 MiB: 128 MiB of a program's memory (zmem gen --kind memory), 64 MiB
# of text at lz4 ratio 0.5, 32 MiB of random bytes and 32 MiB of system
# files (a tar of /usr/lib): with lz4 it compresses to about half, so
# about SIZE/2 - LIMIT goes to the backing store.  Its page cache is
# dropped after each copy (dd iflag=nocache), so that it does not count.
#
# Environment: ZMEM (default build/zmem beside this script), WORK (default
# a new folder in ${TMPDIR:-/var/tmp}), EXTRA_SERVE (more options for the
# limited server, e.g. "--clean-rate 8M").  Runs in a private
# XDG_RUNTIME_DIR; needs nbdcopy, fincore (util-linux), jq.  Prints a
# table on stdout, and the JSON to --json FILE (default WORK/e2e.json).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
ZMEM=${ZMEM:-$here/build/zmem}
SIZE=4G
LIMIT=1G
REPS=2
MODES="file nbd"
SETTLE=10
JSON=""
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
    --size) SIZE=$2; shift 2 ;;
    --mem-limit) LIMIT=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --settle) SETTLE=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "e2e-serve.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
for c in nbdcopy fincore jq sha256sum; do
    command -v $c > /dev/null || { echo "e2e-serve.sh: needs $c" >&2; exit 2; }
done
[ -x "$ZMEM" ] || { echo "e2e-serve.sh: no $ZMEM (make -j2 WERROR=1)" >&2; exit 2; }

bytes() {   # 4G -> 4294967296
    echo "$1" | awk '{ n = $1 + 0; u = toupper(substr($1, length($1))); m = 1
        if (u == "K") m = 1024; if (u == "M") m = 1048576
        if (u == "G") m = 1073741824; if (u == "T") m = 1099511627776
        printf "%.0f\n", n * m }'
}
SIZE_B=$(bytes "$SIZE")
LIMIT_B=$(bytes "$LIMIT")
MIB=1048576
BACK_SIZE=$((SIZE_B * 2))
[ "$SIZE_B" -gt 0 ] && [ $((SIZE_B % (256 * MIB))) = 0 ] && [ "$LIMIT_B" -gt 0 ] ||
    { echo "e2e-serve.sh: --size must be a multiple of 256M, --mem-limit more than 0" >&2; exit 2; }
export TMPDIR=${TMPDIR:-/var/tmp}
WORK=${WORK:-$(mktemp -d "$TMPDIR/zmem-e2e.XXXXXX")}
mkdir -p "$WORK"
XDG_RUNTIME_DIR=$(mktemp -d "$TMPDIR/zmem-e2e-run.XXXXXX")
export XDG_RUNTIME_DIR
RT=$XDG_RUNTIME_DIR
JSON=${JSON:-$WORK/e2e.json}
FRONT=$RT/front.sock
BACK=$RT/back.sock
IMG=$WORK/z.img


cleanup() {
    for s in "$FRONT" "$BACK"; do
        [ -S "$s.ctl" ] && "$ZMEM" stop --timeout 30 "$s" > /dev/null 2>&1 || true
    done
    rm -rf "$RT"
    rm -f "$IMG"
    [ $KEEP = 1 ] || rm -f "$WORK/input.img"
}
trap cleanup EXIT INT TERM

log() { echo "# $*" >&2; }

make_input() {
    in=$WORK/input.img
    if [ -f "$in" ] && [ "$(stat -c %s "$in")" = "$SIZE_B" ]; then return 0; fi
    log "making $SIZE of input in $in"
    blocks=$((SIZE_B / (256 * MIB)))
    tar cf - /usr/lib 2> /dev/null | head -c $((blocks * 32 * MIB)) > "$WORK/sys.bin" || true
    : > "$in"
    i=0
    while [ $i -lt $blocks ]; do
        "$ZMEM" gen -q -k memory -s 128M -S $((i + 1)) -o - >> "$in"
        "$ZMEM" gen -q -k text -r 0.5 -s 64M -S $((i + 1)) -o - >> "$in"
        "$ZMEM" gen -q -k random -s 32M -S $((i + 1)) -o - >> "$in"
        dd if="$WORK/sys.bin" bs=1M skip=$((i * 32)) count=32 status=none >> "$in"
        i=$((i + 1))
    done
    rm -f "$WORK/sys.bin"
    truncate -s "$SIZE_B" "$in"   # a short tar: zeros at the end
}

drop_cache() { dd if="$1" iflag=nocache count=0 status=none 2> /dev/null || true; }

mem_used() { awk '/^MemTotal:/ { t = $2 } /^MemAvailable:/ { a = $2 } END { printf "%.0f\n", (t - a) * 1024 }' /proc/meminfo; }
rss() { awk '/^VmRSS:/ { printf "%.0f\n", $2 * 1024 }' "/proc/$1/status" 2> /dev/null || echo 0; }

# serve NAME SOCK ARGS...: start a server detached, print its pid
serve() {
    name=$1; sock=$2; shift 2
    "$ZMEM" serve --socket "$sock" --pidfile "$RT/$name.pid" "$@" > "$RT/$name.out" 2> "$RT/$name.log" ||
        { cat "$RT/$name.log" >&2; exit 1; }
    cat "$RT/$name.pid"
}

# sample MODE REP PHASE: one JSON object on stdout
sample() {
    st=$("$ZMEM" stats --json --timeout 30 "$FRONT")
    fpid=$(cat "$RT/front.pid")
    if [ "$1" = file ]; then
        alloc=$(($(stat -c '%b * %B' "$IMG")))
        cache=$(fincore --bytes --noheadings -o RES "$IMG" | awk '{ print $1 + 0 }')
        brss=0; bpool=0
    else
        alloc=0; cache=0
        brss=$(rss "$(cat "$RT/back.pid")")
        bpool=$("$ZMEM" stats --json --timeout 30 "$BACK" | jq .mm_stat.mem_used_total)
    fi
    echo "$st" | jq -c --arg mode "$1" --argjson rep "$2" --arg phase "$3" \
        --argjson rss "$(rss "$fpid")" --argjson alloc "$alloc" --argjson cache "$cache" \
        --argjson brss "$brss" --argjson bpool "$bpool" \
        --argjson used "$(($(mem_used) - USED0))" '{
        mode: $mode, rep: $rep, phase: $phase,
        rss: $rss, pool: .mm_stat.mem_used_total, mem_limit: .mm_stat.mem_limit_bytes,
        orig: .mm_stat.orig_data_size, compr: .mm_stat.compr_data_size,
        file_cache: $cache, file_blocks: $alloc,
        file_alloc: .tiering.file_alloc_bytes, file_live: .tiering.file_live_bytes,
        bd_count: .bd_stat.bd_count, bd_bytes: .tiering.bd_bytes,
        backing_cache: .tiering.backing_cache,
        writeback_failures: .tiering.writeback_failures,
        back_rss: $brss, back_pool: $bpool, machine_used_delta: $used }'
}

run_one() {   # MODE REP
    mode=$1; rep=$2
    rm -f "$IMG"
    sync; sleep 1
    USED0=$(mem_used)
    if [ "$mode" = file ]; then
        backing=$IMG
    else
        serve back "$BACK" --size "$BACK_SIZE" > /dev/null
        backing="nbd+unix:///?socket=$BACK"
    fi
    # shellcheck disable=SC2086
    serve front "$FRONT" --size "$SIZE_B" --mem-limit "$LIMIT_B" --backing "$backing" \
        ${EXTRA_SERVE:-} > /dev/null
    uri="nbd+unix:///?socket=$FRONT"
    t0=$(date +%s.%N)
    nbdcopy "$WORK/input.img" "$uri"
    t1=$(date +%s.%N)
    drop_cache "$WORK/input.img"
    sample "$mode" "$rep" fill >> "$WORK/samples.jsonl"
    sleep "$SETTLE"
    sample "$mode" "$rep" settle >> "$WORK/samples.jsonl"
    t2=$(date +%s.%N)
    got=$(nbdcopy "$uri" - | sha256sum | cut -d' ' -f1)
    t3=$(date +%s.%N)
    sample "$mode" "$rep" readback >> "$WORK/samples.jsonl"
    equal=false; [ "$got" = "$WANT" ] && equal=true
    jq -nc --arg mode "$mode" --argjson rep "$rep" --argjson equal $equal \
        --argjson fill_s "$(echo "$t1 - $t0" | bc)" --argjson read_s "$(echo "$t3 - $t2" | bc)" \
        '{mode: $mode, rep: $rep, equal: $equal, fill_s: $fill_s, read_s: $read_s}' \
        >> "$WORK/runs.jsonl"
    "$ZMEM" stop --timeout 30 "$FRONT" > /dev/null
    [ "$mode" = nbd ] && "$ZMEM" stop --timeout 30 "$BACK" > /dev/null
    rm -f "$IMG"
    log "$mode rep $rep: read back equal: $equal"
}

make_input
log "hashing the input"
WANT=$(sha256sum < "$WORK/input.img" | cut -d' ' -f1)
drop_cache "$WORK/input.img"
: > "$WORK/samples.jsonl"; : > "$WORK/runs.jsonl"
r=1
while [ "$r" -le "$REPS" ]; do
    for m in $MODES; do run_one "$m" "$r"; done
    r=$((r + 1))
done

jq -n --slurpfile s "$WORK/samples.jsonl" --slurpfile r "$WORK/runs.jsonl" \
    --arg zmem "$("$ZMEM" --version 2> /dev/null | head -1)" --arg size "$SIZE" \
    --arg limit "$LIMIT" --arg extra "${EXTRA_SERVE:-}" --arg sha "$WANT" \
    '{command: "e2e-serve", zmem: $zmem, size: $size, mem_limit: $limit,
      extra_serve: $extra, input_sha256: $sha, runs: $r, samples: $s}' > "$JSON"

m() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }
printf '%-4s %3s %-8s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %5s\n' \
    mode rep phase rss pool fcache rss+fc file live "f/live" bd_cnt back "machine" equal
printf '%-4s %3s %-8s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %5s\n' \
    "" "" "" MiB MiB MiB MiB MiB MiB "" pages "rss MiB" "+MiB" ""
jq -r --slurpfile r "$WORK/runs.jsonl" '. as $x |
    ($r | map(select(.mode == $x.mode and .rep == $x.rep)) | .[0].equal) as $eq |
    [.mode, .rep, .phase, .rss, .pool, .file_cache, .rss + .file_cache,
     (if .mode == "file" then .file_blocks else .file_alloc end), .file_live,
     (if .file_live > 0 then ((if .mode == "file" then .file_blocks else .file_alloc end)
                              / .file_live * 100 | floor) / 100 else 0 end),
     .bd_count, .back_rss, .machine_used_delta, $eq] | @tsv' "$WORK/samples.jsonl" |
while IFS="$(printf '\t')" read -r mo re ph rs po fc rf fa fl ra bd br mu eq; do
    printf '%-4s %3s %-8s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s %5s\n' \
        "$mo" "$re" "$ph" "$(m "$rs")" "$(m "$po")" "$(m "$fc")" "$(m "$rf")" "$(m "$fa")" \
        "$(m "$fl")" "$(printf %.2f "$ra")" "$bd" "$(m "$br")" "$(m "$mu")" "$eq"
done
jq -r '"# \(.mode) rep \(.rep): fill \(.fill_s) s, read back \(.read_s) s, equal \(.equal)"' \
    "$WORK/runs.jsonl"
echo "# JSON: $JSON"
jq -e -s "all(.[]; .equal)" "$WORK/runs.jsonl" > /dev/null
