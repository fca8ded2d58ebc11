/* JSON's text for json_columns.c (see json_text.h). */
#define PY_SSIZE_T_CLEAN
#include <stdlib.h>

#include "json_text.h"

_Thread_local int tlj_error;

#define PLAIN16(b) 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
const uint8_t tlj_plain[256] = {
    [0x20] = 1, [0x21] = 1, [0x23] = 1, [0x24] = 1, [0x25] = 1, [0x26] = 1, [0x27] = 1,
    [0x28] = 1, [0x29] = 1, [0x2A] = 1, [0x2B] = 1, [0x2C] = 1, [0x2D] = 1, [0x2E] = 1,
    [0x2F] = 1, [0x30] = PLAIN16(0), [0x40] = PLAIN16(0), [0x50] = 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, [0x5D] = 1, 1, 1, [0x60] = PLAIN16(0), [0x70] = PLAIN16(0)};
#undef PLAIN16

int
tlj_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t c = b->cap ? b->cap : 1024;
    while (c < b->len + more)
        c *= 2;
    uint8_t *q = realloc(b->p, c);
    if (q == NULL) {
        tlj_error = E_MEMORY;
        return -1;
    }
    b->p = q;
    b->cap = c;
    return 0;
}

/* Bytes a pass made, handed to Python without a copy: a read-only buffer (Arrow's
 * pa.py_buffer and numpy read it in place) that frees them when the last reader lets go. */
typedef struct {
    PyObject_HEAD uint8_t *p;
    Py_ssize_t len;
} Block;

