/* A Produce response encoded (protocol/fast.py encode_produce_response_py is its twin and
 * the reference; both byte for byte kio's writer, v3-v13: flexible from v9, a topic is its
 * 16-byte id from v13).
 *
 * Declined (None): anything the twin would not encode as it stands (a field out of its
 * type's range, a topic neither str nor UUID, a string that is not valid UTF-8); the caller
 * then runs the twin, which raises its own error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <structmember.h>

#include "native.h"

static PyObject *uuid_type;
static PyObject *s_index, *s_error_code, *s_base_offset, *s_log_append_time,
    *s_log_start_offset, *s_record_errors, *s_error_message, *s_bytes;

typedef struct {
    uint8_t *p;
    Py_ssize_t n, cap;
    int flexible;
} out_buf;

static int
grow(out_buf *o, Py_ssize_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap * 2 + more + 64;
    uint8_t *p = realloc(o->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static int
put(out_buf *o, uint64_t v, int n)
{
    if (grow(o, n) < 0)
        return -1;
    for (int i = n - 1; i >= 0; i--) {
        o->p[o->n + i] = (uint8_t)v;
        v >>= 8;
    }
    o->n += n;
    return 0;
}

static int
put_uvarint(out_buf *o, uint64_t v)
{
    if (grow(o, 10) < 0)
        return -1;
    while (v > 0x7F) {
        o->p[o->n++] = (uint8_t)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    o->p[o->n++] = (uint8_t)v;
    return 0;
}

/* A length: compact (n + 1, unsigned varint) when flexible, else int32. */
static int
put_len(out_buf *o, Py_ssize_t n)
{
    return o->flexible ? put_uvarint(o, (uint64_t)n + 1) : put(o, (uint64_t)n, 4);
}

/* A nullable string; -1 with an error set, or declined (-2). */
static int
put_string(out_buf *o, PyObject *s)
{
    if (s == Py_None)
        return o->flexible ? put(o, 0, 1) : put(o, 0xFFFF, 2);
    if (!PyUnicode_Check(s))
        return -2;
    Py_ssize_t n;
    const char *data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == NULL) {
        PyErr_Clear();
        return -2;
    }
    if (o->flexible ? put_uvarint(o, (uint64_t)n + 1) < 0 : (n > 0x7FFF || put(o, n, 2) < 0))
        return o->flexible || n <= 0x7FFF ? -1 : -2;
    if (grow(o, n) < 0)
        return -1;
    memcpy(o->p + o->n, data, (size_t)n);
    o->n += n;
    return 0;
}

/* Where a result's __slots__ member sits while its type is unchanged (its version tag):
 * read there, not through the generic lookup (a slotted ProducePartitionResult's fields);
 * offset -1: the generic lookup. */
typedef struct {
    PyTypeObject *type;
    unsigned int version;
    Py_ssize_t offset;
} slot_hint;

enum { H_INDEX, H_ERROR_CODE, H_BASE_OFFSET, H_LOG_APPEND_TIME, H_LOG_START_OFFSET,
       H_RECORD_ERRORS, H_ERROR_MESSAGE, H_COUNT };
static slot_hint hints[H_COUNT];

static Py_ssize_t
learn_slot(PyTypeObject *tp, PyObject *name, slot_hint *h)
{
    PyObject *d = _PyType_Lookup(tp, name);  /* (borrowed; gives tp its version tag) */
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
        return -1;
    h->type = tp;
    h->version = tp->tp_version_tag;
    h->offset = -1;
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type &&
            tp->tp_getattro == PyObject_GenericGetAttr) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX)
            h->offset = m->offset;
    }
    return h->offset;
}

/* obj.<name>, a new reference (NULL with an error set: missing). */
static PyObject *
get_attr(PyObject *obj, PyObject *name, int hint)
{
    PyTypeObject *tp = Py_TYPE(obj);
    slot_hint *h = &hints[hint];
    Py_ssize_t at = h->type == tp && h->version == tp->tp_version_tag &&
        PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ? h->offset
                                                            : learn_slot(tp, name, h);
    PyObject *v = at < 0 ? NULL : *(PyObject **)((char *)obj + at);
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(obj, name);
}

