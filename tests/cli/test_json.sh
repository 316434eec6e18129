#!/bin/sh
# The one JSON contract of the zmem command (docs/json.md), checked over
# every command that has --json, each run on tiny sizes: one document on
# stdout and nothing else (even with -v); the envelope "zmem", "command",
# then the parameters; a benchmark's rows in "results"; a unit suffix on
# every size and time key (_bytes, _ns, _us, _ms, _s); -j the same as
# --json.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env json
command -v python3 > /dev/null || { echo "1..0 # SKIP no python3"; exit 0; }

# The keys of commands whose sources still use old names (checked for the
# envelope and rows only): none now; a command named here is skipped by
# the key check.
PENDING_KEYS=""

cat > "$T/check.py" <<'PY'
import json, re, sys
path, command, rows, lint = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
text = open(path).read()
d = json.loads(text)                       # one document: nothing before or after
assert isinstance(d, dict), "not an object"
keys = list(d)
assert keys[:2] == ["zmem", "command"], keys[:2]
assert d["command"] == command, d["command"]
assert isinstance(d["zmem"], str) and re.fullmatch(r"\d+\.\d+\.\d+", d["zmem"]), d["zmem"]
if rows != "-":
    assert isinstance(d.get(rows), list), "no array %r: %s" % (rows, keys)
    for other in ("rows", "units", "allocators", "table"):
        assert other == rows or other not in d, "rows named %r, not %r" % (other, rows)
# a size or time without its unit: "size", "ms", "mem_cap", "x_seconds", ...
BAD = re.compile(r"^(size|ms|ns|us|s|seconds|time|duration)$|"
                 r"_(size|cap|limit|seconds|time|duration)$")
# zram's own names, kept where a document mirrors its mm_stat
ZRAM = {"orig_data_size", "compr_data_size"}
# a limit of 0 meaning "none" is null instead
LIMIT = re.compile(r"(^|_)limit(_bytes)?$")
bad = []
def walk(o, where):
    if isinstance(o, dict):
        for k, v in o.items():
            if (isinstance(v, (int, float)) and not isinstance(v, bool) and BAD.search(k)
                    and k not in ZRAM):
                bad.append(where + k)
            if v == 0 and not isinstance(v, bool) and LIMIT.search(k):
                bad.append(where + k + " (0, not null, for none)")
            walk(v, where + k + ".")
    elif isinstance(o, list):
        for v in o[:3]:
            walk(v, where + "[].")
if lint:
    walk(d, "")
    assert not bad, "keys without a unit suffix: %s" % sorted(set(bad))
PY

# json NAME ROWS ARGS...: zmem ARGS, one document on stdout of command
# NAME, its rows in ROWS ("-": none), its keys with units
json() {
    name=$1 rows=$2; shift 2
    lint=1
    for p in $PENDING_KEYS; do case " $* " in *" $p "*|*" --$p "*) lint=0 ;; esac; done
    (cd "$T/tmp" && "$ZMEM" "$@" > "$T/doc.json" 2> "$T/err")
    rc=$?
    if [ $rc -eq 77 ]; then ok "zmem $* # SKIP cannot run here"; return; fi
    if [ $rc -ne 0 ]; then bad "zmem $*: status $rc"; tail -3 "$T/err" | diag; return; fi
    if python3 "$T/check.py" "$T/doc.json" "$name" "$rows" "$lint" 2> "$T/py"; then
        ok "zmem $*"
    else
        bad "zmem $*"; tail -1 "$T/py" | diag; head -c 200 "$T/doc.json" | diag
    fi
}

"$ZMEM" gen --kind text --ratio 0.5 --size 1M -o "$T/c.pages" -q || bad "gen a corpus"
mkdir "$T/scratch"
json bench results bench --size 256K --reps 1 --data zero --data text:0.5 \
    --allocator zsmalloc -v --json
