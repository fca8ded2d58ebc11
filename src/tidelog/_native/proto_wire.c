/* Protobuf wire data checked against a message type: iceberg/protobuf_bulk.py's runtime parse
 * (check_wire_py) in C, and the gather that drops each value's framing (value_codec.py
 * strip_prefix_py).
 *
 * proto_check walks each value as the protobuf runtime (upb) parses it and returns the rows
 * it refuses: tags with field number 0 or wire type 3, 4, 6 or 7 (no group is taken, a
 * stray end-group neither), a tag or varint longer than the format allows, a length past
 * the end of its message, a known field under a wire type its type does not take (packed
 * only for repeated numeric fields, with whole elements), a string field that is not
 * well-formed UTF-8, and the same inside every nested message of the plan. The runtime
 * refuses a subset of these (it keeps a known field under another wire type as an unknown
 * one, takes groups, checks UTF-8 only for proto3): a row refused here and not there is
 * decoded by the runtime, value by value, like every row refused. No library walks wire
 * data without building messages: the runtime's own parse costs about five times this walk.
 *
 * The plan (protobuf_bulk.wire_plan): a tuple of messages, the first the value's; each is
 * bytes of 8-byte entries sorted by field number: uint32 number (little-endian), kind,
 * repeated flag, uint16 index of the nested message (kind MESSAGE). A map entry's message
 * starts with an entry of number 0: a field it does not name is refused there (the runtime
 * leaves such an entry out of the map; the bulk decoders would keep it). */
#define PY_SSIZE_T_CLEAN
#include <stdlib.h>
#include <string.h>

#include "native.h"
#include "proto_varint.h"

enum { W_VARINT = 1, W_FIXED64 = 2, W_FIXED32 = 3, W_STRING = 4, W_BYTES = 5,
       W_MESSAGE = 6 };
#define MAX_DEPTH 64

typedef struct {
    uint32_t number;
    uint8_t kind, repeated;
    uint16_t sub;
} Field;

typedef struct {
    const Field *fields;
    Py_ssize_t n;
} Message;

typedef struct {
    Message *msgs;
    Py_ssize_t n;
} Plan;

/* Well-formed UTF-8 (Unicode's table 3-7: no overlong form, surrogate or code point past
 * U+10FFFF), as the runtime's check of proto3 strings and Python's strict decode. */
int
tl_utf8_ok(const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (w & 0x8080808080808080ULL)
                break;
            p += 8;
        }
        if (p >= end)
            break;
        uint8_t c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        Py_ssize_t left = end - p;
        if (c >= 0xC2 && c <= 0xDF) {
            if (left < 2 || (p[1] & 0xC0) != 0x80)
                return 0;
            p += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F))
                return 0;
            p += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
                (p[3] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F))
                return 0;
            p += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* The field of ``number``: the one after the last found first (fields come in order),
 * then that one again (a repeated field's elements), then any. */
static inline const Field *
find(const Message *m, uint32_t number, Py_ssize_t *hint)
{
    Py_ssize_t i = *hint;
    if (i < m->n && m->fields[i].number == number) {
        *hint = i + 1;
        return &m->fields[i];
    }
    if (i > 0 && m->fields[i - 1].number == number)
        return &m->fields[i - 1];
    for (i = 0; i < m->n; i++)
        if (m->fields[i].number == number) {
            *hint = i + 1;
            return &m->fields[i];
        }
    return NULL;
}

/* Packed varints filling [p, end) exactly. */
static int
packed_varints(const uint8_t *p, const uint8_t *end)
{
    uint64_t v;
    while (p < end)
        if (!proto_varint(&p, end, &v))
            return 0;
    return 1;
}

static int message_ok(const Plan *plan, Py_ssize_t m, const uint8_t *p, const uint8_t *end,
                      int depth);

/* A length-delimited field of ``f`` over [p, end). */
static int
delimited_ok(const Plan *plan, const Field *f, const uint8_t *p, const uint8_t *end,
             int depth)
{
    switch (f->kind) {
    case W_STRING:
        return tl_utf8_ok(p, end);
    case W_BYTES:
        return 1;
    case W_MESSAGE:
        return message_ok(plan, f->sub, p, end, depth + 1);
    case W_VARINT:
        return f->repeated && packed_varints(p, end);
    case W_FIXED64:
        return f->repeated && (end - p) % 8 == 0;
    case W_FIXED32:
        return f->repeated && (end - p) % 4 == 0;
    }
    return 0;
}

static int
message_ok(const Plan *plan, Py_ssize_t m, const uint8_t *p, const uint8_t *end, int depth)
{
    if (depth > MAX_DEPTH || m >= plan->n)
        return 0;
    const Message *msg = &plan->msgs[m];
    /* a map entry's message (first entry number 0): no field it does not name */
    int closed = msg->n > 0 && msg->fields[0].number == 0;
    Py_ssize_t hint = closed;
    uint64_t tag, v;
    while (p < end) {
        const uint8_t *tag_at = p;
        if (!proto_varint(&p, end, &tag) || p - tag_at > 5 || tag > 0xFFFFFFFFu)
            return 0;
        uint32_t number = (uint32_t)(tag >> 3);
        int wire = (int)(tag & 7);
        if (number == 0)
            return 0;
        const Field *f = find(msg, number, &hint);
        if (f == NULL && closed)
            return 0;
        switch (wire) {
        case 0:
            if ((f && f->kind != W_VARINT) || !proto_varint(&p, end, &v))
                return 0;
            break;
        case 1:
            if ((f && f->kind != W_FIXED64) || end - p < 8)
                return 0;
            p += 8;
            break;
        case 5:
            if ((f && f->kind != W_FIXED32) || end - p < 4)
                return 0;
            p += 4;
            break;
        case 2:
            if (!proto_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return 0;
            if (f && !delimited_ok(plan, f, p, p + v, depth))
                return 0;
            p += v;
            break;
        default: /* groups (3, 4) and the wire types 6 and 7 */
            return 0;
        }
    }
    return 1;
}

/* The plan's tuple of bytes as messages (views into those bytes: the tuple outlives the
 * walk); -1 with an exception set. */
static int
read_plan(PyObject *tuple, Plan *plan)
{
    plan->n = PyTuple_GET_SIZE(tuple);
    plan->msgs = PyMem_Calloc(plan->n ? (size_t)plan->n : 1, sizeof(Message));
    if (!plan->msgs) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < plan->n; i++) {
        PyObject *b = PyTuple_GET_ITEM(tuple, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) % (Py_ssize_t)sizeof(Field)) {
            PyErr_SetString(PyExc_ValueError, "a plan's message is bytes of 8-byte fields");
            PyMem_Free(plan->msgs);
            return -1;
        }
        plan->msgs[i].fields = (const Field *)PyBytes_AS_STRING(b);
        plan->msgs[i].n = PyBytes_GET_SIZE(b) / (Py_ssize_t)sizeof(Field);
    }
    return 0;
}

