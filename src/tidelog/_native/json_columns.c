/* JSON Schema values into Arrow column buffers: iceberg/json_native.py json_columns in C.
 *
 * Each value (Confluent's framing skipped) must be one JSON object of the plan's struct; its
 * fields are read straight into the buffers of the plan's columns (int64, double, bool,
 * string, list, struct; a column of the table that the value's schema lacks stays null).
 * The decode is strict: a value is taken only when Python's json.loads would read it into
 * exactly these typed values (RFC 8259's grammar, UTF-8 as Python decodes it, integers in
 * int64, each known key once, nothing after the object).  Anything else (another type in a
 * column, a float in an integer column, NaN, a duplicate or escaped key, a lone surrogate,
 * bad UTF-8, a number strtod flags as out of range) rejects that value: its slots are rolled
 * back to one null row and its index is returned, for the reference decode (json.loads)
 * to take or to send to the DLQ with its reason.  No library reads JSON into given Arrow
 * columns under those rules: pyarrow's reader takes a superset and costs about ten times
 * as much per value. */
#define PY_SSIZE_T_CLEAN
#include <stdlib.h>

#include "json_text.h"
#include "native.h"

enum { K_ABSENT = 0, K_INT64 = 1, K_DOUBLE = 2, K_BOOL = 3, K_STRING = 4, K_LIST = 5,
       K_STRUCT = 6 };
#define MAX_FIELDS 64

typedef struct Node {
    int kind, nchild, index;
    struct Node **child;
    PyObject **names; /* bytes, UTF-8 */
    Buf valid, vals, offs;
    Py_ssize_t count;
} Node;

/* An offset of a string or list column: 64-bit, as the table's large_string and large_list
 * hold them (no cast after the pass). */
static inline int
put_offset64(Buf *b, size_t v)
{
    int64_t o = (int64_t)v;
    return push_8(b, &o);
}

typedef struct {
    size_t valid, vals, offs;
    Py_ssize_t count;
} Mark;

/* One null slot (a struct's children get one each; a list's is empty). */
static int
append_null(Node *nd)
{
    uint8_t zero8[8] = {0};
    if (nd->kind != K_ABSENT && push_u8(&nd->valid, 0) < 0)
        return -1;
    nd->count++;
    switch (nd->kind) {
    case K_INT64:
    case K_DOUBLE:
        return push_8(&nd->vals, zero8);
    case K_BOOL:
        return push_u8(&nd->vals, 0);
    case K_STRING:
        return put_offset64(&nd->offs, nd->vals.len);
    case K_LIST:
        return put_offset64(&nd->offs, (size_t)nd->child[0]->count);
    case K_STRUCT:
        for (int i = 0; i < nd->nchild; i++)
            if (append_null(nd->child[i]) < 0)
                return -1;
        return 0;
    default:
        return 0;
    }
}

static int parse_value(Cur *c, Node *nd);

static int
parse_int(Cur *c, Node *nd)
{
    const uint8_t *s;
    int is_int;
    TRY(tlj_token(c, &s, &is_int));
    if (!is_int)
        return 0;
    int neg = *s == '-';
    const uint8_t *d = s + neg;
    if (c->p - d > 19)
        return 0;
    uint64_t v = 0;
    for (; d < c->p; d++)
        v = v * 10 + (uint64_t)(*d - '0');
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return 0;
    int64_t x = neg ? (int64_t)(0 - v) : (int64_t)v;
    if (push_8(&nd->vals, &x) < 0 || push_u8(&nd->valid, 1) < 0)
        return -1;
    nd->count++;
    return 1;
}

static int
parse_double(Cur *c, Node *nd)
{
    const uint8_t *s;
    int is_int;
    double x;
    TRY(tlj_token(c, &s, &is_int));
    TRY(tlj_double(c, s, is_int, &x));
    if (push_8(&nd->vals, &x) < 0 || push_u8(&nd->valid, 1) < 0)
        return -1;
    nd->count++;
    return 1;
}

