#!/bin/sh
# Bash completion (scripts/zmem.bash): it is registered for zmem; it
# completes the commands, only the options the command takes (not words
# its help merely mentions), and the values of options: codecs,
# allocators, data sets, choices written a|b in --help; and ctl's verbs
# and their first arguments.  Each case drives _zmem through COMP_WORDS
# and COMP_CWORD, as bash does.  Reports in TAP (tests/tap.sh).
#
#   ZMEM    the zmem binary under test (default: the build's, beside us)
set -u
here=$(cd "$(dirname "$0")" && pwd)
ZMEM=${ZMEM:-$here/../zmem}
COMPLETION=${COMPLETION:-}
for f in "$here/../scripts/zmem.bash" "$here/../../scripts/zmem.bash" \
         "$here/../../../scripts/zmem.bash"; do
    [ -z "$COMPLETION" ] && [ -f "$f" ] && COMPLETION=$f
done
T=$(mktemp -d /tmp/zmem-completion.XXXXXX)
trap 'rm -rf "$T"' EXIT
tap=$(dirname "$0")/tap.sh
[ -f "$tap" ] || tap=$(dirname "$0")/../tap.sh
. "$tap"
command -v bash > /dev/null || { echo "1..0 # SKIP no bash"; exit 0; }
[ -n "$COMPLETION" ] || { echo "1..0 # SKIP no scripts/zmem.bash"; exit 0; }
export ZMEM COMPLETION

# offers WORDS... :: WANT...: completing the last of WORDS (zmem first)
# offers every word of WANT; "!WORD" in WANT: does not offer WORD
offers() {
    words=""
    while [ "$1" != "::" ]; do words="$words '$1'"; shift; done
    shift
    # shellcheck disable=SC2016
    bash -c '
        . "$COMPLETION"
        eval "COMP_WORDS=($1)"
        COMP_WORDS[0]=$ZMEM
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
        _zmem zmem "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}"' _ "$words" > "$T/reply" 2> "$T/err"
    miss=""
    for w in "$@"; do
        case $w in
            !*) grep -qxF -- "${w#!}" "$T/reply" && miss="$miss $w" ;;
            *) grep -qxF -- "$w" "$T/reply" || miss="$miss $w" ;;
        esac
    done
    if [ -z "$miss" ]; then
        ok "zmem$words: $*"
    else
        bad "zmem$words: wrong:$miss"; tr '\n' ' ' < "$T/reply" | diag; echo | diag
        diag < "$T/err"
    fi
}

# shellcheck disable=SC2016
if bash -c '. "$COMPLETION"; complete -p zmem' 2> /dev/null | grep -q -- '-F _zmem'; then
    ok "complete -p zmem: _zmem"
else
    bad "complete -p zmem: _zmem"
fi
offers zmem be :: bench
offers zmem help ch :: churn
# the options a command takes, not those its help names
offers zmem ctl -- :: --timeout '!--backing' '!--recompress' '!--mem-limit'
offers zmem bench --wi :: --wide
offers zmem allocbench --latency --se :: --settle
offers zmem allocbench --si :: --sizes '!--settle'
# values
offers zmem bench --codec '' :: lz4 zstd lzo none
offers zmem tierbench --recompress z :: zstd
offers zmem serve --codec=l :: lz4 lzo
offers zmem bench --allocator z :: zsmalloc zbud '!xvmalloc'
offers zmem serve --allocator x :: xvmalloc xcfmalloc
offers zmem churn -a zs :: zsmalloc zsmalloc-off
# codecs and allocators: exactly the names the binary has, no list of
# the completion's own to drift from the build
# same_as WORDS... :: CMD...: completing the last of WORDS offers exactly
# the lines zmem CMD prints (and CMD prints some)
same_as() {
    words=""
    while [ "$1" != "::" ]; do words="$words '$1'"; shift; done
    shift
    "$ZMEM" "$@" 2> /dev/null | sort > "$T/want"
    # shellcheck disable=SC2016
    bash -c '
        . "$COMPLETION"
        eval "COMP_WORDS=($1)"
        COMP_WORDS[0]=$ZMEM
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        _zmem zmem "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}"' _ "$words" 2> /dev/null | sort > "$T/got"
    if [ -s "$T/want" ] && cmp -s "$T/want" "$T/got"; then
        ok "zmem$words: the names of zmem $*"
    else
        bad "zmem$words: not the names of zmem $*"
        { echo "want: $(tr '\n' ' ' < "$T/want")"; echo "got: $(tr '\n' ' ' < "$T/got")"; } | diag
    fi
}
same_as zmem bench --codec '' :: help codecs
same_as zmem serve --recompress '' :: help codecs
same_as zmem bench --allocator '' :: help allocators
same_as zmem cachebench --allocators '' :: help allocators
same_as zmem churn --allocator '' :: churn --choices --allocator
same_as zmem churn -a '' :: churn --choices --allocator
codecs_built() {
    "$ZMEM" help codecs > "$T/c" && grep -qx lz4 "$T/c" && grep -qx none "$T/c" &&
    "$ZMEM" help allocators > "$T/a" && grep -qx zsmalloc "$T/a" &&
    "$ZMEM" churn --choices --allocator | grep -qx zsmalloc-off
}
if codecs_built; then ok "zmem help codecs, help allocators, churn --choices --allocator"
else bad "zmem help codecs, help allocators, churn --choices --allocator"; fi
offers zmem bench --data te :: text text:
offers zmem tierbench -d '' :: zero text random memory file: capture:
offers zmem allocbench --apart '' :: pools all
offers zmem gen --kind '' :: zero random text memory
offers zmem list -o N :: NAME
# ctl's verbs, after its options and socket, and their arguments
offers zmem ctl com :: compact compact-file
offers zmem ctl --timeout 5s /tmp/s.sock wr :: writeback
offers zmem ctl run:12 re :: reclaim '!recompress'
offers zmem ctl writeback '' :: idle huge huge_idle incompressible all page
offers zmem ctl recompress '' :: idle huge huge_idle all
offers zmem ctl idle '' :: all
tap_end