/* (data, offsets, plan) -> the rows refused (a list of ints); ``offsets``: n + 1 int32,
 * positions in ``data``. */
PyObject *
tl_proto_check(PyObject *self, PyObject *args)
{
    Py_buffer data, offsets;
    PyObject *tuple, *out = NULL;
    Plan plan;
    if (!PyArg_ParseTuple(args, "y*y*O!", &data, &offsets, &PyTuple_Type, &tuple))
        return NULL;
    Py_ssize_t n = offsets.len / 4 - 1;
    const uint8_t *base = data.buf;
    if (n < 0 || offsets.len % 4) {
        PyErr_SetString(PyExc_ValueError, "offsets: n + 1 int32");
        goto done;
    }
    if (read_plan(tuple, &plan) < 0)
        goto done;
    out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        int32_t a, b;
        memcpy(&a, (const char *)offsets.buf + 4 * i, 4);
        memcpy(&b, (const char *)offsets.buf + 4 * i + 4, 4);
        if (a < 0 || b < a || b > data.len) {
            PyErr_SetString(PyExc_ValueError, "an offset outside the data");
            Py_CLEAR(out);
            break;
        }
        if (!message_ok(&plan, 0, base + a, base + b, 0)) {
            PyObject *row = PyLong_FromSsize_t(i);
            if (!row || PyList_Append(out, row) < 0)
                Py_CLEAR(out);
            Py_XDECREF(row);
        }
    }
    PyMem_Free(plan.msgs);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}

/* (data, offsets, skip) -> (data, offsets): each value of ``data`` between ``offsets``
 * (n + 1 int32) less its first ``skip`` bytes, as new buffers (offsets from 0). */
PyObject *
tl_strip_prefix(PyObject *self, PyObject *args)
{
    Py_buffer data, offsets;
    Py_ssize_t skip;
    PyObject *out = NULL, *new_data = NULL, *new_offsets = NULL;
    if (!PyArg_ParseTuple(args, "y*y*n", &data, &offsets, &skip))
        return NULL;
    Py_ssize_t n = offsets.len / 4 - 1;
    const int32_t *off = offsets.buf;
    if (n < 0 || offsets.len % 4 || skip < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets: n + 1 int32");
        goto done;
    }
    int64_t total = (int64_t)off[n] - off[0] - (int64_t)skip * n;
    for (Py_ssize_t i = 0; i < n; i++)
        if (off[i] < 0 || off[i + 1] - (int64_t)off[i] < skip || off[i + 1] > data.len) {
            PyErr_SetString(PyExc_ValueError, "a value shorter than its framing");
            goto done;
        }
    new_data = PyBytes_FromStringAndSize(NULL, total > 0 ? total : 0);
    new_offsets = PyBytes_FromStringAndSize(NULL, 4 * (n + 1));
    if (!new_data || !new_offsets)
        goto done;
    char *dst = PyBytes_AS_STRING(new_data);
    int32_t *to = (int32_t *)PyBytes_AS_STRING(new_offsets);
    const char *src = data.buf;
    int32_t at = 0;
    to[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t len = off[i + 1] - off[i] - (int32_t)skip;
        memcpy(dst + at, src + off[i] + skip, (size_t)len);
        at += len;
        to[i + 1] = at;
    }
    out = PyTuple_Pack(2, new_data, new_offsets);
done:
    Py_XDECREF(new_data);
    Py_XDECREF(new_offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}