/* An int attribute of ``bits`` bits put big-endian; -2 declined (missing, out of range). */
static int
put_attr(out_buf *o, PyObject *obj, PyObject *name, int hint, int bits)
{
    PyObject *v = get_attr(obj, name, hint);
    if (v == NULL || !PyLong_Check(v)) {
        Py_XDECREF(v);
        PyErr_Clear();
        return -2;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -2;
    }
    if (bits < 64 && (x < -(1LL << (bits - 1)) || x >= (1LL << (bits - 1))))
        return -2;
    return put(o, (uint64_t)x, bits / 8);
}

static int
record_errors(out_buf *o, PyObject *p)
{
    PyObject *errs = get_attr(p, s_record_errors, H_RECORD_ERRORS);
    if (errs == NULL) {
        PyErr_Clear();
        return -2;
    }
    PyObject *seq = PySequence_Fast(errs, "record_errors");
    Py_DECREF(errs);
    if (seq == NULL) {
        PyErr_Clear();
        return -2;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = put_len(o, n);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2 ||
            !PyLong_Check(PyTuple_GET_ITEM(e, 0))) {
            rc = -2;
            break;
        }
        int overflow;
        long long bi = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(e, 0), &overflow);
        if (overflow || bi < INT32_MIN || bi > INT32_MAX) {
            rc = -2;
            break;
        }
        rc = put(o, (uint64_t)bi, 4);
        if (rc == 0)
            rc = put_string(o, PyTuple_GET_ITEM(e, 1));
        if (rc == 0 && o->flexible)
            rc = put(o, 0, 1);
    }
    Py_DECREF(seq);
    return rc;
}

static int
partition(out_buf *o, PyObject *p, int version)
{
    int rc = put_attr(o, p, s_index, H_INDEX, 32);
    if (rc == 0)
        rc = put_attr(o, p, s_error_code, H_ERROR_CODE, 16);
    if (rc == 0)
        rc = put_attr(o, p, s_base_offset, H_BASE_OFFSET, 64);
    if (rc == 0)
        rc = put_attr(o, p, s_log_append_time, H_LOG_APPEND_TIME, 64);
    if (rc == 0 && version >= 5)
        rc = put_attr(o, p, s_log_start_offset, H_LOG_START_OFFSET, 64);
    if (rc == 0 && version >= 8) {
        rc = record_errors(o, p);
        if (rc == 0) {
            PyObject *msg = get_attr(p, s_error_message, H_ERROR_MESSAGE);
            if (msg == NULL) {
                PyErr_Clear();
                return -2;
            }
            rc = put_string(o, msg);
            Py_DECREF(msg);
        }
    }
    if (rc == 0 && o->flexible)
        rc = put(o, 0, 1);
    return rc;
}

static int
topic(out_buf *o, PyObject *t, int version)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2)
        return -2;
    PyObject *key = PyTuple_GET_ITEM(t, 0);
    int rc;
    if (PyObject_TypeCheck(key, (PyTypeObject *)uuid_type)) {
        PyObject *raw = PyObject_GetAttr(key, s_bytes);
        if (raw == NULL || !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16) {
            Py_XDECREF(raw);
            PyErr_Clear();
            return -2;
        }
        rc = grow(o, 16);
        if (rc == 0) {
            memcpy(o->p + o->n, PyBytes_AS_STRING(raw), 16);
            o->n += 16;
        }
        Py_DECREF(raw);
    } else {
        rc = PyUnicode_Check(key) ? put_string(o, key) : -2;
    }
    if (rc < 0)
        return rc;
    PyObject *parts = PySequence_Fast(PyTuple_GET_ITEM(t, 1), "partitions");
    if (parts == NULL) {
        PyErr_Clear();
        return -2;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(parts);
    rc = put_len(o, n);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        rc = partition(o, PySequence_Fast_GET_ITEM(parts, i), version);
    Py_DECREF(parts);
    if (rc == 0 && o->flexible)
        rc = put(o, 0, 1);
    return rc;
}

