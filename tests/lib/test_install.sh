#!/bin/sh
# make install as users run it: a plain build, then an install into a
# prefix of its own (DESTDIR unset) must give a zmem.pc naming that prefix,
# cflags naming zmem's headers only, a shared library under its soname, a
# static library exporting the public calls only, and the man pages
# (libzmem(3), zmem(1)); the
# README's example, taken from README.md so that the two cannot drift,
# must build and run against both libraries through pkg-config, and the
# man page's EXAMPLE must be the same program.  A DESTDIR install lands
# under DESTDIR; uninstall leaves nothing.  Reports in TAP (tests/tap.sh).
#
# shellcheck disable=SC2016,SC2046,SC2086,SC2317
# (sh -c scripts take their arguments as $1..; pkg-config's words and $CC
# are split on purpose; run() and the like are called through check)
#
# It builds the tree's release configuration in a directory of its own
# under /tmp (never the build directory it was copied into, whose
# configuration may be a debug or sanitizer one), and removes it after.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$here
while [ ! -d "$top/include/zmem" ] && [ "$top" != / ]; do top=$(dirname "$top"); done
T=$(mktemp -d /tmp/zmem-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -f "$here/tap.sh" ]; then . "$here/tap.sh"; else . "$here/../tap.sh"; fi
finish() { tap_end; exit $?; }

# make check runs this from a make whose configuration (BUILD, ZM_DEBUG,
# SAN, ...) reaches it in MAKEFLAGS and, as variables given on make's
# command line are exported, in the environment: the builds here are plain
# ones, into directories of their own.  CC, CFLAGS, ZM_WITH_LZO and WERROR
# are the user's and stay.
unset MAKEFLAGS MFLAGS MAKEOVERRIDES MAKELEVEL BUILD SAN ZM_DEBUG OPT \
      PREFIX LIBDIR INCDIR BINDIR MANDIR DESTDIR RESULTS RUN_TESTS TEST_WRAP
CC=${CC:-cc}
B=$T/build
P=$T/prefix
M="make -s -C $top BUILD=$B"
jobs=$(nproc 2>/dev/null || echo 2)
ver=$(for p in MAJOR MINOR PATCH; do
        sed -n "s/^#define ZMEM_VERSION_$p  *\([0-9]*\).*/\1/p" "$top/include/zmem/common.h"
      done | paste -sd. -)
# the soname's number is the version's major number (the Makefile's
# SOVERSION), so the file libzmem.so.$ver starts with the soname
so=libzmem.so.${ver%%.*}

# a plain make, then the install: the prefix reaches zmem.pc all the same
if $M -j"$jobs" > "$T/log" 2>&1; then ok "make"; else bad "make"; diag < "$T/log"; finish; fi

# An upgrade leaves the previous ABI's library alone.  0.2.0 installed
# libzmem.so.0.2.0 under the soname libzmem.so.1 and exported the workload
# calls; a stand-in for it (a library with that file name, soname and one
# of those calls, built here in a second rather than building 0.2.0) is
# in the prefix with a program linked against it, before this tree's
# install and after its uninstall.
L=$P/lib
mkdir -p "$L" "$T/old"
printf '%s\n' 'unsigned zm_workload_count(void);' \
    'unsigned zm_workload_count(void) { return 17; }' > "$T/old/old.c"
printf '%s\n' '#include <stdio.h>' 'unsigned zm_workload_count(void);' \
    'int main(void) { printf("old %u\n", zm_workload_count()); return 0; }' > "$T/old/prog.c"
$CC -shared -fPIC -Wl,-soname,libzmem.so.1 -o "$L/libzmem.so.0.2.0" "$T/old/old.c" &&
    ln -s libzmem.so.0.2.0 "$L/libzmem.so.1" &&
    $CC -o "$T/old/prog" "$T/old/prog.c" "$L/libzmem.so.0.2.0" -Wl,-rpath,"$L"
