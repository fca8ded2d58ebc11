/* Avro values into Arrow column buffers: iceberg/avro_native.py avro_columns in C.
 *
 * Each value (Confluent's framing skipped) is one datum of the writer's schema, read in the
 * plan's order straight into the buffers of the table's columns: boolean, int, long, float,
 * double, string, bytes, enum (its symbol), fixed, array, record, and a union of null and
 * one of these (a table column the schema lacks stays null).  The read is strict: a value is
 * taken only when fastavro's schemaless reader, the reference, would read exactly these
 * typed values from it and nothing would be left after it (every varint within 64 bits,
 * an int within 32, a boolean byte 0 or 1, a float that is not NaN, lengths, counts and
 * union and enum indexes in range, strings well-formed UTF-8, array blocks with positive
 * counts).  Anything else rejects that value: its slots are rolled back to one null row and
 * its index is returned, for the reference to take or to send to the DLQ with its reason.
 * Polars' Avro reader, the other bulk path, costs about 2.5 times this read. */
#define PY_SSIZE_T_CLEAN
#include <stdlib.h>

#include "json_text.h"
#include "native.h"
#include "proto_varint.h"

enum { A_ABSENT = 0, A_BOOL, A_INT32, A_INT64, A_FLOAT, A_DOUBLE, A_STRING, A_BYTES, A_ENUM,
       A_FIXED, A_LIST, A_STRUCT };
#define A_MAX_NODES 1024
#define A_MAX_CHILDREN 1024

typedef struct ANode {
    int kind, large, null_index, value_index, nchild, norder;
    int *order;            /* struct: the child of each writer field, in the datum's order */
    struct ANode **child;
    Py_ssize_t size;       /* fixed: its size; enum: its symbols */
    const char **sym;
    Py_ssize_t *sym_len;
    TLJ_COLUMN;
} ANode;

typedef struct {
    const uint8_t *p, *end;
} ACur;

/* A zig-zag varint within 64 bits (at most 10 bytes, the 10th at most 1), as fastavro
 * reads it; 0 when it is not.  The varint is Protobuf's base-128 one. */
static inline int
read_long(ACur *c, int64_t *out)
{
    uint64_t v;
    if (!proto_varint(&c->p, c->end, &v))
        return 0;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 1;
}

static inline int
put_off(ANode *nd, size_t v)
{
    if (nd->large) {
        int64_t o = (int64_t)v;
        return push_8(&nd->offs, &o);
    }
    if (v > INT32_MAX) {
        tlj_error = E_TOO_BIG;
        return -1;
    }
    int32_t o = (int32_t)v;
    return tlj_put(&nd->offs, &o, 4);
}


/* One null slot (a struct's children get one each; a list's and a string's are empty). */
static int
a_null(ANode *nd)
{
    static const uint8_t zero[16] = {0};
    nd->count++;
    if (nd->kind == A_ABSENT)
        return 0;
    if (push_u8(&nd->valid, 0) < 0)
        return -1;
    switch (nd->kind) {
    case A_BOOL:
        return push_u8(&nd->vals, 0);
    case A_INT32:
    case A_FLOAT:
        return tlj_put(&nd->vals, zero, 4);
    case A_INT64:
    case A_DOUBLE:
        return push_8(&nd->vals, zero);
    case A_STRING:
    case A_BYTES:
    case A_ENUM:
        return put_off(nd, nd->vals.len);
    case A_FIXED:
        for (Py_ssize_t k = 0; k < nd->size; k++)
            if (push_u8(&nd->vals, 0) < 0)
                return -1;
        return 0;
    case A_LIST:
        return put_off(nd, (size_t)nd->child[0]->count);
    case A_STRUCT:
        for (int i = 0; i < nd->nchild; i++)
            if (a_null(nd->child[i]) < 0)
                return -1;
        return 0;
    }
    return 0;
}

static int read_node(ACur *c, ANode *nd);

static inline int
taken(ANode *nd)
{
    nd->count++;
    return push_u8(&nd->valid, 1) < 0 ? -1 : 1;
}

/* A length, then that many bytes (UTF-8 checked for a string) into the values. */
static int
read_blob(ACur *c, ANode *nd)
{
    int64_t n;
    TRY(read_long(c, &n));
    if (n < 0 || n > c->end - c->p)
        return 0;
    if (nd->kind == A_STRING && !tl_utf8_ok(c->p, c->p + n))
        return 0;
    if (tlj_put(&nd->vals, c->p, (size_t)n) < 0 || put_off(nd, nd->vals.len) < 0)
        return -1;
    c->p += n;
    return taken(nd);
}

static int
read_list(ACur *c, ANode *nd)
{
    ANode *item = nd->child[0];
    for (;;) {
        int64_t n;
        TRY(read_long(c, &n));
        if (n == 0)
            break;
        if (n < 0 || n > c->end - c->p) /* a negative count carries a size: the reference's */
            return 0;
        for (int64_t k = 0; k < n; k++)
            TRY(read_node(c, item));
    }
    if (put_off(nd, (size_t)item->count) < 0)
        return -1;
    return taken(nd);
}