json bench results bench --size 256K --reps 1 --data zero --allocator zbud -j
json bench results bench --unit-pages 1,4 --size 256K --reps 1 --data text:0.5 --json
json bench results bench --seed-table --size 1M --allocator zsmalloc --json
json mapbench results mapbench --threads 1 --json
json pagebench results pagebench --max-size 256K --threads 1 --quick --json
json worstcase results worstcase --max-size 4M --sequence tiny --json
json allocbench results allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K \
    --reps 1 --min-ms 0 --threads 1 --json
json allocbench results allocbench --latency --rounds 1 --ms 20 --bytes 256K --json
json density results density --corpus "$T/c.pages" --size 256K -v --json
json churn results churn --corpus "$T/c.pages" --size 64K --allocator zsmalloc --json
json cachebench results cachebench --mode all --size 1M --file-set 1M --cache 256K \
    --budgets 256K --reads 1000 --dir "$T/scratch" --allocators zsmalloc --json
json tierbench results tierbench --data text:0.5 --size 2M --ops 2000 --dir "$T/scratch" --json
json regionbench results regionbench --fault-cost --size 4M --resident 1M --json
json runbench results runbench --quick --json
json list servers list --json
# has NAME KEYS ARGS...: zmem ARGS' document has each of KEYS (key=value
# also checks its value, as JSON) and no bare "bytes" key: the parameters
# of a run are there to repeat it, each named for what it is
has() {
    name=$1 keys=$2; shift 2
    (cd "$T/tmp" && "$ZMEM" "$@" > "$T/doc.json" 2> "$T/err") ||
        { bad "$name: zmem $*: status $?"; tail -3 "$T/err" | diag; return; }
    if python3 - "$T/doc.json" "$keys" > "$T/py" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for kv in sys.argv[2].split():
    k, _, v = kv.partition("=")
    assert k in d, "no %r in %s" % (k, list(d))
    assert not v or d[k] == json.loads(v), "%s is %r, not %s" % (k, d[k], v)
assert "bytes" not in d, "a bare 'bytes' key"
PY
    then ok "$name"; else bad "$name"; tail -1 "$T/py" | diag; fi
}
has "worstcase --json: the run's options" \
    'min_size_bytes=4194304 max_size_bytes=4194304 mem_cap_bytes=2147483648 plot=null
     backends=["zbud"] sequences=[{"name":"tiny","hurts":"zbud"}]' \
    worstcase --max-size 4M --allocator zbud --sequence tiny --json
has "allocbench --json: bytes per thread" bytes_per_thread=65536 \
    allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K --reps 1 \
    --min-ms 0 --threads 1 --json
has "allocbench --latency --json: bytes per thread" bytes_per_thread=262144 \
    allocbench --latency --rounds 1 --ms 20 --bytes 256K --json
# stats and ctl of a server that lives as long as the command asking
# shellcheck disable=SC2016
served() {  # NAME BEFORE AFTER: zmem BEFORE SOCKET AFTER
    name=$1 before=$2 after=$3
    (cd "$T/tmp" && export ZMEM OUT="$T/doc.json" &&
     "$ZMEM" serve --size 1M --socket "$T/scratch/s.sock" \
        --run "\"\$ZMEM\" $before \"\$socket\" $after > \"\$OUT\"" 2> "$T/err") ||
        { bad "zmem $before SOCKET $after"; diag < "$T/err"; return; }
    lint=1
    for p in $PENDING_KEYS; do [ "$p" = "$name" ] && lint=0; done
    if python3 "$T/check.py" "$T/doc.json" "$name" - "$lint" 2> "$T/py"; then
        ok "zmem $before SOCKET $after"
    else
        bad "zmem $before SOCKET $after"; tail -1 "$T/py" | diag; head -c 200 "$T/doc.json" | diag
    fi
}
served stats "stats --json" ""
served stats "stats -j" ""
served ctl ctl info
tap_end
