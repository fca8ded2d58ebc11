/* tidelog._native._core: the cleaner's batch runs, twins of storage/cleaner/batch_runs.py
 * map_run_py and filter_run_py.
 *
 * A run walks the batches of a chunk of a segment as long as each one is *plain*: whole in
 * the chunk, a good header and CRC, neither transactional nor control, and records that the
 * strict walk below reads (varints as Kafka writes them); a compressed one is decompressed
 * (and a re-written one re-compressed) by the reference code's own codec functions, passed
 * in.  A plain batch is mapped (pass 1) or filtered (pass 2: dropped, copied or re-written)
 * here without a Python object per record; the run stops *before* the first batch it does
 * not take, which the cleaner hands to its reference per-batch code (errors, transactions,
 * headers of emptied batches).  A run never raises for what it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

#define BATCH_OVERHEAD 61
#define CRC_START 21
#define ATTR_CODEC 0x07
#define ATTR_SKIP 0x30 /* transactional (0x10), control (0x20) */
#define MAX_CODEC 4     /* zstd; above: no codec Kafka knows */
#define ATTR_DELETE_HORIZON 0x40
#define OMAP_ENTRY 24

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

#define ATTR_LOG_APPEND_TIME 0x08

/* batch_runs._plain_header: 1 if the batch at b (n bytes left) is plain (header, CRC);
 * compressed ones only with ``codecs``. */
