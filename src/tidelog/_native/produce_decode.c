/* A Produce request decoded in place (protocol/produce_in_place.py decode_produce_in_place
 * is its twin and the reference): the header and body of v3-v13 (flexible from v9, topic
 * ids from v13), each partition's records a view of the frame (a slice of the memoryview
 * given, so writable when it is), the objects those of the twin (bound once with
 * produce_decode_bind).
 *
 * Declined (None): any frame the twin would refuse, and only those. Nothing is raised for
 * a malformed frame: the caller then runs the twin, which raises its own
 * InvalidRequestError, so the messages are the twin's by construction. Every length is
 * checked against the frame before it is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include <structmember.h>

#include "native.h"

static PyObject *header_cls, *request_cls, *topic_cls, *partition_cls, *uuid_cls;
static PyObject *twin; /* decode_produce_in_place_py: what a declined frame is given to */
static PyObject *uuid_kwnames; /* ("bytes",) */

/* A slotted dataclass made without its __init__ (which only sets its fields, in the order
 * of ``__slots__``): allocated and its slots filled, ~5x cheaper than calling the class. */
typedef struct {
    PyTypeObject *type; /* NULL: call the class */
    Py_ssize_t offset[4];
} slotted;

static slotted request_slots, topic_slots, partition_slots;

static int
bind_slots(slotted *sl, PyObject *cls, Py_ssize_t n)
{
    sl->type = NULL;
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (!PyType_Check(cls) || tp->tp_dictoffset != 0 ||
        PyObject_HasAttrString(cls, "__post_init__"))
        return 0;
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) == n;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *d = PyObject_GetAttr(cls, PyTuple_GET_ITEM(slots, i));
        if (d == NULL) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        if (Py_IS_TYPE(d, &PyMemberDescr_Type) &&
            ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
            sl->offset[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        else
            ok = 0;
        Py_DECREF(d);
    }
    Py_DECREF(slots);
    if (ok)
        sl->type = tp;
    return 0;
}

