/* JSON's text for json_columns.c: growing buffers, strings (UTF-8 as Python decodes it),
 * numbers (as float() reads them: json_number.c), values checked and skipped, by RFC 8259's
 * grammar and json.loads' rules.  Each reader returns 1 (read), 0 (not taken: the value
 * is rejected) or -1 (an error, in tlj_error: the pass runs without the GIL). */
#ifndef TIDELOG_JSON_TEXT_H
#define TIDELOG_JSON_TEXT_H

#include <Python.h>
#include <stdint.h>
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
 * with an error set. */
PyObject *tlj_block(Buf *b);
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

/* 1: parsed; 0: not taken (the value is rejected); -1: Python error. */
#define TRY(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ <= 0)                                                                           \
            return r_;                                                                         \
    } while (0)

#endif
