/* JSON's text for json_columns.c: growing buffers (the Avro and Protobuf passes' too, and
 * the hand-over of a pass's buffers to Python without a copy: tlj_block), strings (UTF-8
 * as Python decodes it), numbers (as float() reads them: json_number.c), values checked
 * and skipped, by RFC 8259's grammar and json.loads' rules.  Each reader returns 1 (read),
 * 0 (not taken: the value is rejected) or -1 (an error, in tlj_error: the pass runs
 * without the GIL). */
#ifndef TIDELOG_JSON_TEXT_H
#define TIDELOG_JSON_TEXT_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 256

typedef struct {
    uint8_t *p;
    size_t len, cap;
} Buf;

typedef struct {
    const uint8_t *p, *end;
    Buf scratch;
    PyThreadState *ts; /* the pass runs without the GIL; NULL while it holds it */
} Cur;

/* Why the pass stopped (it runs without the GIL: the error is raised after). */
enum { E_NONE = 0, E_MEMORY, E_TOO_BIG, E_PYTHON };
extern _Thread_local int tlj_error;

int tlj_reserve(Buf *b, size_t more);
/* The int64 rows in ``b`` (a pass's rejected values) as a list of ints; NULL with an
 * error set. */
PyObject *tlj_row_list(const Buf *b);
/* ``b``'s bytes as a read-only buffer object that owns them (``b`` is left empty); NULL
 * with an error set.  The JSON, Avro and Protobuf passes hand their columns over with it. */
PyObject *tlj_block(Buf *b);
/* A column as a pass fills it: validity bytes, values, offsets and its count of slots.
 * Each pass's node holds one as TLJ_COLUMN: its fields read as nd->valid ..., the whole
 * as nd->col. */
typedef struct {
    Buf valid, vals, offs;
    Py_ssize_t count;
} TljColumn;
#define TLJ_COLUMN                                                                             \
    union {                                                                                    \
        TljColumn col;                                                                         \
        struct {                                                                               \
            Buf valid, vals, offs;                                                             \
            Py_ssize_t count;                                                                  \
        };                                                                                     \
    }
/* Where a column stood before a row: a rejected row's slots are cut back to it. */
typedef struct {
    size_t valid, vals, offs;
    Py_ssize_t count;
} TljMark;
/* A column's (count, validity, values, offsets), its three buffers handed over as they are
 * (tlj_block: each Buf is left empty); NULL with an error set. */
PyObject *tlj_column_result(TljColumn *c);
/* After a pass that ran without the GIL: with ``rc`` < 0 its error (tlj_error) raised and
 * NULL; else (columns, rejected rows), the column of each of the ``n`` nodes at ``col``
 * bytes into it handed over (tlj_column_result).  ``format`` names the values in the
 * message of a column past 2 GiB ("an Avro"). */
PyObject *tlj_pass_outcome(int rc, const char *format, const Buf *rejected,
                           void *const *nodes, int n, size_t col);

static inline TljMark
tlj_mark(const TljColumn *c)
{
    return (TljMark){c->valid.len, c->vals.len, c->offs.len, c->count};
}

static inline void
tlj_rewind(TljColumn *c, const TljMark *m)
{
    c->valid.len = m->valid;
    c->vals.len = m->vals;
    c->offs.len = m->offs;
    c->count = m->count;
}

/* Each node's column (at ``col`` bytes into it) marked before a row, or cut back to its
 * mark when the row is rejected. */
static inline void
tlj_mark_all(TljMark *marks, void *const *nodes, int n, size_t col)
{
    for (int k = 0; k < n; k++)
        marks[k] = tlj_mark((const TljColumn *)((const char *)nodes[k] + col));
}

static inline void
tlj_rewind_all(const TljMark *marks, void *const *nodes, int n, size_t col)
{
    for (int k = 0; k < n; k++)
        tlj_rewind((TljColumn *)((char *)nodes[k] + col), &marks[k]);
}

static inline void
tlj_column_free(TljColumn *c)
{
    free(c->valid.p);
    free(c->vals.p);
    free(c->offs.p);
}
/* Builds the tables of tlj_double; once, with the GIL, before a pass. */
void tlj_init(void);
int tlj_string(Cur *c, Buf *out);
int tlj_token(Cur *c, const uint8_t **start, int *is_int);
int tlj_literal(Cur *c, const char *word, size_t n);
int tlj_skip(Cur *c, int depth);
int tlj_double(Cur *c, const uint8_t *s, int is_int, double *out);
int tlj_number(Cur *c, double *out);

/* ``n`` bytes from ``src`` at the end of ``b``; -1 (tlj_error set) on no memory. */
static inline int
tlj_put(Buf *b, const void *src, size_t n)
{
    if (b->len + n > b->cap && tlj_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int
push_u8(Buf *b, uint8_t v)
{
    if (b->len >= b->cap && tlj_reserve(b, 1) < 0)
        return -1;
    b->p[b->len++] = v;
    return 0;
}

static inline int
push_8(Buf *b, const void *v)
{
    if (b->len + 8 > b->cap && tlj_reserve(b, 8) < 0)
        return -1;
    memcpy(b->p + b->len, v, 8);
    b->len += 8;
    return 0;
}

static inline int
put_offset(Buf *b, size_t v)
{
    if (v > INT32_MAX) {
        tlj_error = E_TOO_BIG;
        return -1;
    }
    int32_t o = (int32_t)v;
    if (b->len + 4 > b->cap && tlj_reserve(b, 4) < 0)
        return -1;
    memcpy(b->p + b->len, &o, 4);
    b->len += 4;
    return 0;
}

/* (The scanning loops here and in the passes keep the position in a local: stores through
 * ``c->p``, a pointer to bytes, may alias anything, so the compiler would write it back at
 * every byte.) */
static inline void
skip_ws(Cur *c)
{
    const uint8_t *p = c->p, *e = c->end;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    c->p = p;
}

/* A string's bytes that stand for themselves: printable ASCII but the quote and backslash
 * (one load a byte in the scanning loops, not four comparisons). */
extern const uint8_t tlj_plain[256];

/* 1: parsed; 0: not taken (the value is rejected); -1: an error (the JSON, Avro and
 * Protobuf readers alike). */
#define TRY(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ <= 0)                                                                           \
            return r_;                                                                         \
    } while (0)

#endif