old_ok() { out=$("$T/old/prog" 2>&1); [ "$out" = "old 17" ] || { echo "$out" | diag; return 1; }; }
check "the previous ABI's program runs before the install" old_ok
cksum "$L/libzmem.so.0.2.0" > "$T/old/sum"
if $M PREFIX="$P" install > "$T/log" 2>&1; then ok "make install PREFIX=TMP"
else bad "make install PREFIX=TMP"; diag < "$T/log"; finish; fi

check "the previous ABI's program runs after the install" old_ok
check "the install left libzmem.so.0.2.0 alone" \
    sh -c 'cksum "$1/libzmem.so.0.2.0" | cmp -s - "$2"' - "$L" "$T/old/sum"
check "libzmem.so.1 still names it" test "$(readlink "$L/libzmem.so.1")" = libzmem.so.0.2.0
check "the installed file is named after the soname ($so.*)" \
    sh -c 'case $2 in "$1".*) ;; *) exit 1 ;; esac' - "$so" "libzmem.so.$ver"
missing=""
for f in lib/libzmem.a "lib/libzmem.so.$ver" "lib/$so" lib/libzmem.so \
         lib/pkgconfig/zmem.pc include/zmem/zmem.h include/zmem/common.h bin/zmem \
         share/man/man3/libzmem.3 share/man/man1/zmem.1 \
         share/bash-completion/completions/zmem; do
    [ -e "$P/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "installed files"; else bad "installed files, missing:$missing"; fi
check "libzmem.so -> $so -> libzmem.so.$ver" \
    test "$(readlink "$L/libzmem.so")" = "$so" -a \
         "$(readlink "$L/$so")" = "libzmem.so.$ver"
soname=$(readelf -d "$L/libzmem.so.$ver" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
check "soname $so" test "$soname" = "$so"
[ "$soname" = "$so" ] || echo "soname: $soname" | diag

export PKG_CONFIG_PATH="$L/pkgconfig"
check "zmem.pc names the prefix" \
    test "$(pkg-config --variable=prefix zmem)" = "$P" -a \
         "$(pkg-config --variable=libdir zmem)" = "$L"
check "zmem.pc version $ver" test "$(pkg-config --modversion zmem)" = "$ver"
cflags=$(pkg-config --cflags zmem | sed 's/ *$//')
check "cflags are zmem's headers only" test "$cflags" = "-I$P/include"
[ "$cflags" = "-I$P/include" ] || echo "cflags: $cflags" | diag
static_libs=$(pkg-config --static --libs zmem)
check "static libs: -pthread -lm and the codecs" \
    sh -c 'for w in -lzmem -pthread -lm -llz4 -lzstd; do
               case " $1 " in *" $w "*) ;; *) echo "static libs: $1"; exit 1 ;; esac
           done' - "$static_libs"

# the installed static library defines no global symbol but the public ones
nm -g --defined-only "$L/libzmem.a" 2>/dev/null | awk 'NF == 3 { print $3 }' > "$T/syms"
other=$(grep -v '^zm_' "$T/syms")
if [ -s "$T/syms" ] && [ -z "$other" ]; then ok "libzmem.a: $(wc -l < "$T/syms") globals, all zm_"
else bad "libzmem.a: globals outside zm_:"; echo "$other" | head -20 | diag; fi

