/* The Spark read path's columnar pass: spark/columns.py decode_columns_py in C.
 *
 * A run of v2 batches (a fetch response's or a segment slice's, each batch's bytes with its
 * records payload: the batch's own bytes past its header, or the decompressed records) is
 * decoded in one call into the buffers of Spark's Arrow columns: offsets, timestamps (µs),
 * timestamp types, key and value offsets/data/validity, and the (row, batch, position, count)
 * of every record that carries headers.  Each record is walked once, with the Spark
 * decoder's own walks (tl_record_starts, tl_record_at), so results and errors equal the
 * twin's bit for bit: numpy's int64 wrap-around, the same messages in the same order. */
#define PY_SSIZE_T_CLEAN
#include <string.h>

#include "native.h"

#define OVERHEAD 61
#define TIMESTAMP_TYPE_MASK 0x08

typedef struct {
    int64_t offset, ts, kpos, klen, vpos, vlen, hcount, hpos;
    Py_ssize_t batch;
    int32_t type;
} Rec;

/* What went wrong in the part of the pass that runs without the GIL, raised after it. */
enum { OK, ERR_NOMEM, ERR_STARTS, ERR_RECORD, ERR_2GIB, ERR_OUTSIDE };

typedef struct {
    Py_buffer *views; /* the buffers held (released at the end) */
    Py_ssize_t held, nb;
    const uint8_t **bp, **pp; /* batch i's bytes and its records payload */
    int64_t *bl, *pl;
    Rec *recs;
    Py_ssize_t n, cap;
    int64_t *starts;
    Py_ssize_t starts_cap;
    int err, err_rc; /* an ERR_ and, for ERR_STARTS, tl_record_starts_raw's result */
    Py_ssize_t err_j;
    int64_t err_a, err_b;
    int64_t total[2], nulls[2]; /* keys' and values' bytes and nulls */
    Py_ssize_t outside[2];      /* the first key / value outside its payload (-1: none) */
    int64_t outside_len[2];     /* and that payload's length */
    Py_ssize_t hn;              /* records with headers */
} Pass;

/* ``*buf`` with room for ``need`` items (raw allocator: no GIL needed); -1 when out of
 * memory. */
static int
grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    void *p = PyMem_RawRealloc(*buf, (size_t)c * item);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = c;
    return 0;
}

/* The payload of batch i: its own bytes past the header, or the given (decompressed) bytes. */
static const uint8_t *
payload_of(const Pass *ps, Py_ssize_t i, int64_t *len)
{
    *len = ps->pl[i];
    return ps->pp[i];
}

/* Records batch i's walk may give (what its starts are sized for). */
static Py_ssize_t
wanted(const Pass *ps, Py_ssize_t i)
{
    int64_t count = (int32_t)tl_be(ps->bp[i] + 57, 4), len = ps->pl[i];
    return count < 0 ? 0 : (Py_ssize_t)(count < len + 1 ? count : len + 1);
}

/* Walk batch i, appending its records with offsets in [start, end). No Python call: -1
 * with ps->err set. */
