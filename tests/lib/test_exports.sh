#!/bin/sh
# The shared library exports exactly the calls the public headers declare
# with ZM_API: nothing internal leaks out (hidden visibility), and nothing
# declared is missing; libzmem(3) names each of them and every errno the
# headers name.  Reports in TAP (tests/tap.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
LIB=${LIB:-$here/../libzmem.so}
top=$here
while [ ! -d "$top/include/zmem" ] && [ "$top" != / ]; do top=$(dirname "$top"); done
INC=${INC:-$top/include/zmem}
T=$(mktemp -d /tmp/zmem-exports.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -f "$here/tap.sh" ]; then . "$here/tap.sh"; else . "$here/../tap.sh"; fi

# every declaration starts its line with ZM_API; the name is the word
# before the first parenthesis
sed -n 's/^ZM_API [^(]*[^a-z0-9_]\(zm_[a-z0-9_]*\)(.*/\1/p' "$INC"/*.h | sort -u > "$T/declared"
nm -D --defined-only "$LIB" | awk '$2 == "T" || $2 == "W" { print $3 }' | sort -u > "$T/exported"
nm -D --defined-only "$LIB" | awk '$2 != "T" && $2 != "W" && $3 !~ /^_/ { print $3 }' > "$T/other"

if [ -s "$T/declared" ]; then ok "headers declare $(wc -l < "$T/declared") calls"; else bad "headers declare calls"; fi
extra=$(comm -13 "$T/declared" "$T/exported")
if [ -z "$extra" ]; then ok "nothing exported beyond the headers"; else bad "exported but not declared:"; echo "$extra" | diag; fi
missing=$(comm -23 "$T/declared" "$T/exported")
if [ -z "$missing" ]; then ok "every declared call exported"; else bad "declared but not exported:"; echo "$missing" | diag; fi
if [ ! -s "$T/other" ]; then ok "no data symbols exported"; else bad "data symbols exported:"; diag < "$T/other"; fi
# libzmem(3) names every declared call and every errno a header says a
# call returns
MAN=${MAN:-$top/docs/libzmem.3}
if [ -f "$MAN" ]; then
	undoc=$(while read -r f; do grep -q "$f" "$MAN" || echo "$f"; done < "$T/declared")
	if [ -z "$undoc" ]; then ok "libzmem(3) names every declared call"; else bad "declared but not in libzmem(3):"; echo "$undoc" | diag; fi
	undoc=$(grep -ohE -- '-E[A-Z0-9]+' "$INC"/*.h | sort -u | sed 's/^-//' |
		while read -r e; do grep -q "^\.B $e\b" "$MAN" || echo "$e"; done)
	if [ -z "$undoc" ]; then ok "libzmem(3) lists every errno the headers name"; else bad "errnos not under ERRORS in libzmem(3):"; echo "$undoc" | diag; fi
else
	ok "# SKIP no libzmem(3) beside the headers ($MAN)"
fi
# no symbol outside the public prefix, and none of the internal tier
if grep -qv '^zm_' "$T/exported"; then bad "symbols outside zm_:"; grep -v '^zm_' "$T/exported" | diag; else ok "every export has the public prefix"; fi

tap_end
