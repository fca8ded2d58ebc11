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
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

enum { K_ABSENT = 0, K_INT64 = 1, K_DOUBLE = 2, K_BOOL = 3, K_STRING = 4, K_LIST = 5,
       K_STRUCT = 6 };
#define MAX_FIELDS 64
#define MAX_DEPTH 256

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

typedef struct Node {
    int kind, nchild, index;
    struct Node **child;
    PyObject **names; /* bytes, UTF-8 */
    Buf valid, vals, offs;
    Py_ssize_t count;
} Node;

typedef struct {
    size_t valid, vals, offs;
    Py_ssize_t count;
} Mark;

typedef struct {
    const uint8_t *p, *end;
    Buf scratch;
    PyThreadState *ts; /* the pass runs without the GIL; NULL while it holds it */
} Cur;

/* Why the pass stopped (it runs without the GIL: the error is raised after). */
enum { E_NONE = 0, E_MEMORY, E_TOO_BIG, E_PYTHON };
static _Thread_local int pass_error;

static int
buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t c = b->cap ? b->cap : 1024;
    while (c < b->len + more)
        c *= 2;
    uint8_t *q = realloc(b->p, c);
    if (q == NULL) {
        pass_error = E_MEMORY;
        return -1;
    }
    b->p = q;
    b->cap = c;
    return 0;
}

static int
buf_put(Buf *b, const void *src, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int
push_u8(Buf *b, uint8_t v)
{
    if (b->len >= b->cap && buf_reserve(b, 1) < 0)
        return -1;
    b->p[b->len++] = v;
    return 0;
}

static inline int
push_8(Buf *b, const void *v)
{
    if (b->len + 8 > b->cap && buf_reserve(b, 8) < 0)
        return -1;
    memcpy(b->p + b->len, v, 8);
    b->len += 8;
    return 0;
}

static int
put_offset(Buf *b, size_t v)
{
    if (v > INT32_MAX) {
        pass_error = E_TOO_BIG;
        return -1;
    }
    int32_t o = (int32_t)v;
    if (b->len + 4 > b->cap && buf_reserve(b, 4) < 0)
        return -1;
    memcpy(b->p + b->len, &o, 4);
    b->len += 4;
    return 0;
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
        return put_offset(&nd->offs, nd->vals.len);
    case K_LIST:
        return put_offset(&nd->offs, (size_t)nd->child[0]->count);
    case K_STRUCT:
        for (int i = 0; i < nd->nchild; i++)
            if (append_null(nd->child[i]) < 0)
                return -1;
        return 0;
    default:
        return 0;
    }
}

static inline void
skip_ws(Cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* 1: parsed; 0: not taken (the value is rejected); -1: Python error. */
#define TRY(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ <= 0)                                                                           \
            return r_;                                                                         \
    } while (0)

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
    return buf_put(b, u, n);
}

/* A string (c->p at its opening quote), its text appended to ``out``. */
static int
parse_string(Cur *c, Buf *out)
{
    c->p++;
    for (;;) {
        const uint8_t *run = c->p;
        while (c->p < c->end && *c->p >= 0x20 && *c->p < 0x80 && *c->p != '"' && *c->p != '\\')
            c->p++;
        size_t len = (size_t)(c->p - run);
        if (len) {
            if (out->len + len > out->cap && buf_reserve(out, len) < 0)
                return -1;
            uint8_t *dst = out->p + out->len;
            if (len <= 16)
                for (size_t j = 0; j < len; j++)
                    dst[j] = run[j];
            else
                memcpy(dst, run, len);
            out->len += len;
        }
        if (c->p >= c->end)
            return 0;
        uint8_t b = *c->p;
        if (b == '"') {
            c->p++;
            return 1;
        }
        if (b < 0x20)
            return 0;
        if (b >= 0x80) {
            int n = utf8_len(c->p, c->end);
            if (!n)
                return 0;
            if (buf_put(out, c->p, (size_t)n) < 0)
                return -1;
            c->p += n;
            continue;
        }
        /* an escape */
        if (c->end - c->p < 2)
            return 0;
        uint8_t e = c->p[1], ch;
        c->p += 2;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (c->end - c->p < 4 || !hex4(c->p, &cp))
                return 0;
            c->p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF)
                return 0; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' ||
                    !hex4(c->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return 0;
                c->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (put_utf8(out, cp) < 0)
                return -1;
            continue;
        }
        default:
            return 0;
        }
        if (buf_put(out, &ch, 1) < 0)
            return -1;
    }
}

