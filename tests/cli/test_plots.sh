#!/bin/sh
# The plots of every command that has --plot, small: each is a
# well-formed SVG document; "--plot -" writes it to standard output and
# nothing else goes there; a name not ending in ".svg" is refused before
# any work with status 1; tierbench draws one group of bars per mode and
# its memory limit as a labelled line; titles give a size under 1 MiB in
# KiB.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env plots
mkdir "$T/empty"

# each command, small, as "NAME ARGS..." (one a line); runbench's
# programs may be missing (its status is then 1), its plot is still drawn
cmds='bench --size 64K --reps 1 --data text:0.5 --allocator zsmalloc
allocbench --allocator zsmalloc --allocator zbud --sizes 64,2048 --count 500 --bytes 64K --reps 1 --min-ms 0 --threads 1
worstcase --max-size 4M
cachebench --mode cleancache --size 1M --file-set 1M --cache 256K --budgets 256K --reads 1000 --allocators zsmalloc
regionbench --size 1M --trace seq,random
runbench --quick --programs c
tierbench --size 512K --data text:0.5 --modes none,writeback,lz4-only'

# well-formed FILE: python3's XML parser reads it and the root is <svg>
well_formed() {
    python3 - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
sys.exit(0 if root.tag == '{http://www.w3.org/2000/svg}svg' else 1)
EOF
}

echo "$cmds" > "$T/cmds"
while read -r name args; do
    # ---- a name not ending in .svg: refused at once -------------------
    # shellcheck disable=SC2086
    (cd "$T/empty" && ZMEM_LOG=off timeout 3 "$ZMEM" $name $args --plot p.png) \
        < /dev/null > "$T/out" 2> "$T/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && [ ! -s "$T/out" ] &&
       grep -qF "zmem $name: --plot p.png: not an SVG file name" "$T/err" &&
       [ -z "$(ls -A "$T/empty")" ]; then
        ok "$name --plot p.png refused"
    else
        bad "$name --plot p.png: want status 1 at once, got $rc:"
        cat "$T/err" "$T/out" | head -5 | diag
        rm -rf "${T:?}/empty/"*
    fi

    # ---- --plot -: the document alone on standard output --------------
    # shellcheck disable=SC2086
    (cd "$T/empty" && ZMEM_LOG=off "$ZMEM" $name $args -q --plot -) \
        < /dev/null > "$T/$name.svg" 2> "$T/err"
    rc=$?
    if { [ $rc -eq 0 ] || [ "$name" = runbench ]; } &&
       head -1 "$T/$name.svg" | grep -q '^<?xml ' && [ "$(tail -1 "$T/$name.svg")" = '</svg>' ] &&
       well_formed "$T/$name.svg" && [ -z "$(ls -A "$T/empty")" ]; then
        ok "$name --plot -: an SVG document alone on stdout"
    else
        bad "$name --plot -: status $rc:"
        { head -3 "$T/$name.svg"; tail -3 "$T/$name.svg"; head -5 "$T/err"; } | diag
        rm -rf "${T:?}/empty/"*
    fi
done < "$T/cmds"

# --plot - and --json both want standard output
zmem_usage tierbench --size 512K --json --plot - -- "--plot - and --json"

# ---- worstcase: five sequences, two panels each, in a grid -------------
# (a screen's height: under 1100 px, not ten panels stacked, 2890 px)
h=$(sed -n 's/^<svg .* height="\([0-9]*\)".*/\1/p' "$T/worstcase.svg")
if [ -n "$h" ] && [ "$h" -le 1100 ]; then
    ok "worstcase --plot: the panels in a grid ($h px high)"
else
    bad "worstcase --plot: ${h:-no} height, want <= 1100"
fi

# ---- tierbench: bars per mode, the limit, failed writes ---------------
svg=$T/tierbench.svg
python3 - "$svg" > "$T/out" 2>&1 <<'EOF'
import sys, xml.etree.ElementTree as ET
ns = {'s': 'http://www.w3.org/2000/svg'}
root = ET.parse(sys.argv[1]).getroot()
bad = []
groups = root.findall(".//s:g[@class='bars']", ns)
# two panels (memory, throughput), one group per mode in each
modes = [g.get('data-x') for g in groups]
if sorted(modes) != sorted(['none', 'writeback', 'lz4-only'] * 2):
    bad.append('bar groups: %r' % modes)
for g in groups:
    if len(g.findall('s:rect', ns)) != 3:
        bad.append('%s: %d bars, want 3' % (g.get('data-x'), len(g.findall('s:rect', ns))))
if not root.findall(".//s:polyline", ns) == []:
    bad.append('lines between the modes')
lim = root.findall(".//s:line[@class='limit']", ns)
texts = ' '.join(''.join(t.itertext()) for t in root.iter('{http://www.w3.org/2000/svg}text'))
if len(lim) != 1 or 'memory limit 128 KiB' not in texts:
    bad.append('limit line: %d, texts: %s' % (len(lim), texts[:300]))
if 'failed writes' not in texts:
    bad.append('no failed writes')
if '512 KiB' not in texts or '0 MiB' in texts:
    bad.append('sizes in the title: ' + texts[:200])
print('\n'.join(bad))
sys.exit(1 if bad else 0)
EOF
if [ $? -eq 0 ]; then
    ok "tierbench --plot: a group of 3 bars per mode, the limit line, failed writes"
else
    bad "tierbench --plot: bars, limit, failed writes"
    diag < "$T/out"
fi

tap_end
