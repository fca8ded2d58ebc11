/* tidelog._native._core: the plain batch of the cleaner's runs -- its header, its payload
 * (decompressed by the reference codec functions), the strict record walk, the digests of
 * its keys, and its re-write (batch_filter.rebuild_batch's twin).  Twins in
 * storage/cleaner/batch_runs.py; the passes are in cleaner_runs.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"
#include "cleaner_plain.h"

/* batch_runs._plain_header: 1 if the batch at b (n bytes left) is plain (header, CRC);
 * compressed ones only with ``codecs``. */
int
tl_plain_header_at(const uint8_t *b, Py_ssize_t n, plain_header *h, int codecs)
{
    if (n < BATCH_OVERHEAD)
        return 0;
    int64_t size = 12 + (int64_t)(int32_t)rd32(b + 8);
    if (size < BATCH_OVERHEAD || size > n || b[16] != 2)
        return 0;
    int attrs = (int)(int16_t)(b[21] << 8 | b[22]);
    int32_t count = (int32_t)rd32(b + 57);
    int codec = attrs & ATTR_CODEC;
    if ((attrs & ATTR_SKIP) || count < 0 || codec > MAX_CODEC || (codec && !codecs))
        return 0;
    if (!codec && count > size - BATCH_OVERHEAD)
        return 0; /* a record takes at least a byte: no scratch for an absurd count */
    h->base_offset = (int64_t)rd64(b);
    if (__builtin_add_overflow(h->base_offset, (int64_t)(int32_t)rd32(b + 23), &h->last_offset)
        || h->last_offset == INT64_MAX)
        return 0; /* next_offset must be an int64 too */
    if (tl_crc32c(b + CRC_START, (size_t)(size - CRC_START)) != rd32(b + 17))
        return 0;
    h->size = (Py_ssize_t)size;
    h->attrs = attrs;
    h->codec = codec;
    h->count = count;
    h->base_ts = (int64_t)rd64(b + 27);
    h->max_ts = (int64_t)rd64(b + 35);
    h->pid = (int64_t)rd64(b + 43);
    return 1;
}

/* An Exception from a codec means "not plain" (the reference code raises it); anything
 * else (KeyboardInterrupt, ...) propagates. */
static int
stop_or_raise(void)
{
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* batch_runs._payload: the records of a plain batch, after its header or, compressed,
 * decompressed by codecs[0] (records.compression.decompress) into *holder. 1, 0 (not
 * plain: the codec refused it, or more records declared than bytes), -1 error. */
int
tl_batch_payload(const uint8_t *b, const plain_header *h, PyObject *codecs, PyObject **holder,
              const uint8_t **p, Py_ssize_t *n)
{
    *holder = NULL;
    if (!h->codec) {
        *p = b + BATCH_OVERHEAD;
        *n = h->size - BATCH_OVERHEAD;
        return 1;
    }
    PyObject *r = PyObject_CallFunction(PyTuple_GET_ITEM(codecs, 0), "iy#", h->codec,
                                        (const char *)b + BATCH_OVERHEAD,
                                        h->size - BATCH_OVERHEAD);
    if (r == NULL)
        return stop_or_raise();
    if (!PyBytes_Check(r) || h->count > PyBytes_GET_SIZE(r)) {
        Py_DECREF(r);
        return 0;
    }
    *holder = r;
    *p = (const uint8_t *)PyBytes_AS_STRING(r);
    *n = PyBytes_GET_SIZE(r);
    return 1;
}

/* ``codecs`` as passed: None, or a tuple (decompress, compress). */
int
tl_codecs_arg(PyObject *codecs)
{
    if (codecs == Py_None)
        return 0;
    if (!PyTuple_Check(codecs) || PyTuple_GET_SIZE(codecs) != 2) {
        PyErr_SetString(PyExc_TypeError, "codecs must be None or (decompress, compress)");
        return -1;
    }
    return 1;
}

/* An unsigned varint of at most ``maxb`` bytes before ``end``: 0, or -1. */
static inline int
uvarint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *pos, int maxb, uint64_t *out)
{
    uint64_t r = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < maxb; i++) {
        if (p >= end)
            return -1;
        uint8_t c = b[p++];
        r |= (uint64_t)(c & 0x7F) << (7 * i);
        if (c < 0x80) {
            *pos = p;
            *out = r;
            return 0;
        }
    }
    return -1;
}

static inline int64_t
zz(uint64_t raw)
{
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}


/* batch_runs._plain_records: the records of a payload, read strictly (length, offset delta
 * and key length in at most 5 varint bytes, the timestamp delta in at most 10, every field
 * inside its record); 1 if all ``count`` records end exactly at the payload's end. */
