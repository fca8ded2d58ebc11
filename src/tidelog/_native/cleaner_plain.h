/* Internal to tidelog._native._core: the plain batch of the cleaner's runs (cleaner_plain.c),
 * shared by the two passes (cleaner_runs.c). */
#ifndef TIDELOG_CLEANER_PLAIN_H
#define TIDELOG_CLEANER_PLAIN_H

#include <Python.h>
#include <stdint.h>

#include "native.h"

#define BATCH_OVERHEAD 61
#define CRC_START 21
#define ATTR_CODEC 0x07
#define ATTR_SKIP 0x30 /* transactional (0x10), control (0x20) */
#define MAX_CODEC 4     /* zstd; above: no codec Kafka knows */
#define ATTR_DELETE_HORIZON 0x40
#define OMAP_ENTRY 24

#define ATTR_LOG_APPEND_TIME 0x08

static inline uint64_t
rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t
rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

typedef struct {
    Py_ssize_t size;
    int64_t base_offset, last_offset, base_ts, max_ts, pid;
    int32_t count;
    int attrs, codec;
} plain_header;

typedef struct {
    int64_t offset;
    Py_ssize_t key; /* position of the key in the payload, or -1: no key */
    Py_ssize_t klen;
    int has_value;
    Py_ssize_t start, attr, ts_end, end; /* the record's spans, for a rebuild */
    int64_t ts;
    int ts_ok; /* the timestamp (base + delta) is an int64 */
} plain_record;

/* Per-call scratch: the records of one batch and their digests. */
typedef struct {
    plain_record *recs;
    tl_key_ref *keys;
    Py_ssize_t *at;
    uint8_t (*digest)[16];
    Py_ssize_t cap;
} scratch;

typedef struct {
    uint8_t *p;
    size_t n, cap;
} growing;

int tl_plain_header_at(const uint8_t *b, Py_ssize_t n, plain_header *h, int codecs);
int tl_codecs_arg(PyObject *codecs);
int tl_batch_payload(const uint8_t *b, const plain_header *h, PyObject *codecs,
                     PyObject **holder, const uint8_t **p, Py_ssize_t *n);
int tl_plain_records(const uint8_t *p, Py_ssize_t n, int32_t count, int64_t base,
                     int64_t base_ts, plain_record *out);
int tl_scratch_reserve(scratch *s, Py_ssize_t n);
void tl_scratch_free(scratch *s);
void tl_hash_keys(scratch *s, const uint8_t *payload, int32_t count, const char *want,
                  const uint8_t *map, long long slots);
int tl_grow_append(growing *g, const uint8_t *src, size_t n);
int tl_rebuild(growing *out, const uint8_t *batch, const uint8_t *payload, const plain_header *h,
               const scratch *s, const char *keep, int need_horizon, long long new_horizon,
               PyObject *codecs, int64_t *max_ts, int64_t *last_kept);

#endif
