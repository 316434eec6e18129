#!/bin/sh
# zmem(1) lists every command's options and ctl's verbs: for each command
# of "zmem help" (and allocbench --latency), the long options its --help
# gives are the ones its subsection of COMMAND OPTIONS in docs/zmem.1
# names, no more and no fewer; each verb ctl --help lists is in the
# subsection of ctl's verbs (scripts/manopts.py prints that section
# afresh).  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
#   MAN     the man page (default: docs/zmem.1 of the tree)
set -u
here=$(cd "$(dirname "$0")" && pwd)
ZMEM=${ZMEM:-$here/../zmem}
MAN=${MAN:-}
for m in "$here/../docs/zmem.1" "$here/../../docs/zmem.1" "$here/../../../docs/zmem.1"; do
    [ -z "$MAN" ] && [ -f "$m" ] && MAN=$m
done
T=$(mktemp -d /tmp/zmem-manpage.XXXXXX)
trap 'rm -rf "$T"' EXIT
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
[ -n "$MAN" ] || { echo "1..0 # SKIP no docs/zmem.1 found"; exit 0; }

# section TITLE: the lines of docs/zmem.1's ".SS TITLE", up to the next
# .SS or .SH, with roff's \- as -
section() {
    sed 's/\\-/-/g' "$MAN" |
        awk -v t=".SS $1" '$0 == t { on = 1; next } /^\.S[SH] / { on = 0 } on'
}
# helpopts ARGS...: the long options zmem ARGS --help lists (not -h, -q)
helpopts() {
    "$ZMEM" "$@" --help | sed -n 's/^  \(-., \|    \)--\([a-z0-9-]*\).*/\2/p' |
        grep -v '^help$\|^quiet$' | sort -u
}
# manopts TITLE: the long options that head an entry of the section
manopts() {
    section "$1" | awk 'prev == ".TP" { print } { prev = $0 }' |
        sed -n 's/^\.BI\{0,1\} "\{0,1\}\(-., \)\{0,1\}--\([a-z0-9-]*\).*/\2/p' | sort -u
}
# same TITLE ARGS...: the options of zmem ARGS --help and of .SS TITLE
same() {
    title=$1; shift
    helpopts "$@" > "$T/help"
    manopts "$title" > "$T/man"
    if [ ! -s "$T/man" ]; then
        bad "zmem(1) has a section '$title' with its options"
    elif cmp -s "$T/help" "$T/man"; then
        ok "zmem(1) '$title': the $(wc -l < "$T/help") options of --help"
    else
        bad "zmem(1) '$title': the options of --help (<) and of the man page (>)"
        diff "$T/help" "$T/man" | grep '^[<>]' | diag
    fi
}

for c in $("$ZMEM" help | sed -n 's/^  \([a-z][a-z0-9-]*\)  .*/\1/p'); do
    same "zmem $c" "$c"
done
same "zmem allocbench --latency" allocbench --latency

# ctl's verbs: each name at the start of a line under "Verbs" in --help
"$ZMEM" ctl --help | awk '/^Verbs/ { on = 1; next } /^[^ ]/ { on = 0 } on' |
    sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | sort -u > "$T/verbs"
section "zmem ctl verbs" | awk 'prev == ".TP" { print } { prev = $0 }' |
    sed -n 's/^\.BI\{0,1\} "\{0,1\}\([a-z][a-z-]*\).*/\1/p' | sort -u > "$T/manverbs"
if [ -s "$T/verbs" ] && cmp -s "$T/verbs" "$T/manverbs"; then
    ok "zmem(1) lists ctl's $(wc -l < "$T/verbs") verbs"
else
    bad "zmem(1) lists ctl's verbs: --help (<) and the man page (>)"
    diff "$T/verbs" "$T/manverbs" | grep '^[<>]' | diag
fi
# the section's text is the help's: scripts/manopts.py's output
# (defaults and limits included, not the option names alone)
gen=$here/../scripts/manopts.py
[ -f "$gen" ] || gen=$here/../../scripts/manopts.py
if command -v python3 > /dev/null && [ -f "$gen" ]; then
    python3 "$gen" "$ZMEM" > "$T/gen"
    awk '/^\.SH COMMAND OPTIONS$/ { on = 1 } on && /^\.SH / && !/COMMAND OPTIONS/ { on = 0 }
        on' "$MAN" > "$T/sec"
    if cmp -s "$T/gen" "$T/sec"; then
        ok "zmem(1) COMMAND OPTIONS: scripts/manopts.py's output"
    else
        bad "zmem(1) COMMAND OPTIONS: scripts/manopts.py's output (<) and the page (>)"
        diff "$T/gen" "$T/sec" | grep '^[<>]' | head -6 | diag
    fi
fi
# the page renders without a warning
if command -v groff > /dev/null; then
    groff -man -Tutf8 -ww -z "$MAN" 2> "$T/groff"
    if [ ! -s "$T/groff" ]; then ok "zmem(1) renders without a warning"
    else bad "zmem(1) renders without a warning"; head -5 "$T/groff" | diag; fi
fi
tap_end
