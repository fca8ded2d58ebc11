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

#include "native.h"

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

/* Returns 0, or an error already set (also validate_plain.c's walk). */
int
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

/* The walk itself into ``starts`` (count entries), with no Python call (so with or without
 * the GIL): 0, or TL_STARTS_RANGE / TL_STARTS_BIG for the twin's two IndexErrors. */
int
tl_record_starts_raw(const uint8_t *b, uint64_t len, Py_ssize_t count, int64_t *starts)
{
    Pos pos = {0, 0};
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos.big)
            return TL_STARTS_BIG;
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
    return 0;
range:
    return TL_STARTS_RANGE;
}

/* The twin's IndexError for a tl_record_starts_raw result (NULL for 0). */
void
tl_record_starts_error(int rc)
{
    if (rc == TL_STARTS_BIG)
        PyErr_SetString(PyExc_IndexError, "cannot fit 'int' into an index-sized integer");
    else if (rc == TL_STARTS_RANGE)
        PyErr_SetString(PyExc_IndexError, "index out of range");
}

/* The walk into ``starts``; -1 with IndexError set as the twin's. */
int
tl_record_starts(const uint8_t *b, uint64_t len, Py_ssize_t count, int64_t *starts)
{
    int rc = tl_record_starts_raw(b, len, count, starts);
    if (rc == 0)
        return 0;
    tl_record_starts_error(rc);
    return -1;
}

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
    PyObject *out = PyByteArray_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out != NULL && tl_record_starts((const uint8_t *)view.buf, (uint64_t)view.len, count,
                                        (int64_t *)PyByteArray_AS_STRING(out)) < 0)
        Py_CLEAR(out);
    PyBuffer_Release(&view);
    return out;
}

/* A bytearray of ``size`` bytes left as malloc gave them: a large frame's buffer
   (server/connection.py), every byte of which the socket fills before one is read, so the
   zeroing of bytearray(size) (a pass over up to socket.request.max.bytes) is saved. */