/* An instance of the class with ``args`` as its fields (borrowed: new references kept). */
static PyObject *
make(const slotted *sl, PyObject *cls, PyObject **args, Py_ssize_t n)
{
    if (sl->type == NULL)
        return PyObject_Vectorcall(cls, args, (size_t)n, NULL);
    PyObject *o = sl->type->tp_alloc(sl->type, 0);
    if (o == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        *(PyObject **)((char *)o + sl->offset[i]) = Py_NewRef(args[i]);
    return o;
}

typedef struct {
    PyObject *frame; /* the memoryview: records are its slices */
    const uint8_t *b;
    Py_ssize_t end;
    Py_ssize_t pos;
    int flexible;
} reader;

/* An unsigned varint of at most ``max_bytes`` bytes: 0, or -1 (truncated, too long). */
static int
uvarint(reader *r, int max_bytes, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (r->pos >= r->end)
            return -1;
        uint8_t c = r->b[r->pos++];
        v |= (uint64_t)(c & 0x7F) << (7 * i);
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static inline int
need(const reader *r, int64_t n)
{
    return n >= 0 && n <= (int64_t)(r->end - r->pos) ? 0 : -1;
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)tl_be(p, 4);
}

static inline int16_t
be16(const uint8_t *p)
{
    return (int16_t)tl_be(p, 2);
}

/* A length: compact (unsigned varint less one) when flexible, else a big-endian int of
 * ``fixed`` bytes. */
static int
length(reader *r, int fixed, int64_t *n)
{
    if (r->flexible) {
        uint64_t v;
        if (uvarint(r, 5, &v) < 0)
            return -1;
        *n = (int64_t)v - 1;
        return 0;
    }
    if (need(r, fixed) < 0)
        return -1;
    *n = fixed == 2 ? be16(r->b + r->pos) : be32(r->b + r->pos);
    r->pos += fixed;
    return 0;
}

static int
skip_tags(reader *r)
{
    uint64_t count, tag, size;
    if (uvarint(r, 5, &count) < 0)
        return -1;
    for (uint64_t i = 0; i < count; i++) {
        if (uvarint(r, 5, &tag) < 0 || uvarint(r, 5, &size) < 0 || need(r, (int64_t)size) < 0)
            return -1;
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* The tagged fields closing a flexible struct (none: one zero byte). */
static int
end_struct(reader *r)
{
    if (!r->flexible)
        return 0;
    if (r->pos >= r->end)
        return -1;
    if (r->b[r->pos] == 0) {
        r->pos++;
        return 0;
    }
    return skip_tags(r);
}

/* The last string decoded from each place (the client id, a topic's name): the next
 * request of a client names the same ones, so the same str is handed out again (its hash
 * kept for the dict lookups that follow) instead of a new one. Only ASCII strings are
 * kept, whose decoding is the same under any error handler. */
typedef struct {
    PyObject *s;
} last_string;

static last_string last_client_id, last_topic;

/* ``n`` bytes at ``p`` as a str (a new reference), or NULL. */
static PyObject *
decode_cached(last_string *last, const uint8_t *p, Py_ssize_t n, const char *errors)
{
    PyObject *s = last->s;
    if (s != NULL && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), p, (size_t)n) == 0)
        return Py_NewRef(s);
    s = PyUnicode_DecodeUTF8((const char *)p, n, errors);
    if (s != NULL && PyUnicode_IS_COMPACT_ASCII(s))
        Py_XSETREF(last->s, Py_NewRef(s));
    return s;
}

/* A nullable string (a new reference, Py_None included), or NULL. */
static PyObject *
string(reader *r, const char *errors, last_string *last)
{
    int64_t n;
    if (length(r, 2, &n) < 0)
        return NULL;
    if (n < 0)
        return Py_NewRef(Py_None);
    if (need(r, n) < 0)
        return NULL;
    PyObject *s = last != NULL ? decode_cached(last, r->b + r->pos, (Py_ssize_t)n, errors)
                               : PyUnicode_DecodeUTF8((const char *)r->b + r->pos,
                                                      (Py_ssize_t)n, errors);
    r->pos += (Py_ssize_t)n;
    return s;
}

/* An array's length: never null, never more elements than bytes left (each element reads
 * at least one byte, so the twin would run past the end). */
static int
array_len(reader *r, Py_ssize_t *n)
{
    int64_t v;
    if (length(r, 4, &v) < 0 || v < 0 || v > (int64_t)(r->end - r->pos))
        return -1;
    *n = (Py_ssize_t)v;
    return 0;
}

static PyObject *
partition(reader *r)
{
    int64_t size;
    if (need(r, 4) < 0)
        return NULL;
    int32_t index = be32(r->b + r->pos);
    r->pos += 4;
    if (length(r, 4, &size) < 0)
        return NULL;
    PyObject *records;
    if (size >= 0) {
        if (need(r, size) < 0)
            return NULL;
        records = PySequence_GetSlice(r->frame, r->pos, r->pos + (Py_ssize_t)size);
        if (records == NULL)
            return NULL;
        r->pos += (Py_ssize_t)size;
    } else {
        records = Py_NewRef(Py_None);
    }
    PyObject *idx = PyLong_FromLong(index);
    PyObject *part = NULL;
    if (idx != NULL) {
        PyObject *args[2] = {idx, records};
        part = make(&partition_slots, partition_cls, args, 2);
    }
    Py_XDECREF(idx);
    Py_DECREF(records);
    if (part != NULL && end_struct(r) < 0)
        Py_CLEAR(part);
    return part;
}

/* A topic's key: its name (up to v12) or its id (v13; None when all zero, as kio reads). */
static int
topic_key(reader *r, int version, PyObject **name, PyObject **topic_id)
{
    *name = Py_NewRef(Py_None);
    *topic_id = Py_NewRef(Py_None);
    if (version < 13) {
        Py_DECREF(*name);
        *name = string(r, "strict", &last_topic);
        return *name == NULL ? -1 : 0;
    }
    if (need(r, 16) < 0)
        return -1;
    const uint8_t *p = r->b + r->pos;
    r->pos += 16;
    static const uint8_t zero[16];
    if (memcmp(p, zero, 16) == 0)
        return 0;
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 16);
    if (raw == NULL)
        return -1;
    PyObject *args[1] = {raw};
    Py_DECREF(*topic_id);
    *topic_id = PyObject_Vectorcall(uuid_cls, args, 0, uuid_kwnames);
    Py_DECREF(raw);
    return *topic_id == NULL ? -1 : 0;
}

