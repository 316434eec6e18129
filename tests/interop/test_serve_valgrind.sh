#!/bin/sh
# zmem serve under valgrind (memcheck): the raw client's bad inputs
# (test_nbd, pointed at this server) and qemu-io traffic, then SIGTERM;
# any invalid access or definite leak makes the server's exit status 99.
# Sanitizer builds skip this (ASan and valgrind do not mix; ASan checks
# the same server there).
. "$(dirname "$0")/interop.sh"
if [ -n "${ZM_SAN:-}" ]; then echo "sanitizer build: valgrind run skipped"; finish; fi
need valgrind qemu-io
SERVE_WRAP="valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99"
serve_start --size 8M --threads 2 || finish
check "test_nbd's bad inputs against the server under valgrind" \
    env ZMEM_NBD_SOCKET="$SOCK" "$(dirname "$0")/test_nbd"
check "qemu-io traffic under valgrind" sh -c "
    qemu-io -f raw '$URI' -c 'write -P 0x42 0 1M' -c 'write -P 0x43 100 1000' \
        -c 'read -P 0x43 100 1000' -c 'write -z 1M 1M' -c 'discard 0 64k' -c 'read -P 0 0 64k' \
        > '$T/qio' 2>&1; cat '$T/qio'; ! grep -qiE 'fail|error' '$T/qio'"
check "zmem stats under valgrind" "$ZMEM" stats --json "$SOCK"
serve_stop
finish
