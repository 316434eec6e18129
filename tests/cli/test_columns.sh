#!/bin/sh
# Every line the zmem command prints on stdout fits 80 columns: zmem
# help, each command's --help and each command's default tables, each run
# on tiny sizes; columns that do not fit are behind --wide, which each
# such command takes.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env columns

# fits ARGS...: zmem ARGS succeeds and no line of its stdout passes 80.
# todo ARGS...: the same for an output known to pass 80 still: a TODO
# while it does, a failure once it fits (make it a "fits" then).
todo=0
fits() {
    (cd "$T/tmp" && ZMEM_LOG=off "$ZMEM" "$@" > "$T/out" 2> "$T/err")
    rc=$?
    if [ $rc -eq 77 ]; then ok "zmem $* # SKIP cannot run here"; return; fi
    if [ $rc -ne 0 ]; then bad "zmem $*: status $rc"; tail -3 "$T/err" | diag; return; fi
    wide=$(awk 'length > 80 { n++ } END { print n + 0 }' "$T/out")
    if [ $todo -eq 1 ] && [ "$wide" -gt 0 ]; then
        ok "zmem $*: $wide lines past 80 columns # TODO"
    elif [ $todo -eq 1 ]; then
        bad "zmem $*: fits 80 columns now (make it a fits)"
    elif [ "$wide" -eq 0 ]; then
        ok "zmem $*: 80 columns"
    else
        bad "zmem $*: $wide lines past 80 columns"
        awk 'length > 80 { print length ": " $0 }' "$T/out" | head -3 | diag
    fi
}
todo() { todo=1; fits "$@"; todo=0; }
# takes CMD OPTION: CMD's --help lists OPTION
takes() {
    if "$ZMEM" "$1" --help | grep -q -- "^ *\(-., \)\?$2[ =]\|^ *\(-., \)\?$2\$"; then
        ok "zmem $1 takes $2"
    else
        bad "zmem $1 takes $2"
    fi
}

fits help
# indented ARGS...: in zmem ARGS --help's options, each line is an
# option's or goes on under its help's column (24), a default included
indented() {
    "$ZMEM" "$@" --help | awk '/^Options:/ { o = 1; next } o && /^$/ { o = 0 }
        o && !/^  -., --/ && !/^      --/ && !/^                        [^ ]/' > "$T/out"
    if [ ! -s "$T/out" ]; then
        ok "zmem $* --help: each option's lines under its column"
    else
        bad "zmem $* --help: lines out of the help's column"; diag < "$T/out"
    fi
}
for c in $("$ZMEM" help | sed -n 's/^  \([a-z][a-z0-9-]*\)  .*/\1/p'); do
    fits "$c" --help
    indented "$c"
done
fits allocbench --latency --help
indented allocbench --latency
"$ZMEM" gen --kind text --ratio 0.5 --size 1M -o "$T/c.pages" -q || bad "gen a corpus"
mkdir "$T/scratch"
fits bench --size 256K --reps 1
fits bench --size 256K --reps 1 --data zero --data text:0.5 --allocator zsmalloc
# -v: each store's counters and its pool's class table
fits bench --size 256K --reps 1 --data text:0.5 --allocator zsmalloc -v
fits bench --unit-pages 1,4 --size 256K --reps 1 --data text:0.5
fits bench --compare-2011 --size 1M --allocator zsmalloc
# as root, with the kernel's zram row (its name the longest)
fits bench --size 256K --reps 1 --kernel --allocator zsmalloc
fits pagebench --max-size 256K --threads 1 --quick
fits worstcase --max-size 4M --sequence tiny
fits allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K --reps 1 \
    --min-ms 0 --threads 1
fits allocbench --latency --rounds 1 --ms 20 --bytes 256K
fits density --corpus "$T/c.pages" --size 256K
fits density --corpus "$T/c.pages" --size 64K --sweep
fits churn --corpus "$T/c.pages" --size 64K --allocator zsmalloc
fits churn --corpus "$T/c.pages" --size 64K --allocator zsmalloc --foreground
fits bench --size 256K --reps 1 --data text:0.5 --allocator zsmalloc --churn 0.5
fits cachebench --mode all --size 1M --file-set 1M --cache 256K --budgets 256K \
    --reads 1000 --dir "$T/scratch" --allocators zsmalloc
fits tierbench --data text:0.5 --size 2M --ops 2000 --dir "$T/scratch"
# the notes under its table explain its columns, not --wide's alone
if grep -q "^mode .*machine MiB" "$T/out" && ! grep -q "in mem /\|file alloc =\|rss =" "$T/out"; then
    ok "tierbench: the notes name the table's columns only"
else
    bad "tierbench: the notes name the table's columns only"; grep "=" "$T/out" | diag
fi
fits regionbench --fault-cost --size 4M --resident 1M
fits regionbench --size 4M --resident 1M --trace seq
fits runbench --quick --programs c --sides zmem
fits list
# the commands whose tables have more columns behind --wide
for c in churn tierbench bench cachebench regionbench runbench; do takes "$c" --wide; done
tap_end
