/*
 * The NBD protocol's numbers, as zmem serve uses them (the protocol is
 * NetworkBlockDevice/nbd doc/proto.md).  Every integer on the wire is big
 * endian.  Only the fixed newstyle handshake is spoken; oldstyle and TLS
 * are not.
 */
#ifndef ZM_SERVE_NBD_H
#define ZM_SERVE_NBD_H

#include <stdint.h>

/* ---- handshake ------------------------------------------------------ */
#define NBD_MAGIC            0x4e42444d41474943ull  /* "NBDMAGIC" */
#define NBD_IHAVEOPT         0x49484156454f5054ull  /* "IHAVEOPT" */
#define NBD_OPT_REPLY_MAGIC  0x0003e889045565a9ull

/* server handshake flags (16 bits) and the client's answer (32 bits) */
#define NBD_FLAG_FIXED_NEWSTYLE   (1u << 0)
#define NBD_FLAG_NO_ZEROES        (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES      (1u << 1)

/* options the client sends */
#define NBD_OPT_EXPORT_NAME       1
#define NBD_OPT_ABORT             2
#define NBD_OPT_LIST              3
#define NBD_OPT_STARTTLS          5
#define NBD_OPT_INFO              6
#define NBD_OPT_GO                7
#define NBD_OPT_STRUCTURED_REPLY  8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT  10

/* option replies */
#define NBD_REP_ACK               1
#define NBD_REP_SERVER            2
#define NBD_REP_INFO              3
#define NBD_REP_META_CONTEXT      4
#define NBD_REP_ERR(n)            ((1u << 31) | (n))
#define NBD_REP_ERR_UNSUP         NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY        NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID       NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM      NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD      NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN       NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN      NBD_REP_ERR(7)
#define NBD_REP_ERR_TOO_BIG       NBD_REP_ERR(9)

/* NBD_REP_INFO payloads */
#define NBD_INFO_EXPORT           0   /* u64 size, u16 transmission flags */
#define NBD_INFO_NAME             1
#define NBD_INFO_DESCRIPTION      2
#define NBD_INFO_BLOCK_SIZE       3   /* u32 minimum, preferred, maximum */

/* transmission flags (16 bits) */
#define NBD_FLAG_HAS_FLAGS        (1u << 0)
#define NBD_FLAG_READ_ONLY        (1u << 1)
#define NBD_FLAG_SEND_FLUSH       (1u << 2)
#define NBD_FLAG_SEND_FUA         (1u << 3)
#define NBD_FLAG_ROTATIONAL       (1u << 4)
#define NBD_FLAG_SEND_TRIM        (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF          (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN   (1u << 8)
#define NBD_FLAG_SEND_CACHE       (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO   (1u << 11)

/* ---- transmission --------------------------------------------------- */
#define NBD_REQUEST_MAGIC         0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC    0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu
#define NBD_REQUEST_SIZE          28  /* magic, flags, type, cookie, offset, length */
#define NBD_SIMPLE_REPLY_SIZE     16  /* magic, error, cookie */
#define NBD_CHUNK_HEADER_SIZE     20  /* magic, flags, type, cookie, length */

#define NBD_CMD_READ              0
#define NBD_CMD_WRITE             1
#define NBD_CMD_DISC              2
#define NBD_CMD_FLUSH             3
#define NBD_CMD_TRIM              4
#define NBD_CMD_CACHE             5
#define NBD_CMD_WRITE_ZEROES      6
#define NBD_CMD_BLOCK_STATUS      7

#define NBD_CMD_FLAG_FUA          (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE      (1u << 1)
#define NBD_CMD_FLAG_DF           (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE      (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO    (1u << 4)

/* structured reply chunks */
#define NBD_REPLY_FLAG_DONE       (1u << 0)
#define NBD_REPLY_TYPE_NONE       0
#define NBD_REPLY_TYPE_OFFSET_DATA 1
#define NBD_REPLY_TYPE_OFFSET_HOLE 2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR      ((1u << 15) | 1)

/* base:allocation extent flags */
#define NBD_STATE_HOLE            (1u << 0)
#define NBD_STATE_ZERO            (1u << 1)

/* errors on the wire (the protocol's numbers, not the host's errno) */
#define NBD_EPERM                 1
#define NBD_EIO                   5
#define NBD_ENOMEM                12
#define NBD_EINVAL                22
#define NBD_ENOSPC                28
#define NBD_EOVERFLOW             75
#define NBD_ENOTSUP               95
#define NBD_ESHUTDOWN             108

#endif