/* A number's token by JSON's grammar; *is_int: no fraction or exponent. */
static int
scan_number(Cur *c, const uint8_t **start, int *is_int)
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

static int
literal(Cur *c, const char *word, size_t n)
{
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return 0;
    c->p += n;
    return 1;
}

static int skip_value(Cur *c, int depth);

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
            TRY(parse_string(c, &c->scratch));
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':')
                return 0;
            c->p++;
        }
        TRY(skip_value(c, depth + 1));
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
static int
skip_value(Cur *c, int depth)
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
        return parse_string(c, &c->scratch);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    default:
        return scan_number(c, &s, &is_int);
    }
}

static int parse_value(Cur *c, Node *nd);

static int
parse_int(Cur *c, Node *nd)
{
    const uint8_t *s;
    int is_int;
    TRY(scan_number(c, &s, &is_int));
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

/* A decimal token of at most 19 significant digits and a power of ten within 10^27, when
 * the result is surely float()'s, or 0: the digits m (< 2^64) and 10^|e| (5^27 < 2^63) are
 * exact in x87's 64-bit mantissa, so one multiplication or division gives the exact value
 * rounded once to 64 bits; rounding that to a double gives the exact value's correctly
 * rounded double unless it lies exactly halfway between two doubles (then the first
 * rounding may have moved it there: not taken).  Within 2^53 and 10^22 (Clinger's fast
 * path) one double operation is exact enough by itself. */
static int
exact_double(const uint8_t *s, size_t n, double *out)
{
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                   1e20, 1e21, 1e22};
    const uint8_t *p = s, *e = s + n;
    int neg = *p == '-', digits = 0;
    long exp10 = 0;
    uint64_t m = 0;
    p += neg;
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        if (m || *p != '0')
            digits++;
        m = m * 10 + (uint64_t)(*p - '0');
        if (digits > 19)
            return 0;
    }
    if (p < e && *p == '.')
        for (p++; p < e && *p >= '0' && *p <= '9'; p++) {
            if (m || *p != '0')
                digits++;
            m = m * 10 + (uint64_t)(*p - '0');
            exp10--;
            if (digits > 19)
                return 0;
        }
    if (p < e) { /* an exponent */
        int eneg = 0;
        long x = 0;
        p++;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        for (; p < e; p++) {
            x = x * 10 + (*p - '0');
            if (x > 1000)
                return 0;
        }
        exp10 += eneg ? -x : x;
    }
    double d;
    if (m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        d = (double)m;
        d = exp10 < 0 ? d / p10[-exp10] : d * p10[exp10];
    } else {
#if LDBL_MANT_DIG == 64
        if (exp10 < -27 || exp10 > 27 || m == 0)
            return 0;
        static const long double p10l[28] = {
            1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L, 1e11L, 1e12L,
            1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L,
            1e25L, 1e26L, 1e27L}; /* exact: 5^27 < 2^63 */
        long double t = p10l[exp10 < 0 ? -exp10 : exp10], r;
        r = exp10 < 0 ? (long double)m / t : (long double)m * t;
        d = (double)r;
        long double off = r - (long double)d; /* exact */
        if (off != 0) {
            double next = nextafter(d, off > 0 ? HUGE_VAL : -HUGE_VAL);
            long double half = ((long double)next - (long double)d) / 2;
            if (off == half)
                return 0;
        }
#else
        return 0;
#endif
    }
    *out = neg ? -d : d;
    return 1;
}

/* A number as float() reads it (Python's correctly rounded dtoa, which json.loads uses):
 * the same double, inf past the range as float('1e400'); an integer token past the range
 * is rejected (json.loads gives an int, which float() refuses). */
