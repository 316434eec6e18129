#!/bin/sh
# Install the Debian 12 packages zmem needs to build and test, if missing.
# As root (or with password-less sudo) it runs apt-get; otherwise it prints
# the exact apt-get line and stops with status 1.
set -eu

# build + unit tests + sanitizers; codecs (lzo is GPL and optional at
# build time, but installed here so that zcache's 2011 codec can be measured).
PKGS="gcc make pkg-config libcmocka-dev liblz4-dev libzstd-dev liblzo2-dev util-linux"
# the peers of the churn benchmark (loaded with LD_PRELOAD, never linked)
PKGS="$PKGS libjemalloc2 libmimalloc2.0"
# zmem run's preload library: mimalloc over region memory (its header to
# build, its library loaded at run time)
PKGS="$PKGS libmimalloc-dev"
# the real programs zmem run's tests and zmem runbench run under it
# (python3 is below)
PKGS="$PKGS sqlite3 nodejs"
# libFuzzer (make check fuzzes the pool for a bounded time)
PKGS="$PKGS clang libclang-rt-14-dev"
# zmem serve's clients in the interop tests, and nbdkit for bench/nbd-vs-nbdkit
PKGS="$PKGS qemu-utils libnbd-bin python3-libnbd fio valgrind python3 nbdkit"
# NBD as the backing store (backing_uri); the arm64 build goes without
PKGS="$PKGS libnbd-dev"
# the install test renders the man page (man-db brings groff-base)
PKGS="$PKGS man-db"
# make check-arm64: Debian's aarch64 cross compiler, the arm64 builds of
# the libraries the tests link (multiarch: the arm64 architecture is added
# to dpkg first), and qemu-user to run the arm64 tests here
ARM64_PKGS="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
ARM64_PKGS="$ARM64_PKGS libcmocka-dev:arm64 liblz4-dev:arm64 libzstd-dev:arm64 liblzo2-dev:arm64"
PKGS="$PKGS $ARM64_PKGS $*"

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0
# an arm64 package needs dpkg to know the architecture before apt-get update
addarch=""
case "$missing" in
    *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 ||
                  addarch="dpkg --add-architecture arm64" ;;
esac

echo "zmem: missing packages:$missing" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "zmem: run this, then try again:" >&2
    echo "  ${addarch:+sudo $addarch && }sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
[ -z "$addarch" ] || $SUDO $addarch
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
