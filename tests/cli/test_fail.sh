#!/bin/sh
# The zmem command fails loudly, early and with the right status: every
# file it will write (--plot, -o, --pidfile) and every file or folder it
# will read or write into (--corpus, --files, --dir, --data file:) is
# checked before any work, so a bad one ends the run at once with one line
# naming it and status 1; a size that cannot be held in memory is refused
# naming the size and the memory; a corpus file that cannot be read is
# reported with its error; a write to standard output that fails is
# "write error" and status 1, as coreutils do.  Reports in TAP
# (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
ZMEM=${ZMEM:-$(cd "$(dirname "$0")/.." && pwd)/zmem}
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
zmem_test_env fail

# refused ARGS... -- WANT: zmem ARGS ends within 3 s (before any work)
# with status 1, one line on stderr containing WANT, nothing on stdout,
# and no file written in the working folder
mkdir "$T/empty"
refused() {
    args=""
    while [ "$1" != "--" ]; do args="$args '$1'"; shift; done
    want=$2
    eval "cd \"\$T/empty\" && ZMEM_LOG=off timeout 3 \"\$ZMEM\" $args" > "$T/out" 2> "$T/err"
    rc=$?
    cd "$T" || exit 1
    if [ $rc -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && [ ! -s "$T/out" ] &&
       grep -qF -- "$want" "$T/err" && [ -z "$(ls -A "$T/empty")" ]; then
        ok "zmem$args: $want"
    else
        bad "zmem$args: want status 1 at once and '$want', got $rc:"
        cat "$T/err" "$T/out" | head -5 | diag
        ls -A "$T/empty" | diag
        rm -rf "${T:?}/empty/"*
    fi
}

nodir=$T/none/x
"$ZMEM" gen --kind text --ratio 0.5 --size 256K -o "$T/c.pages" -q || bad "gen a corpus"

# ---- paths: checked before any work --------------------------------
refused bench --size 64K --reps 1 --data zero --allocator zsmalloc --plot "$nodir.svg" -- \
    "zmem bench: --plot $nodir.svg: No such file or directory"
refused bench --size 64K --reps 1 --data zero --allocator zsmalloc --plot "$T" -- \
    "--plot $T: Is a directory"
refused bench --size 64K --reps 1 --data "file:$T/none" --allocator zsmalloc --no-plot -- \
    "zmem bench: --data file: $T/none: No such file or directory"
refused allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K --reps 1 \
    --min-ms 0 --threads 1 --plot "$nodir.svg" -- "zmem allocbench: --plot $nodir.svg:"
refused worstcase --max-size 4M --sequence tiny --plot "$nodir.svg" -- \
    "zmem worstcase: --plot $nodir.svg:"
refused cachebench --mode all --size 1M --file-set 1M --cache 256K --budgets 256K \
    --reads 1000 --allocators zsmalloc --plot "$nodir.svg" -- "zmem cachebench: --plot $nodir.svg:"
refused cachebench --files /nonexistent -- "zmem cachebench: --files /nonexistent: No such file"
refused cachebench --dir "$T/none" -- "zmem cachebench: --dir $T/none: No such file"
refused density --corpus "$T/none" --size 64K -- "zmem density: --corpus $T/none: No such file"
refused churn --corpus "$T/none" --size 64K -- "zmem churn: --corpus $T/none: No such file"
refused gen --kind text --size 64K -o "$nodir" -- "zmem gen: -o $nodir: No such file"
refused capture $$ -o "$nodir" -- "zmem capture: -o $nodir: No such file"
refused serve --size 1M --socket "$T/s.sock" --pidfile "$nodir" -- \
    "zmem serve: --pidfile $nodir: No such file"
refused serve --size 1M --socket "$T/s.sock" --backing "$nodir" -- \
    "zmem serve: --backing $nodir: cannot open it for reading and writing: No such file"
refused regionbench --plot "$nodir.svg" -- "zmem regionbench: --plot $nodir.svg:"
refused regionbench --dir "$T/none" -- "zmem regionbench: --dir $T/none:"
refused runbench --plot "$nodir.svg" -- "zmem runbench: --plot $nodir.svg:"
refused runbench --prog-dir "$T/none" -- "zmem runbench: --prog-dir $T/none: No such file"
refused tierbench --size 2M --plot "$nodir.svg" -- "zmem tierbench: --plot $nodir.svg:"
refused tierbench --size 2M --dir "$T/none" -- "zmem tierbench: --dir $T/none: No such file"
refused tierbench --size 2M --data "file:$T/none" -- \
    "zmem tierbench: --data file: $T/none: No such file"
refused tierbench --size 2M --modes none,wb-nbd --backing-uri "nbd+unix:///?socket=$T/none.sock" \
    -- "zmem tierbench: --backing-uri nbd+unix:///?socket=$T/none.sock: "

# ---- sizes that cannot be held: the size and the memory named --------
refused bench --size 1T --data zero --allocator zsmalloc --no-plot -- "zmem bench: --size 1T does not fit in memory"
refused cachebench --size 1T -- "zmem cachebench: --size 1T does not fit in memory"
refused cachebench --size 1M --cache 1T -- "zmem cachebench: --cache 1T does not fit in memory"
refused tierbench --size 1T -- "zmem tierbench: --size 1T does not fit in memory"
refused regionbench --size 1T -- "zmem regionbench: --size 1T does not fit in memory"
mem_named() {
    "$ZMEM" bench --size 1T --data zero --allocator zsmalloc --no-plot 2>&1 |
        grep -q "this machine has [0-9.]* [KMGT]iB"
}
check "the refused size names the machine's memory" mem_named

# ---- an unreadable corpus file: its error, not skipped --------------
# (as root every file is readable: the check runs as nobody then)
as_user() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
    if command -v setpriv > /dev/null; then
        as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
    else
        as_user() { return 77; }
    fi
fi
chmod 0711 "$T"
mkdir -m 0755 "$T/ro"
cp "$T/c.pages" "$T/ro/a.pages" && cp "$T/c.pages" "$T/ro/b.pages"
chmod 0 "$T/ro/b.pages"
unreadable() {
    as_user "$ZMEM" density --corpus "$T/ro/b.pages" --size 64K > "$T/out" 2> "$T/err"
    rc=$?
    [ $rc -eq 77 ] && return 0
    [ $rc -eq 1 ] && grep -q "b.pages: Permission denied" "$T/err" && [ ! -s "$T/out" ] ||
        { cat "$T/err" | diag; return 1; }
    # in a tree: the file named with its error, not skipped
    as_user "$ZMEM" churn --corpus "$T/ro" --size 1M > "$T/out" 2> "$T/err"
    [ $? -eq 1 ] && grep -q "b.pages: Permission denied" "$T/err" || { diag < "$T/err"; return 1; }
    # cachebench's --files tree the same, before its first phase
    as_user "$ZMEM" cachebench --files "$T/ro" --size 1M --file-set 1M --cache 256K \
        --budgets 256K --reads 100 --allocators zsmalloc --dir "$T/tmp" > "$T/out" 2> "$T/err"
    [ $? -eq 1 ] && grep -q "b.pages: Permission denied" "$T/err" && [ ! -s "$T/out" ] &&
        ! grep -q frontswap "$T/err" || { diag < "$T/err"; return 1; }
}
check "an unreadable corpus file is reported with its error" unreadable

# ---- standard output: a failed write is an error --------------------
full() {
    [ -w /dev/full ] || return 0
    "$ZMEM" "$@" > /dev/full 2> "$T/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "write error: No space left on device" "$T/err" ||
        { echo "status $rc" | cat - "$T/err" | diag; return 1; }
}
check "zmem help > /dev/full: write error, status 1" full help
# the message names zmem alone when no command runs
full_bare() { full "$@" && grep -q '^zmem: write error' "$T/err" || { diag < "$T/err"; false; }; }
check "zmem help codecs > /dev/full: \"zmem: write error\"" full_bare help codecs
check "zmem --version > /dev/full: \"zmem: write error\"" full_bare --version
check "zmem --version > /dev/full: write error, status 1" full --version
check "zmem bench > /dev/full: write error, status 1" \
    full bench --size 64K --reps 1 --data zero --allocator zsmalloc --no-plot -q
check "zmem bench --json > /dev/full: write error, status 1" \
    full bench --size 64K --reps 1 --data zero --allocator zsmalloc --json -q
check "zmem density > /dev/full: write error, status 1" \
    full density --corpus "$T/c.pages" --size 64K -q

# zmem serve detaching: its URI and pid lost is a write error too (the
# server runs on: stop it)
serve_full() {
    [ -w /dev/full ] || return 0
    "$ZMEM" serve --size 1M --socket "$T/full.sock" > /dev/full 2> "$T/err"
    rc=$?
    "$ZMEM" stop "$T/full.sock" > /dev/null 2>&1
    [ $rc -eq 1 ] && grep -q "write error: No space left on device" "$T/err" ||
        { echo "status $rc" | cat - "$T/err" | diag; return 1; }
}
check "zmem serve > /dev/full: write error, status 1" serve_full

# ---- a plot that passes the early checks and fails to write at the end:
# the error named and status 1 (full.svg is /dev/full: it opens, and
# every write to it fails)
ln -s /dev/full "$T/full.svg"
plot_full() {
    [ -w /dev/full ] || return 0
    (cd "$T/empty" && ZMEM_LOG=off "$ZMEM" "$@" --plot "$T/full.svg" > "$T/out" 2> "$T/err")
    rc=$?
    [ $rc -eq 1 ] && grep -q "full.svg: No space left on device" "$T/err" ||
        { echo "status $rc" | cat - "$T/err" | diag; return 1; }
}
check "zmem bench --plot FULL: status 1" \
    plot_full bench --size 64K --reps 1 --data zero --allocator zsmalloc -q
check "zmem tierbench --plot FULL: status 1" \
    plot_full tierbench --data text:0.5 --size 2M --ops 2000 --dir "$T/tmp"
check "zmem cachebench --plot FULL: status 1" \
    plot_full cachebench --mode all --size 1M --file-set 1M --cache 256K --budgets 256K \
    --reads 1000 --dir "$T/tmp" --allocators zsmalloc
check "zmem regionbench --plot FULL: status 1" \
    plot_full regionbench --size 4M --resident 1M --trace seq
check "zmem allocbench --plot FULL: status 1" \
    plot_full allocbench --allocator zsmalloc --sizes 64 --count 500 --bytes 64K --reps 1 \
    --min-ms 0 --threads 1
check "zmem worstcase --plot FULL: status 1" plot_full worstcase --max-size 4M --sequence tiny

tap_end
