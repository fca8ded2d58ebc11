/* tidelog._native._core: the per-record loops of the produce validator and the cleaner.
 *
 * Each function is the twin of a pure-Python function that stays the reference
 * (storage/validator.py _walk_py, storage/cleaner/batch_filter.py _scan_py): same results,
 * same exception types, same messages, on every input.  Varints are decoded exactly like
 * Python's unbounded ints: up to 10 groups of 7 bits (70 bits), so values are held in
 * 128-bit integers and only converted to Python ints at the end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef __int128 i128;
typedef unsigned __int128 u128;

static PyObject *InvalidRecordError; /* tidelog.records.errors.InvalidRecordError */

static PyObject *
long_from_i128(i128 v)
{
    if (v >= INT64_MIN && v <= INT64_MAX)
        return PyLong_FromLongLong((long long)v);
    /* beyond int64 only for malformed varints: hi * 2**64 + lo */
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)v);
    PyObject *sh = PyLong_FromLong(64), *t = NULL, *out = NULL;
    if (hi && lo && sh && (t = PyNumber_Lshift(hi, sh)))
        out = PyNumber_Add(t, lo);
    Py_XDECREF(hi); Py_XDECREF(lo); Py_XDECREF(sh); Py_XDECREF(t);
    return out;
}

static inline i128
zigzag(u128 raw)
{
    return (raw & 1) ? -(i128)(raw >> 1) - 1 : (i128)(raw >> 1);
}