static int
read_value(ACur *c, ANode *nd)
{
    int64_t v;
    switch (nd->kind) {
    case A_BOOL:
        if (c->p >= c->end || *c->p > 1)
            return 0;
        if (push_u8(&nd->vals, *c->p++) < 0)
            return -1;
        return taken(nd);
    case A_INT32: {
        TRY(read_long(c, &v));
        if (v < INT32_MIN || v > INT32_MAX)
            return 0;
        int32_t x = (int32_t)v;
        if (tlj_put(&nd->vals, &x, 4) < 0)
            return -1;
        return taken(nd);
    }
    case A_INT64:
        TRY(read_long(c, &v));
        if (push_8(&nd->vals, &v) < 0)
            return -1;
        return taken(nd);
    case A_FLOAT: {
        float f;
        if (c->end - c->p < 4)
            return 0;
        memcpy(&f, c->p, 4);
        if (f != f)
            return 0;
        c->p += 4;
        if (tlj_put(&nd->vals, &f, 4) < 0)
            return -1;
        return taken(nd);
    }
    case A_DOUBLE:
        if (c->end - c->p < 8)
            return 0;
        if (push_8(&nd->vals, c->p) < 0)
            return -1;
        c->p += 8;
        return taken(nd);
    case A_STRING:
    case A_BYTES:
        return read_blob(c, nd);
    case A_ENUM:
        TRY(read_long(c, &v));
        if (v < 0 || v >= nd->size)
            return 0;
        if (tlj_put(&nd->vals, nd->sym[v], (size_t)nd->sym_len[v]) < 0 ||
            put_off(nd, nd->vals.len) < 0)
            return -1;
        return taken(nd);
    case A_FIXED:
        if (c->end - c->p < nd->size)
            return 0;
        if (tlj_put(&nd->vals, c->p, (size_t)nd->size) < 0)
            return -1;
        c->p += nd->size;
        return taken(nd);
    case A_LIST:
        return read_list(c, nd);
    case A_STRUCT:
        for (int k = 0; k < nd->norder; k++)
            TRY(read_node(c, nd->child[nd->order[k]]));
        for (int i = 0; i < nd->nchild; i++)
            if (nd->child[i]->kind == A_ABSENT && a_null(nd->child[i]) < 0)
                return -1;
        return taken(nd);
    }
    return 0;
}

static int
read_node(ACur *c, ANode *nd)
{
    if (nd->value_index >= 0) { /* a union: its branch first */
        int64_t b;
        TRY(read_long(c, &b));
        if (b == nd->null_index)
            return a_null(nd) < 0 ? -1 : 1;
        if (b != nd->value_index)
            return 0;
    }
    return read_value(c, nd);
}

/* The plan (kind, null index, value index, large, children, order, extra) as nodes in
 * preorder; -1 with an error set. */
static int
a_build(PyObject *plan, ANode **nodes, int *n, ANode **out)
{
    int kind, null_index, value_index, large;
    PyObject *children, *order, *extra;
    if (!PyArg_ParseTuple(plan, "iiiiO!O!O!", &kind, &null_index, &value_index, &large,
                          &PyTuple_Type, &children, &PyTuple_Type, &order, &PyTuple_Type,
                          &extra))
        return -1;
    Py_ssize_t nc = PyTuple_GET_SIZE(children), no = PyTuple_GET_SIZE(order);
    if (*n >= A_MAX_NODES || kind < A_ABSENT || kind > A_STRUCT || nc > A_MAX_CHILDREN ||
        (kind == A_LIST && nc != 1) || no > nc) {
        PyErr_SetString(PyExc_ValueError, "a bad Avro column plan");
        return -1;
    }
    ANode *nd = PyMem_Calloc(1, sizeof(ANode));
    if (nd == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    nodes[*n] = nd;
    (*n)++;
    *out = nd;
    *nd = (ANode){.kind = kind, .large = large, .null_index = null_index,
                  .value_index = value_index};
    nd->child = PyMem_Calloc((size_t)nc + 1, sizeof(ANode *));
    nd->order = PyMem_Calloc((size_t)no + 1, sizeof(int));
    if (nd->child == NULL || nd->order == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < no; i++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(order, i));
        if (k < 0 || k >= nc) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a bad Avro field order");
            return -1;
        }
        nd->order[nd->norder++] = (int)k;
    }
    if (kind == A_FIXED) {
        nd->size = PyTuple_GET_SIZE(extra) == 1 ? PyLong_AsSsize_t(PyTuple_GET_ITEM(extra, 0))
                                                : -1;
        if (nd->size < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a fixed without its size");
            return -1;
        }
    } else if (kind == A_ENUM) {
        nd->size = PyTuple_GET_SIZE(extra);
        nd->sym = PyMem_Calloc((size_t)nd->size + 1, sizeof(char *));
        nd->sym_len = PyMem_Calloc((size_t)nd->size + 1, sizeof(Py_ssize_t));
        if (nd->sym == NULL || nd->sym_len == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < nd->size; i++) {
            PyObject *s = PyTuple_GET_ITEM(extra, i);
            if (!PyBytes_Check(s)) {
                PyErr_SetString(PyExc_TypeError, "enum symbols are bytes");
                return -1;
            }
            nd->sym[i] = PyBytes_AS_STRING(s);
            nd->sym_len[i] = PyBytes_GET_SIZE(s);
        }
    }
    if ((kind == A_STRING || kind == A_BYTES || kind == A_ENUM || kind == A_LIST) &&
        put_off(nd, 0) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        if (a_build(PyTuple_GET_ITEM(children, i), nodes, n, &nd->child[i]) < 0)
            return -1;
        nd->nchild++;
    }
    return 0;
}