# the README's example, against the shared library and then the static one
awk '/^## Using the library/ { u = 1 } u && /^```c$/ { c = 1; next }
     c && /^```$/ { exit } c' "$top/README.md" > "$T/example.c"
run() { out=$("$@" 2>&1); [ "$out" = "zmem $ver: ok" ] || { echo "$out"; return 1; }; }
check "README example found" grep -q 'int main' "$T/example.c"
check "shared: cc \$(pkg-config --cflags --libs zmem)" \
    $CC -Wall -Wextra -Werror -o "$T/ex" "$T/example.c" $(pkg-config --cflags --libs zmem)
check "shared: runs with LD_LIBRARY_PATH" run env LD_LIBRARY_PATH="$L" "$T/ex"
check "shared: needs $so" sh -c 'readelf -d "$1" | grep NEEDED | grep -qF "[$2]"' - "$T/ex" "$so"
check "shared with rpath: builds" $CC -o "$T/ex-rpath" "$T/example.c" \
    $(pkg-config --cflags --libs zmem) -Wl,-rpath,"$L"
check "shared with rpath: runs" run "$T/ex-rpath"
check "static: cc -static \$(pkg-config --static --cflags --libs zmem)" \
    $CC -static -o "$T/ex-static" "$T/example.c" $(pkg-config --static --cflags --libs zmem)
check "static: runs" run "$T/ex-static"
check "static: no shared library needed" \
    sh -c 'test -x "$1" && ! readelf -d "$1" | grep -q NEEDED' - "$T/ex-static"

# the man page: where man looks under the prefix, and rendered without warnings
check "man -M PREFIX/share/man finds libzmem(3)" \
    test "$(man -M "$P/share/man" -w 3 libzmem 2>/dev/null)" = "$P/share/man/man3/libzmem.3"
man3=$P/share/man/man3/libzmem.3
warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$man3" 2>&1 >/dev/null)
check "man -l renders libzmem.3 without warnings" test -z "$warn"
[ -z "$warn" ] || echo "$warn" | head -20 | diag
check "man page: NAME and every section" sh -c '
    LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$1" 2>/dev/null > "$2"
    for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS "THREADS AND FORK" \
             ENVIRONMENT EXAMPLE VERSIONS "SEE ALSO"; do
        grep -qx "$s" "$2" || { echo "no $s"; exit 1; }; done' - "$man3" "$T/man.txt"
check "man page: version $ver as the headers'" grep -q "^\.TH LIBZMEM 3 .*\"zmem $ver\"" "$man3"
man1=$P/share/man/man1/zmem.1
check "man -M PREFIX/share/man finds zmem(1)" \
    test "$(man -M "$P/share/man" -w 1 zmem 2>/dev/null)" = "$man1"
warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$man1" 2>&1 >/dev/null)
check "man -l renders zmem.1 without warnings" test -z "$warn"
check "zmem(1): version $ver as the headers'" grep -q "^\.TH ZMEM 1 .*\"zmem $ver\"" "$man1"
# its EXAMPLE is the README's, indented by four spaces for a tab
sed -n '/^\.SH EXAMPLE/,/^\.fi/p' "$man3" | sed '1,/^\.nf/d; /^\.fi/d' |
    sed 's/\\e/\\/g; s/\\-/-/g; s/\\(aq/'"'"'/g' > "$T/man-example.c"
check "man page: EXAMPLE is the README's" \
    sh -c 'sed "s/\t/    /g" "$1" | cmp -s - "$2"' - "$T/example.c" "$T/man-example.c"

# a plain make afterwards writes the default prefix back
$M > "$T/log" 2>&1
check "a later plain make: build's zmem.pc names /usr/local" \
    grep -qx 'prefix=/usr/local' "$B/zmem.pc"

# DESTDIR: everything under it, zmem.pc naming the prefix without it
D=$T/stage
P2=$T/prefix2
if $M PREFIX="$P2" DESTDIR="$D" install > "$T/log" 2>&1; then ok "make install DESTDIR"
else bad "make install DESTDIR"; diag < "$T/log"; fi
check "DESTDIR: files under DESTDIR only" \
    test -e "$D$P2/lib/$so" -a -e "$D$P2/share/man/man3/libzmem.3" -a ! -e "$P2"
check "DESTDIR: zmem.pc names the prefix" grep -qx "prefix=$P2" "$D$P2/lib/pkgconfig/zmem.pc"

# uninstall takes it all away again, but for the previous ABI's library
$M PREFIX="$P" uninstall > "$T/log" 2>&1
check "the previous ABI's program runs after the uninstall" old_ok
rm -f "$L/libzmem.so.0.2.0" "$L/libzmem.so.1"
left=$(find "$P" ! -type d)
check "make uninstall leaves no other file" test -z "$left"
[ -z "$left" ] || echo "$left" | diag

finish
