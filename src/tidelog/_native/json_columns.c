/* JSON Schema values into Arrow column buffers: iceberg/json_native.py json_columns in C.
 *
 * Each value (Confluent's framing skipped) must be one JSON object of the plan's struct; its
 * fields are read straight into the buffers of the plan's columns (int64, double, bool,
 * string, list, struct; a column of the table that the value's schema lacks stays null).
 * The decode is strict: a value is taken only when Python's json.loads would read it into
 * exactly these typed values (RFC 8259's grammar, UTF-8 as Python decodes it, integers in
 * int64, each known key once, nothing after the object).  Anything else (another type in a
 * column, a float in an integer column, NaN, a duplicate or escaped key, a lone surrogate,
 * bad UTF-8, a number strtod flags as out of range) rejects that value: its slots are cut
 * back (each column's length follows from its count: nothing is saved before a row) to one
 * null row and its index is returned, for the reference decode (json.loads)
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

typedef struct {
    const uint8_t *p; /* UTF-8, held by the plan */
    size_t len;
    int plain; /* no byte a JSON string must escape: the key's text is the name itself */
} Name;

typedef struct Node {
    int kind, nchild, index;
    struct Node **child;
    Name *names;
    TLJ_COLUMN;
    uint64_t all; /* a struct's bit of each field: every field seen */
} Node;

/* An offset of a string or list column: 64-bit, as the table's large_string and large_list
 * hold them (no cast after the pass). */
static inline int
put_offset64(Buf *b, size_t v)
{
    int64_t o = (int64_t)v;
    return push_8(b, &o);
}

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

/* The node back to ``count`` slots: its buffers' lengths follow from the count (a string's
 * bytes and a list's items from the offset at ``count``), its children's from its own. */
static void
cut_to(Node *nd, Py_ssize_t count)
{
    int64_t at;
    nd->count = count;
    if (nd->kind == K_ABSENT)
        return;
    nd->valid.len = (size_t)count;
    switch (nd->kind) {
    case K_INT64:
    case K_DOUBLE:
        nd->vals.len = 8 * (size_t)count;
        return;
    case K_BOOL:
        nd->vals.len = (size_t)count;
        return;
    case K_STRING:
    case K_LIST:
        nd->offs.len = 8 * ((size_t)count + 1);
        memcpy(&at, nd->offs.p + 8 * count, 8);
        if (nd->kind == K_STRING)
            nd->vals.len = (size_t)at;
        else
            cut_to(nd->child[0], at);
        return;
    default:
        for (int i = 0; i < nd->nchild; i++)
            cut_to(nd->child[i], count);
    }
}

static int parse_value(Cur *c, Node *nd);
static int read_text_key(Cur *c, Buf *key);

/* An integer by JSON's grammar within int64 (a fraction or exponent: not taken). */
static int
parse_int(Cur *c, Node *nd)
{
    const uint8_t *p = c->p, *e = c->end;
    int neg = *p == '-';
    p += neg;
    const uint8_t *d = p;
    uint64_t v = 0;
    while (p < e && (unsigned)(*p - '0') < 10) {
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    long digits = (long)(p - d);
    if (digits == 0 || digits > 19 || (digits > 1 && *d == '0') ||
        (p < e && (*p == '.' || *p == 'e' || *p == 'E')))
        return 0;
    c->p = p;
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
    double x;
    TRY(tlj_number(c, &x));
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

/* (Names are short: a loop, not a call to memcmp.) */
static inline int
same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (a[j] != b[j])
            return 0;
    return 1;
}

static inline int
same_name(const Name *name, const Buf *key)
{
    return name->len == key->len && same_bytes(name->p, key->p, key->len);
}

static int
find_field(Node *nd, const Buf *key, int hint)
{
    if (hint < nd->nchild && same_name(&nd->names[hint], key))
        return hint;
    for (int i = 0; i < nd->nchild; i++)
        if (same_name(&nd->names[i], key))
            return i;
    return -1;
}

/* An object's key (c->p at its quote) and its field (-1: none): the field after the last
 * one first, its name compared in place (objects most often hold the fields in the
 * schema's order); else the key in place when plain ASCII, or decoded. */
static int
read_key(Cur *c, Node *nd, int hint, int *field)
{
    if (hint < nd->nchild && nd->names[hint].plain) {
        const Name *name = &nd->names[hint];
        if ((size_t)(c->end - c->p) > name->len + 1 && c->p[name->len + 1] == '"' &&
            same_bytes(c->p + 1, name->p, name->len)) {
            c->p += name->len + 2;
            *field = hint;
            return 1;
        }
    }
    Buf key;
    TRY(read_text_key(c, &key));
    *field = find_field(nd, &key, hint);
    return 1;
}

/* An object's key (c->p at its quote): in place when plain ASCII, else decoded. */
static int
read_text_key(Cur *c, Buf *key)
{
    const uint8_t *k = c->p + 1, *q = k, *e = c->end;
    while (q < e && tlj_plain[*q])
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
            int i;
            TRY(read_key(c, nd, hint, &i));
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
    if (seen != nd->all)
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
    nd->names = PyMem_Calloc((size_t)nc + 1, sizeof(Name));
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
            Name *at = &nd->names[i];
            at->p = (const uint8_t *)PyBytes_AS_STRING(name);
            at->len = (size_t)PyBytes_GET_SIZE(name);
            at->plain = 1;
            for (size_t j = 0; j < at->len; j++)
                if (at->p[j] < 0x20 || at->p[j] >= 0x80 || at->p[j] == '"' || at->p[j] == '\\')
                    at->plain = 0;
        }
        if (build(PyTuple_GET_ITEM(children, i), nodes, n, cap, &nd->child[i]) < 0)
            return -1;
        nd->all |= (uint64_t)1 << i;
        nd->nchild++;
    }
    return 0;
}

/* (count, validity, values, offsets): the buffers handed over as they are (tlj_block). */
/* Every value into the nodes; the rejected rows' numbers in ``rejected`` (int64).  No
 * Python object is touched: the caller lets other threads run meanwhile.  0, or -1 with
 * tlj_error set. */
static int
pass(Cur *c, Node *root, Node **nodes, int n, const uint8_t *data, size_t dlen,
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
        cut_to(root, r); /* every row before holds one slot of the root */
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
    tlj_init();
    tlj_error = E_NONE;
    c.ts = PyEval_SaveThread();
    int rc = pass(&c, root, nodes, n, data, dlen, offs, rows, skip, &rejected);
    PyEval_RestoreThread(c.ts);
    PyObject *out = tlj_pass_outcome(rc, "a JSON", &rejected, (void *const *)nodes, n,
                                     offsetof(Node, col));
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
        tlj_column_free(&nodes[k]->col);
        PyMem_Free(nodes[k]->child);
        PyMem_Free(nodes[k]->names);
        PyMem_Free(nodes[k]);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}
