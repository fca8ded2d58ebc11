/* The quiet-partition scan of a consumer's sessionless Fetch: the twin of
 * server/quiet_table.py quiet_runs_py (same answers, no Python frame per partition).
 *
 * A topic's table is three parallel stores indexed by partition: ``slots`` (a bytearray of
 * QUIET_SLOT-byte records: HW int64, leader epoch int32, version int32, entry length uint8,
 * the entry's bytes), ``logs`` (the leader's Log or None) and ``stamps`` (the log's
 * ``state_stamp`` object the slot was answered under). A slot is current while the log's
 * ``state_stamp`` is that very object (held here, so never freed and its address never
 * reused; the stamp only moves by making a new int). Per partition this touches the slot,
 * two list items and the Log's attribute: the request's columns and the table's stores
 * stay contiguous, whatever else the loop did between two Fetches. */
#include "native.h"

#include <string.h>

#define QUIET_SLOT 80
#define QUIET_ENTRY_AT 17
#define QUIET_ENTRY_MAX (QUIET_SLOT - QUIET_ENTRY_AT)
#define QUIET_AHEAD 16 /* partitions ahead whose Log is prefetched, then half as far its
                        * attribute values */

/* the Log at request index ``i`` (NULL: none there) */
static PyObject *
log_at(PyObject *ids, Py_ssize_t i, PyObject *logs, Py_ssize_t size)
{
    long p = PyLong_AsLong(PyTuple_GET_ITEM(ids, i));
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear(); /* (the scan itself raises for it when it gets there) */
        return NULL;
    }
    if (p < 0 || p >= size)
        return NULL;
    PyObject *log = PyList_GET_ITEM(logs, p);
    return log == Py_None ? NULL : log;
}

/* Ask the memory for what reading ``state_stamp`` of the Logs ahead will touch: with the
 * loop's other work between two Fetches, those are cache misses, and asked for one at a
 * time they are most of the scan's time. Hints only (a prefetch never faults). */
static void
prefetch_ahead(PyObject *ids, Py_ssize_t i, Py_ssize_t n, PyObject *logs, Py_ssize_t size)
{
    if (i + QUIET_AHEAD < n) {
        PyObject *far = log_at(ids, i + QUIET_AHEAD, logs, size);
        if (far != NULL) {
            __builtin_prefetch((char *)far - 32); /* 3.11+: the pre-header (values) */
            __builtin_prefetch(far);
        }
    }
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    /* 3.11: an object of a class with a managed dict keeps its attribute values' array
     * four words before itself (Include/internal/pycore_object.h _PyObject_ValuesPointer) */
    if (i + QUIET_AHEAD / 2 < n) {
        PyObject *near = log_at(ids, i + QUIET_AHEAD / 2, logs, size);
        if (near != NULL && PyType_HasFeature(Py_TYPE(near), Py_TPFLAGS_MANAGED_DICT))
            __builtin_prefetch(((void **)near)[-4]);
    }
#endif
}

static PyObject *s_state_stamp;

static int
as_ll(PyObject *o, long long *out)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
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
one(const char *slots, Py_ssize_t size, PyObject *logs, PyObject *stamps, long long p,
    long long epoch, long long offset, int version, run_buf *run)
{
    if (p < 0 || p >= size)
        return 1;
    PyObject *log = PyList_GET_ITEM(logs, p);
    if (log == Py_None)
        return 1;
    const char *slot = slots + p * QUIET_SLOT;
    int32_t slot_version, slot_epoch;
    int64_t hw;
    memcpy(&slot_version, slot + 12, 4);
    if (slot_version != version)
        return 2;
    PyObject *now = PyObject_GetAttr(log, s_state_stamp);
    if (now == NULL)
        return -1;
    int same = now == PyList_GET_ITEM(stamps, p);
    Py_DECREF(now);
    if (!same)
        return 2;
    memcpy(&hw, slot, 8);
    memcpy(&slot_epoch, slot + 8, 4);
    if (hw != offset || (epoch != -1 && epoch != slot_epoch))
        return 1;
    return run_add(run, slot + QUIET_ENTRY_AT, (unsigned char)slot[16]);
}

/* quiet_runs(slots, logs, stamps, ids, epochs, offsets, version) -> (runs, slow, stale) */
PyObject *
tl_quiet_runs(PyObject *self, PyObject *args)
{
    Py_buffer sb;
    PyObject *logs, *stamps, *ids, *epochs, *offsets;
    int version;
    if (!PyArg_ParseTuple(args, "y*O!O!O!O!O!i", &sb, &PyList_Type, &logs, &PyList_Type,
                          &stamps, &PyTuple_Type, &ids, &PyTuple_Type, &epochs, &PyTuple_Type,
                          &offsets, &version))
        return NULL;
    PyObject *runs = NULL, *slow = NULL, *stale = NULL, *out = NULL;
    run_buf run = {NULL, 0, 0};
    Py_ssize_t n = PyTuple_GET_SIZE(ids), size = PyList_GET_SIZE(logs);
    if (s_state_stamp == NULL && (s_state_stamp = PyUnicode_InternFromString("state_stamp")) == NULL)
        goto done;
    if (PyTuple_GET_SIZE(epochs) != n || PyTuple_GET_SIZE(offsets) != n ||
        PyList_GET_SIZE(stamps) != size || sb.len < size * QUIET_SLOT) {
        PyErr_SetString(PyExc_ValueError, "quiet_runs: stores or columns of different lengths");
        goto done;
    }
    runs = PyList_New(0), slow = PyList_New(0), stale = PyList_New(0);
    if (runs == NULL || slow == NULL || stale == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long p, epoch, offset;
        prefetch_ahead(ids, i, n, logs, size);
        if (as_ll(PyTuple_GET_ITEM(ids, i), &p) < 0 ||
            as_ll(PyTuple_GET_ITEM(epochs, i), &epoch) < 0 ||
            as_ll(PyTuple_GET_ITEM(offsets, i), &offset) < 0)
            goto done;
        int rc = one(sb.buf, size, logs, stamps, p, epoch, offset, version, &run);
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
    return out;
}
