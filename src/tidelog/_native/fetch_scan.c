/* The quiet-partition scan of a consumer's sessionless Fetch: the twin of
 * server/quiet_table.py quiet_runs_py (same answers, no Python frame per partition).
 *
 * A topic's table is one bytearray of QUIET_SLOT-byte slots indexed by partition: the Log's
 * state stamp now (int64, which the Log writes there as it moves), the stamp the kept answer
 * was read under (int64), HW int64, leader epoch int32, version int32 (-1: nothing kept,
 * -2: not hosted here), entry length uint8, the entry's bytes. A slot is current while its
 * two stamps are equal. The request's partitions are read where they came, the entries of
 * the Fetch (big-endian, ``size`` bytes each: the index first, the current leader epoch at
 * ``epoch_at`` (-1: none), the fetch offset at ``offset_at``). Per partition this touches
 * the entry and its slot only, both in arrays read front to back: no Python object. */
#include "native.h"

#include <string.h>

#define QUIET_SLOT 96
#define QUIET_VERSION_AT 28
#define QUIET_ENTRY_AT 33
#define QUIET_NOT_HOSTED (-2)

static int32_t
be32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)(uint32_t)be32(p) << 32 | (uint32_t)be32(p + 4));
}

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} run_buf;

static int
run_add(run_buf *r, const char *p, Py_ssize_t n)
{
    if (r->len + n > r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 4096;
        while (cap < r->len + n)
            cap *= 2;
        char *grown = PyMem_Realloc(r->buf, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        r->buf = grown;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, (size_t)n);
    r->len += n;
    return 0;
}

/* the run so far as a bytes object appended to ``runs``; the buffer starts again */
static int
run_close(run_buf *r, PyObject *runs)
{
    PyObject *b = PyBytes_FromStringAndSize(r->buf, r->len);
    if (b == NULL)
        return -1;
    int rc = PyList_Append(runs, b);
    Py_DECREF(b);
    r->len = 0;
    return rc;
}

static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *index = PyLong_FromSsize_t(i);
    if (index == NULL)
        return -1;
    int rc = PyList_Append(list, index);
    Py_DECREF(index);
    return rc;
}

/* 0 quiet (entry added to the run), 1 slow (read it), 2 stale (ask again), -1 error */
static int
one(const char *slots, Py_ssize_t count, long long p, long long epoch, long long offset,
    int version, run_buf *run)
{
    if (p < 0 || p >= count)
        return 1;
    const char *slot = slots + p * QUIET_SLOT;
    int64_t now, kept, hw;
    int32_t slot_version, slot_epoch;
    memcpy(&slot_version, slot + QUIET_VERSION_AT, 4);
    if (slot_version == QUIET_NOT_HOSTED)
        return 1;
    memcpy(&now, slot, 8);
    memcpy(&kept, slot + 8, 8);
    if (slot_version != version || now != kept)
        return 2;
    memcpy(&hw, slot + 16, 8);
    memcpy(&slot_epoch, slot + 24, 4);
    if (hw != offset || (epoch != -1 && epoch != slot_epoch))
        return 1;
    return run_add(run, slot + QUIET_ENTRY_AT, (unsigned char)slot[QUIET_ENTRY_AT - 1]);
}