int
tl_plain_records(const uint8_t *p, Py_ssize_t n, int32_t count, int64_t base, int64_t base_ts,
              plain_record *out)
{
    Py_ssize_t pos = 0;
    uint64_t raw;
    for (int32_t i = 0; i < count; i++) {
        out[i].start = pos;
        if (uvarint(p, n, &pos, 5, &raw) < 0)
            return 0;
        int64_t len = zz(raw);
        if (len < 0 || len > n - pos)
            return 0;
        Py_ssize_t end = pos + (Py_ssize_t)len, q = pos + 1; /* past the attributes */
        out[i].attr = pos;
        out[i].end = end;
        Py_ssize_t ts_at = q;
        if (uvarint(p, end, &q, 10, &raw) < 0)
            return 0;
        /* a tenth byte above 1 carries bits past 64: not an int64 delta */
        out[i].ts_ok = !(q - ts_at == 10 && p[q - 1] > 1) &&
                       !__builtin_add_overflow(base_ts, zz(raw), &out[i].ts);
        out[i].ts_end = q;
        if (uvarint(p, end, &q, 5, &raw) < 0)
            return 0;
        int64_t delta = zz(raw), off;
        if (__builtin_add_overflow(base, delta, &off) || uvarint(p, end, &q, 5, &raw) < 0)
            return 0;
        int64_t klen = zz(raw);
        if (klen < -1 || klen > end - q)
            return 0;
        out[i].offset = off;
        out[i].key = klen >= 0 ? q : -1;
        out[i].klen = klen >= 0 ? (Py_ssize_t)klen : 0;
        if (klen > 0)
            q += (Py_ssize_t)klen;
        if (q >= end)
            return 0;
        out[i].has_value = p[q] != 1;
        pos = end;
    }
    return pos == n;
}

