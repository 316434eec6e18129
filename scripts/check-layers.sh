#!/bin/sh
# make check-layers: every #include in src/ goes down the layers or stays
# in its folder; include/zmem/'s headers include only those below them;
# the tests include the programs' internals only in those programs' tests.  A file in src/L/ (or a folder below it: src/pool/zsmalloc/
# is the pool's) may include "L/..." and the folders its line below names,
# nothing else; a library layer may include the public headers <zmem/H.h>
# its line names.  The same table, in prose, is in docs/hacking.md.
#
#   layer | quoted includes ("DIR/...", or one "DIR/FILE") | <zmem/H.h>
set -uf  # -f: the table's * is a word, not a glob
cd "$(dirname "$0")/.." || exit 2

# has WORD LIST...: is WORD one of LIST?
has() {
	w=$1
	shift
	for a in "$@"; do
		[ "$a" = "$w" ] && return 0
	done
	return 1
}

# includes FILE: "LINE <header>" or 'LINE "header"' for each #include
includes() {
	grep -n '^[[:space:]]*#[[:space:]]*include' "$1" |
		sed -n 's/^\([0-9]*\):.*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1 \2/p'
}

TABLE='
base     | -                                            | common
pages    | base                                         | common pages
codec    | base                                         | common codec
pool     | base                                         | common pages pool
store    | base                                         | common pages pool codec store
tmem     | base                                         | common pages pool codec store tmem
region   | base                                         | common pages pool codec store region
workload | base                                         | *
serve    | base                                         | *
run      | base                                         | *
tool     | base                                         | *
bench    | base workload tool                           | *
cli      | base workload tool serve run bench/commands.h | *
'

fail=0
out=$(for f in $(find src -name '*.[ch]' | sort); do
	layer=${f#src/}
	layer=${layer%%/*}
	row=$(printf '%s\n' "$TABLE" | awk -F'|' -v l="$layer" '{ k = $1; gsub(/ /, "", k) } k == l')
	if [ -z "$row" ]; then
		echo "check-layers: $f: folder src/$layer is not in the table (scripts/check-layers.sh)"
		fail=1
		continue
	fi
	quoted=$(printf '%s\n' "$row" | awk -F'|' '{ print $2 }')
	public=$(printf '%s\n' "$row" | awk -F'|' '{ print $3 }')
	includes "$f" | while read -r n inc; do
		case $inc in
		\"*)
			path=${inc#\"}; path=${path%\"}
			dir=${path%%/*}
			[ "$dir" = "$path" ] && continue   # same folder, no prefix
			[ "$dir" = "$layer" ] && continue
			# shellcheck disable=SC2086
			has "$dir" $quoted || has "$path" $quoted || echo "$f:$n: includes \"$path\": src/$layer may not include src/$dir"
			;;
		\<zmem/*)
			case " $public " in *" * "*) continue ;; esac
			h=${inc#<zmem/}; h=${h%.h>}
			# shellcheck disable=SC2086
			has "$h" $public || echo "$f:$n: includes <zmem/$h.h>: the layer $layer is below it"
			;;
		esac
	done
done)
if [ -n "$out" ]; then
	printf '%s\n' "$out"
	fail=1
fi

# The public headers: include/zmem/H.h includes system headers and the
# public headers below it, nothing quoted (no header of src/).  zmem.h is
# the one that includes them all.
#
#   header | <zmem/H.h> below it
HEADERS='
common   | -
pages    | common
codec    | common
pool     | common pages
store    | common pages codec pool
tmem     | common pages codec pool store
region   | common pages codec pool store
zmem     | *
'
out=$(for f in $(find include/zmem -name '*.h' | sort); do
	h=${f#include/zmem/}; h=${h%.h}
	row=$(printf '%s\n' "$HEADERS" | awk -F'|' -v l="$h" '{ k = $1; gsub(/ /, "", k) } k == l')
	if [ -z "$row" ]; then
		echo "check-layers: $f is not in the headers' table (scripts/check-layers.sh)"
		continue
	fi
	below=$(printf '%s\n' "$row" | awk -F'|' '{ print $2 }')
	includes "$f" | while read -r n inc; do
		case $inc in
		\"*)
			echo "$f:$n: includes $inc: a public header includes no header of src/"
			;;
		\<zmem/*)
			case " $below " in *" * "*) continue ;; esac
			i=${inc#<zmem/}; i=${i%.h>}
			# shellcheck disable=SC2086
			has "$i" $below || echo "$f:$n: includes <zmem/$i.h>: <zmem/$h.h> is below it"
			;;
		esac
	done
done)
if [ -n "$out" ]; then
	printf '%s\n' "$out"
	fail=1
fi

# The tests sit above everything: tests/ may include any header of the
# library (base, pages, codec, pool, store, tmem, region, their private
# headers too: the tests are white-box) and the workload generator.  The
# programs' internals (tool, serve, run, bench, cli) only in the tests of
# that program, the files this table names:
#
#   files (globs under tests/) | program folders they may include
TESTS='
test_cli.c test_benchmarks.c                      | tool bench cli
test_nbd*.c nbdclient.h fuzz/fuzz_nbd.c           | serve
run/*                                             | run
'
LIBRARY="base pages codec pool store tmem region workload"
out=$(for f in $(find tests -name '*.[ch]' | sort); do
	rel=${f#tests/}
	extra=$(printf '%s\n' "$TESTS" | while IFS='|' read -r globs dirs; do
		for g in $globs; do
			# shellcheck disable=SC2254
			case $rel in $g) echo "$dirs" ;; esac
		done
	done)
	includes "$f" | while read -r n inc; do
		case $inc in \"*) ;; *) continue ;; esac
		path=${inc#\"}; path=${path%\"}
		dir=${path%%/*}
		[ "$dir" = "$path" ] && continue   # the tests' own headers
		# shellcheck disable=SC2086
		has "$dir" $LIBRARY $extra || echo "$f:$n: includes \"$path\": only the tests of src/$dir may (scripts/check-layers.sh)"
	done
done)
if [ -n "$out" ]; then
	printf '%s\n' "$out"
	fail=1
fi
[ $fail = 0 ] && echo "check-layers: every include goes down or stays in its folder"
exit $fail
