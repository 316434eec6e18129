#!/bin/sh
# zmem serve with a backing file and a secondary codec: a disk holding 4x
# its memory limit written with nbdcopy and read back byte for byte, the
# overflow on the file (bd_stat); then zram's verbs by hand (idle,
# recompress, writeback, writeback page) and the data still intact; then
# the same on its own (--idle-after) and read back (--readback).  Last
# the file's own end: with --writeback-limit (and, as root, a tiny tmpfs)
# writes beyond memory + file get ENOSPC and every write acknowledged
# before reads back.
. "$(dirname "$0")/interop.sh"
need nbdcopy qemu-io python3

MiB=1048576

# 64 MiB of data that compresses but not to nothing: English-like text at
# two ratios, program binaries, a run of zeros
"$ZMEM" gen --kind text --size 24M --seed 1 -o "$T/a" > /dev/null 2>&1
"$ZMEM" gen --kind text --ratio 0.4 --size 24M --seed 2 -o "$T/b" > /dev/null 2>&1
cat /usr/bin/* 2> /dev/null | head -c 12M > "$T/c"
head -c 4M /dev/zero > "$T/d"
cat "$T/a" "$T/c" "$T/d" "$T/b" > "$T/corpus"
rm -f "$T/a" "$T/b" "$T/c" "$T/d"
SIZE=$(stat -c %s "$T/corpus")

# same_bytes N FILE: the disk's first N bytes are FILE's first N
same_bytes() {
    nbdcopy "$URI" - 2> /dev/null | head -c "$1" | cmp -n "$1" - "$2"
}

# json EXPR: a Python expression on the stats document d must hold
json() {
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json" &&
    python3 - "$T/stats.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b, t, m, s = d["bd_stat"], d["tiering"], d["mm_stat"], d["store"]
ok = eval(sys.argv[2])
if not ok:
    print("false:", sys.argv[2]); print(json.dumps({k: d[k] for k in
          ("mm_stat", "bd_stat", "tiering", "store")}, indent=1))
sys.exit(0 if ok else 1)
PY
}

# ctl_ok VERB...: the verb answers "ok: N ..." with N > 0; N in $T/n
ctl_ok() {
    "$ZMEM" ctl "$SOCK" "$@" > "$T/ctl" || { cat "$T/ctl"; return 1; }
    cat "$T/ctl"
    sed -n 's/^ok: \([0-9]*\) .*/\1/p' "$T/ctl" > "$T/n"
    [ "$(cat "$T/n")" -gt 0 ]
}

# the file's cleaner runs when asked here (its automatic one, on by
# default, is tested below)
serve_start --size 256M --mem-limit 16M --backing "$T/z.img" --recompress zstd \
    --clean-rate 0 || finish
check "nbdcopy 64 MiB into a 16 MiB memory limit" nbdcopy "$T/corpus" "$URI"
check "read back byte-identical" same_bytes "$SIZE" "$T/corpus"
check "stats: pages on the file, no failed write, memory within its limit" json \
    "b['bd_count'] > 0 and b['bd_writes'] >= b['bd_count'] and s['failed_writes'] == 0 \
     and t['writeback_failures'] == 0 and m['mem_used_total'] <= 16 << 20 \
     and t['backing'].endswith('z.img') and t['recompress_codec'] == 'zstd'"
check "stats text: a bd_stat line of three numbers" sh -c "
    '$ZMEM' stats '$SOCK' | grep -Eq '^bd_stat: +[1-9][0-9]* +[0-9]+ +[1-9][0-9]*$'"

check "ctl idle all: pages idle" ctl_ok idle all
idle=$(cat "$T/n")
check "stats: idle_pages is what idle answered" json "t['idle_pages'] == $idle"
check "ctl recompress idle: pages recompressed" ctl_ok recompress idle
check "stats: recompressed_pages and secondary_pages counted, bytes saved" json \
    "t['recompressed_pages'] > 0 and t['secondary_pages'] > 0 and t['recompress_saved_bytes'] > 0"
before=$(python3 -c "import json; print(json.load(open('$T/stats.json'))['bd_stat']['bd_count'])")
check "ctl writeback idle 64: at most 64 pages written back" sh -c "
    '$ZMEM' ctl '$SOCK' writeback idle 64 | grep -Eq '^ok: ([1-9]|[1-5][0-9]|6[0-4]) pages written back$'"
