/* Protobuf (proto3) values into Arrow column buffers, the Python side of proto_columns.c:
 * the plan (a tree of tuples from iceberg/protobuf_native.py) as nodes, the pass over
 * the rows with the GIL released (a rejected row rolled back to a null one), and each
 * node's buffers handed to Python as they are (tlj_column_result: no copy). */
#define PY_SSIZE_T_CLEAN
#include "proto_columns.h"

/* The plan (kind, number, presence, large, children, symbols) as nodes in preorder; -1
 * with an error set. */
static int
p_build(PyObject *plan, PNode **nodes, int *n, PNode **out)
{
    int kind, presence, large;
    unsigned long number;
    PyObject *children, *symbols;
    if (!PyArg_ParseTuple(plan, "ikiiO!O!", &kind, &number, &presence, &large, &PyTuple_Type,
                          &children, &PyTuple_Type, &symbols))
        return -1;
    Py_ssize_t nc = PyTuple_GET_SIZE(children);
    if (*n >= P_MAX_NODES || kind < P_ABSENT || kind > P_TS || nc > P_MAX_FIELDS ||
        (kind == P_LIST && nc != 1)) {
        PyErr_SetString(PyExc_ValueError, "a bad Protobuf column plan");
        return -1;
    }
    PNode *nd = PyMem_Calloc(1, sizeof(PNode));
    if (nd == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    nodes[(*n)++] = nd;
    *out = nd;
    nd->kind = kind;
    nd->number = (uint32_t)number;
    nd->presence = presence;
    nd->large = large;
    nd->nsym = PyTuple_GET_SIZE(symbols);
    nd->child = PyMem_Calloc((size_t)nc + 1, sizeof(PNode *));
    nd->sym_num = PyMem_Calloc((size_t)nd->nsym + 1, sizeof(int32_t));
    nd->sym = PyMem_Calloc((size_t)nd->nsym + 1, sizeof(char *));
    nd->sym_len = PyMem_Calloc((size_t)nd->nsym + 1, sizeof(Py_ssize_t));
    if (!nd->child || !nd->sym_num || !nd->sym || !nd->sym_len) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nd->nsym; i++) {
        int num;
        const char *name;
        Py_ssize_t len;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(symbols, i), "iy#", &num, &name, &len))
            return -1;
        nd->sym_num[i] = num;
        nd->sym[i] = name;
        nd->sym_len[i] = len;
    }
    if ((kind == P_STRING || kind == P_BYTES || kind == P_ENUM || kind == P_LIST) &&
        poff(nd, 0) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        if (p_build(PyTuple_GET_ITEM(children, i), nodes, n, &nd->child[i]) < 0)
            return -1;
        nd->nchild++;
    }
    return 0;
}

static int
p_pass(PNode *root, PNode **nodes, int n, TljMark *marks, const uint8_t *data, size_t dlen,
       const int32_t *offs, Py_ssize_t rows, Buf *rejected)
{
    for (int k = 0; k < n; k++) { /* a slot a row, and a column's bytes at most the data's
                                   * (pages never written are never mapped in) */
        PNode *nd = nodes[k];
        int blob = nd->kind == P_STRING || nd->kind == P_BYTES;
        if (tlj_reserve(&nd->valid, (size_t)rows + 1) < 0 ||
            tlj_reserve(&nd->vals, blob ? dlen + 1 : (size_t)width(nd->kind) * (rows + 1)) < 0 ||
            tlj_reserve(&nd->offs, 8 * ((size_t)rows + 1)) < 0)
            return -1;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        tlj_mark_all(marks, (void *const *)nodes, n, offsetof(PNode, col));
        int64_t a = offs[r], b = offs[r + 1];
        if (a < 0 || b < a || (size_t)b > dlen) {
            tlj_error = E_PYTHON + 1;
            return -1;
        }
        int got = pc_read_message(data + a, data + b, root, 0);
        if (got < 0)
            return -1;
        if (got)
            continue;
        tlj_rewind_all(marks, (void *const *)nodes, n, offsetof(PNode, col));
        int64_t row = r;
        if (push_8(rejected, &row) < 0 || pc_null(root) < 0)
            return -1;
    }
    return 0;
}

static PyObject *
p_run(PNode *root, PNode **nodes, int n, const uint8_t *data, size_t dlen,
      const int32_t *offs, Py_ssize_t rows)
{
    Buf rejected = {0};
    TljMark *marks = PyMem_Calloc((size_t)n, sizeof(TljMark));
    if (marks == NULL)
        return PyErr_NoMemory();
    tlj_error = E_NONE;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = p_pass(root, nodes, n, marks, data, dlen, offs, rows, &rejected);
    PyEval_RestoreThread(ts);
    PyObject *out = tlj_pass_outcome(rc, "a Protobuf", &rejected, (void *const *)nodes, n,
                                     offsetof(PNode, col));
    PyMem_Free(marks);
    free(rejected.p);
    return out;
}

PyObject *
tl_proto_columns(PyObject *self, PyObject *args)
{
    PyObject *plan, *out = NULL;
    Py_buffer data, offsets;
    PNode *nodes[P_MAX_NODES] = {0}, *root = NULL;
    int n = 0;
    if (!PyArg_ParseTuple(args, "y*y*O!", &data, &offsets, &PyTuple_Type, &plan))
        return NULL;
    Py_ssize_t rows = offsets.len / 4 - 1;
    if (rows < 0 || offsets.len % 4) {
        PyErr_SetString(PyExc_ValueError, "no offsets");
    } else if (p_build(plan, nodes, &n, &root) == 0) {
        if (root->kind != P_STRUCT)
            PyErr_SetString(PyExc_ValueError, "the plan's root is not a message");
        else
            out = p_run(root, nodes, n, data.buf, (size_t)data.len, offsets.buf, rows);
    }
    for (int k = 0; k < n; k++) {
        tlj_column_free(&nodes[k]->col);
        PyMem_Free(nodes[k]->child);
        PyMem_Free(nodes[k]->sym_num);
        PyMem_Free(nodes[k]->sym);
        PyMem_Free(nodes[k]->sym_len);
        PyMem_Free(nodes[k]);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return out;
}