static PyObject *
topic(reader *r, int version)
{
    PyObject *name, *topic_id, *parts = NULL, *out = NULL;
    Py_ssize_t n;
    if (topic_key(r, version, &name, &topic_id) < 0 || array_len(r, &n) < 0)
        goto done;
    parts = PyTuple_New(n);
    if (parts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = partition(r);
        if (p == NULL)
            goto done;
        PyTuple_SET_ITEM(parts, i, p);
    }
    PyObject *args[3] = {name, topic_id, parts};
    out = make(&topic_slots, topic_cls, args, 3);
    if (out != NULL && end_struct(r) < 0)
        Py_CLEAR(out);
done:
    Py_XDECREF(name);
    Py_XDECREF(topic_id);
    Py_XDECREF(parts);
    return out;
}

static PyObject *
body(reader *r, int version)
{
    PyObject *txn = string(r, "strict", NULL), *topics = NULL, *out = NULL, *acks = NULL,
             *timeout = NULL;
    Py_ssize_t n;
    if (txn == NULL || need(r, 6) < 0)
        goto done;
    acks = PyLong_FromLong(be16(r->b + r->pos));
    timeout = PyLong_FromLong(be32(r->b + r->pos + 2));
    r->pos += 6;
    if (acks == NULL || timeout == NULL || array_len(r, &n) < 0)
        goto done;
    topics = PyTuple_New(n);
    if (topics == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = topic(r, version);
        if (t == NULL)
            goto done;
        PyTuple_SET_ITEM(topics, i, t);
    }
    if (r->flexible && (r->pos >= r->end || (r->b[r->pos] != 0 && skip_tags(r) < 0)))
        goto done;
    PyObject *args[4] = {txn, acks, timeout, topics};
    out = make(&request_slots, request_cls, args, 4);
done:
    Py_XDECREF(txn);
    Py_XDECREF(acks);
    Py_XDECREF(timeout);
    Py_XDECREF(topics);
    return out;
}

/* codec.parse_header: key, version, correlation id, client id ("replace"), tags (v2). */
static PyObject *
header(reader *r, int header_version)
{
    if (r->end < 10)
        return NULL;
    const uint8_t *b = r->b;
    int16_t n = be16(b + 8);
    r->pos = 10;
    PyObject *client_id;
    if (n >= 0) {
        if (need(r, n) < 0)
            return NULL;
        client_id = decode_cached(&last_client_id, b + 10, n, "replace");
        if (client_id == NULL)
            return NULL;
        r->pos += n;
    } else {
        client_id = Py_NewRef(Py_None);
    }
    if (header_version >= 2) {
        uint64_t count, tag, size;
        if (r->pos < r->end && b[r->pos] == 0) {
            r->pos++;
        } else if (uvarint(r, 6, &count) < 0) {
            goto fail;
        } else {
            for (uint64_t i = 0; i < count; i++) {
                if (uvarint(r, 6, &tag) < 0 || uvarint(r, 6, &size) < 0 ||
                    need(r, (int64_t)size) < 0)
                    goto fail;
                r->pos += (Py_ssize_t)size;
            }
        }
    }
    /* tuple.__new__(RequestHeader, fields): the named tuple allocated and filled here */
    PyObject *h = ((PyTypeObject *)header_cls)->tp_alloc((PyTypeObject *)header_cls, 5);
    if (h == NULL)
        goto fail;
    PyObject *fields[4] = {PyLong_FromLong(be16(b)), PyLong_FromLong(be16(b + 2)),
                           PyLong_FromLong(be32(b + 4)), PyLong_FromLong(header_version)};
    for (int i = 0; i < 4; i++) {
        if (fields[i] == NULL) {
            for (int j = 0; j < 4; j++)
                Py_XDECREF(fields[j]);
            Py_DECREF(h);
            goto fail;
        }
    }
    PyTuple_SET_ITEM(h, 0, fields[0]);
    PyTuple_SET_ITEM(h, 1, fields[1]);
    PyTuple_SET_ITEM(h, 2, fields[2]);
    PyTuple_SET_ITEM(h, 3, client_id);
    PyTuple_SET_ITEM(h, 4, fields[3]);
    return h;
fail:
    Py_DECREF(client_id);
    return NULL;
}

