#!/bin/sh
# zmem serve with multi-page units: qemu-io writes across units' edges,
# single pages inside units and whole units read back with their
# patterns; nbdcopy in and out byte for byte; pages rewritten inside
# units with their neighbours intact; zmem stats --json showing the
# units; and --page-size alone keeping pages alone.
. "$(dirname "$0")/interop.sh"
need nbdcopy qemu-io python3

# the corpus: text, a zero stretch, random bytes, the system's binaries
"$ZMEM" gen --kind text --size 6M --seed 3 -o "$T/a" > /dev/null 2>&1
head -c 1M /dev/zero > "$T/z"
head -c 1M /dev/urandom > "$T/r"
cat /usr/bin/* 2> /dev/null | head -c 4M > "$T/b"
cat "$T/a" "$T/z" "$T/r" "$T/b" > "$T/corpus"
SIZE=$(stat -c %s "$T/corpus")

# io: qemu-io writes with patterns: unaligned sectors across a unit's
# edge, single 4K pages inside units, whole units, a long run; then
# reads them back with the same patterns
io() {
    qemu-io -f raw "$URI" \
        -c "write -P 0x11 0 256K" -c "write -P 0x22 8K 4K" -c "write -P 0x33 65024 1024" \
        -c "write -P 0x44 128K 64K" -c "write -P 0x55 100000 3000" -c "discard 192K 4K" \
        -c "write -P 0x66 1M 1M" -c "write -P 0x77 1052672 4096" \
        -c "read -P 0x11 0 8K" -c "read -P 0x22 8K 4K" -c "read -P 0x11 12K 52736" \
        -c "read -P 0x33 65024 1024" -c "read -P 0x11 66048 33952" \
        -c "read -P 0x55 100000 3000" -c "read -P 0x11 103000 28072" \
        -c "read -P 0x44 128K 64K" -c "read -P 0 192K 4K" -c "read -P 0x11 196K 60K" \
        -c "read -P 0x66 1M 4K" -c "read -P 0x77 1052672 4096" -c "read -P 0x66 1056768 1040384" \
        > "$T/io" 2>&1 && ! grep -q "Pattern verification failed\|error" "$T/io"
}

for args in "--codec zstd" "--codec lz4 --unit-pages 4" "--codec zstd --unit-pages 16 --threads 0"; do
    serve_start --size 64M $args || continue
    if io; then ok "serve $args: qemu-io writes read back (sectors, pages, units)"
    else bad "serve $args: qemu-io writes read back"; tail -20 "$T/io" | diag; fi
    check "serve $args: nbdcopy in" nbdcopy -C 2 --requests 8 "$T/corpus" "$URI"
    check "serve $args: nbdcopy out, 4 KiB requests" \
        nbdcopy -C 1 --request-size 4096 "$URI" "$T/back"
    check "serve $args: the copy is byte-identical" \
        sh -c "head -c $SIZE '$T/back' | cmp - '$T/corpus'"
    # rewrite single pages inside units, then the whole copy again
    qemu-io -f raw "$URI" -c "write -P 0x99 4K 4K" -c "write -P 0x98 1M 512" \
        -c "read -P 0x99 4K 4K" -c "read -P 0x98 1M 512" > "$T/io2" 2>&1
    check "serve $args: pages rewritten inside units" \
        sh -c "! grep -q 'Pattern verification failed\|error' '$T/io2'"
    nbdcopy "$URI" "$T/back2"
    python3 - "$T/corpus" "$T/back2" <<'PY' > "$T/cmp" 2>&1
import sys
a, b = open(sys.argv[1], "rb").read(), bytearray(open(sys.argv[2], "rb").read())
want = bytearray(a)
want[4096:8192] = b"\x99" * 4096
want[1 << 20:(1 << 20) + 512] = b"\x98" * 512
assert b[:len(want)] == want, "differs"
PY
    check "serve $args: their neighbours are intact" [ $? -eq 0 ]
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json"
    check "serve $args: zmem stats --json shows units" python3 - "$T/stats.json" "$args" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = 4 if "--unit-pages 4" in sys.argv[2] else 16
assert d["export"]["page_size_bytes"] == 4096 and d["export"]["unit_pages"] == want, d["export"]
s = d["store"]
for k in ("units", "unit_pages", "unit_bytes", "unit_saved_bytes", "units_formed",
          "units_declined", "unit_splits"):
    assert k in s and s[k] >= 0, (k, s)
assert s["unit_pages"] <= s["pages_stored"], s
# nbdcopy's 256 KiB writes of text: zstd keeps some of them as units
if "zstd" in sys.argv[2]:
    assert s["units_formed"] > 0 and s["unit_saved_bytes"] > 0, s
assert s["pool_errors"] == 0 and s["failed_reads"] == 0, s
PY
    check "serve $args: zmem stats shows the unit size" \
        sh -c "'$ZMEM' stats '$SOCK' | grep -q '^export: .*4096-byte pages in units of up to'"
    serve_stop
done

# --page-size alone keeps pages alone, as before
serve_start --size 8M --codec zstd --page-size 32K && {
    "$ZMEM" stats --json "$SOCK" > "$T/stats.json"
    check "serve --codec zstd --page-size 32K: 32 KiB pages, no units" python3 -c "
import json, sys
e = json.load(open(sys.argv[1]))['export']
assert e['page_size_bytes'] == 32768 and e['unit_pages'] == 1, e
" "$T/stats.json"
    serve_stop
}

finish