static int
plain_header_at(const uint8_t *b, Py_ssize_t n, plain_header *h, int codecs)
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
static int
batch_payload(const uint8_t *b, const plain_header *h, PyObject *codecs, PyObject **holder,
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
static int
codecs_arg(PyObject *codecs)
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

typedef struct {
    int64_t offset;
    Py_ssize_t key; /* position of the key in the payload, or -1: no key */
    Py_ssize_t klen;
    int has_value;
    Py_ssize_t start, attr, ts_end, end; /* the record's spans, for a rebuild */
    int64_t ts;
    int ts_ok; /* the timestamp (base + delta) is an int64 */
} plain_record;

/* batch_runs._plain_records: the records of a payload, read strictly (length, offset delta
 * and key length in at most 5 varint bytes, the timestamp delta in at most 10, every field
 * inside its record); 1 if all ``count`` records end exactly at the payload's end. */
static int
plain_records(const uint8_t *p, Py_ssize_t n, int32_t count, int64_t base, int64_t base_ts,
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

/* Per-call scratch: the records of one batch and their digests. */
typedef struct {
    plain_record *recs;
    tl_key_ref *keys;
    Py_ssize_t *at;
    uint8_t (*digest)[16];
    Py_ssize_t cap;
} scratch;

static int
scratch_reserve(scratch *s, Py_ssize_t n)
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

static void
scratch_free(scratch *s)
{
    PyMem_Free(s->recs);
    PyMem_Free(s->keys);
    PyMem_Free(s->at);
    PyMem_Free(s->digest);
}

/* Digests of the chosen records' keys (want[i] != 0), each first slot prefetched; s->at[i]
 * is the index of record i's digest. */
static void
hash_keys(scratch *s, const uint8_t *payload, int32_t count, const char *want,
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

static int
map_buffer(PyObject *map, Py_buffer *mb, long long slots, int writable)
{
    if (PyObject_GetBuffer(map, mb, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (slots < 1 || mb->len < slots * OMAP_ENTRY) {
        PyBuffer_Release(mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return -1;
    }
    return 0;
}

static int
append_pos(PyObject *list, long long pos)
{
    PyObject *v = PyLong_FromLongLong(pos);
    int rc = v == NULL ? -1 : PyList_Append(list, v);
    Py_XDECREF(v);
    return rc;
}

/* -- pass 1: the offset map ------------------------------------------------------------ */

typedef struct {
    long long start, entries, max_entries, track;
    long long read, added, probes, lookups, latest;
    int full, overflow, any_latest;
} map_state;

/* Put one plain batch's keyed records from ``start`` (SkimpyOffsetMap.put_records). */
static int
map_batch(scratch *s, const uint8_t *payload, int32_t count, uint8_t *map, long long slots,
          map_state *m, PyObject *positions, char *want)
{
    for (int32_t i = 0; i < count; i++)
        want[i] = s->recs[i].key >= 0 && s->recs[i].offset >= m->start;
    hash_keys(s, payload, count, want, map, slots);
    for (int32_t i = 0; i < count; i++) {
        if (want[i]) {
            if (m->entries + m->added >= m->max_entries) {
                m->full = 1;
                return 0;
            }
            int found;
            long long p, pos = tl_omap_find(map, slots, s->digest[s->at[i]], &found, &p);
            m->lookups++;
            m->probes += p;
            if (pos < 0) {
                m->overflow = 1;
                return 0;
            }
            if (!found) {
                memcpy(map + pos, s->digest[s->at[i]], 16);
                m->added++;
                if (m->entries + m->added <= m->track && append_pos(positions, pos) < 0)
                    return -1;
            }
            uint64_t v = (uint64_t)s->recs[i].offset;
            for (int j = 0; j < 8; j++)
                map[pos + 16 + j] = (uint8_t)(v >> (56 - 8 * j));
            m->latest = s->recs[i].offset;
            m->any_latest = 1;
        }
        m->read++;
    }
    return 0;
}

PyObject *
tl_clean_map_run(PyObject *self, PyObject *args)
{
    Py_buffer view, mb;
    Py_ssize_t off;
    PyObject *map, *codecs;
    long long slots;
    map_state m = {0};
    if (!PyArg_ParseTuple(args, "y*nOLLLLLO:clean_map_run", &view, &off, &map, &slots, &m.start,
                          &m.entries, &m.max_entries, &m.track, &codecs))
        return NULL;
    int with_codecs = codecs_arg(codecs);
    if (with_codecs < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (off < 0 || off > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "offset outside the buffer");
        return NULL;
    }
    if (map_buffer(map, &mb, slots, 1) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    scratch s = {0};
    char *want = NULL;
    PyObject *positions = PyList_New(0), *result = NULL, *holder = NULL;
    long long batches = 0, nbytes = 0, last_offset = 0;
    const uint8_t *b = view.buf;
    plain_header h;
    while (positions != NULL && plain_header_at(b + off, view.len - off, &h, with_codecs)) {
        const uint8_t *payload;
        Py_ssize_t plen;
        int rc = batch_payload(b + off, &h, codecs, &holder, &payload, &plen);
        if (rc < 0)
            goto done;
        if (rc == 0)
            break;
        if (scratch_reserve(&s, h.count) < 0)
            goto done;
        char *w = PyMem_Realloc(want, (size_t)(s.cap ? s.cap : 1));
        if (w == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        want = w;
        if (!plain_records(payload, plen, h.count, h.base_offset, h.base_ts, s.recs))
            break;
        batches++;
        nbytes += h.size;
        off += h.size;
        last_offset = h.last_offset;
        if (map_batch(&s, payload, h.count, (uint8_t *)mb.buf, slots, &m, positions, want) < 0)
            goto done;
        Py_CLEAR(holder);
        if (m.full || m.overflow)
            break;
        if (h.last_offset >= m.start) {
            m.latest = h.last_offset;
            m.any_latest = 1;
        }
    }
    if (positions == NULL)
        goto done;
    PyObject *latest = m.any_latest ? PyLong_FromLongLong(m.latest) : Py_NewRef(Py_None);
    PyObject *last = batches ? PyLong_FromLongLong(last_offset) : Py_NewRef(Py_None);
    if (latest != NULL && last != NULL)
        result = Py_BuildValue("(nLLLNLLLNONi)", off, batches, nbytes, m.read,
                               PyBool_FromLong(m.full), m.added, m.probes, m.lookups, latest,
                               positions, last, m.overflow);
    else {
        Py_XDECREF(latest);
        Py_XDECREF(last);
    }
done:
    Py_XDECREF(holder);
    Py_XDECREF(positions);
    PyMem_Free(want);
    scratch_free(&s);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&view);
    return result;
}

/* -- pass 2: the filter ---------------------------------------------------------------- */

typedef struct {
    long long latest, now, new_horizon, upper, group_end;
    PyObject *last_data; /* {producer id: last data offset} of the active producers */
} filter_args;

/* A producer's last batch, or the round's or group's last one: kept as an empty header
 * when nothing in it is kept (the reference code writes that header). */
static int
retain_empty(const plain_header *h, const filter_args *a)
{
    int64_t next = h->last_offset + 1;
    if (next == a->upper || next == a->group_end)
        return 1;
    if (h->pid < 0)
        return 0;
    PyObject *k = PyLong_FromLongLong(h->pid);
    if (k == NULL)
        return -1;
    PyObject *v = PyDict_GetItemWithError(a->last_data, k);
    Py_DECREF(k);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long long last = PyLong_AsLongLong(v);
    if (last == -1 && PyErr_Occurred())
        return -1;
    return last == h->last_offset;
}

/* Records of one plain batch kept by _CleanerFilter.retain_records: the count, keep[i] per
 * record, *tombstone if a kept one is a tombstone, with its lookups, probes and keyless
 * records. */
static long long
keep_count(scratch *s, const uint8_t *payload, const plain_header *h, const uint8_t *map,
           long long slots, const filter_args *a, char *keep, int *tombstone,
           long long *lookups, long long *probes, long long *invalid)
{
    int has_horizon = (h->attrs & ATTR_DELETE_HORIZON) != 0;
    int tombstones_kept = !has_horizon || a->now < h->base_ts;
    for (int32_t i = 0; i < h->count; i++)
        keep[i] = s->recs[i].offset <= a->latest && s->recs[i].key >= 0; /* to look up */
    hash_keys(s, payload, h->count, keep, map, slots);
    long long kept = 0;
    *tombstone = 0;
    for (int32_t i = 0; i < h->count; i++) {
        const plain_record *r = &s->recs[i];
        if (r->offset > a->latest) {
            keep[i] = 1;
        } else if (r->key < 0) {
            (*invalid)++;
            keep[i] = 0;
        } else {
            int found;
            long long p, pos = tl_omap_find(map, slots, s->digest[s->at[i]], &found, &p);
            long long stored = -1;
            if (pos >= 0 && found)
                stored = (long long)rd64(map + pos + 16);
            (*lookups)++;
            *probes += p;
            keep[i] = r->offset >= stored && (r->has_value || tombstones_kept);
        }
        if (keep[i]) {
            kept++;
            *tombstone |= !r->has_value;
        }
    }
    return kept;
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
} growing;

static int
grow_append(growing *g, const uint8_t *src, size_t n)
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
static int
rebuild(growing *out, const uint8_t *batch, const uint8_t *payload, const plain_header *h,
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
    if (grow_append(out, batch, BATCH_OVERHEAD) < 0 || grow_append(out, NULL, body) < 0)
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
        int rc = grow_append(out, (const uint8_t *)PyBytes_AS_STRING(c),
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

PyObject *
tl_clean_filter_run(PyObject *self, PyObject *args)
{
    Py_buffer view, mb;
    Py_ssize_t off;
    PyObject *map, *codecs;
    long long slots, budget, max_ts;
    filter_args a;
    if (!PyArg_ParseTuple(args, "y*nOLLLLLLO!LLO:clean_filter_run", &view, &off, &map, &slots,
                          &a.latest, &a.now, &a.new_horizon, &a.upper, &a.group_end,
                          &PyDict_Type, &a.last_data, &budget, &max_ts, &codecs))
        return NULL;
    int with_codecs = codecs_arg(codecs);
    if (with_codecs < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (off < 0 || off > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "offset outside the buffer");
        return NULL;
    }
    if (map_buffer(map, &mb, slots, 0) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    scratch s = {0};
    growing out = {0};
    char *want = NULL;
    PyObject *result = NULL, *holder = NULL;
    long long batches = 0, nread = 0, messages = 0, retained = 0, bytes_retained = 0,
              shallow = -1, max_offset = -1, written = -1, last = 0, invalid = 0,
              lookups = 0, probes = 0;
    int any_written = 0, raised = 0;
    const uint8_t *b = view.buf;
    plain_header h;
    while (nread < budget && plain_header_at(b + off, view.len - off, &h, with_codecs)) {
        const uint8_t *payload;
        Py_ssize_t plen;
        Py_CLEAR(holder);
        int prc = batch_payload(b + off, &h, codecs, &holder, &payload, &plen);
        if (prc < 0)
            goto done;
        if (prc == 0)
            break;
        if (scratch_reserve(&s, h.count) < 0)
            goto done;
        char *w = PyMem_Realloc(want, (size_t)(s.cap ? s.cap : 1));
        if (w == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        want = w;
        if (!plain_records(payload, plen, h.count, h.base_offset, h.base_ts, s.recs))
            break;
        long long lk = 0, pr = 0, inv = 0;
        int tombstone;
        long long kept = keep_count(&s, payload, &h, mb.buf, slots, &a, want, &tombstone, &lk,
                                    &pr, &inv);
        int need_horizon = tombstone && !(h.attrs & ATTR_DELETE_HORIZON);
        if (kept == 0) {
            int r = retain_empty(&h, &a);
            if (r < 0)
                goto done;
            if (r)
                break; /* an empty header: the reference code writes it */
        } else {
            size_t before = out.n;
            int64_t bmax = h.max_ts, last_kept = h.last_offset;
            if (kept != h.count || need_horizon) {
                int r = rebuild(&out, b + off, payload, &h, &s, want, need_horizon,
                                a.new_horizon, codecs, &bmax, &last_kept);
                if (r < 0)
                    goto done;
                if (r == 0)
                    break; /* odd timestamps: the reference code rebuilds it */
            } else if (grow_append(&out, b + off, (size_t)h.size) < 0) {
                goto done;
            }
            if (bmax > max_ts) {
                max_ts = bmax;
                shallow = h.last_offset;
                raised = 1;
            }
            if (last_kept > max_offset)
                max_offset = last_kept;
            retained += kept;
            bytes_retained += (long long)(out.n - before);
            written = h.last_offset;
            any_written = 1;
        }
        batches++;
        nread += h.size;
        messages += h.count;
        invalid += inv;
        lookups += lk;
        probes += pr;
        last = h.last_offset;
        off += h.size;
    }
    PyObject *w_obj = any_written ? PyLong_FromLongLong(written) : Py_NewRef(Py_None);
    PyObject *l_obj = batches ? PyLong_FromLongLong(last) : Py_NewRef(Py_None);
    PyObject *s_obj = raised ? PyLong_FromLongLong(shallow) : Py_NewRef(Py_None);
    if (w_obj != NULL && l_obj != NULL && s_obj != NULL)
        result = Py_BuildValue("(nLLLy#LLLNLNLLLN)", off, batches, nread, messages,
                               (const char *)(out.p ? out.p : (uint8_t *)""), (Py_ssize_t)out.n,
                               retained, bytes_retained, max_ts, s_obj, max_offset, w_obj,
                               invalid, lookups, probes, l_obj);
    else {
        Py_XDECREF(w_obj);
        Py_XDECREF(l_obj);
        Py_XDECREF(s_obj);
    }
done:
    Py_XDECREF(holder);
    PyMem_Free(want);
    PyMem_Free(out.p);
    scratch_free(&s);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&view);
    return result;
}