PyObject *
tl_produce_decode_bind(PyObject *self, PyObject *args)
{
    PyObject *h, *q, *t, *p, *u, *tw = NULL;
    if (!PyArg_ParseTuple(args, "O!OOOO|O:produce_decode_bind", &PyType_Type, &h, &q, &t, &p,
                          &u, &tw))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)h, &PyTuple_Type) ||
        ((PyTypeObject *)h)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "the header class must be a named tuple");
        return NULL;
    }
    if (uuid_kwnames == NULL && (uuid_kwnames = Py_BuildValue("(s)", "bytes")) == NULL)
        return NULL;
    Py_XSETREF(header_cls, Py_NewRef(h));
    Py_XSETREF(request_cls, Py_NewRef(q));
    Py_XSETREF(topic_cls, Py_NewRef(t));
    Py_XSETREF(partition_cls, Py_NewRef(p));
    Py_XSETREF(uuid_cls, Py_NewRef(u));
    Py_XSETREF(twin, Py_XNewRef(tw));
    bind_slots(&request_slots, q, 4);
    bind_slots(&topic_slots, t, 3);
    bind_slots(&partition_slots, p, 2);
    Py_RETURN_NONE;
}

/* ``frame`` (a memoryview) decoded: (header, request), None (declined), NULL (raised). */
static PyObject *decode(PyObject *frame, int version, int header_version);

static int
frame_and_version(const char *name, PyObject *const *args, PyObject **frame, int *version)
{
    *frame = args[0];
    if (!PyMemoryView_Check(*frame)) {
        PyErr_Format(PyExc_TypeError, "%s() argument 1 must be memoryview, not %.50s", name,
                     Py_TYPE(*frame)->tp_name);
        return -1;
    }
    return tl_arg_int(args[1], version);
}

PyObject *
tl_produce_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    PyObject *frame;
    int version, header_version;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "produce_decode() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (frame_and_version("produce_decode", args, &frame, &version) < 0 ||
        tl_arg_int(args[2], &header_version) < 0)
        return NULL;
    return decode(frame, version, header_version);
}

/* decode_produce_in_place: the frame decoded here, or by the bound twin when declined (which
 * then raises its own InvalidRequestError); the header version Produce's (2 from v9, the
 * first flexible version, else 1). */
PyObject *
tl_produce_decode_in_place(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    PyObject *frame;
    int version;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "produce_decode_in_place() takes 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (frame_and_version("produce_decode_in_place", args, &frame, &version) < 0)
        return NULL;
    if (twin == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "produce_decode_bind was not given the twin");
        return NULL;
    }
    PyObject *out = decode(frame, version, version >= 9 ? 2 : 1);
    if (out != Py_None)
        return out;
    Py_DECREF(out);
    return PyObject_Vectorcall(twin, args, 2, NULL);
}

static PyObject *
decode(PyObject *frame, int version, int header_version)
{
    if (header_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "produce_decode_bind was not called");
        return NULL;
    }
    Py_buffer *mv = PyMemoryView_GET_BUFFER(frame);
    if (mv->itemsize != 1 || mv->ndim != 1)
        Py_RETURN_NONE; /* not a view of bytes: the twin's business */
    Py_buffer view;
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    reader r = {frame, (const uint8_t *)view.buf, view.len, 0, version >= 9};
    PyObject *out = NULL, *h = header(&r, header_version);
    if (h != NULL) {
        PyObject *req = body(&r, version);
        if (req != NULL)
            out = PyTuple_Pack(2, h, req);
        Py_XDECREF(req);
        Py_DECREF(h);
    }
    PyBuffer_Release(&view);
    if (out != NULL)
        return out;
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return NULL; /* not the frame's fault (MemoryError...) */
    PyErr_Clear();
    Py_RETURN_NONE;
}