static int
response(out_buf *o, long long correlation_id, int version, PyObject *topics,
         long long throttle_ms)
{
    if (correlation_id < INT32_MIN || correlation_id > INT32_MAX || throttle_ms < INT32_MIN ||
        throttle_ms > INT32_MAX)
        return -2;
    PyObject *seq = PySequence_Fast(topics, "topics");
    if (seq == NULL) {
        PyErr_Clear();
        return -2;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = put(o, 0, 4); /* the size, patched at the end */
    if (rc == 0)
        rc = put(o, (uint64_t)correlation_id, 4);
    if (rc == 0 && o->flexible)
        rc = put(o, 0, 1);
    if (rc == 0)
        rc = put_len(o, n);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
        rc = topic(o, PySequence_Fast_GET_ITEM(seq, i), version);
    Py_DECREF(seq);
    if (rc == 0)
        rc = put(o, (uint64_t)throttle_ms, 4);
    if (rc == 0 && o->flexible)
        rc = put(o, 0, 1);
    if (rc == 0 && o->n - 4 > INT32_MAX)
        rc = -2;
    if (rc == 0) {
        Py_ssize_t size = o->n - 4;
        for (int i = 3; i >= 0; i--, size >>= 8)
            o->p[i] = (uint8_t)size;
    }
    return rc;
}

PyObject *
tl_produce_response_bind(PyObject *self, PyObject *arg)
{
    if (!PyType_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "produce_response_bind(uuid.UUID)");
        return NULL;
    }
    if (s_index == NULL) {
        if (!(s_index = PyUnicode_InternFromString("index")) ||
            !(s_error_code = PyUnicode_InternFromString("error_code")) ||
            !(s_base_offset = PyUnicode_InternFromString("base_offset")) ||
            !(s_log_append_time = PyUnicode_InternFromString("log_append_time")) ||
            !(s_log_start_offset = PyUnicode_InternFromString("log_start_offset")) ||
            !(s_record_errors = PyUnicode_InternFromString("record_errors")) ||
            !(s_error_message = PyUnicode_InternFromString("error_message")) ||
            !(s_bytes = PyUnicode_InternFromString("bytes")))
            return NULL;
    }
    Py_XSETREF(uuid_type, Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *encode_twin; /* encode_produce_response_py: what a declined answer is given to */

PyObject *
tl_produce_response_twin(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_XSETREF(encode_twin, Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *response_of(PyObject *const *args);

/* METH_FASTCALL: the arguments converted as PyArg_ParseTuple's "LiOL" would. */
PyObject *
tl_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "produce_response() takes 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    return response_of(args);
}

/* encode_produce_response(correlation_id, version, topics, throttle_time_ms=0): encoded here,
 * or by the bound twin when declined. */
PyObject *
tl_encode_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 && nargs != 4) {
        PyErr_Format(PyExc_TypeError,
                     "encode_produce_response() takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (encode_twin == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "produce_response_twin was not called");
        return NULL;
    }
    static PyObject *zero;
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyObject *full[4] = {args[0], args[1], args[2], nargs == 4 ? args[3] : zero};
    PyObject *out = response_of(full);
    if (out != Py_None)
        return out;
    Py_DECREF(out);
    return PyObject_Vectorcall(encode_twin, full, 4, NULL);
}

static PyObject *
response_of(PyObject *const *args)
{
    long long correlation_id, throttle_ms;
    int version;
    if (tl_arg_ll(args[0], &correlation_id) < 0 || tl_arg_int(args[1], &version) < 0 ||
        tl_arg_ll(args[3], &throttle_ms) < 0)
        return NULL;
    PyObject *topics = args[2];
    if (uuid_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "produce_response_bind was not called");
        return NULL;
    }
    out_buf o = {NULL, 0, 0, version >= 9};
    if (grow(&o, 128) < 0)
        return NULL;
    int rc = response(&o, correlation_id, version, topics, throttle_ms);
    PyObject *res = NULL;
    if (rc == 0)
        res = PyBytes_FromStringAndSize((const char *)o.p, o.n);
    else if (rc == -2)
        res = Py_NewRef(Py_None);
    free(o.p);
    return res;
}