check "ctl writeback idle: the rest written back" ctl_ok writeback idle
check "stats: bd_count grew by what the verbs wrote" json "b['bd_count'] > $before"
check "ctl writeback idle again: nothing left idle" sh -c "
    '$ZMEM' ctl '$SOCK' writeback idle | grep -qx 'ok: 0 pages written back'"
check "read back byte-identical after recompress and writeback" same_bytes "$SIZE" "$T/corpus"

# one page by index: a page written past the corpus, then on the file
one_page() {
    off=$((200 * MiB)); idx=$((off / 4096))
    qemu-io -f raw "$URI" -c "write -s $T/corpus $off 4096" > /dev/null &&
    "$ZMEM" ctl "$SOCK" writeback page $idx | grep -qx "ok: page $idx written back" &&
    ! "$ZMEM" ctl "$SOCK" writeback page $idx 2> "$T/err" && grep -q "not in memory" "$T/err" &&
    ! "$ZMEM" ctl "$SOCK" writeback page 65536 2> "$T/err" && grep -q "0..65535" "$T/err" &&
    nbdcopy "$URI" - 2> /dev/null | head -c $((off + 4096)) | tail -c 4096 > "$T/page" &&
    head -c 4096 "$T/corpus" | cmp - "$T/page"
}
check "ctl writeback page INDEX: that page, once; read back" one_page
check "ctl: a bad type, count or index is refused by name" sh -c "
    ! '$ZMEM' ctl '$SOCK' writeback sideways 2> '$T/err' && grep -q 'type idle, huge' '$T/err' &&
    ! '$ZMEM' ctl '$SOCK' recompress idle 0 2> '$T/err' && grep -q 'MAX_PAGES' '$T/err' &&
    ! '$ZMEM' ctl '$SOCK' idle soon 2> '$T/err' && grep -q 'SECONDS' '$T/err'"
check "stats: still no failed write or writeback" json \
    "s['failed_writes'] == 0 and t['writeback_failures'] == 0 and s['failed_reads'] == 0"