/* Every value into the nodes; the rejected rows' numbers in ``rejected`` (int64); no
 * Python object touched (the caller lets other threads run).  0, or -1 with tlj_error. */
static int
a_pass(ANode *root, ANode **nodes, int n, TljMark *marks, const uint8_t *data, size_t dlen,
       const int32_t *offs, Py_ssize_t rows, Py_ssize_t skip, Buf *rejected)
{
    for (int k = 0; k < n; k++) { /* a slot a row, and a column's bytes at most the data's
                                   * (pages never written are never mapped in) */
        ANode *nd = nodes[k];
        size_t w = nd->kind == A_BOOL ? 1 : nd->kind == A_INT32 || nd->kind == A_FLOAT ? 4 : 8;
        int blob = nd->kind == A_STRING || nd->kind == A_BYTES;
        if (tlj_reserve(&nd->valid, (size_t)rows + 1) < 0 ||
            tlj_reserve(&nd->vals, blob ? dlen + 1 : w * ((size_t)rows + 1)) < 0 ||
            tlj_reserve(&nd->offs, 8 * ((size_t)rows + 1)) < 0)
            return -1;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        tlj_mark_all(marks, (void *const *)nodes, n, offsetof(ANode, col));
        int64_t a = offs[r], b = offs[r + 1];
        int ok = 0;
        if (a < 0 || b < a || (size_t)b > dlen) {
            tlj_error = E_PYTHON + 1;
            return -1;
        }
        if (b - a >= skip) {
            ACur c = {data + a + skip, data + b};
            int got = read_node(&c, root);
            if (got < 0)
                return -1;
            ok = got && c.p == c.end;
        }
        if (ok)
            continue;
        tlj_rewind_all(marks, (void *const *)nodes, n, offsetof(ANode, col));
        int64_t row = r;
        if (push_8(rejected, &row) < 0 || a_null(root) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
a_run(ANode *root, ANode **nodes, int n, const uint8_t *data, size_t dlen,
      const int32_t *offs, Py_ssize_t rows, Py_ssize_t skip)
{
    Buf rejected = {0};
    TljMark *marks = PyMem_Calloc((size_t)n, sizeof(TljMark));
    if (marks == NULL)
        return PyErr_NoMemory();
    tlj_error = E_NONE;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = a_pass(root, nodes, n, marks, data, dlen, offs, rows, skip, &rejected);
    PyEval_RestoreThread(ts);
    PyObject *out = tlj_pass_outcome(rc, "an Avro", &rejected, (void *const *)nodes, n,
                                     offsetof(ANode, col));
    PyMem_Free(marks);
    free(rejected.p);
    return out;
}

PyObject *
tl_avro_columns(PyObject *self, PyObject *args)
{
    PyObject *plan, *out = NULL;
    Py_buffer data, offsets;
    Py_ssize_t skip;
    ANode *nodes[A_MAX_NODES] = {0}, *root = NULL;
    int n = 0;
    if (!PyArg_ParseTuple(args, "y*y*nO!", &data, &offsets, &skip, &PyTuple_Type, &plan))
        return NULL;
    Py_ssize_t rows = offsets.len / 4 - 1;
    if (rows < 0 || skip < 0 || offsets.len % 4) {
        PyErr_SetString(PyExc_ValueError, "no offsets");
    } else if (a_build(plan, nodes, &n, &root) == 0) {
        if (root->kind != A_STRUCT || root->value_index >= 0)
            PyErr_SetString(PyExc_ValueError, "the plan's root is not a record");
        else
            out = a_run(root, nodes, n, data.buf, (size_t)data.len, offsets.buf, rows, skip);
    }
    for (int k = 0; k < n; k++) {
        tlj_column_free(&nodes[k]->col);
        PyMem_Free(nodes[k]->child);
        PyMem_Free(nodes[k]->order);
        PyMem_Free(nodes[k]->sym);
        PyMem_Free(nodes[k]->sym_len);
        PyMem_Free(nodes[k]);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}