/* quiet_runs(slots, raw, size, epoch_at, offset_at, version) -> (runs, slow, stale) */
PyObject *
tl_quiet_runs(PyObject *self, PyObject *args)
{
    Py_buffer sb, rb;
    Py_ssize_t esize, epoch_at, offset_at;
    int version;
    if (!PyArg_ParseTuple(args, "y*y*nnni", &sb, &rb, &esize, &epoch_at, &offset_at, &version))
        return NULL;
    PyObject *runs = NULL, *slow = NULL, *stale = NULL, *out = NULL;
    run_buf run = {NULL, 0, 0};
    Py_ssize_t count = sb.len / QUIET_SLOT;
    Py_ssize_t n = esize > 0 ? rb.len / esize : 0;
    if (esize <= 0 || rb.len % esize || offset_at < 4 || offset_at + 8 > esize ||
        epoch_at + 4 > esize || (epoch_at >= 0 && epoch_at < 4) || sb.len % QUIET_SLOT) {
        PyErr_SetString(PyExc_ValueError, "quiet_runs: slots or entries of other sizes");
        goto done;
    }
    runs = PyList_New(0), slow = PyList_New(0), stale = PyList_New(0);
    if (runs == NULL || slow == NULL || stale == NULL)
        goto done;
    /* room for every entry at once (at most QUIET_SLOT - QUIET_ENTRY_AT bytes each): one
     * allocation, where growing from 4 KiB re-copied a 37 KB run four times */
    if (n > 0) {
        run.cap = n * (QUIET_SLOT - QUIET_ENTRY_AT);
        run.buf = PyMem_Malloc((size_t)run.cap);
        if (run.buf == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    const unsigned char *raw = rb.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *e = raw + i * esize;
        long long epoch = epoch_at < 0 ? -1 : be32(e + epoch_at);
        int rc = one(sb.buf, count, be32(e), epoch, be64(e + offset_at), version, &run);
        if (rc < 0)
            goto done;
        if (rc == 0)
            continue;
        if (run_close(&run, runs) < 0 || append_index(slow, i) < 0 ||
            (rc == 2 && append_index(stale, i) < 0))
            goto done;
    }
    if (run_close(&run, runs) < 0)
        goto done;
    out = PyTuple_Pack(3, runs, slow, stale);
done:
    PyMem_Free(run.buf);
    Py_XDECREF(runs);
    Py_XDECREF(slow);
    Py_XDECREF(stale);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&rb);
    return out;
}

#define DISTINCT_MAX_ID (1 << 20) /* above: the set of Python tells */

/* The bitmap of the ``esize``-byte entries' partition indexes (each entry's first four bytes,
 * big-endian: bit p of byte p / 8 set for index p, as many bytes as the largest needs) as a
 * new bytes object, and in ``*distinct`` whether no index came twice; None when one is
 * negative or past DISTINCT_MAX_ID; NULL with an error raised. Both entry points below are
 * this one pass (the first finds the largest index, the second sets the bits). */
static PyObject *
ids_bitmap(const unsigned char *raw, Py_ssize_t len, Py_ssize_t esize, const char *name,
           int *distinct)
{
    if (esize < 4) {
        PyErr_Format(PyExc_ValueError, "%s: entries under 4 bytes", name);
        return NULL;
    }
    Py_ssize_t n = len / esize;
    int32_t top = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t p = be32(raw + i * esize);
        if (p < 0 || p >= DISTINCT_MAX_ID)
            return Py_NewRef(Py_None);
        if (p > top)
            top = p;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, top < 0 ? 0 : (Py_ssize_t)top / 8 + 1);
    if (out == NULL)
        return NULL;
    unsigned char *bits = (unsigned char *)PyBytes_AS_STRING(out);
    memset(bits, 0, (size_t)PyBytes_GET_SIZE(out));
    *distinct = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t p = be32(raw + i * esize);
        unsigned char bit = (unsigned char)(1 << (p & 7));
        if (bits[p >> 3] & bit)
            *distinct = 0;
        bits[p >> 3] |= bit;
    }
    return out;
}

/* fetch_ids_distinct(raw, size) -> bool or None: whether the entries' partition indexes
 * are all different, read off their bitmap (``ids_bitmap``); None when one is negative or
 * past DISTINCT_MAX_ID (protocol/fetch_request.py ids_distinct_py). */
PyObject *
tl_fetch_ids_distinct(PyObject *self, PyObject *args)
{
    Py_buffer rb;
    Py_ssize_t esize;
    if (!PyArg_ParseTuple(args, "y*n", &rb, &esize))
        return NULL;
    int distinct = 1;
    PyObject *bits = ids_bitmap(rb.buf, rb.len, esize, "fetch_ids_distinct", &distinct);
    PyBuffer_Release(&rb);
    if (bits == NULL || bits == Py_None)
        return bits;
    Py_DECREF(bits);
    return PyBool_FromLong(distinct);
}

/* fetch_ids_bits(raw, size) -> bytes or None: the bitmap of the entries' partition indexes
 * (``ids_bitmap``); None when one is negative or past DISTINCT_MAX_ID
 * (server/quiet_table.py ids_bits_py). */
PyObject *
tl_fetch_ids_bits(PyObject *self, PyObject *args)
{
    Py_buffer rb;
    Py_ssize_t esize;
    if (!PyArg_ParseTuple(args, "y*n", &rb, &esize))
        return NULL;
    int distinct;
    PyObject *bits = ids_bitmap(rb.buf, rb.len, esize, "fetch_ids_bits", &distinct);
    PyBuffer_Release(&rb);
    return bits;
}
