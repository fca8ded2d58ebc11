/* The produce validator's fast path (storage/validator.py validate_plain_py, its twin):
 * one uncompressed batch from a client, checked and patched in one call.
 *
 * It only ever accepts: a batch it cannot vouch for (compressed, LogAppendTime, a control
 * batch, a bad CRC, a malformed record, offsets not 0..n-1, a timestamp out of bounds, a
 * null key on a compacted topic, ...) is declined (None) with the buffer untouched, and the
 * reference path (validate_and_assign_offsets) then answers with Kafka's error or accepts
 * it its own way.  Accepted, the batch gets its base offset, partition leader epoch and max
 * timestamp, as the reference path patches it; when the max timestamp changed, the caller
 * writes the new CRC (it computes CRCs with the crc32c package).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

typedef __int128 i128;

#define RECORD_BATCH_OVERHEAD 61
#define CRC_START 21
/* attributes a plain client batch may carry: the transactional bit only */
#define PLAIN_ATTRIBUTES 0x10

static inline uint64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline void
put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* 1: acceptable (*count, *max_ts set); 0: declined. Nothing is written here.  ``crc``:
 * the CRC-32C of the bytes after the CRC field, computed by the caller (the crc32c
 * package's three-way interleaved loop is several times faster than one stream here). */
int
tl_plain_check(const uint8_t *b, Py_ssize_t n, long long crc, long long lo, long long hi,
               long long max_message_bytes, int compact, int32_t *count, int64_t *max_ts)
{
    if (n < RECORD_BATCH_OVERHEAD || (i128)(int32_t)be32(b + 8) + 12 != n)
        return 0; /* not exactly one whole batch */
    if (be64(b) != 0 || n > max_message_bytes || b[16] != 2)
        return 0;
    if (crc != (long long)be32(b + 17))
        return 0;
    uint16_t attrs = (uint16_t)((b[21] << 8) | b[22]);
    if (attrs & ~PLAIN_ATTRIBUTES)
        return 0;
    int32_t lod = (int32_t)be32(b + 23), cnt = (int32_t)be32(b + 57);
    int64_t base_ts = (int64_t)be64(b + 27), pid = (int64_t)be64(b + 43);
    int32_t base_seq = (int32_t)be32(b + 53);
    if ((i128)lod + 1 <= 0 || cnt <= 0 || (i128)lod + 1 != cnt)
        return 0;
    if (pid > -1 && base_seq < 0)
        return 0;
    Py_ssize_t recs, nulls;
    i128 min_d, max_d;
    int seq;
    if (walk_loop(b + RECORD_BATCH_OVERHEAD, n - RECORD_BATCH_OVERHEAD, &recs, &min_d, &max_d,
                  &seq, &nulls) < 0) {
        PyErr_Clear(); /* the reference path raises Kafka's error for it */
        return 0;
    }
    if (recs != cnt || !seq || (compact && nulls > 0))
        return 0;
    i128 lo_ts = (i128)base_ts + min_d, hi_ts = (i128)base_ts + max_d;
    if (lo_ts < lo || hi_ts > hi || hi_ts > INT64_MAX)
        return 0;
    *count = cnt;
    *max_ts = (int64_t)hi_ts;
    return 1;
}

PyObject *
tl_validate_plain(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long crc, offset, lo, hi, max_message_bytes;
    int leader_epoch, compact;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*LLiLLLp:validate_plain", &view, &crc, &offset,
                          &leader_epoch, &lo, &hi, &max_message_bytes, &compact))
        return NULL;
    uint8_t *b = (uint8_t *)view.buf;
    int32_t count;
    int64_t max_ts;
    if (!tl_plain_check(b, view.len, crc, lo, hi, max_message_bytes, compact, &count, &max_ts)) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    put64(b, (uint64_t)offset);
    put32(b + 12, (uint32_t)leader_epoch);
    int stale = (int64_t)be64(b + 35) != max_ts; /* the caller computes the new CRC */
    if (stale)
        put64(b + 35, (uint64_t)max_ts);
    PyBuffer_Release(&view);
    return Py_BuildValue("iLO", count, (long long)max_ts, stale ? Py_True : Py_False);
}