static int
parse_list(Cur *c, Node *nd)
{
    Node *item = nd->child[0];
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']')
        c->p++;
    else
        for (;;) {
            TRY(parse_value(c, item));
            skip_ws(c);
            if (c->p >= c->end)
                return 0;
            if (*c->p == ']') {
                c->p++;
                break;
            }
            if (*c->p != ',')
                return 0;
            c->p++;
        }
    if (put_offset64(&nd->offs, (size_t)item->count) < 0 || push_u8(&nd->valid, 1) < 0)
        return -1;
    nd->count++;
    return 1;
}

static inline int
same_name(PyObject *name, const Buf *key)
{
    if ((size_t)PyBytes_GET_SIZE(name) != key->len)
        return 0;
    const char *a = PyBytes_AS_STRING(name);
    for (size_t j = 0; j < key->len; j++)
        if ((uint8_t)a[j] != key->p[j])
            return 0;
    return 1;
}

static int
find_field(Node *nd, const Buf *key, int hint)
{
    if (hint < nd->nchild && same_name(nd->names[hint], key))
        return hint;
    for (int i = 0; i < nd->nchild; i++)
        if (same_name(nd->names[i], key))
            return i;
    return -1;
}

/* An object's key (c->p at its quote): in place when plain ASCII, else decoded. */
static int
read_key(Cur *c, Buf *key)
{
    const uint8_t *k = c->p + 1, *q = k, *e = c->end;
    while (q < e && *q >= 0x20 && *q < 0x80 && *q != '"' && *q != '\\')
        q++;
    c->p = q;
    if (q < e && *q == '"') {
        *key = (Buf){(uint8_t *)k, (size_t)(q - k), 0};
        c->p = q + 1;
        return 1;
    }
    c->p = k - 1;
    c->scratch.len = 0;
    TRY(tlj_string(c, &c->scratch));
    *key = c->scratch;
    return 1;
}

static int
parse_object(Cur *c, Node *nd)
{
    uint64_t seen = 0;
    int hint = 0;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        c->p++;
    else
        for (;;) {
            skip_ws(c);
            if (c->p >= c->end || *c->p != '"')
                return 0;
            Buf key;
            TRY(read_key(c, &key));
            int i = find_field(nd, &key, hint);
            hint = i + 1;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':')
                return 0;
            c->p++;
            if (i < 0 || nd->child[i]->kind == K_ABSENT) {
                TRY(tlj_skip(c, 1));
            } else {
                if (seen & ((uint64_t)1 << i))
                    return 0; /* json.loads keeps the last: the reference decides */
                seen |= (uint64_t)1 << i;
                TRY(parse_value(c, nd->child[i]));
            }
            skip_ws(c);
            if (c->p >= c->end)
                return 0;
            if (*c->p == '}') {
                c->p++;
                break;
            }
            if (*c->p != ',')
                return 0;
            c->p++;
        }
    for (int i = 0; i < nd->nchild; i++)
        if (!(seen & ((uint64_t)1 << i)) && append_null(nd->child[i]) < 0)
            return -1;
    if (push_u8(&nd->valid, 1) < 0)
        return -1;
    nd->count++;
    return 1;
}