/* Room in the scratch for ``n`` records. */
int
tl_scratch_reserve(scratch *s, Py_ssize_t n)
{
    if (n <= s->cap)
        return 0;
    Py_ssize_t cap = n < 256 ? 256 : n;
    plain_record *r = PyMem_Realloc(s->recs, (size_t)cap * sizeof(*r));
    if (r != NULL)
        s->recs = r;
    tl_key_ref *k = PyMem_Realloc(s->keys, (size_t)cap * sizeof(*k));
    if (k != NULL)
        s->keys = k;
    Py_ssize_t *a = PyMem_Realloc(s->at, (size_t)cap * sizeof(*a));
    if (a != NULL)
        s->at = a;
    uint8_t (*d)[16] = PyMem_Realloc(s->digest, (size_t)cap * 16);
    if (d != NULL)
        s->digest = d;
    if (r == NULL || k == NULL || a == NULL || d == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->cap = cap;
    return 0;
}

void
tl_scratch_free(scratch *s)
{
    PyMem_Free(s->recs);
    PyMem_Free(s->keys);
    PyMem_Free(s->at);
    PyMem_Free(s->digest);
}

/* Digests of the chosen records' keys (want[i] != 0), each first slot prefetched; s->at[i]
 * is the index of record i's digest. */
void
tl_hash_keys(scratch *s, const uint8_t *payload, int32_t count, const char *want,
          const uint8_t *map, long long slots)
{
    Py_ssize_t k = 0;
    for (int32_t i = 0; i < count; i++) {
        if (!want[i])
            continue;
        s->keys[k].p = payload + s->recs[i].key;
        s->keys[k].n = (size_t)s->recs[i].klen;
        s->at[i] = k++;
    }
    tl_md5_keys(s->keys, k, s->digest);
    for (Py_ssize_t j = 0; j < k; j++)
        __builtin_prefetch(map + (rd32(s->digest[j]) % (uint64_t)slots) * OMAP_ENTRY);
}


int
tl_grow_append(growing *g, const uint8_t *src, size_t n)
{
    if (g->n + n > g->cap) {
        size_t cap = g->cap ? g->cap : 65536;
        while (cap < g->n + n)
            cap *= 2;
        uint8_t *p = PyMem_Realloc(g->p, cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        g->p = p;
        g->cap = cap;
    }
    if (src != NULL) /* NULL: room only, filled by the caller */
        memcpy(g->p + g->n, src, n);
    g->n += n;
    return 0;
}

static size_t
varint_size(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 1;
    while (z > 0x7F) {
        z >>= 7;
        n++;
    }
    return n;
}

static uint8_t *
put_varint(uint8_t *o, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z > 0x7F) {
        *o++ = (uint8_t)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    *o++ = (uint8_t)z;
    return o;
}

static void
wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void
wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* batch_filter.rebuild_batch for a plain batch: the kept records under the same header
 * fields, the delete horizon set (``horizon``) or kept, the timestamp deltas re-encoded when
 * the base timestamp moves. 1 written (*max_ts, *last_kept), 0 not taken (a timestamp that
 * is no int64), -1 error. */
int
tl_rebuild(growing *out, const uint8_t *batch, const uint8_t *payload, const plain_header *h,
        const scratch *s, const char *keep, int need_horizon, long long new_horizon,
        PyObject *codecs, int64_t *max_ts, int64_t *last_kept)
{
    int has = need_horizon || (h->attrs & ATTR_DELETE_HORIZON);
    int64_t base_ts = need_horizon ? new_horizon : h->base_ts, mx = INT64_MIN, d;
    int first = -1;
    size_t body = 0;
    for (int32_t i = 0; i < h->count; i++) {
        if (!keep[i])
            continue;
        if (!s->recs[i].ts_ok)
            return 0;
        if (first < 0)
            first = i;
        if (s->recs[i].ts > mx)
            mx = s->recs[i].ts;
        *last_kept = s->recs[i].offset;
    }
    if (!has)
        base_ts = s->recs[first].ts;
    int reencode = base_ts != h->base_ts;
    for (int32_t i = 0; i < h->count; i++) {
        const plain_record *r = &s->recs[i];
        if (!keep[i])
            continue;
        if (!reencode) {
            body += (size_t)(r->end - r->start);
            continue;
        }
        if (__builtin_sub_overflow(r->ts, base_ts, &d))
            return 0;
        size_t len = 1 + varint_size(d) + (size_t)(r->end - r->ts_end);
        body += varint_size((int64_t)len) + len;
    }
    int attrs = has ? (h->attrs | ATTR_DELETE_HORIZON) : (h->attrs & ~ATTR_DELETE_HORIZON);
    *max_ts = (attrs & ATTR_LOG_APPEND_TIME) ? h->max_ts : mx;
    size_t at = out->n, total = BATCH_OVERHEAD + body;
    if (tl_grow_append(out, batch, BATCH_OVERHEAD) < 0 || tl_grow_append(out, NULL, body) < 0)
        return -1;
    uint8_t *o = out->p + at, *w = o + BATCH_OVERHEAD;
    for (int32_t i = 0; i < h->count; i++) {
        const plain_record *r = &s->recs[i];
        if (!keep[i])
            continue;
        if (!reencode) {
            memcpy(w, payload + r->start, (size_t)(r->end - r->start));
            w += r->end - r->start;
            continue;
        }
        d = r->ts - base_ts;
        size_t len = 1 + varint_size(d) + (size_t)(r->end - r->ts_end);
        w = put_varint(w, (int64_t)len);
        *w++ = payload[r->attr];
        w = put_varint(w, d);
        memcpy(w, payload + r->ts_end, (size_t)(r->end - r->ts_end));
        w += r->end - r->ts_end;
    }
    if (h->codec) { /* the body re-compressed as the reference does: compress(codec, body) */
        PyObject *c = PyObject_CallFunction(PyTuple_GET_ITEM(codecs, 1), "iy#", h->codec,
                                            (const char *)o + BATCH_OVERHEAD, (Py_ssize_t)body);
        out->n = at + BATCH_OVERHEAD;
        if (c == NULL || !PyBytes_Check(c)) {
            out->n = at;
            Py_XDECREF(c);
            return c == NULL ? stop_or_raise() : 0;
        }
        int rc = tl_grow_append(out, (const uint8_t *)PyBytes_AS_STRING(c),
                             (size_t)PyBytes_GET_SIZE(c));
        total = BATCH_OVERHEAD + (size_t)PyBytes_GET_SIZE(c);
        Py_DECREF(c);
        if (rc < 0)
            return -1;
        o = out->p + at;
    }
    if (total - 12 > INT32_MAX) {
        out->n = at;
        return 0;
    }
    long long kept = 0;
    for (int32_t i = 0; i < h->count; i++)
        kept += keep[i] != 0;
    wr32(o + 8, (uint32_t)(total - 12));
    o[21] = (uint8_t)(attrs >> 8);
    o[22] = (uint8_t)attrs;
    wr64(o + 27, (uint64_t)base_ts);
    wr64(o + 35, (uint64_t)*max_ts);
    wr32(o + 57, (uint32_t)kept);
    wr32(o + 17, tl_crc32c(o + CRC_START, total - CRC_START));
    return 1;
}