static int
walk_batch(Pass *ps, Py_ssize_t i, int64_t start, int64_t end, int headers)
{
    const uint8_t *h = ps->bp[i];
    uint64_t base_offset = tl_be(h, 8), base_ts = tl_be(h + 27, 8);
    int64_t max_ts = (int64_t)tl_be(h + 35, 8);
    int log_append = (h[22] & TIMESTAMP_TYPE_MASK) != 0;
    int64_t len;
    const uint8_t *b = payload_of(ps, i, &len);
    Py_ssize_t want = wanted(ps, i);
    if (grow((void **)&ps->starts, &ps->starts_cap, want, sizeof(int64_t)) < 0) {
        ps->err = ERR_NOMEM;
        return -1;
    }
    int rc = tl_record_starts_raw(b, (uint64_t)len, want, ps->starts);
    if (rc) {
        ps->err = ERR_STARTS;
        ps->err_rc = rc;
        return -1;
    }
    for (Py_ssize_t j = 0; j < want; j++) {
        int64_t row[8];
        if (tl_record_at(b, len, ps->starts[j], headers, row)) {
            ps->err = ERR_RECORD;
            ps->err_j = j;
            ps->err_a = ps->starts[j];
            ps->err_b = len;
            return -1;
        }
        int64_t offset = (int64_t)(base_offset + (uint64_t)row[0]);
        if (offset < start || offset >= end)
            continue;
        if (grow((void **)&ps->recs, &ps->cap, ps->n + 1, sizeof(Rec)) < 0) {
            ps->err = ERR_NOMEM;
            return -1;
        }
        uint64_t ts = log_append ? (uint64_t)max_ts : base_ts + (uint64_t)row[1];
        Rec r = {offset, (int64_t)(ts * 1000u), row[2], row[3], row[4], row[5], row[6], row[7],
                 i, log_append};
        for (int which = 0; which < 2; which++) { /* sizes and gather_py's bounds */
            int64_t pos = which ? r.vpos : r.kpos, ln = which ? r.vlen : r.klen;
            if (ln >= 0)
                ps->total[which] += ln;
            else
                ps->nulls[which]++;
            if (ps->outside[which] < 0 && (pos < 0 || pos > len - (ln > 0 ? ln : 0))) {
                ps->outside[which] = ps->n;
                ps->outside_len[which] = len;
            }
        }
        ps->hn += r.hcount != 0;
        ps->recs[ps->n++] = r;
    }
    return 0;
}