static int
parse_value(Cur *c, Node *nd)
{
    skip_ws(c);
    if (c->p >= c->end)
        return 0;
    uint8_t b = *c->p;
    if (b == 'n') {
        TRY(tlj_literal(c, "null", 4));
        return append_null(nd) < 0 ? -1 : 1;
    }
    switch (nd->kind) {
    case K_INT64:
        return (b == '-' || (b >= '0' && b <= '9')) ? parse_int(c, nd) : 0;
    case K_DOUBLE:
        return (b == '-' || (b >= '0' && b <= '9')) ? parse_double(c, nd) : 0;
    case K_BOOL: {
        uint8_t v = b == 't';
        TRY(v ? tlj_literal(c, "true", 4) : tlj_literal(c, "false", 5));
        if (push_u8(&nd->vals, v) < 0 || push_u8(&nd->valid, 1) < 0)
            return -1;
        nd->count++;
        return 1;
    }
    case K_STRING: {
        if (b != '"')
            return 0;
        TRY(tlj_string(c, &nd->vals));
        if (put_offset64(&nd->offs, nd->vals.len) < 0 || push_u8(&nd->valid, 1) < 0)
            return -1;
        nd->count++;
        return 1;
    }
    case K_LIST:
        return b == '[' ? parse_list(c, nd) : 0;
    case K_STRUCT:
        return b == '{' ? parse_object(c, nd) : 0;
    default:
        return 0;
    }
}

