/* The Spark decoder's per-record field walk: spark/decode.py record_fields_py in C.
 *
 * The twin is written with numpy over whole batches; this walks each record once and gives
 * the same (FIELDS, n) int64 array, bit for bit, and the same errors: reads clipped to the
 * payload, bytes past it read as the twin's zero padding, a varint without its last byte
 * within 10 counted as one byte (the twin's argmax), 64-bit wrap-around as numpy's uint64. */
#include "native.h"

#define FIELDS 8

typedef struct {
    const uint8_t *b;
    int64_t len;
} Payload;

static inline uint8_t
byte_at(const Payload *p, int64_t i)
{
    return i < p->len ? p->b[i] : 0; /* the twin's _PAD */
}

/* spark/decode.py varints for one position: (zig-zag value, encoded size) */
static inline int64_t
varint_at(const Payload *p, int64_t pos, int64_t *size)
{
    int k = 0;
    while (k < 10 && byte_at(p, pos + k) >= 0x80)
        k++;
    int n = k < 10 ? k + 1 : 1;
    uint64_t raw = 0;
    for (int j = 0; j < n; j++)
        raw += (uint64_t)(byte_at(p, pos + j) & 0x7F) << (7 * j);
    *size = n;
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

static inline int64_t
clip(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static inline int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* One record's fields into row[FIELDS]; 1 when it runs past its length or the payload. */
static int
record_row(const Payload *p, int64_t start, int headers, int64_t *row)
{
    int64_t L = p->len, size;
    int64_t length = varint_at(p, start, &size);
    int64_t rec_end = start + size + clip(length, -1, L + 1);
    int64_t q = min64(start + size + 1, L);
    int64_t ts_delta = varint_at(p, q, &size);
    q = min64(q + size, L);
    int64_t off_delta = varint_at(p, q, &size);
    q = min64(q + size, L);
    int64_t key_len = varint_at(p, q, &size);
    int64_t key_pos = min64(q + size, L);
    int64_t key_end = key_pos + clip(key_len, 0, L);
    int64_t value_len = varint_at(p, min64(key_end, L), &size);
    int64_t value_pos = min64(key_end, L) + size;
    int64_t value_end = min64(value_pos, L) + clip(value_len, 0, L);
    int64_t header_count = 0, header_pos = value_end;
    if (headers) {
        header_count = varint_at(p, min64(value_end, L), &size);
        header_pos = min64(value_end, L) + size;
    }
    row[0] = off_delta;
    row[1] = ts_delta;
    row[2] = key_pos;
    row[3] = key_len;
    row[4] = value_pos;
    row[5] = value_len;
    row[6] = header_count;
    row[7] = header_pos;
    return rec_end > L || key_end > rec_end || value_end > rec_end || header_pos > rec_end;
}

int
tl_record_at(const uint8_t *b, int64_t len, int64_t start, int headers, int64_t row[FIELDS])
{
    Payload p = {b, len};
    return record_row(&p, start, headers, row);
}

/* One record's fields into out[f * n + i]; 1 when it runs past its length or the payload. */
static int
record_at(const Payload *p, int64_t start, int headers, int64_t *out, Py_ssize_t n,
          Py_ssize_t i)
{
    int64_t row[FIELDS];
    int bad = record_row(p, start, headers, row);
    for (int f = 0; f < FIELDS; f++)
        out[f * n + i] = row[f];
    return bad;
}

PyObject *
tl_record_fields(PyObject *self, PyObject *args)
{
    PyObject *payload_obj, *starts_obj;
    int headers;
    if (!PyArg_ParseTuple(args, "OOp:record_fields", &payload_obj, &starts_obj, &headers))
        return NULL;
    Py_buffer pv, sv;
    if (PyObject_GetBuffer(payload_obj, &pv, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(starts_obj, &sv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    Payload p = {(const uint8_t *)pv.buf, (int64_t)pv.len};
    const int64_t *starts = (const int64_t *)sv.buf;
    Py_ssize_t n = sv.len / (Py_ssize_t)sizeof(int64_t);
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (starts[i] < 0 || starts[i] >= p.len) {
            PyErr_Format(PyExc_ValueError, "a record start outside the batch's %lld bytes",
                         (long long)p.len);
            goto done;
        }
    }
    out = PyByteArray_FromStringAndSize(NULL, FIELDS * n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL)
        goto done;
    int64_t *cols = (int64_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (record_at(&p, starts[i], headers, cols, n, i)) {
            PyErr_Format(PyExc_ValueError,
                         "record %zd at byte %lld of the batch runs past its length or the "
                         "batch's end (%lld bytes)", i, (long long)starts[i], (long long)p.len);
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&pv);
    return out;
}

/* spark/decode.py gather_py: data[pos[i] : pos[i] + len[i]] back to back. */
PyObject *
tl_gather(PyObject *self, PyObject *args)
{
    PyObject *data_obj, *pos_obj, *len_obj;
    if (!PyArg_ParseTuple(args, "OOO:gather", &data_obj, &pos_obj, &len_obj))
        return NULL;
    Py_buffer dv, pv, lv;
    if (PyObject_GetBuffer(data_obj, &dv, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(pos_obj, &pv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&dv);
        return NULL;
    }
    if (PyObject_GetBuffer(len_obj, &lv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&pv);
        PyBuffer_Release(&dv);
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)dv.buf;
    const int64_t *pos = (const int64_t *)pv.buf, *len = (const int64_t *)lv.buf;
    Py_ssize_t n = pv.len / (Py_ssize_t)sizeof(int64_t);
    if (lv.len / (Py_ssize_t)sizeof(int64_t) < n)
        n = lv.len / (Py_ssize_t)sizeof(int64_t);
    int64_t total = 0;
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = len[i] > 0 ? len[i] : 0;
        if (pos[i] < 0 || k > (int64_t)dv.len || pos[i] > (int64_t)dv.len - k) {
            PyErr_Format(PyExc_ValueError, "a key or value outside its batch's %zd bytes",
                         dv.len);
            goto done;
        }
        total += k;
    }
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto done;
    uint8_t *w = (uint8_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (len[i] > 0) {
            memcpy(w, data + pos[i], (size_t)len[i]);
            w += len[i];
        }
    }
done:
    PyBuffer_Release(&lv);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&dv);
    return out;
}
