#!/bin/sh
# zmem serve with fio's nbd engine: random writes with crc32c verification,
# several jobs (one connection each) at once, 4 KiB and 512-byte blocks;
# bounded in size and time.
. "$(dirname "$0")/interop.sh"
need fio
fio --enghelp 2>/dev/null | grep -qw nbd || { bad "fio has the nbd engine"; finish; }
serve_start --size 128M --threads 2 || finish
cd "$T"  # fio leaves its verify state files in the working directory
check "fio randwrite 4k, 4 jobs, verify=crc32c" \
    fio --name=rw4k --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=8 \
        --numjobs=4 --size=16M --offset_increment=16M --verify=crc32c --do_verify=1 \
        --verify_fatal=1 --runtime=60 --group_reporting
check "fio randwrite 512-byte blocks, 2 jobs, verify=crc32c" \
    fio --name=rw512 --ioengine=nbd --uri="$URI" --rw=randwrite --bs=512 --iodepth=4 \
        --numjobs=2 --size=2M --offset=64M --offset_increment=2M --verify=crc32c \
        --do_verify=1 --verify_fatal=1 --runtime=60 --group_reporting
check "fio mixed random read/write with verify, compressible buffers" \
    fio --name=mix --ioengine=nbd --uri="$URI" --rw=randrw --bs=16k --iodepth=4 \
        --numjobs=2 --size=8M --offset=96M --offset_increment=8M --buffer_compress_percentage=60 \
        --refill_buffers --verify=crc32c --do_verify=1 --verify_fatal=1 --runtime=60
check "the store is consistent after fio (zmem stats)" sh -c "
    '$ZMEM' stats '$SOCK' | grep -A3 -i 'server' | head -5 && '$ZMEM' stats --json '$SOCK' |
    python3 -c 'import json,sys; d=json.load(sys.stdin); s=d[\"server\"];
assert s[\"errors\"] == 0 and s[\"protocol_errors\"] == 0, s'"
serve_stop
finish