static PyObject *
tl_frame_buffer(PyObject *self, PyObject *arg)
{
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

PyDoc_STRVAR(omap_put_doc,
"omap_put(buf, slots, key, offset) -> (pos, found, probes)\n\n"
"SkimpyOffsetMap.put's slot work: pos -1 when the map is full (nothing written).");
PyDoc_STRVAR(omap_get_doc,
"omap_get(buf, slots, key) -> (offset or -1, probes)\n\n"
"SkimpyOffsetMap.get's slot work.");
PyDoc_STRVAR(md5_doc, "md5(data) -> 16-byte digest (as hashlib.md5(data).digest()).");

static PyMethodDef core_methods[] = {
    {"omap_put", tl_omap_put, METH_VARARGS, omap_put_doc},
    {"omap_get", tl_omap_get, METH_VARARGS, omap_get_doc},
    {"omap_put_records", tl_omap_put_records, METH_VARARGS,
     "omap_put_records(buf, slots, records, start, entries, max_entries, track): the cleaner's "
     "map loop (SkimpyOffsetMap.put_records)."},
    {"omap_get_many", tl_omap_get_many, METH_VARARGS,
     "omap_get_many(buf, slots, keys) -> (offsets, probes): SkimpyOffsetMap.get_many."},
    {"md5", tl_md5, METH_O, md5_doc},
    {"omap_clear", tl_omap_clear, METH_VARARGS,
     "omap_clear(buf, positions): zero the map's slots at the int64 byte positions "
     "(SkimpyOffsetMap.clear while few slots are used)."},
    {"md5_many", tl_md5_many, METH_O,
     "md5_many(keys) -> [digest]: the offset map's lane MD5 over a list of bytes."},
    {"record_starts", core_record_starts, METH_VARARGS, starts_doc},
    {"record_fields", tl_record_fields, METH_VARARGS,
     "record_fields(payload, starts, headers) -> bytearray of (8, n) int64: the twin of "
     "spark/decode.py record_fields_py, same values and errors"},
    {"decode_columns", tl_decode_columns, METH_VARARGS,
     "decode_columns(batches, payloads, start, end, headers) -> the Arrow buffers of a run of "
     "batches (spark/columns.py decode_columns_py)."},
    {"decode_runs", tl_decode_runs, METH_VARARGS,
     "decode_runs(bufs, spans, payloads, start, end, headers) -> decode_columns over the batches "
     "at int64 (buffer, position, size) spans (spark/columns.py decode_runs_py)."},
    {"batch_spans", tl_batch_spans, METH_VARARGS,
     "batch_spans(buf) -> (int64 header rows, problem, position, a, b): the complete batches of "
     "a records section (spark/fetch_runs.py batch_spans_py)."},
    {"gather", tl_gather, METH_VARARGS,
     "gather(data, pos, lengths) -> bytearray: the twin of spark/decode.py gather_py"},
    {"quiet_runs", tl_quiet_runs, METH_VARARGS,
     "quiet_runs(slots, raw, size, epoch_at, offset_at, version) -> (runs, slow, stale): a "
     "sessionless Fetch's quiet partitions (server/quiet_table.py quiet_runs_py)."},
    {"find_batch", tl_find_batch, METH_VARARGS,
     "find_batch(index, entries, base_offset, target, start, fd, limit) -> (last offset, position, "
     "size), None, or the start to run the twin's search from (storage/file_records.py "
     "find_batch_py)."},
    {"fetch_ids_bits", tl_fetch_ids_bits, METH_VARARGS,
     "fetch_ids_bits(raw, size) -> bytes or None: a bitmap of a Fetch topic's partition "
     "indexes (server/quiet_table.py ids_bits_py)."},
    {"fetch_ids_distinct", tl_fetch_ids_distinct, METH_VARARGS,
     "fetch_ids_distinct(raw, size) -> bool or None: a Fetch topic's partition indexes all "
     "different (protocol/fetch_request.py ids_distinct_py)."},
    {"walk", core_walk, METH_VARARGS, walk_doc},
    {"scan", core_scan, METH_VARARGS, scan_doc},
    {"validate_plain", tl_validate_plain, METH_VARARGS,
     "validate_plain(buf, crc, offset, leader_epoch, lo, hi, max_message_bytes, compact) -> "
     "(records, max timestamp, CRC stale) or None: the produce validator's fast path for one "
     "plain batch (storage/validator.py validate_plain_py)."},
    {"clean_map_run", tl_clean_map_run, METH_VARARGS,
     "clean_map_run(buf, off, map, slots, start, entries, max_entries, track, codecs): the "
     "cleaner's offset-map pass over a run of plain batches (storage/cleaner/batch_runs.py "
     "map_run_py)."},
    {"clean_filter_run", tl_clean_filter_run, METH_VARARGS,
     "clean_filter_run(buf, off, map, slots, latest, now, new_horizon, upper, group_end, "
     "last_data, budget, max_ts, codecs): the cleaner's filter pass over a run of plain "
     "batches (filter_run_py)."},
    {"recover_scan", tl_recover_scan, METH_VARARGS,
     "recover_scan(buf, off, interval, segment_base, state) -> (off, state, index entries, "
     "time index entries, epochs, producer batch offsets, next offset): the recovery scan's "
     "fast path (storage/recovery_scan.py scan_run_py)."},
    {"schema_ids", tl_schema_ids, METH_VARARGS,
     "schema_ids(data, offsets, present) -> (ids, framed, distinct): Confluent's schema ids"},
    {"json_columns", tl_json_columns, METH_VARARGS,
     "json_columns(data, offsets, skip, plan) -> (columns, rejected rows): JSON objects into "
     "the Arrow buffers of a plan's columns (iceberg/json_native.py)."},
    {"proto_check", tl_proto_check, METH_VARARGS,
     "proto_check(data, offsets, plan) -> [rows]: the Protobuf values a plan's message type "
     "refuses (iceberg/protobuf_bulk.py)."},
    {"strip_prefix", tl_strip_prefix, METH_VARARGS,
     "strip_prefix(data, offsets, skip) -> (data, offsets): each value less its first skip "
     "bytes (iceberg/value_codec.py)."},
    {"avro_columns", tl_avro_columns, METH_VARARGS,
     "avro_columns(data, offsets, skip, plan) -> (columns, rejected rows): Avro datums into "
     "the Arrow buffers of a plan's columns (iceberg/avro_native.py)."},
    {"proto_columns", tl_proto_columns, METH_VARARGS,
     "proto_columns(data, offsets, plan) -> (columns, rejected rows): Protobuf messages into "
     "the Arrow buffers of a plan's columns (iceberg/protobuf_native.py)."},
    {"append_plain", (PyCFunction)(void (*)(void))tl_append_plain, METH_FASTCALL,
     "append_plain(buf, offset, leader_epoch, lo, hi, max_message_bytes, compact, max_ts_bound, "
     "fd, position[, crc]) -> (records, max timestamp) or None: a leader's plain append, "
     "checked, patched and written (storage/log_plain.py append_plain_py); crc: the CRC-32C "
     "of buf[21:] if known (-1: computed here)."},
    {"append_leader_bind", tl_append_leader_bind, METH_VARARGS,
     "append_leader_bind(new_batch_metadata, new_info, new_offset_metadata, "
     "new_timestamp_offset, unknown_timestamp_offset, crc32c, SystemClock.milliseconds, "
     "OffsetIndex, TimeIndex): what append_leader makes and calls (storage/log_plain.py)."},
    {"index_entries", (PyCFunction)(void (*)(void))tl_index_entries, METH_FASTCALL,
     "index_entries(offset_index, time_index, last, position, timestamp, offset): "
     "offset_index.append(last, position), time_index.maybe_append(timestamp, offset), "
     "natively when they take them (storage/log_plain.py index_entries_py)."},
    {"append_leader", (PyCFunction)(void (*)(void))tl_append_leader, METH_FASTCALL,
     "append_leader(local, psm, epochs, records, leader_epoch, inline_below, log_start_offset) "
     "-> LogAppendInfo or None: a leader's plain append with its bookkeeping "
     "(storage/log_plain.py append_plain_leader_py)."},
    {"slotted_maker", tl_slotted_maker, METH_O,
     "slotted_maker(cls) -> a callable making cls's instances without its Python __init__ "
     "(a slotted dataclass, a named tuple), or cls itself (util/slotted.py)."},
    {"produce_decode_bind", tl_produce_decode_bind, METH_VARARGS,
     "produce_decode_bind(header, request, topic, partition, uuid): the classes produce_decode "
     "makes (protocol/produce_in_place.py)."},
    {"produce_decode", (PyCFunction)(void (*)(void))tl_produce_decode, METH_FASTCALL,
     "produce_decode(frame, version, header_version) -> (header, request) or None (a frame the "
     "twin refuses): protocol/produce_in_place.py decode_produce_in_place_py."},
    {"produce_decode_in_place", (PyCFunction)(void (*)(void))tl_produce_decode_in_place,
     METH_FASTCALL,
     "produce_decode_in_place(frame, version) -> (header, request): decoded here, or by the "
     "twin given to produce_decode_bind when declined (protocol/produce_in_place.py)."},
    {"produce_response_twin", tl_produce_response_twin, METH_O,
     "produce_response_twin(encode_produce_response_py): what encode_produce_response hands "
     "a declined answer to."},
    {"encode_produce_response", (PyCFunction)(void (*)(void))tl_encode_produce_response,
     METH_FASTCALL,
     "encode_produce_response(correlation_id, version, topics, throttle_time_ms=0) -> bytes: "
     "encoded here, or by the bound twin when declined (protocol/fast.py)."},
    {"produce_response_bind", tl_produce_response_bind, METH_O,
     "produce_response_bind(uuid.UUID): the class of a topic id (protocol/fast.py)."},
    {"produce_now_bind", tl_produce_now_bind, METH_VARARGS,
     "produce_now_bind(new_tp, new_result, encode_produce_response, INTERNAL_TOPICS, Log, "
     "append_plain, HEAVY_COMPRESSED_BYTES, BrokerTopicStats.record_append): what "
     "produce_one_now makes and calls "
     "(server/produce_one.py)."},
    {"produce_one_now", (PyCFunction)(void (*)(void))tl_produce_one_now, METH_FASTCALL,
     "produce_one_now(broker, connection_state, header, request) -> bytes, None or "
     "(partition, tp, outcome, phase): the common Produce in one call (server/produce_one.py)."},
    {"attr_hint_read", (PyCFunction)(void (*)(void))tl_attr_hint_read, METH_FASTCALL,
     "attr_hint_read(o, name, how) -> o.<name> read as the native calls read it (how: 0 the "
     "value, 1 its truth, 2 is None, 3 as an int): their twin is getattr."},
    {"take_now_bind", tl_take_now_bind, METH_VARARGS,
     "take_now_bind(connection_now's globals, handle_now, decode_produce_in_place, "
     "new_timing, record_timing, LARGE_FRAME): what take_one_now calls and tests against "
     "(server/connection_now.py)."},
    {"take_one_now", (PyCFunction)(void (*)(void))tl_take_one_now, METH_FASTCALL,
     "take_one_now(connection, data, end) -> where its frames end, None or (spec, header, "
     "request, timing, result, error, end): the common Produce frames a read starts with, "
     "answered in one call (server/connection_now.py)."},
    {"produce_response", (PyCFunction)(void (*)(void))tl_produce_response, METH_FASTCALL,
     "produce_response(correlation_id, version, topics, throttle_time_ms) -> bytes or None "
     "(what the twin would refuse): protocol/fast.py encode_produce_response_py."},
    {"frame_buffer", tl_frame_buffer, METH_O,
     "frame_buffer(size) -> bytearray of size bytes, not zeroed: a large frame's buffer, "
     "filled whole before it is read (server/connection.py; twin bytearray(size))."},
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
    tl_recovery_init();
    if (tl_slotted_ready(NULL) < 0)
        return NULL;
    return PyModule_Create(&core_module);
}