/* The plan (kind, names, children) as nodes in preorder; -1 with an error set. */
static int
build(PyObject *plan, Node **nodes, int *n, int cap, Node **out)
{
    int kind;
    PyObject *names, *children;
    if (!PyArg_ParseTuple(plan, "iO!O!", &kind, &PyTuple_Type, &names, &PyTuple_Type,
                          &children))
        return -1;
    Py_ssize_t nc = PyTuple_GET_SIZE(children);
    if (*n >= cap || kind < K_ABSENT || kind > K_STRUCT || nc > MAX_FIELDS ||
        (kind == K_LIST && nc != 1) || (kind == K_STRUCT && PyTuple_GET_SIZE(names) != nc)) {
        PyErr_SetString(PyExc_ValueError, "a bad JSON column plan");
        return -1;
    }
    Node *nd = PyMem_Calloc(1, sizeof(Node));
    if (nd == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    nd->kind = kind;
    nd->index = (*n)++;
    nodes[nd->index] = nd;
    *out = nd;
    nd->child = PyMem_Calloc((size_t)nc + 1, sizeof(Node *));
    nd->names = PyMem_Calloc((size_t)nc + 1, sizeof(PyObject *));
    if (nd->child == NULL || nd->names == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if ((kind == K_STRING || kind == K_LIST) && put_offset64(&nd->offs, 0) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        if (kind == K_STRUCT) {
            PyObject *name = PyTuple_GET_ITEM(names, i);
            if (!PyBytes_Check(name)) {
                PyErr_SetString(PyExc_TypeError, "field names are bytes");
                return -1;
            }
            nd->names[i] = name;
        }
        if (build(PyTuple_GET_ITEM(children, i), nodes, n, cap, &nd->child[i]) < 0)
            return -1;
        nd->nchild++;
    }
    return 0;
}

static PyObject *
node_result(Node *nd)
{
    static const char empty[1] = {0};
#define BYTES(b) (b).p ? (const char *)(b).p : empty, (Py_ssize_t)(b).len
    return Py_BuildValue("ny#y#y#", nd->count, BYTES(nd->valid), BYTES(nd->vals),
                         BYTES(nd->offs));
#undef BYTES
}

/* Every value into the nodes; the rejected rows' numbers in ``rejected`` (int64).  No
 * Python object is touched: the caller lets other threads run meanwhile.  0, or -1 with
 * tlj_error set. */
static int
pass(Cur *c, Node *root, Node **nodes, int n, Mark *marks, const uint8_t *data, size_t dlen,
     const int32_t *offs, Py_ssize_t rows, Py_ssize_t skip, Buf *rejected)
{
    for (int k = 0; k < n; k++) { /* a slot a row at least, most often */
        Node *nd = nodes[k];
        size_t width = nd->kind == K_INT64 || nd->kind == K_DOUBLE ? 8 : nd->kind == K_BOOL;
        if (tlj_reserve(&nd->valid, (size_t)rows + 1) < 0 ||
            tlj_reserve(&nd->vals, width * ((size_t)rows + 1)) < 0 ||
            ((nd->kind == K_STRING || nd->kind == K_LIST) &&
             tlj_reserve(&nd->offs, 8 * ((size_t)rows + 1)) < 0))
            return -1;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        for (int k = 0; k < n; k++)
            marks[k] = (Mark){nodes[k]->valid.len, nodes[k]->vals.len, nodes[k]->offs.len,
                              nodes[k]->count};
        int64_t a = offs[r], b = offs[r + 1], ok = 0;
        if (a < 0 || b < a || (size_t)b > dlen) {
            tlj_error = E_PYTHON + 1;
            return -1;
        }
        if (b - a >= skip) {
            c->p = data + a + skip;
            c->end = data + b;
            skip_ws(c);
            if (c->p < c->end && *c->p == '{') {
                int got = parse_object(c, root);
                if (got < 0)
                    return -1;
                skip_ws(c);
                ok = got && c->p == c->end;
            }
        }
        if (ok)
            continue;
        for (int k = 0; k < n; k++) {
            nodes[k]->valid.len = marks[k].valid;
            nodes[k]->vals.len = marks[k].vals;
            nodes[k]->offs.len = marks[k].offs;
            nodes[k]->count = marks[k].count;
        }
        int64_t row = r;
        if (push_8(rejected, &row) < 0 || append_null(root) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
run(Node *root, Node **nodes, int n, const uint8_t *data, size_t dlen, const int32_t *offs,
    Py_ssize_t rows, Py_ssize_t skip)
{
    Cur c = {0};
    Buf rejected = {0};
    PyObject *out = NULL, *cols = NULL, *rej = NULL;
    Mark *marks = PyMem_Calloc((size_t)n, sizeof(Mark));
    if (marks == NULL)
        return PyErr_NoMemory();
    tlj_error = E_NONE;
    c.ts = PyEval_SaveThread();
    int rc = pass(&c, root, nodes, n, marks, data, dlen, offs, rows, skip, &rejected);
    PyEval_RestoreThread(c.ts);
    if (rc < 0) {
        if (tlj_error == E_MEMORY)
            PyErr_NoMemory();
        else if (tlj_error != E_PYTHON)
            PyErr_SetString(PyExc_ValueError, "offsets outside the data");
        goto done;
    }
    if ((cols = PyList_New(n)) == NULL || (rej = tlj_row_list(&rejected)) == NULL)
        goto done;
    for (int k = 0; k < n; k++) {
        PyObject *t = node_result(nodes[k]);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(cols, k, t);
    }
    out = PyTuple_Pack(2, cols, rej);
done:
    Py_XDECREF(cols);
    Py_XDECREF(rej);
    PyMem_Free(marks);
    free(c.scratch.p);
    free(rejected.p);
    return out;
}

PyObject *
tl_json_columns(PyObject *self, PyObject *args)
{
    PyObject *plan, *out = NULL;
    Py_buffer data, offsets;
    Py_ssize_t skip;
    Node *nodes[1024] = {0}, *root = NULL;
    int n = 0;
    if (!PyArg_ParseTuple(args, "y*y*nO!", &data, &offsets, &skip, &PyTuple_Type, &plan))
        return NULL;
    Py_ssize_t rows = offsets.len / 4 - 1;
    if (rows < 0 || skip < 0) {
        PyErr_SetString(PyExc_ValueError, "no offsets");
    } else if (build(plan, nodes, &n, 1024, &root) == 0) {
        if (root->kind != K_STRUCT)
            PyErr_SetString(PyExc_ValueError, "the plan's root is not a struct");
        else
            out = run(root, nodes, n, data.buf, (size_t)data.len, offsets.buf, rows, skip);
    }
    for (int k = 0; k < n; k++) {
        free(nodes[k]->valid.p);
        free(nodes[k]->vals.p);
        free(nodes[k]->offs.p);
        PyMem_Free(nodes[k]->child);
        PyMem_Free(nodes[k]->names);
        PyMem_Free(nodes[k]);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}