static void
block_dealloc(PyObject *self)
{
    free(((Block *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

static int
block_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    Block *b = (Block *)self;
    return PyBuffer_FillInfo(view, self, b->p, b->len, 1, flags);
}

static PyBufferProcs block_buffer = {block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tidelog._native._core.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = block_dealloc,
    .tp_as_buffer = &block_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes of a native pass's column, freed with the last reference.",
};

PyObject *
tlj_block(Buf *b)
{
    if (b->p == NULL || b->len == 0)
        return PyBytes_FromStringAndSize(NULL, 0);
    if (PyType_Ready(&BlockType) < 0)
        return NULL;
    Block *o = PyObject_New(Block, &BlockType);
    if (o == NULL)
        return NULL;
    if (b->cap - b->len > 4096) { /* give back the growth's slack */
        uint8_t *q = realloc(b->p, b->len);
        if (q != NULL)
            b->p = q;
    }
    o->p = b->p;
    o->len = (Py_ssize_t)b->len;
    *b = (Buf){0};
    return (PyObject *)o;
}

PyObject *
tlj_column_result(TljColumn *c)
{
    PyObject *v = tlj_block(&c->valid), *x = tlj_block(&c->vals), *o = tlj_block(&c->offs);
    PyObject *out = NULL;
    if (v != NULL && x != NULL && o != NULL)
        out = Py_BuildValue("nOOO", c->count, v, x, o);
    Py_XDECREF(v);
    Py_XDECREF(x);
    Py_XDECREF(o);
    return out;
}

PyObject *
tlj_pass_outcome(int rc, const char *format, const Buf *rejected, void *const *nodes, int n,
                 size_t col)
{
    if (rc < 0) {
        if (tlj_error == E_MEMORY)
            PyErr_NoMemory();
        else if (tlj_error == E_TOO_BIG)
            PyErr_Format(PyExc_OverflowError, "%s column passed 2 GiB", format);
        else if (tlj_error != E_PYTHON)
            PyErr_SetString(PyExc_ValueError, "offsets outside the data");
        return NULL;
    }
    PyObject *out = NULL, *cols = PyList_New(n), *rej = NULL;
    if (cols == NULL || (rej = tlj_row_list(rejected)) == NULL)
        goto done;
    for (int k = 0; k < n; k++) {
        PyObject *t = tlj_column_result((TljColumn *)((char *)nodes[k] + col));
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(cols, k, t);
    }
    out = PyTuple_Pack(2, cols, rej);
done:
    Py_XDECREF(cols);
    Py_XDECREF(rej);
    return out;
}

PyObject *
tlj_row_list(const Buf *b)
{
    Py_ssize_t n = (Py_ssize_t)(b->len / 8);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t row;
        memcpy(&row, b->p + 8 * i, 8);
        PyObject *v = PyLong_FromLongLong(row);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static int
hex4(const uint8_t *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= (uint32_t)(h - '0');
        else if (h >= 'a' && h <= 'f')
            v |= (uint32_t)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F')
            v |= (uint32_t)(h - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* Length of the well-formed UTF-8 sequence at p (Unicode's table 3-7, as Python decodes),
 * or 0. */
static int
utf8_len(const uint8_t *p, const uint8_t *end)
{
    uint8_t b = p[0];
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (end - p < n || p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

static int
put_utf8(Buf *b, uint32_t cp)
{
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (uint8_t)(0xC0 | (cp >> 6));
        u[1] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | (cp >> 12));
        u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | (cp >> 18));
        u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return tlj_put(b, u, n);
}

/* A string (c->p at its opening quote), its text appended to ``out``. */
/* An escape (c->p at its backslash), its character appended to ``out``; a \u pair of
 * surrogates is one character, a lone surrogate is not taken (Python keeps it, and then
 * cannot encode it: the reference's row does not fit). */
static int
escape(Cur *c, Buf *out)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    if (c->end - c->p < 2)
        return 0;
    uint8_t e = c->p[1];
    c->p += 2;
    if (e != 'u') {
        const char *at = e ? strchr(from, e) : NULL;
        if (at == NULL)
            return 0;
        return push_u8(out, (uint8_t)to[at - from]) < 0 ? -1 : 1;
    }
    uint32_t cp, lo;
    if (c->end - c->p < 4 || !hex4(c->p, &cp))
        return 0;
    c->p += 4;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return 0; /* a lone low surrogate */
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || !hex4(c->p + 2, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF)
            return 0;
        c->p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    return put_utf8(out, cp) < 0 ? -1 : 1;
}

/* Bytes [run, end) (printable ASCII) appended to ``out``. */
static inline int
put_run(Buf *out, const uint8_t *run, size_t len)
{
    if (out->len + len > out->cap && tlj_reserve(out, len) < 0)
        return -1;
    uint8_t *dst = out->p + out->len;
    if (len <= 16)
        for (size_t j = 0; j < len; j++)
            dst[j] = run[j];
    else
        memcpy(dst, run, len);
    out->len += len;
    return 0;
}

int
tlj_string(Cur *c, Buf *out)
{
    c->p++;
    for (;;) {
        const uint8_t *run = c->p, *q = run, *e = c->end;
        while (q < e && tlj_plain[*q])
            q++;
        c->p = q;
        if (q > run && put_run(out, run, (size_t)(q - run)) < 0)
            return -1;
        if (c->p >= c->end)
            return 0;
        uint8_t b = *c->p;
        if (b == '"') {
            c->p++;
            return 1;
        }
        if (b < 0x20)
            return 0;
        if (b == '\\') {
            TRY(escape(c, out));
            continue;
        }
        int n = utf8_len(c->p, c->end);
        if (!n)
            return 0;
        if (tlj_put(out, c->p, (size_t)n) < 0)
            return -1;
        c->p += n;
    }
}

/* A number's token by JSON's grammar; *is_int: no fraction or exponent. */
int
tlj_token(Cur *c, const uint8_t **start, int *is_int)
{
    const uint8_t *p = c->p, *e = c->end;
    *start = p;
    *is_int = 1;
    if (p < e && *p == '-')
        p++;
    if (p >= e)
        return 0;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (p < e && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return 0;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    c->p = p;
    return 1;
}

int
tlj_literal(Cur *c, const char *word, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

static int
skip_container(Cur *c, int depth, uint8_t close)
{
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 1;
    }
    for (;;) {
        if (close == '}') {
            skip_ws(c);
            if (c->p >= c->end || *c->p != '"')
                return 0;
            c->scratch.len = 0;
            TRY(tlj_string(c, &c->scratch));
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':')
                return 0;
            c->p++;
        }
        TRY(tlj_skip(c, depth + 1));
        skip_ws(c);
        if (c->p >= c->end)
            return 0;
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p != close)
            return 0;
        c->p++;
        return 1;
    }
}

/* Any JSON value, checked as json.loads would and dropped. */
int
tlj_skip(Cur *c, int depth)
{
    const uint8_t *s;
    int is_int;
    if (depth > MAX_DEPTH)
        return 0;
    skip_ws(c);
    if (c->p >= c->end)
        return 0;
    switch (*c->p) {
    case '{':
        return skip_container(c, depth, '}');
    case '[':
        return skip_container(c, depth, ']');
    case '"':
        c->scratch.len = 0;
        return tlj_string(c, &c->scratch);
    case 't':
        return tlj_literal(c, "true", 4);
    case 'f':
        return tlj_literal(c, "false", 5);
    case 'n':
        return tlj_literal(c, "null", 4);
    default:
        return tlj_token(c, &s, &is_int);
    }
}