static int
parse_double(Cur *c, Node *nd)
{
    const uint8_t *s;
    int is_int;
    char tmp[128];
    TRY(scan_number(c, &s, &is_int));
    size_t n = (size_t)(c->p - s);
    if (n >= sizeof tmp)
        return 0;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    double x;
    if (exact_double(s, n, &x))
        goto done;
    char *stop;
    if (c->ts) /* Python's dtoa wants the GIL (its big integers' free lists) */
        PyEval_RestoreThread(c->ts);
    x = PyOS_string_to_double(tmp, &stop, NULL);
    int failed = x == -1.0 && PyErr_Occurred();
    if (c->ts)
        c->ts = PyEval_SaveThread();
    if (failed) {
        pass_error = E_PYTHON;
        return -1;
    }
    if (stop != tmp + n || (is_int && (x == Py_HUGE_VAL || x == -Py_HUGE_VAL)))
        return 0;
done:
    if (is_int && x == 0)
        x = 0.0; /* float(int("-0")) */
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
    if (put_offset(&nd->offs, (size_t)item->count) < 0 || push_u8(&nd->valid, 1) < 0)
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
            const uint8_t *k = ++c->p;
            while (c->p < c->end && *c->p >= 0x20 && *c->p < 0x80 && *c->p != '"' &&
                   *c->p != '\\')
                c->p++;
            Buf key = {(uint8_t *)k, (size_t)(c->p - k), 0};
            if (c->p < c->end && *c->p == '"') {
                c->p++;
            } else { /* escapes or non-ASCII: decoded */
                c->p = k - 1;
                c->scratch.len = 0;
                TRY(parse_string(c, &c->scratch));
                key = c->scratch;
            }
            int i = find_field(nd, &key, hint);
            hint = i + 1;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':')
                return 0;
            c->p++;
            if (i < 0 || nd->child[i]->kind == K_ABSENT) {
                TRY(skip_value(c, 1));
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
        TRY(literal(c, "null", 4));
        return append_null(nd) < 0 ? -1 : 1;
    }
    switch (nd->kind) {
    case K_INT64:
        return (b == '-' || (b >= '0' && b <= '9')) ? parse_int(c, nd) : 0;
    case K_DOUBLE:
        return (b == '-' || (b >= '0' && b <= '9')) ? parse_double(c, nd) : 0;
    case K_BOOL: {
        uint8_t v = b == 't';
        TRY(v ? literal(c, "true", 4) : literal(c, "false", 5));
        if (push_u8(&nd->vals, v) < 0 || push_u8(&nd->valid, 1) < 0)
            return -1;
        nd->count++;
        return 1;
    }
    case K_STRING: {
        if (b != '"')
            return 0;
        TRY(parse_string(c, &nd->vals));
        if (put_offset(&nd->offs, nd->vals.len) < 0 || push_u8(&nd->valid, 1) < 0)
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
    if ((kind == K_STRING || kind == K_LIST) && put_offset(&nd->offs, 0) < 0) {
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
 * pass_error set. */
static int
pass(Cur *c, Node *root, Node **nodes, int n, Mark *marks, const uint8_t *data, size_t dlen,
     const int32_t *offs, Py_ssize_t rows, Py_ssize_t skip, Buf *rejected)
{
    for (int k = 0; k < n; k++) { /* a slot a row at least, most often */
        Node *nd = nodes[k];
        size_t width = nd->kind == K_INT64 || nd->kind == K_DOUBLE ? 8 : nd->kind == K_BOOL;
        if (buf_reserve(&nd->valid, (size_t)rows + 1) < 0 ||
            buf_reserve(&nd->vals, width * ((size_t)rows + 1)) < 0 ||
            ((nd->kind == K_STRING || nd->kind == K_LIST) &&
             buf_reserve(&nd->offs, 4 * ((size_t)rows + 1)) < 0))
            return -1;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        for (int k = 0; k < n; k++)
            marks[k] = (Mark){nodes[k]->valid.len, nodes[k]->vals.len, nodes[k]->offs.len,
                              nodes[k]->count};
        int64_t a = offs[r], b = offs[r + 1], ok = 0;
        if (a < 0 || b < a || (size_t)b > dlen) {
            pass_error = E_PYTHON + 1;
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
    pass_error = E_NONE;
    c.ts = PyEval_SaveThread();
    int rc = pass(&c, root, nodes, n, marks, data, dlen, offs, rows, skip, &rejected);
    PyEval_RestoreThread(c.ts);
    if (rc < 0) {
        if (pass_error == E_MEMORY)
            PyErr_NoMemory();
        else if (pass_error == E_TOO_BIG)
            PyErr_SetString(PyExc_OverflowError, "a JSON column passed 2 GiB");
        else if (pass_error != E_PYTHON)
            PyErr_SetString(PyExc_ValueError, "offsets outside the data");
        goto done;
    }
    Py_ssize_t nrej = (Py_ssize_t)(rejected.len / 8);
    if ((cols = PyList_New(n)) == NULL || (rej = PyList_New(nrej)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < nrej; i++) {
        int64_t row;
        memcpy(&row, rejected.p + 8 * i, 8);
        PyObject *v = PyLong_FromLongLong(row);
        if (v == NULL)
            goto done;
        PyList_SET_ITEM(rej, i, v);
    }
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
