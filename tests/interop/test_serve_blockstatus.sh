#!/bin/sh
# Block status on real data: 32 MiB of the system's binaries with zero
# pages scattered through them (runs of 1-4 pages), written into a
# 64 MiB export whose tail is never written.  qemu-img map must see few
# extents (short zero runs are reported as data: thousands of one-page
# extents made qemu-img slower than reading them), every extent it sees
# as zeros must read as zeros, and qemu-img convert must give back the
# data byte for byte and keep the never-written tail a hole.  Twice: the
# zero pages sent as zero requests (nbdcopy, holes in the store), and as
# data (nbdcopy --allocated, zero-filled pages).
. "$(dirname "$0")/interop.sh"
need qemu-img nbdcopy python3

DATA=$T/data
python3 - "$DATA" << 'PY'
import os, random, sys
P, want, b = 4096, 32 << 20, bytearray()
for d in ('/usr/lib', '/usr/bin'):
    for root, dirs, files in os.walk(d):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            if len(b) >= want or os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                x = open(p, 'rb').read()
            except OSError:
                continue
            b += x + bytes(-len(x) % P)
del b[want:]
b += bytes(want - len(b))
r, n, i = random.Random(1), want // P, 0
while i < n:
    if r.random() < 1 / 13:
        k = r.randint(1, 4)
        b[i * P:(i + k) * P] = bytes(P * min(k, n - i))
        i += k + 1
    else:
        i += 1
open(sys.argv[1], 'wb').write(b)
PY
BYTES=$(stat -c %s "$DATA")

# map: at most MAX extents, the zero ones really zeros; convert: the
# data back, the tail a hole
map_few() {
    qemu-img map -f raw --output=json "$URI" > "$T/map" || return 1
    python3 - "$T/map" "$DATA" 64 << 'PY' || { head -c 2000 "$T/map"; echo; return 1; }
import json, sys
m, d, most = json.load(open(sys.argv[1])), open(sys.argv[2], 'rb').read(), int(sys.argv[3])
print(f"{len(m)} extents")
assert len(m) <= most, f"{len(m)} extents, at most {most} expected"
assert sum(e["length"] for e in m) == 64 << 20
for e in m:
    if e["zero"] and e["start"] < len(d):
        s = d[e["start"]:e["start"] + e["length"]]
        assert s.count(0) == len(s), f"extent {e} reported zero is not"
tail = [e for e in m if e["start"] >= len(d)]
assert tail and all(e["zero"] and not e["data"] for e in tail), "tail not a hole"
PY
}
convert_same() {
    rm -f "$T/out.img"
    timeout 120 qemu-img convert -f raw -O raw "$URI" "$T/out.img" &&
    cmp -n "$BYTES" "$DATA" "$T/out.img" &&
    [ "$(stat -c %s "$T/out.img")" -eq $((64 << 20)) ] &&
    python3 - "$T/out.img" "$BYTES" << 'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    at = os.lseek(fd, int(sys.argv[2]), os.SEEK_DATA)
    sys.exit(f"data at {at} in the never-written tail")
except OSError:
    pass
PY
}

for load in "" --allocated; do
    how=${load:-"zeros as zero requests"}
    serve_start --size 64M || finish
    check "nbdcopy $how: real data with scattered zero pages in" nbdcopy $load "$DATA" "$URI"
    check "qemu-img map ($how): few extents, zeros where it says" map_few
    check "qemu-img convert ($how): identical, the tail sparse" convert_same
    rm -f "$T/out.img"
    serve_stop
done
finish
