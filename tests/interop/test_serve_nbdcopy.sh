#!/bin/sh
# zmem serve with libnbd's clients: nbdcopy a page corpus in over several
# connections and back out byte for byte; nbdinfo --json, --can, --is and
# --map; socket activation (nbdinfo -- [ zmem serve ... ]); zmem stats in
# text and JSON.
. "$(dirname "$0")/interop.sh"
need nbdcopy nbdinfo python3

# the corpus: English-like text at two ratios, zero pages, random pages
"$ZMEM" gen --kind text --size 16M --seed 1 -o "$T/a" > /dev/null 2>&1
"$ZMEM" gen --kind text --ratio 0.4 --size 8M --seed 2 -o "$T/b" > /dev/null 2>&1
head -c 4M /dev/zero > "$T/c"
head -c 4M /dev/urandom > "$T/d"
cat "$T/a" "$T/c" "$T/b" "$T/d" "$T/c" > "$T/corpus"
rm -f "$T/a" "$T/b" "$T/c" "$T/d"
SIZE=$(stat -c %s "$T/corpus")

serve_start --size "$SIZE" --codec zstd || finish
check "nbdcopy in with 4 connections" nbdcopy -C 4 --requests 16 "$T/corpus" "$URI"
check "nbdcopy out with 4 connections" nbdcopy -C 4 "$URI" "$T/back"
check "the copy is byte-identical" cmp "$T/corpus" "$T/back"
check "nbdcopy out with 1 connection, 4 KiB requests" \
    nbdcopy -C 1 --request-size 4096 --requests 4 "$URI" "$T/back2"
check "... byte-identical too" cmp "$T/corpus" "$T/back2"

check "nbdinfo --json" sh -c "nbdinfo --json '$URI' > '$T/info.json'"
check "nbdinfo --json: size, flags, block sizes, base:allocation" python3 - "$T/info.json" "$SIZE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = d["exports"][0]
assert d["structured"] is True, d
assert e["export-size"] == int(sys.argv[2]), e
for k in ("can_flush", "can_fua", "can_trim", "can_zero", "can_fast_zero",
          "can_multi_conn", "can_cache", "can_df"):
    assert e[k] is True, k
assert e["is_read_only"] is False
# the preferred size is the page size: 4 KiB, zstd's default (in units)
assert e["block_size_minimum"] == 1 and e["block_size_preferred"] == 4096
assert e["block_size_maximum"] == 32 << 20
assert "base:allocation" in e["contexts"]
PY
for f in flush fua trim zero fast-zero multi-conn cache df structured-reply; do
    check "nbdinfo --can $f" nbdinfo --can "$f" "$URI"
done
check "nbdinfo --is rotational is false" sh -c "! nbdinfo --is rotational '$URI'"
check "nbdinfo --is read-only is false" sh -c "! nbdinfo --is read-only '$URI'"

# holes: discard a range, then the map shows a hole there and data elsewhere
check "nbdinfo --map shows holes and data" sh -c "
    nbdsh -u '$URI' -c 'h.trim(1 << 20, 2 << 20)' 2>/dev/null ||
    qemu-io -f raw '$URI' -c 'discard 2M 1M' > /dev/null 2>&1
    nbdinfo --map '$URI' > '$T/map' && cat '$T/map' &&
    grep -q 'hole,zero' '$T/map' && grep -q 'data' '$T/map'"

check "zmem stats (text)" sh -c "'$ZMEM' stats '$SOCK' > '$T/stats' && grep -q '^mm_stat:' '$T/stats' &&
    grep -q 'requests' '$T/stats' && grep -q 'class' '$T/stats'"
check "zmem stats --json" sh -c "'$ZMEM' stats --json '$SOCK' > '$T/stats.json'"
check "zmem stats --json: mm_stat, classes, counters" python3 - "$T/stats.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d["mm_stat"]
assert m["orig_data_size"] > 0 and 0 < m["compr_data_size"] < m["orig_data_size"], m
assert m["mem_used_total"] > 0
assert d["store"]["pages_stored"] > 0 and d["store"]["pool_errors"] == 0, d["store"]
assert len(d["classes"]) > 0
s = d["server"]
assert s["connections"] >= 9 and s["writes"] > 0 and s["reads"] > 0, s
assert s["bytes_written"] >= 20 << 20 and s["write_zeroes"] > 0, s  # nbdcopy zeroes zero runs
assert d["export"]["codec"] == "zstd"
PY
serve_stop

# read-only
serve_start --size 4M --read-only || finish
check "nbdinfo --is read-only" nbdinfo --is read-only "$URI"
check "nbdinfo --can trim is false when read-only" sh -c "! nbdinfo --can trim '$URI'"
check "nbdcopy into a read-only export fails" sh -c "! nbdcopy '$T/corpus' '$URI' 2>/dev/null"
serve_stop

# systemd-style socket activation
check "nbdinfo -- [ zmem serve ] (socket activation)" sh -c "
    nbdinfo --size -- [ '$ZMEM' serve --size 1G --threads 1 ] > '$T/size' && cat '$T/size' &&
    [ \"\$(cat '$T/size')\" = 1073741824 ]"
check "nbdcopy -- [ zmem serve ] round trip" sh -c "
    nbdcopy '$T/corpus' -- [ '$ZMEM' serve --size $SIZE ] 2>&1"
# TCP on loopback, when asked
PORT=$((20000 + $$ % 20000))
"$ZMEM" serve --size 8M --port "$PORT" --pidfile "$T/pid" > "$T/tcp.log" 2>&1
check "zmem serve --port detaches and answers on 127.0.0.1" sh -c "
    nbdinfo --size nbd://127.0.0.1:$PORT | grep -qx 8388608"
[ -f "$T/pid" ] && kill -TERM "$(cat "$T/pid")"
finish