# a second server on the same file would empty it under this one
second() {
    ! "$ZMEM" serve --size 64M --socket "$T/2.sock" --backing "$T/z.img" 2> "$T/err" &&
    grep -q "in use by another server" "$T/err" && [ ! -e "$T/2.sock" ]
}
check "a second server on the same backing file is refused" second
check "... and the first one's data is intact" same_bytes "$SIZE" "$T/corpus"
# the packed file's cleaner: two pages in three discarded leave its blocks
# mostly dead; compact-file brings them to at most 1.2x the live bytes
churn_file() {
    python3 - "$T/corpus" "$T/expect" "$T/trims" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
with open(sys.argv[3], "w") as f:
    for off in range(0, len(data) - 4096, 4096):
        if (off // 4096) % 3:
            f.write("discard %d 4096\n" % off)
            data[off:off + 4096] = bytes(4096)
open(sys.argv[2], "wb").write(data)
PY
    qemu-io -f raw "$URI" < "$T/trims" > /dev/null &&
    json "t['file_alloc_bytes'] > 2 * t['file_live_bytes'] > 0"
}
check "trims leave the file's blocks mostly dead" churn_file
check "ctl compact-file: bytes freed" sh -c "
    '$ZMEM' ctl '$SOCK' compact-file | grep -Eq '^ok: file compacted, [1-9][0-9]* bytes freed$'"
check "stats: the file's blocks at most 1.2x its live bytes" json \
    "0 < t['file_alloc_bytes'] <= 1.2 * t['file_live_bytes']"
check "read back byte-identical after the cleaner" same_bytes "$SIZE" "$T/expect"
check "ctl compact-file: a bad bound refused" sh -c "
    ! '$ZMEM' ctl '$SOCK' compact-file lots 2> '$T/err' && grep -q 'number of bytes' '$T/err'"
serve_stop

# the automatic cleaner, on by default: the same trims, and the file
# comes down to 1.2x its live bytes by itself
serve_start --size 256M --mem-limit 16M --backing "$T/a.img" || finish
check "--clean-rate by default: nbdcopy in" nbdcopy "$T/corpus" "$URI"
auto_clean() {
    qemu-io -f raw "$URI" < "$T/trims" > /dev/null || return 1
    i=0
    while [ $i -lt 150 ]; do
        json "0 < t['file_alloc_bytes'] <= 1.2 * t['file_live_bytes']" > /dev/null && return 0
        sleep 0.2
        i=$((i + 1))
    done
    json "0 < t['file_alloc_bytes'] <= 1.2 * t['file_live_bytes']"
}
check "--clean-rate by default: the file at most 1.2x its live bytes, unasked" auto_clean
check "--clean-rate by default: read back byte-identical" same_bytes "$SIZE" "$T/expect"
serve_stop

# automatic tiering: idle pages recompressed by the server itself; reads
# of pages on the file bring them back while the memory limit allows
serve_start --size 256M --mem-limit 16M --backing "$T/w.img" --recompress zstd \
    --idle-after 300ms --readback || finish
check "--idle-after: nbdcopy in" nbdcopy "$T/corpus" "$URI"
recompressed() {
    i=0
    while [ $i -lt 100 ]; do
        json "t['recompressed_pages'] > 1000" > /dev/null && return 0
        sleep 0.1; i=$((i + 1))
    done
    json "t['recompressed_pages'] > 1000"
}
check "--idle-after: idle pages recompressed within 10 s, unasked" recompressed
check "--readback: read back byte-identical" same_bytes "$SIZE" "$T/corpus"
check "--readback: pages read from the file, some of them back in memory" json \
    "b['bd_reads'] > 0 and b['bd_count'] < b['bd_writes'] and s['failed_reads'] == 0 \
     and m['mem_used_total'] <= 16 << 20 and t['idle_after_ms'] == 300"
serve_stop

# fill: write the corpus in 2 MiB chunks at their offsets until a
# write fails; $T/acked gets the bytes acknowledged, $T/fill.err the error
fill() {
    n=0
    while [ $n -lt 32 ]; do
        off=$((n * 2 * MiB))
        dd if="$T/corpus" of="$T/chunk" bs=2M skip=$n count=1 2> /dev/null
        qemu-io -f raw "$URI" -c "write -s $T/chunk $off 2M" > "$T/fill.err" 2>&1 || break
        grep -qiE "fail|error" "$T/fill.err" && break
        n=$((n + 1))
    done
    echo $((n * 2 * MiB)) > "$T/acked"
    cat "$T/fill.err"
}

# a full file: ENOSPC, and what was acknowledged is all there
full_file() {
    fill
    acked=$(cat "$T/acked")
    echo "acknowledged $((acked / MiB)) MiB"
    [ "$acked" -gt $((8 * MiB)) ] && [ "$acked" -lt $((64 * MiB)) ] &&
    grep -q "No space left on device" "$T/fill.err" &&
    same_bytes "$acked" "$T/corpus"
}

serve_start --size 256M --mem-limit 8M --backing "$T/y.img" --writeback-limit 8M || finish
check "--writeback-limit: ENOSPC past memory + file, earlier writes intact" full_file
check "stats: the limit spent, the failed writes counted" json \
    "t['writeback_left'] == 0 and b['bd_count'] <= 2048 and s['failed_writes'] > 0"
check "ctl writeback with the limit spent is refused" sh -c "
    ! '$ZMEM' ctl '$SOCK' writeback all 2> '$T/err' && cat '$T/err' &&
    grep -q 'writeback limit is spent' '$T/err'"
check "... and nothing was lost meanwhile" same_bytes "$(cat "$T/acked")" "$T/corpus"
serve_stop

# a tiny filesystem, as root where mounting works (CI runs as root)
if [ "$(id -u)" = 0 ] && mkdir -p "$T/mnt" && mount -t tmpfs -o size=4M tmpfs "$T/mnt" 2> /dev/null
then
    serve_start --size 256M --mem-limit 8M --backing "$T/mnt/z.img" || { umount "$T/mnt"; finish; }
    check "a 4 MiB tmpfs: ENOSPC past memory + file, earlier writes intact" full_file
    check "stats: the full file's writes counted as writeback failures" json \
        "t['writeback_failures'] > 0 and b['bd_count'] > 0"
    serve_stop
    umount "$T/mnt"
else
    echo "(skipped the tmpfs case: needs root and mount)"
fi
finish