/* Raise InvalidRecordError(fmt % (int, pylong(v))). */
static PyObject *
invalid_with_value(const char *fmt, Py_ssize_t n, i128 v)
{
    PyObject *val = long_from_i128(v);
    if (val == NULL)
        return NULL;
    PyObject *msg = n >= 0 ? PyUnicode_FromFormat(fmt, n, val) : PyUnicode_FromFormat(fmt, val);
    Py_DECREF(val);
    if (msg != NULL) {
        PyErr_SetObject(InvalidRecordError, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

/* records.varint.decode_varint: raw value; -1 underflow, -2 longer than 10 bytes. */
static inline int
raw_varint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *pos, u128 *out)
{
    u128 r = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end)
            return -1;
        uint8_t c = b[p++];
        r |= (u128)(c & 0x7F) << shift;
        if (!(c & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return -2;
    }
    *pos = p;
    *out = r;
    return 0;
}

static void
varint_error(int rc)
{
    PyErr_SetString(InvalidRecordError,
                    rc == -1 ? "varint underflow" : "varint longer than 10 bytes");
}

/* One varint as _walk_py reads it: 1- and 2-byte forms inline (an IndexError there is
 * "header runs past"), longer ones through decode_varint's errors.
 * Returns 0, -3 for header-runs-past, or -1/-2 from raw_varint. */
static inline int
walk_varint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *pos, i128 *out)
{
    Py_ssize_t p = *pos;
    if (p >= end)
        return -3;
    uint8_t c = b[p];
    if (c < 0x80) {
        *out = zigzag(c);
        *pos = p + 1;
        return 0;
    }
    if (p + 1 >= end)
        return -3;
    if (b[p + 1] < 0x80) {
        *out = zigzag((u128)((c & 0x7F) | (b[p + 1] << 7)));
        *pos = p + 2;
        return 0;
    }
    u128 raw;
    int rc = raw_varint(b, end, pos, &raw);
    if (rc == 0)
        *out = zigzag(raw);
    return rc;
}

#define BIG ((i128)1 << 62)

static PyObject *
walk_result(Py_ssize_t n, i128 min_d, i128 max_d, int sequential, Py_ssize_t nulls)
{
    PyObject *lo = long_from_i128(min_d), *hi = long_from_i128(max_d);
    PyObject *out = NULL;
    if (lo && hi)
        out = Py_BuildValue("nOONn", n, lo, hi, PyBool_FromLong(sequential), nulls);
    Py_XDECREF(lo); Py_XDECREF(hi);
    return out;
}

static PyObject *
walk_count_error(PyObject *count, Py_ssize_t n)
{
    PyObject *msg = PyUnicode_FromFormat("the batch declares %S records but holds %zd",
                                         count, n);
    if (msg) {
        PyErr_SetObject(InvalidRecordError, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

/* Returns 0, or an error already set. */
static int
walk_loop(const uint8_t *b, Py_ssize_t end, Py_ssize_t *n_out, i128 *min_out,
          i128 *max_out, int *seq_out, Py_ssize_t *nulls_out)
{
    Py_ssize_t pos = 0, n = 0, nulls = 0;
    i128 min_d = BIG, max_d = -BIG, length, d, od;
    int sequential = 1, rc;
    while (pos < end) {
        Py_ssize_t p = pos;
        if ((rc = walk_varint(b, end, &p, &length)) != 0)
            goto fail;
        i128 rec_end = (i128)p + length;
        if (length <= 0 || rec_end > end) {
            invalid_with_value("record %zd length %S runs past the batch", n, length);
            return -1;
        }
        p += 1; /* attributes */
        if ((rc = walk_varint(b, end, &p, &d)) != 0)
            goto fail;
        if (d < min_d) min_d = d;
        if (d > max_d) max_d = d;
        if ((rc = walk_varint(b, end, &p, &od)) != 0)
            goto fail;
        if (od != n)
            sequential = 0;
        if (p >= end) {
            rc = -3;
            goto fail;
        }
        if (b[p] == 1) /* key length -1 is the single byte 0x01 */
            nulls++;
        pos = (Py_ssize_t)rec_end;
        n++;
    }
    *n_out = n; *min_out = min_d; *max_out = max_d; *seq_out = sequential; *nulls_out = nulls;
    return 0;
fail:
    if (rc == -3)
        PyErr_Format(InvalidRecordError, "record %zd header runs past the batch", n);
    else
        varint_error(rc);
    return -1;
}

PyDoc_STRVAR(walk_doc,
"walk(buf, count) -> (records, min ts delta, max ts delta, sequential, null keys)\n\n"
"The produce validator's record walk (storage/validator.py _walk_py).");

static PyObject *
core_walk(PyObject *self, PyObject *args)
{
    PyObject *obj, *count;
    if (!PyArg_ParseTuple(args, "OO:walk", &obj, &count))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n, nulls;
    i128 min_d, max_d;
    int seq;
    int rc = walk_loop((const uint8_t *)view.buf, view.len, &n, &min_d, &max_d, &seq, &nulls);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    PyObject *nn = PyLong_FromSsize_t(n);
    if (nn == NULL)
        return NULL;
    int eq = PyObject_RichCompareBool(nn, count, Py_EQ);
    Py_DECREF(nn);
    if (eq < 0)
        return NULL;
    if (!eq)
        return walk_count_error(count, n);
    return walk_result(n, min_d, max_d, seq, nulls);
}

/* -- the cleaner's scan ------------------------------------------------------------------ */

static PyObject *
index_error(void)
{
    PyErr_SetString(PyExc_IndexError, "index out of range");
    return NULL;
}

/* batch_filter._raw_varint: IndexError on underflow (returns -1), -2 when too long. */
static inline int
scan_raw(const uint8_t *b, Py_ssize_t end, Py_ssize_t *pos, u128 *out)
{
    return raw_varint(b, end, pos, out);
}

static int
scan_fail(int rc)
{
    if (rc == -1)
        index_error();
    else
        varint_error(-2);
    return -1;
}

typedef struct {
    u128 length, raw_ts, raw_off, raw_klen;
    Py_ssize_t start, attr_pos, ts_end, p;
} ScanFields;

/* Decode the record header at f->start up to the key length, as _scan_py does. */
static int
scan_header(const uint8_t *b, Py_ssize_t limit, ScanFields *f)
{
    Py_ssize_t pos = f->start, p;
    int rc;
    if (pos >= limit)
        return scan_fail(-1);
    uint8_t c = b[pos];
    if (c < 0x80) {
        f->length = c;
        f->attr_pos = pos + 1;
    } else if (pos + 1 >= limit) {
        return scan_fail(-1);
    } else if (b[pos + 1] < 0x80) {
        f->length = (c & 0x7F) | (b[pos + 1] << 7);
        f->attr_pos = pos + 2;
    } else {
        p = pos;
        if ((rc = scan_raw(b, limit, &p, &f->length)) != 0)
            return scan_fail(rc);
        f->attr_pos = p;
    }
    i128 length = zigzag(f->length);
    i128 end = (i128)f->attr_pos + length;
    if (length < 0 || end > limit) {
        invalid_with_value("record length %S runs past the batch", -1, length);
        return -1;
    }
    p = f->attr_pos + 1;
    if (p >= limit)
        return scan_fail(-1);
    f->raw_ts = b[p];
    f->ts_end = p + 1;
    if (f->raw_ts >= 0x80) {
        if ((rc = scan_raw(b, limit, &p, &f->raw_ts)) != 0)
            return scan_fail(rc);
        f->ts_end = p;
    }
    p = f->ts_end;
    if (p >= limit)
        return scan_fail(-1);
    f->raw_off = b[p++];
    if (f->raw_off >= 0x80) {
        if (p >= limit)
            return scan_fail(-1);
        if (b[p] < 0x80) {
            f->raw_off = (f->raw_off & 0x7F) | ((u128)b[p] << 7);
            p++;
        } else {
            p = f->ts_end;
            if ((rc = scan_raw(b, limit, &p, &f->raw_off)) != 0)
                return scan_fail(rc);
        }
    }
    if (p >= limit)
        return scan_fail(-1);
    f->raw_klen = b[p++];
    if (f->raw_klen >= 0x80) {
        p -= 1;
        if ((rc = scan_raw(b, limit, &p, &f->raw_klen)) != 0)
            return scan_fail(rc);
    }
    f->p = p;
    return 0;
}

static PyObject *
new_scanned(PyTypeObject *cls, PyObject **items)
{
    PyObject *t = cls->tp_alloc(cls, 8);
    if (t == NULL) {
        for (int i = 0; i < 8; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < 8; i++) {
        if (items[i] == NULL) {
            for (int j = i; j < 8; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    return t;
}

/* One ScannedRecord (or NULL); *end_out is the record's end. */
static PyObject *
scan_one(const uint8_t *b, Py_ssize_t limit, Py_ssize_t start, long long base_offset,
         long long base_ts, PyTypeObject *cls, Py_ssize_t *end_out)
{
    ScanFields f;
    f.start = start;
    if (scan_header(b, limit, &f) < 0)
        return NULL;
    Py_ssize_t end = f.attr_pos + (Py_ssize_t)zigzag(f.length);
    i128 klen = zigzag(f.raw_klen);
    i128 p = f.p;
    PyObject *key = Py_None;
    if (klen >= 0)
        p += klen;
    if (p >= end || klen < -1) {
        PyErr_SetString(InvalidRecordError, "record fields run past the record");
        return NULL;
    }
    if (klen >= 0)
        key = PyBytes_FromStringAndSize((const char *)b + f.p, (Py_ssize_t)klen);
    else
        Py_INCREF(key);
    PyObject *items[8] = {
        long_from_i128((i128)base_offset + zigzag(f.raw_off)),
        long_from_i128((i128)base_ts + zigzag(f.raw_ts)),
        key,
        PyBool_FromLong(b[(Py_ssize_t)p] != 1),
        PyLong_FromSsize_t(start),
        PyLong_FromSsize_t(f.attr_pos),
        PyLong_FromSsize_t(f.ts_end),
        PyLong_FromSsize_t(end),
    };
    *end_out = end;
    return new_scanned(cls, items);
}

PyDoc_STRVAR(scan_doc,
"scan(payload, base_offset, base_ts, count, cls) -> (records, end)\n\n"
"The cleaner's record scan (storage/cleaner/batch_filter.py _scan_py); ``cls`` is the\n"
"ScannedRecord named tuple.  Raises IndexError where the Python twin does.");

static PyObject *
core_scan(PyObject *self, PyObject *args)
{
    PyObject *obj, *cls;
    long long base_offset, base_ts, count;
    if (!PyArg_ParseTuple(args, "OLLLO!:scan", &obj, &base_offset, &base_ts, &count,
                          &PyType_Type, &cls))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    PyObject *out = PyList_New(0);
    Py_ssize_t pos = 0;
    for (long long i = 0; out != NULL && i < count; i++) {
        Py_ssize_t end;
        PyObject *rec = scan_one(b, view.len, pos, base_offset, base_ts,
                                 (PyTypeObject *)cls, &end);
        if (rec == NULL || PyList_Append(out, rec) < 0) {
            Py_XDECREF(rec);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(rec);
        pos = end;
    }
    PyBuffer_Release(&view);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("Nn", out, pos);
}

/* -- the Spark decoder's record boundaries ----------------------------------------------- */

/* A position as spark/decode.py's record_starts_py holds it (a Python int): exact while it
 * fits 63 bits; ``big`` once it no longer fits an index-sized integer. */
typedef struct {
    uint64_t v;
    int big;
} Pos;

static void
pos_add(Pos *p, uint64_t add, int add_big)
{
    if (p->big || add_big || add > (uint64_t)INT64_MAX - p->v)
        p->big = 1;
    else
        p->v += add;
}

PyDoc_STRVAR(starts_doc,
"record_starts(buf, count) -> bytearray of int64 record positions\n\n"
"The Spark decoder's length walk (spark/decode.py record_starts_py): IndexError where the\n"
"twin's ``buf[pos]`` raises one, with the same message.");

static PyObject *
core_record_starts(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "On:record_starts", &obj, &count))
        return NULL;
    if (count < 0)
        count = 0;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    uint64_t len = (uint64_t)view.len;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *starts = (int64_t *)PyByteArray_AS_STRING(out);
    Pos pos = {0, 0};
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos.big) {
            PyErr_SetString(PyExc_IndexError, "cannot fit 'int' into an index-sized integer");
            goto fail;
        }
        starts[i] = (int64_t)pos.v;
        if (pos.v >= len)
            goto range;
        uint8_t x = b[pos.v];
        if (x < 0x80) {
            pos_add(&pos, 1 + (x >> 1), 0);
            continue;
        }
        if (pos.v + 1 >= len)
            goto range;
        uint8_t y = b[pos.v + 1];
        if (y < 0x80) {
            pos_add(&pos, 2 + ((uint64_t)((x & 0x7F) | (y << 7)) >> 1), 0);
            continue;
        }
        /* _uvarint: unbounded; an overrun is an IndexError, bits past 63 make it "big" */
        uint64_t r = 0, p = pos.v;
        int shift = 0, big = 0;
        for (;;) {
            if (p >= len)
                goto range;
            uint8_t c = b[p++];
            uint64_t bits = c & 0x7F;
            if (bits) {
                if (shift >= 64 || (shift > 0 && bits >> (64 - shift)))
                    big = 1;
                if (shift < 64)
                    r |= bits << shift;
            }
            if (c < 0x80)
                break;
            shift += 7;
        }
        /* pos = p + (x >> 1), with x possibly beyond 64 bits */
        uint64_t half = r >> 1;
        pos.v = p;
        pos.big = 0;
        pos_add(&pos, big ? 0 : half, big);
    }
    PyBuffer_Release(&view);
    return out;
range:
    PyErr_SetString(PyExc_IndexError, "index out of range");
fail:
    PyBuffer_Release(&view);
    Py_DECREF(out);
    return NULL;
}

/* -- the cleaner's offset map (storage/cleaner/offset_map.py SkimpyOffsetMap) ------------- */

/* MD5 (RFC 1321), as hashlib.md5(key).digest(). */
static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391};
static const uint8_t md5_r[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20,
    5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void
md5_block(uint32_t h[4], const uint8_t *p)
{
    uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
               (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        uint32_t t = d;
        d = c;
        c = b;
        uint32_t x = a + f + md5_k[i] + w[g];
        b = b + ((x << md5_r[i]) | (x >> (32 - md5_r[i])));
        a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

static void
md5(const uint8_t *data, size_t len, uint8_t out[16])
{
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t full = len & ~(size_t)63;
    for (size_t i = 0; i < full; i += 64)
        md5_block(h, data + i);
    uint8_t tail[128] = {0};
    size_t rest = len - full;
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    size_t tlen = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tlen - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (tlen == 128)
        md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

#define OMAP_HASH 16
#define OMAP_ENTRY 24
#define OMAP_WINDOWS (OMAP_HASH - 4)

static inline uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const uint8_t omap_empty[OMAP_HASH] = {0};

/* SkimpyOffsetMap._find: the digest's slot (found=1), else the first empty one (found=0),
 * else -1; *probes as the twin adds to its probe count. */
static long long
omap_find(const uint8_t *buf, long long slots, const uint8_t *digest, int *found,
          long long *probes)
{
    long long pos = (long long)(be32(digest) % (uint64_t)slots) * OMAP_ENTRY;
    *probes = 0;
    if (memcmp(buf + pos, digest, OMAP_HASH) == 0) { *found = 1; return pos; }
    if (memcmp(buf + pos, omap_empty, OMAP_HASH) == 0) { *found = 0; return pos; }
    uint64_t last = be32(digest + OMAP_WINDOWS);
    for (long long attempt = 1; attempt < slots + OMAP_WINDOWS; attempt++) {
        uint64_t slot = attempt < OMAP_WINDOWS
            ? be32(digest + attempt) % (uint64_t)slots
            : (last + (uint64_t)(attempt - OMAP_WINDOWS)) % (uint64_t)slots;
        pos = (long long)slot * OMAP_ENTRY;
        int hit = memcmp(buf + pos, digest, OMAP_HASH) == 0;
        if (hit || memcmp(buf + pos, omap_empty, OMAP_HASH) == 0) {
            *probes = attempt;
            *found = hit;
            return pos;
        }
    }
    *probes = slots + OMAP_WINDOWS;
    *found = 0;
    return -1;
}

/* Buffers of one call: the map (writable) and the key. */
static int
omap_buffers(PyObject *map, PyObject *key, long long slots, int writable, Py_buffer *mb,
             Py_buffer *kb)
{
    if (PyObject_GetBuffer(map, mb, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (slots < 1 || mb->len < slots * OMAP_ENTRY) {
        PyBuffer_Release(mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return -1;
    }
    if (PyObject_GetBuffer(key, kb, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(mb);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(omap_put_doc,
"omap_put(buf, slots, key, offset) -> (pos, found, probes)\n\n"
"SkimpyOffsetMap.put's slot work: pos -1 when the map is full (nothing written).");

static PyObject *
core_omap_put(PyObject *self, PyObject *args)
{
    PyObject *map, *key;
    long long slots, offset;
    if (!PyArg_ParseTuple(args, "OLOL:omap_put", &map, &slots, &key, &offset))
        return NULL;
    Py_buffer mb, kb;
    if (omap_buffers(map, key, slots, 1, &mb, &kb) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
    uint8_t *buf = (uint8_t *)mb.buf;
    int found;
    long long probes, pos = omap_find(buf, slots, digest, &found, &probes);
    if (pos >= 0) {
        if (!found)
            memcpy(buf + pos, digest, OMAP_HASH);
        uint64_t v = (uint64_t)offset;
        for (int i = 0; i < 8; i++)
            buf[pos + OMAP_HASH + i] = (uint8_t)(v >> (56 - 8 * i));
    }
    PyBuffer_Release(&kb);
    PyBuffer_Release(&mb);
    return Py_BuildValue("LNL", pos, PyBool_FromLong(found), probes);
}

PyDoc_STRVAR(omap_get_doc,
"omap_get(buf, slots, key) -> (offset or -1, probes)\n\n"
"SkimpyOffsetMap.get's slot work.");

static PyObject *
core_omap_get(PyObject *self, PyObject *args)
{
    PyObject *map, *key;
    long long slots;
    if (!PyArg_ParseTuple(args, "OLO:omap_get", &map, &slots, &key))
        return NULL;
    Py_buffer mb, kb;
    if (omap_buffers(map, key, slots, 0, &mb, &kb) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
    const uint8_t *buf = (const uint8_t *)mb.buf;
    int found;
    long long probes, pos = omap_find(buf, slots, digest, &found, &probes);
    long long offset = -1;
    if (pos >= 0 && found) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = v << 8 | buf[pos + OMAP_HASH + i];
        offset = (long long)v;
    }
    PyBuffer_Release(&kb);
    PyBuffer_Release(&mb);
    return Py_BuildValue("LL", offset, probes);
}

PyDoc_STRVAR(md5_doc, "md5(data) -> 16-byte digest (as hashlib.md5(data).digest()).");

static PyObject *
core_md5(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    md5((const uint8_t *)b.buf, (size_t)b.len, digest);
    PyBuffer_Release(&b);
    return PyBytes_FromStringAndSize((const char *)digest, OMAP_HASH);
}

static PyMethodDef core_methods[] = {
    {"omap_put", core_omap_put, METH_VARARGS, omap_put_doc},
    {"omap_get", core_omap_get, METH_VARARGS, omap_get_doc},
    {"md5", core_md5, METH_O, md5_doc},
    {"record_starts", core_record_starts, METH_VARARGS, starts_doc},
    {"walk", core_walk, METH_VARARGS, walk_doc},
    {"scan", core_scan, METH_VARARGS, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "tidelog._native._core",
    "Native twins of tidelog's per-record loops (see tidelog._native).", -1, core_methods,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    PyObject *errors = PyImport_ImportModule("tidelog.records.errors");
    if (errors == NULL)
        return NULL;
    InvalidRecordError = PyObject_GetAttrString(errors, "InvalidRecordError");
    Py_DECREF(errors);
    if (InvalidRecordError == NULL)
        return NULL;
    return PyModule_Create(&core_module);
}
