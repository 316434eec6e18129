#!/bin/sh
# zmem serve with qemu's clients: qemu-io (pattern writes and reads,
# write -z, discard, flush, FUA, async I/O, unaligned requests) and
# qemu-img (a qcow2 image on the export, checked; compare with a file).
. "$(dirname "$0")/interop.sh"
need qemu-io qemu-img
serve_start --size 256M || finish

# qemu-io prints "Pattern verification failed" (and keeps going) on a
# mismatch, so the output is searched as well as the status
qio_cmds() {
    fmt=$1; shift
    set -- qemu-io -f "$fmt" "$URI" "$@"
    "$@" > "$T/qio" 2>&1; st=$?
    if [ $st -eq 0 ] && ! grep -qiE "fail|error|mismatch|verification" "$T/qio"; then return 0; fi
    cat "$T/qio"; return 1
}

check "qemu-io pattern write and read" qio_cmds raw \
    -c 'write -P 0xab 0 1M' -c 'read -P 0xab 0 1M' \
    -c 'write -P 0x12 1M 4M' -c 'read -P 0x12 1M 4M'
check "qemu-io unaligned requests (read-modify-write)" qio_cmds raw \
    -c 'write -P 0x11 512 512' -c 'read -P 0xab 0 512' -c 'read -P 0x11 512 512' \
    -c 'read -P 0xab 1024 3072' -c 'write -P 0x55 4097 7' -c 'read -P 0x55 4097 7' \
    -c 'read -P 0xab 4096 1' -c 'read -P 0xab 4104 100' \
    -c 'write -P 0x66 8000 10000' -c 'read -P 0x66 8000 10000' -c 'read -P 0xab 18000 1000'
check "qemu-io write -z (zeroes)" qio_cmds raw \
    -c 'write -z 65536 131072' -c 'read -P 0 65536 131072' -c 'read -P 0xab 196608 4096' \
    -c 'write -z 300 1000' -c 'read -P 0 300 1000' -c 'read -P 0xab 0 300'
check "qemu-io discard" qio_cmds raw \
    -c 'write -P 0x77 8M 1M' -c 'discard 8M 1M' -c 'read -P 0 8M 1M'
check "qemu-io flush and FUA writes" qio_cmds raw \
    -c 'write -f -P 0x22 16M 64k' -c 'flush' -c 'read -P 0x22 16M 64k'
check "qemu-io async I/O" qio_cmds raw \
    -c 'aio_write -P 0x33 20M 64k' -c 'aio_write -P 0x44 21M 64k' \
    -c 'aio_write -P 0x45 22M 512' -c 'aio_flush' \
    -c 'aio_read -P 0x33 20M 64k' -c 'aio_read -P 0x44 21M 64k' -c 'aio_flush' \
    -c 'read -P 0x45 22M 512'
check "qemu-io writes past the end fail" sh -c \
    "qemu-io -f raw '$URI' -c 'write 256M 4096' -c 'read -P 0xab 0 4096' 2>&1 |
     tee '$T/past' | grep -q '^write failed' && grep -q '^read 4096/4096' '$T/past'"

# a qcow2 image on the export
check "qemu-img create qcow2 on the export" qemu-img create -f qcow2 "$URI" 128M
check "qemu-io through qcow2" qio_cmds qcow2 \
    -c 'write -P 0x5a 0 4M' -c 'write -P 0x5b 64M 1M' -c 'write -z 32M 2M' -c 'discard 1M 1M' \
    -c 'read -P 0x5a 0 1M' -c 'read -P 0 1M 1M' -c 'read -P 0x5b 64M 1M'
check "qemu-img check finds no errors" qemu-img check -f qcow2 "$URI"
check "qemu-img info sees the qcow2" sh -c "qemu-img info -f qcow2 '$URI' | grep -q 'virtual size: 128 MiB'"

serve_stop

# compare with a file, on an export of the file's size
"$ZMEM" gen --kind text --size 8M --seed 3 -o "$T/text.img" > /dev/null 2>&1
head -c 2M /dev/urandom >> "$T/text.img"
truncate -s 12M "$T/text.img"
serve_start --size 12M --codec zstd || finish
check "qemu-img convert a file onto the export" \
    qemu-img convert -n -f raw -O raw "$T/text.img" "$URI"
check "qemu-img compare file and export" qemu-img compare -f raw -F raw "$T/text.img" "$URI"
check "qemu-img compare sees a change" sh -c \
    "qemu-io -f raw '$URI' -c 'write -P 1 5M 512' > /dev/null &&
     ! qemu-img compare -q -f raw -F raw '$T/text.img' '$URI'"
serve_stop

# qemu walks block status extent by extent (REQ_ONE): on a sparse 2 GiB
# export with two written stretches, map must list exactly them, and
# promptly: a page-by-page walk took 20 s, the budget is a tenth of that
# (a regression guard, not a speed test)
serve_start --size 2G || finish
qemu-io -f raw "$URI" -c 'write -P 0x61 1M 64k' -c 'write -P 0x62 1G 4k' > /dev/null 2>&1
map_sparse() {
    t0=$(date +%s%N)
    qemu-img map -f raw --output=json "$URI" > "$T/map" || return 1
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "qemu-img map: $ms ms"; cat "$T/map"
    python3 - "$T/map" << 'PY' || return 1
import json, sys
m = json.load(open(sys.argv[1]))
data = [(e["start"], e["length"]) for e in m if e["data"]]
assert data == [(1 << 20, 65536), (1 << 30, 4096)], data
assert sum(e["length"] for e in m) == 2 << 30
PY
    [ "$ms" -lt 2000 ]
}
check "qemu-img map of a sparse 2 GiB export: two extents, in under 2 s" map_sparse
convert_sparse() {
    timeout 60 qemu-img convert -f raw -O raw "$URI" "$T/out.img" &&
    [ "$(du -k "$T/out.img" | cut -f1)" -lt 1024 ] &&
    qemu-io -f raw "$T/out.img" -c 'read -P 0x61 1M 64k' -c 'read -P 0x62 1G 4k' \
        -c 'read -P 0 0 1M' > "$T/qio" 2>&1 && ! grep -qi "fail" "$T/qio"
}
check "qemu-img convert out of it keeps the holes" convert_sparse
rm -f "$T/out.img"
serve_stop
finish
