#!/bin/sh
# The zmem command as a Unix tool: every bad value gives one line naming
# the command, the option and the value, and exit status 2, at once;
# help, --help and --version; every --json of a quick run is one JSON
# document with the common keys "zmem" and "command", and writes no file;
# progress goes to stderr only, plain lines when that is not a terminal,
# and -q silences it.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
#   ZM_SAN  set when that binary is built with a sanitizer (see progress)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
T=$(mktemp -d /tmp/zmem-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
# ok, bad, check and tap_end: beside us in a build, one folder up in the tree
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"

# usage ARGS... -- WANT: zmem ARGS is refused at once (tap.sh zmem_usage)
USAGE_TIMEOUT=1
usage() { zmem_usage "$@"; }

# ---- bad input: one line, status 2 ----------------------------------
usage bench --size -1 -- "zmem bench: invalid --size '-1'"
usage bench --size 1Q -- "zmem bench: invalid --size '1Q'"
usage bench --size 99999999999999999999 -- "zmem bench: invalid --size"
usage bench --size 4097 --page-size 8192 -- "--size must be at least one page"
usage bench --threads 0 -- "zmem bench: --threads must be 1..64, not 0"
usage bench --threads 65 -- "--threads must be 1..64, not 65"
usage bench --threads 2x -- "invalid --threads '2x'"
usage bench --reps 0 -- "--reps must be 1..32, not 0"
usage bench --page-size 12288 -- "--page-size must be a power of two"
usage bench --churn 1 -- "--churn must be more than 0 and less than 1"
usage bench --huge-size 8K -- "--huge-size must be at most the page size"
usage bench --codec nope -- "zmem bench: codec 'nope'"
usage bench --allocator nope -- "--allocator nope: unknown; choices:"
usage bench --data bogus -- "zmem bench: unknown data set 'bogus'"
usage bench --data text:2 -- "bad ratio in --data 'text:2'"
usage bench --data capture:x -- "invalid --data 'capture:x'"
usage bench --frobnicate -- "unknown option '--frobnicate'"
usage bench extra -- "unexpected argument 'extra'"
usage bench --size -- "--size needs a value"
usage bench --json=yes -- "--json takes no value"
usage mapbench --threads 100000 -- "zmem mapbench: --threads must be 1..16, not 100000"
usage mapbench --threads -1 -- "invalid --threads '-1'"
usage pagebench --max-size 1Q -- "zmem pagebench: invalid --max-size '1Q'"
usage pagebench --max-size 64K -- "--max-size must be 128K..64G"
usage pagebench --threads 0 -- "--threads must be 1..64, not 0"
usage pagebench --page-size 5000 -- "--page-size must be a power of two"
usage worstcase --max-size 1Q -- "zmem worstcase: invalid --max-size '1Q'"
usage worstcase --min-size 8M --max-size 4M -- "--min-size (8388608) must be at most --max-size"
usage worstcase --mem-cap 1M -- "--mem-cap must be at least 64M, not 1M"
usage worstcase --sequence nope -- "unknown sequence 'nope'"
usage allocbench --sizes 5000 -- "zmem allocbench: invalid size '5000' in --sizes (1..4096)"
usage allocbench --sizes 64,x -- "invalid size 'x' in --sizes"
usage allocbench --sizes , -- "--sizes ',' lists no size"
usage allocbench --threads 0 -- "zmem allocbench: --threads must be 1..16, not 0"
usage allocbench --reps 16 -- "--reps must be 1..15, not 16"
usage allocbench --count 0 -- "--count must be at least 1, not 0"
usage allocbench --count 2x -- "invalid --count '2x'"
usage allocbench --bytes 1Q -- "zmem allocbench: invalid --bytes '1Q'"
usage allocbench --bytes 100 -- "zmem allocbench: --bytes must be at least 4K, not 100"
usage allocbench --min-ms -1 -- "invalid --min-ms '-1'"
usage allocbench --apart some -- "invalid --apart 'some' (one of: pools, all)"
usage allocbench --allocator nope -- "zmem allocbench: --allocator nope: unknown; choices:"
usage allocbench --latency --free 100 -- "zmem allocbench: --free must be 0..99, not 100"
usage allocbench --latency --on x -- "invalid --on 'x' (one of: both, compact, trim)"
usage allocbench --latency --bytes -1 -- "invalid --bytes '-1'"
usage allocbench --latency --rounds 0 -- "--rounds must be 1..50, not 0"
usage allocbench --latency --settle -1 -- "invalid --settle '-1'"
usage churn --fraction 0 -- "zmem churn: --fraction must be more than 0 and less than 1, not 0"
usage churn --fraction 1 -- "--fraction must be more than 0 and less than 1, not 1"
usage churn --fraction x -- "zmem churn: invalid --fraction 'x'"
usage churn --size 0 -- "zmem churn: --size must be 4K..4G, not 0"
usage churn --size 1Q -- "invalid --size '1Q'"
usage churn --allocator nope -- "zmem churn: invalid --allocator 'nope' (one of: zsmalloc,"
usage churn --json=1 -- "--json takes no value"
usage density --size -1 -- "zmem density: invalid --size '-1'"
usage density --size 0 -- "--size must be 4K..4G, not 0"
usage gen --kind text --size -1 -o x -- "zmem gen: invalid --size '-1'"
usage gen --kind txt --size 1M -o x -- "invalid --kind 'txt'"
usage gen --kind text --size 1M -- "--kind, --size and -o are required"
usage gen --kind text --size 1M --ratio 0 -o x -- "--ratio must be more than 0 and at most 1"
usage gen --kind text --size 1000 -o x -- "not a multiple of the page size"
usage gen --kind text --size 4K --seed -3 -o x -- "invalid --seed '-3'"
usage capture -- "a PID and -o FILE are required"
usage capture abc -o x -- "'abc' is not a process id"
usage capture 1 -o x --max-size 1 -- "--max-size must be at least 4K"
usage tierbench --size 1Q -- "zmem tierbench: invalid --size '1Q'"
usage tierbench --rewrite 101 -- "--rewrite must be 0..100, not 101"
usage tierbench --hot 80/0 -- "invalid --hot '80/0'"
usage tierbench --modes none,foo -- "unknown mode 'foo'"
usage cachebench --size -1 -- "zmem cachebench: invalid --size '-1'"
usage cachebench --budgets 1M,x -- "invalid size 'x' in --budgets"
usage cachebench --ram 64M -- "--ram (67108864) must be below --size"
usage cachebench --zipf nan -- "invalid --zipf 'nan'"
usage cachebench --data random:0 -- "bad ratio in --data 'random:0'"
usage tierbench --data nope -- "zmem tierbench: unknown data set 'nope'"
usage serve --size -1 -- "zmem serve: invalid --size '-1'"
usage serve --size 0 -- "zmem serve: --size must be 1..32T, not 0"
usage serve -- "zmem serve: --size is required"
usage serve --size 3T -- "zmem serve: --size 3T is larger than the largest disk of 4K pages, 2T"
usage serve --size 1G --threads 999 -- "zmem serve: --threads must be 0..256, not 999"
usage serve --size 1G --threads x -- "zmem serve: invalid --threads 'x'"
usage serve --size 1G --timeout 0 -- "zmem serve: --timeout must be 1..3600, not 0"
usage serve --size 1G --port 70000 -- "zmem serve: --port must be 1..65535, not 70000"
usage serve --size 1G --page-size 12K -- "zmem serve: --page-size must be a power of two"
usage serve --size 1G --page-size 128K -- "zmem serve: --page-size must be 4K..64K, not 128K"
usage serve --size 1G --mem-limit 1Q -- "zmem serve: invalid --mem-limit '1Q'"
usage serve --size 1G --codec brotli -- "zmem serve: --codec brotli: unknown codec"
usage serve --size 1G --allocator slab -- "zmem serve: --allocator slab: unknown; choices:"
usage serve --size 1G --recompress zstd --idle-after 5x -- "zmem serve: invalid --idle-after '5x'"
usage serve --size 1G --writeback-limit junk -- "zmem serve: invalid --writeback-limit 'junk'"
usage serve --size 1G --readback -- "zmem serve: --readback needs --backing FILE"
usage serve --size 1G --bind 127.0.0.1 -- "zmem serve: --bind needs --port"
usage serve --size 1G --frob -- "zmem serve: unknown option '--frob'"
usage serve --size 1G extra -- "zmem serve: unexpected argument 'extra'"
usage serve --size -- "zmem serve: --size needs a value"
usage serve --size 1G --read-only=yes -- "zmem serve: --read-only takes no value"
usage stats --frob -- "zmem stats: unknown option '--frob'"
usage stats a b -- "zmem stats: unexpected argument 'b'"
usage stats --json=1 -- "zmem stats: --json takes no value"
usage stats --timeout 5x -- "zmem stats: invalid --timeout '5x' (a duration"
usage ctl --timeout 0 compact -- "zmem ctl: invalid --timeout '0'"
usage list --timeout -1 -- "zmem list: invalid --timeout '-1'"
usage ctl -- "zmem ctl: a VERB is required"
usage ctl --frob compact -- "zmem ctl: unknown option '--frob'"
usage ctl compact now -- "zmem ctl: compact takes no argument, not 'now'"
usage ctl mem-limit -5M -- "zmem ctl: mem-limit takes a size (64M, 1G, ...), 0 or none, not '-5M'"
usage ctl mem-limit 1Q -- "not '1Q'"
usage ctl idle 'a b' -- "zmem ctl: idle takes all or a DURATION (250ms, 30s, 10m, 1h; a bare number is SECONDS; under 49 days), not 'a b'"
usage ctl /tmp/s writeback idle 10 more -- "zmem ctl: unexpected argument 'more'"
usage stop a b -- "zmem stop: unexpected argument 'b'"
usage stop --frob -- "zmem stop: unknown option '--frob'"
usage list x -- "zmem list: unexpected argument 'x'"
usage list --frob -- "zmem list: unknown option '--frob'"
usage bnech -- "zmem: unknown command 'bnech'; did you mean 'bench'? (zmem help)"
usage xyzzy -- "zmem: unknown command 'xyzzy' (zmem help)"
usage dens -- "zmem: unknown command 'dens'; did you mean 'density'?"
usage ben -- "did you mean 'bench'?"
usage help nope -- "zmem: unknown command 'nope'"
usage --frob -- "zmem: unknown option '--frob'"

# a failure while running is status 1, still one line naming the command:
# no server at the socket named
no_server() {  # COMMAND ARGS...
    c=$1
    timeout 1 "$ZMEM" "$@" > "$T/out" 2> "$T/err"
    if [ $? -ne 1 ] || [ "$(wc -l < "$T/err")" -ne 1 ] || [ -s "$T/out" ] ||
       ! grep -q "^zmem $c: no server answers at $T/none.sock" "$T/err"; then
        cat "$T/err"; return 1
    fi
}
check "stats with no server: one line, status 1" no_server stats "$T/none.sock"
check "ctl with no server: one line, status 1" no_server ctl "$T/none.sock" compact
check "stop with no server: one line, status 1" no_server stop "$T/none.sock"

# ---- help and version -----------------------------------------------
help_lists() {
    "$ZMEM" help > "$T/help" && grep -q '^  bench ' "$T/help" && grep -q '^  serve ' "$T/help" &&
    ! grep -q churn-child "$T/help" && "$ZMEM" --help | cmp -s - "$T/help" &&
    ! "$ZMEM" > /dev/null 2>&1
}
check "zmem help lists the commands, not the internal ones" help_lists
help_command() {
    for c in bench mapbench pagebench allocbench churn worstcase density gen capture \
             tierbench regionbench cachebench serve stats ctl stop list; do
        "$ZMEM" help "$c" > "$T/h1" && "$ZMEM" "$c" --help > "$T/h2" && cmp -s "$T/h1" "$T/h2" &&
        grep -q "^usage: zmem $c" "$T/h1" && grep -q -- '--quiet' "$T/h1" || return 1
    done
}
check "zmem help COMMAND is COMMAND --help" help_command
help_defaults() {
    "$ZMEM" bench --help > "$T/h" &&
    grep -q -- '--threads N .*' "$T/h" && grep -q '(default 1; 1..64)' "$T/h" &&
    grep -q '(default 64M; 4K..1T)' "$T/h" && grep -q '(default 3; 1..32)' "$T/h" &&
    [ "$(awk 'length > 80' "$T/h" | wc -l)" -eq 0 ]
}
check "bench --help shows defaults and limits, in 80 columns" help_defaults
# zmem(1) lists the commands zmem help lists (the tree's docs/, found
# from here upwards)
top=$(cd "$(dirname "$0")" && pwd)
while [ ! -f "$top/docs/zmem.1" ] && [ "$top" != / ]; do top=$(dirname "$top"); done
man_lists() {
    [ -f "$top/docs/zmem.1" ] &&
    sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p' "$T/help" > "$T/cmds" && [ -s "$T/cmds" ] &&
    sed -n '/^\.SH COMMANDS/,/^\.SH OPTIONS/s/^\.B \([a-z-]*\)$/\1/p' "$top/docs/zmem.1" |
        cmp -s - "$T/cmds"
}
check "zmem(1) lists the commands of zmem help, in its order" man_lists
# bash completion, from the tree's scripts/zmem.bash: commands and options
completion() {
    command -v bash > /dev/null || return 0
    ZMEM=$ZMEM bash -c '. "$1"
        COMP_WORDS=("$ZMEM" benc); COMP_CWORD=1; _zmem; [ "${COMPREPLY[*]}" = bench ] || exit 1
        COMP_WORDS=("$ZMEM" bench --thr); COMP_CWORD=2; _zmem
        [ "${COMPREPLY[*]}" = --threads ] || exit 1
        COMP_WORDS=("$ZMEM" help dens); COMP_CWORD=2; _zmem; [ "${COMPREPLY[*]}" = density ]' \
        - "$top/scripts/zmem.bash"
}
check "bash completion: commands and each command's options" completion
version() {
    v=$("$ZMEM" --version) && echo "$v" | grep -Eqx 'zmem [0-9]+\.[0-9]+\.[0-9]+' &&
    [ "$("$ZMEM" -V)" = "$v" ] && [ "$("$ZMEM" version)" = "$v" ]
}
check "zmem --version, -V" version

# ---- --json: one document, the common keys, no files -----------------
"$ZMEM" gen --kind text --ratio 0.5 --size 1M -o "$T/corpus.pages" -q || bad "gen a corpus"
mkdir "$T/empty" "$T/scratch"
# json NAME ARGS...: run in an empty directory; stdout must be one JSON
# document whose "command" is NAME, and the directory must stay empty
json() {
    name=$1; shift
    if ! (cd "$T/empty" && "$ZMEM" "$@" > "$T/doc.json" 2> "$T/err"); then
        bad "zmem $*: failed"; tail -5 "$T/err"; return
    fi
    if python3 - "$T/doc.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, dict), "not an object"
assert list(d)[:2] == ["zmem", "command"], list(d)[:2]
assert d["command"] == sys.argv[2], d["command"]
assert isinstance(d["zmem"], str) and d["zmem"]
PY
    then
        if [ -z "$(ls -A "$T/empty")" ]; then ok "zmem $*: one document, no files"
        else bad "zmem $*: wrote $(ls -A "$T/empty")"; rm -rf "${T:?}/empty/"*; fi
    else
        bad "zmem $*: not one document with the common keys"; head -c 300 "$T/doc.json"
    fi
}
json bench bench --size 256K --reps 1 --data zero --data 'text:0.75' --allocator zsmalloc --json
json bench bench --size 64K --reps 1 --data "file:$T/corpus.pages" --allocator zbud --json
json bench bench --compare-2011 --size 1M --allocator zsmalloc --json
# --seed-table, its old spelling, still runs it; --help names only the new one
old_spelling() {
    "$ZMEM" bench --seed-table --size 64K --allocator zsmalloc --json 2>/dev/null |
        grep -q '"compare_2011": *true' &&
    "$ZMEM" bench --help > "$T/h" && grep -q -- '--compare-2011' "$T/h" &&
    ! grep -q seed "$T/h"
}
check "bench --seed-table is --compare-2011, not in --help" old_spelling
json mapbench mapbench --threads 1 --json
# bench's fill is read against the codec writing into fresh memory, timed
# in the same run: a speed, and the fill's cost over it
bench_fresh() {
    (cd "$T/empty" && "$ZMEM" bench --size 256K --reps 1 --data 'text:0.5' \
        --allocator zsmalloc --json) > "$T/doc.json" 2>/dev/null &&
    python3 - "$T/doc.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
assert r["codec_fresh_MBps"] > 0, r
assert r["codec_fresh_cost"] > -1 and r["store_fill_cost_vs_fresh"] > -1, r
PY
}
check "bench times the codec into fresh memory beside the fill" bench_fresh
json pagebench pagebench --max-size 256K --threads 1 --quick --json
json worstcase worstcase --max-size 4M --sequence tiny --json
json allocbench allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K --reps 1 \
    --min-ms 0 --threads 1 --json
json allocbench allocbench --latency --rounds 1 --ms 20 --bytes 256K --json
json density density --corpus "$T/corpus.pages" --size 256K --json
json churn churn --corpus "$T/corpus.pages" --size 64K --allocator zsmalloc --json
json tierbench tierbench --data text:0.5 --size 2M --ops 2000 --dir "$T/scratch" --json
# the latency loop is also reported in two parts, split at --settle
latency_parts() {
    (cd "$T/empty" && "$ZMEM" allocbench --latency --rounds 1 --ms 60 --settle 20 \
        --bytes 256K --json) > "$T/doc.json" 2>/dev/null &&
    python3 - "$T/doc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["settle_ms"] == 20, d
parts = d["parts"]
assert [p["part"] for p in parts] == ["first", "rest"], parts
assert all(p["ops"]["alloc"] > 0 for p in parts), parts
PY
}
check "allocbench --latency: the first --settle ms apart from the rest" latency_parts
json cachebench cachebench --mode all --size 1M --file-set 1M --cache 256K --budgets 256K \
    --reads 1000 --dir "$T/scratch" --allocators zsmalloc --json
# churn: no pages is a failure (1), not a usage error; its table names the
# corpus it read
churn_corpus() {
    "$ZMEM" churn --corpus "$T/empty" > "$T/out" 2> "$T/err"
    [ $? -eq 1 ] && grep -q '^zmem churn: no pages' "$T/err" && [ ! -s "$T/out" ] &&
    "$ZMEM" churn --corpus "$T/corpus.pages" --size 64K --allocator zbud -q > "$T/out" &&
    grep -qF "  $T/corpus.pages: 1 file" "$T/out" && grep -q '^zbud ' "$T/out"
}
check "churn: no pages is status 1; the table lists the corpus" churn_corpus
# zmem stats --json, of a server that lives as long as the command asking
# (the --run command expands $ZMEM, $socket and $DOC itself)
# shellcheck disable=SC2016
stats_json() {
    (cd "$T/empty" && export ZMEM DOC="$T/doc.json" &&
     "$ZMEM" serve --size 1M --socket "$T/scratch/s.sock" \
        --run '"$ZMEM" stats --json "$socket" > "$DOC"') 2> "$T/err" &&
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert list(d)[:2] == ["zmem", "command"] and d["command"] == "stats"' "$T/doc.json" &&
    [ -z "$(ls -A "$T/empty")" ]
}
check "zmem stats --json: one document with the common keys" stats_json

# a quote, a backslash and a newline in a file name survive into the JSON
odd="$T/a\"b\\c
d.pages"
cp "$T/corpus.pages" "$odd"
escaped() {
    "$ZMEM" density --corpus "$odd" --size 64K --json -q > "$T/doc.json" &&
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["corpus"]["files"][0]["path"] == sys.argv[2]' "$T/doc.json" "$odd"
}
check "strings are escaped (a file name with a quote, backslash, newline)" escaped

# the default plot is written with the table only
plot() {
    (cd "$T/empty" && "$ZMEM" bench --size 64K --reps 1 --data zero --allocator zsmalloc -q \
        > /dev/null) && [ -s "$T/empty/zmem-bench.svg" ] && rm -f "$T/empty/zmem-bench.svg" &&
    (cd "$T/empty" && "$ZMEM" bench --size 64K --reps 1 --data zero --allocator zsmalloc -q \
        --json --plot p.svg > "$T/doc.json") && [ -s "$T/empty/p.svg" ] &&
    grep -q '"plot": "p.svg"' "$T/doc.json" && rm -f "$T/empty/p.svg"
}
check "bench writes its plot with the table, or where --plot says" plot

# ---- progress: stderr only, plain lines, -q -------------------------
# pagebench's loops have fixed counts (millions of malloc/free pairs):
# both runs take --quick, which shortens every loop a hundred times.
progress() {
    "$ZMEM" bench --size 256K --reps 1 --data zero --allocator zsmalloc --no-plot \
        > "$T/out" 2> "$T/err" &&
    grep -q '^zmem bench: ' "$T/err" && ! grep -q '^zmem bench: zero' "$T/out" &&
    ! tr -d '\n' < "$T/err" | grep -q "$(printf '\r')" || return 1
    "$ZMEM" pagebench --max-size 256K --threads 1 --quick > "$T/out" 2> "$T/err" &&
    grep -q '^zmem pagebench: ' "$T/err" && ! grep -q "$(printf '\r')" "$T/err" "$T/out"
}
check "progress goes to stderr as plain lines when it is not a terminal" progress
quiet() {
    "$ZMEM" bench --size 256K --reps 1 --data zero --allocator zsmalloc --no-plot -q \
        > "$T/out" 2> "$T/err" && [ ! -s "$T/err" ] && [ -s "$T/out" ] &&
    "$ZMEM" worstcase --max-size 4M --sequence tiny -q > "$T/out" 2> "$T/err" &&
    [ ! -s "$T/err" ] && [ -s "$T/out" ] &&
    "$ZMEM" allocbench --allocator zbud --quick --count 500 --reps 1 --min-ms 0 --threads 1 -q \
        > "$T/out" 2> "$T/err" && [ ! -s "$T/err" ] && [ -s "$T/out" ]
}
check "-q: nothing on stderr" quiet

# ---- tables: 100 columns by default (widened, never cut, for long names) -
table() {
    "$ZMEM" bench --size 64K --reps 1 --data zero --data text:0.75 --threads 2 --no-plot -q \
        > "$T/out" && [ "$(awk 'length > 100' "$T/out" | wc -l)" -eq 0 ] &&
    long="file:$T/corpus.pages" &&
    "$ZMEM" bench --size 64K --reps 1 --data "$long" --no-plot -q > "$T/out" &&
    [ "$(grep -cF "$long zsmalloc" "$T/out")" -ge 2 ] &&
    "$ZMEM" bench --size 64K --reps 1 --data zero --no-plot -q --wide | grep -q 'codec put MB/s'
}
check "bench's table fits 100 columns (--wide: all), names whole" table

tap_end