/* Room for ``nb`` batches and ``views`` held buffers. */
static int
alloc_pass(Pass *ps, Py_ssize_t nb, Py_ssize_t views)
{
    ps->nb = nb;
    ps->views = PyMem_Calloc((size_t)views + 1, sizeof(Py_buffer));
    ps->bp = PyMem_Calloc((size_t)nb + 1, sizeof(uint8_t *));
    ps->pp = PyMem_Calloc((size_t)nb + 1, sizeof(uint8_t *));
    ps->bl = PyMem_Calloc((size_t)nb + 1, sizeof(int64_t));
    ps->pl = PyMem_Calloc((size_t)nb + 1, sizeof(int64_t));
    if (!ps->views || !ps->bp || !ps->pp || !ps->bl || !ps->pl) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static Py_buffer *
hold(Pass *ps, PyObject *obj)
{
    if (PyObject_GetBuffer(obj, &ps->views[ps->held], PyBUF_SIMPLE) < 0)
        return NULL;
    return &ps->views[ps->held++];
}

/* Batch i is ``p[0:len]``; its payload the given object's bytes, or its own past the header. */
static int
set_batch(Pass *ps, Py_ssize_t i, const uint8_t *p, int64_t len, PyObject *given)
{
    if (len < OVERHEAD) {
        PyErr_Format(PyExc_ValueError, "a batch of %lld bytes is shorter than its %d-byte "
                     "header", (long long)len, OVERHEAD);
        return -1;
    }
    ps->bp[i] = p;
    ps->bl[i] = len;
    ps->pp[i] = p + OVERHEAD;
    ps->pl[i] = len - OVERHEAD;
    if (given != Py_None) {
        Py_buffer *v = hold(ps, given);
        if (v == NULL)
            return -1;
        ps->pp[i] = (const uint8_t *)v->buf;
        ps->pl[i] = (int64_t)v->len;
    }
    return 0;
}

/* Hold the buffers of every batch and payload; -1 with the twin's error. */
static int
hold_buffers(Pass *ps, PyObject *batches, PyObject *payloads)
{
    for (Py_ssize_t i = 0; i < ps->nb; i++) {
        Py_buffer *v = hold(ps, PySequence_Fast_GET_ITEM(batches, i));
        if (v == NULL || set_batch(ps, i, (const uint8_t *)v->buf, (int64_t)v->len,
                                   PySequence_Fast_GET_ITEM(payloads, i)) < 0)
            return -1;
    }
    return 0;
}

static void
release(Pass *ps)
{
    for (Py_ssize_t k = 0; k < ps->held; k++)
        PyBuffer_Release(&ps->views[k]);
    PyMem_Free(ps->views);
    PyMem_Free(ps->bp);
    PyMem_Free(ps->pp);
    PyMem_Free(ps->bl);
    PyMem_Free(ps->pl);
    PyMem_RawFree(ps->recs);
    PyMem_RawFree(ps->starts);
}

/* The checks of one binary column (keys: which 0, values: which 1) on the sizes the walk
 * measured, in the twin's order (its size, then its bounds); -1 with ps->err set. */
static int
check_binary(Pass *ps, int which)
{
    if (ps->total[which] >= ((int64_t)1 << 31)) {
        ps->err = ERR_2GIB;
        return -1;
    }
    if (ps->outside[which] >= 0) {
        ps->err = ERR_OUTSIDE;
        ps->err_a = ps->outside_len[which];
        return -1;
    }
    return 0;
}

/* Every batch walked (the columns measured as it goes): the part of the pass with no Python call
 * (run with the GIL released). -1 with ps->err set. */
static int
walk_all(Pass *ps, int64_t start, int64_t end, int headers)
{
    Py_ssize_t total = 0, most = 0;
    for (Py_ssize_t i = 0; i < ps->nb; i++) {
        Py_ssize_t w = wanted(ps, i);
        total += w;
        most = w > most ? w : most;
    }
    /* room for every record a window keeps (capped: a window may keep few of many) */
    if (grow((void **)&ps->recs, &ps->cap, total < (1 << 22) ? total : (1 << 22),
             sizeof(Rec)) < 0 ||
        grow((void **)&ps->starts, &ps->starts_cap, most, sizeof(int64_t)) < 0) {
        ps->err = ERR_NOMEM;
        return -1;
    }
    ps->outside[0] = ps->outside[1] = -1;
    for (Py_ssize_t i = 0; i < ps->nb; i++)
        if (walk_batch(ps, i, start, end, headers) < 0)
            return -1;
    if (check_binary(ps, 0) < 0 || check_binary(ps, 1) < 0)
        return -1;
    return 0;
}

/* The Python error of ps->err (the twin's, as the GIL-holding pass raised them). */
static void
raise_error(const Pass *ps)
{
    switch (ps->err) {
    case ERR_STARTS:
        tl_record_starts_error(ps->err_rc);
        break;
    case ERR_RECORD:
        PyErr_Format(PyExc_ValueError,
                     "record %zd at byte %lld of the batch runs past its length or the "
                     "batch's end (%lld bytes)", ps->err_j, (long long)ps->err_a,
                     (long long)ps->err_b);
        break;
    case ERR_2GIB:
        PyErr_SetString(PyExc_ValueError, "more than 2 GiB of keys or values in one Arrow batch");
        break;
    case ERR_OUTSIDE:
        PyErr_Format(PyExc_ValueError, "a key or value outside its batch's %lld bytes",
                     (long long)ps->err_a);
        break;
    default:
        PyErr_NoMemory();
    }
}

/* The 12 buffers of Columns: offsets, timestamps, types, key offsets, data, validity,
 * nulls, value offsets, data, validity, nulls, header rows. */
enum { C_OFFS, C_TS, C_TYPES, C_KOFFS, C_KDATA, C_KVALID, C_KNULLS, C_VOFFS, C_VDATA,
       C_VVALID, C_VNULLS, C_HDR, C_N };

/* A bytes object of ``n`` bytes, its contents written later through ``w[slot]``. */
static int
new_slot(PyObject *out, char **w, int slot, Py_ssize_t n)
{
    PyObject *o = PyBytes_FromStringAndSize(NULL, n);
    if (o == NULL)
        return -1;
    w[slot] = PyBytes_AS_STRING(o);
    PyTuple_SET_ITEM(out, slot, o);
    return 0;
}

/* The tuple with its bytes objects allocated (contents not yet written). */
static PyObject *
alloc_columns(const Pass *ps, char **w)
{
    PyObject *out = PyTuple_New(C_N);
    if (out == NULL)
        return NULL;
    Py_ssize_t n = ps->n;
    if (new_slot(out, w, C_OFFS, n * 8) < 0 || new_slot(out, w, C_TS, n * 8) < 0 ||
        new_slot(out, w, C_TYPES, n * 4) < 0 || new_slot(out, w, C_HDR, ps->hn * 32) < 0)
        goto fail;
    for (int which = 0; which < 2; which++) {
        int base = which ? C_VOFFS : C_KOFFS;
        if (new_slot(out, w, base, (n + 1) * 4) < 0 ||
            new_slot(out, w, base + 1, (Py_ssize_t)ps->total[which]) < 0)
            goto fail;
        if (ps->nulls[which]) {
            if (new_slot(out, w, base + 2, (n + 7) / 8) < 0)
                goto fail;
        } else {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(out, base + 2, Py_None);
            w[base + 2] = NULL;
        }
        PyObject *nulls = PyLong_FromLongLong((long long)ps->nulls[which]);
        if (nulls == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, base + 3, nulls);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* Every column's contents written in one pass over the records (no Python call: run with
 * the GIL released). */
static void
fill_columns(const Pass *ps, char **w)
{
    int64_t *o = (int64_t *)w[C_OFFS], *t = (int64_t *)w[C_TS], *hr = (int64_t *)w[C_HDR];
    int32_t *y = (int32_t *)w[C_TYPES];
    int32_t *ko = (int32_t *)w[C_KOFFS], *vo = (int32_t *)w[C_VOFFS];
    char *kd = w[C_KDATA], *vd = w[C_VDATA], *kv = w[C_KVALID], *vv = w[C_VVALID];
    int32_t kat = 0, vat = 0;
    if (kv != NULL)
        memset(kv, 0, (size_t)(ps->n + 7) / 8);
    if (vv != NULL)
        memset(vv, 0, (size_t)(ps->n + 7) / 8);
    ko[0] = vo[0] = 0;
    for (Py_ssize_t k = 0; k < ps->n; k++) {
        const Rec *r = &ps->recs[k];
        o[k] = r->offset;
        t[k] = r->ts;
        y[k] = r->type;
        if (r->hcount != 0) {
            hr[0] = k;
            hr[1] = r->batch;
            hr[2] = r->hpos;
            hr[3] = r->hcount;
            hr += 4;
        }
        const uint8_t *p = ps->pp[r->batch];
        if (r->klen > 0) {
            memcpy(kd + kat, p + r->kpos, (size_t)r->klen);
            kat += (int32_t)r->klen;
        }
        if (r->vlen > 0) {
            memcpy(vd + vat, p + r->vpos, (size_t)r->vlen);
            vat += (int32_t)r->vlen;
        }
        if (r->klen >= 0 && kv != NULL)
            kv[k / 8] |= (char)(1 << (k % 8));
        if (r->vlen >= 0 && vv != NULL)
            vv[k / 8] |= (char)(1 << (k % 8));
        ko[k + 1] = kat;
        vo[k + 1] = vat;
    }
}

/* The pass over held buffers: the walk and the copies run with the GIL released (a flush's
 * decode does not hold up the event loop); only the result's allocation takes it. */
static PyObject *
decode_held(Pass *ps, int64_t start, int64_t end, int headers)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = walk_all(ps, start, end, headers);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_error(ps);
        return NULL;
    }
    char *w[C_N] = {0};
    PyObject *out = alloc_columns(ps, w);
    if (out == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    fill_columns(ps, w);
    Py_END_ALLOW_THREADS
    return out;
}

PyObject *
tl_decode_columns(PyObject *self, PyObject *args)
{
    PyObject *batches_obj, *payloads_obj;
    long long start, end;
    int headers;
    if (!PyArg_ParseTuple(args, "OOLLp:decode_columns", &batches_obj, &payloads_obj, &start,
                          &end, &headers))
        return NULL;
    PyObject *batches = PySequence_Fast(batches_obj, "batches must be a sequence");
    if (batches == NULL)
        return NULL;
    PyObject *payloads = PySequence_Fast(payloads_obj, "payloads must be a sequence");
    if (payloads == NULL) {
        Py_DECREF(batches);
        return NULL;
    }
    PyObject *out = NULL;
    Pass ps = {0};
    Py_ssize_t nb = PySequence_Fast_GET_SIZE(batches);
    if (PySequence_Fast_GET_SIZE(payloads) != nb) {
        PyErr_SetString(PyExc_ValueError, "one payload (or None) per batch");
        goto done;
    }
    if (alloc_pass(&ps, nb, 2 * nb) < 0 || hold_buffers(&ps, batches, payloads) < 0)
        goto done;
    out = decode_held(&ps, start, end, headers);
done:
    release(&ps);
    Py_DECREF(payloads);
    Py_DECREF(batches);
    return out;
}

/* Hold ``bufs`` and check every span (buffer index, position, size: int64 rows) lies inside
 * its buffer; the twin's errors in the twin's order. */
static int
hold_spans(Pass *ps, PyObject *bufs, const int64_t *sp, PyObject *payloads)
{
    Py_ssize_t nbuf = PySequence_Fast_GET_SIZE(bufs);
    Py_buffer *first = ps->views + ps->held;
    for (Py_ssize_t k = 0; k < nbuf; k++)
        if (hold(ps, PySequence_Fast_GET_ITEM(bufs, k)) == NULL)
            return -1;
    for (Py_ssize_t i = 0; i < ps->nb; i++) {
        const int64_t *r = sp + 3 * i;
        if (r[0] < 0 || r[0] >= nbuf || r[1] < 0 || r[2] < 0 ||
            r[1] > (int64_t)first[r[0]].len - r[2]) {
            PyErr_Format(PyExc_ValueError, "span %zd is outside its buffer", i);
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < ps->nb; i++) {
        const int64_t *r = sp + 3 * i;
        if (r[2] < OVERHEAD) {
            PyErr_Format(PyExc_ValueError, "a batch of %lld bytes is shorter than its %d-byte "
                         "header", (long long)r[2], OVERHEAD);
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < ps->nb; i++) {
        const int64_t *r = sp + 3 * i;
        if (set_batch(ps, i, (const uint8_t *)first[r[0]].buf + r[1], r[2],
                      PySequence_Fast_GET_ITEM(payloads, i)) < 0)
            return -1;
    }
    return 0;
}

PyObject *
tl_decode_runs(PyObject *self, PyObject *args)
{
    PyObject *bufs_obj, *payloads_obj;
    Py_buffer spans;
    long long start, end;
    int headers;
    if (!PyArg_ParseTuple(args, "Oy*OLLp:decode_runs", &bufs_obj, &spans, &payloads_obj, &start,
                          &end, &headers))
        return NULL;
    PyObject *bufs = PySequence_Fast(bufs_obj, "bufs must be a sequence");
    PyObject *payloads = bufs ? PySequence_Fast(payloads_obj, "payloads must be a sequence") : NULL;
    PyObject *out = NULL;
    Pass ps = {0};
    if (payloads == NULL)
        goto done;
    Py_ssize_t nb = spans.len / 24, nbuf = PySequence_Fast_GET_SIZE(bufs);
    if (spans.len % 24) {
        PyErr_SetString(PyExc_ValueError, "spans must be int64 rows of three");
        goto done;
    }
    if (PySequence_Fast_GET_SIZE(payloads) != nb) {
        PyErr_SetString(PyExc_ValueError, "one payload (or None) per batch");
        goto done;
    }
    if (alloc_pass(&ps, nb, nbuf + nb) < 0 ||
        hold_spans(&ps, bufs, (const int64_t *)spans.buf, payloads) < 0)
        goto done;
    out = decode_held(&ps, start, end, headers);
done:
    release(&ps);
    Py_XDECREF(payloads);
    Py_XDECREF(bufs);
    PyBuffer_Release(&spans);
    return out;
}
