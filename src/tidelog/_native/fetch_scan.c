/* The quiet-partition scan of a consumer's sessionless Fetch: the twin of
 * server/sessionless_fetches.py quiet_scan_py (same answers, no Python frame per partition). */
#include "native.h"

static PyObject *s_quiet, *s_log, *s_state_stamp;

static int
same_int(PyObject *a, long long b)
{
    long long v = PyLong_AsLongLong(a);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return v == b;
}

/* 1: q answers (its stamp current), 0: stale, -1: error */
static int
current(PyObject *part, PyObject *q, long version)
{
    if (!PyTuple_Check(q) || PyTuple_GET_SIZE(q) < 5)
        return 0;
    if (!same_int(PyTuple_GET_ITEM(q, 3), version))
        return 0;
    PyObject *log = PyObject_GetAttr(part, s_log);
    if (log == NULL)
        return -1;
    PyObject *stamp = PyObject_GetAttr(log, s_state_stamp);
    Py_DECREF(log);
    if (stamp == NULL)
        return -1;
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(q, 0), stamp, Py_EQ);
    Py_DECREF(stamp);
    return same;
}

/* quiet_scan(table, ids, epochs, offsets, version) -> (items, stale) */
PyObject *
tl_quiet_scan(PyObject *self, PyObject *args)
{
    PyObject *table, *ids, *epochs, *offsets;
    long version;
    if (!PyArg_ParseTuple(args, "O!O!O!O!l", &PyList_Type, &table, &PyTuple_Type, &ids,
                          &PyTuple_Type, &epochs, &PyTuple_Type, &offsets, &version))
        return NULL;
    if (s_quiet == NULL) {
        s_quiet = PyUnicode_InternFromString("quiet");
        s_log = PyUnicode_InternFromString("log");
        s_state_stamp = PyUnicode_InternFromString("state_stamp");
        if (s_quiet == NULL || s_log == NULL || s_state_stamp == NULL)
            return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(ids), size = PyList_GET_SIZE(table);
    if (PyTuple_GET_SIZE(epochs) != n || PyTuple_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        return NULL;
    }
    PyObject *items = PyList_New(n), *stale = PyList_New(0);
    if (items == NULL || stale == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = Py_None;
        long p = PyLong_AsLong(PyTuple_GET_ITEM(ids, i));
        if (p == -1 && PyErr_Occurred())
            goto fail;
        PyObject *part = (p >= 0 && p < size) ? PyList_GET_ITEM(table, p) : Py_None;
        if (part != Py_None) {
            PyObject *q = PyObject_GetAttr(part, s_quiet);
            if (q == NULL)
                goto fail;
            int ok = q == Py_None ? 0 : current(part, q, version);
            if (ok < 0) {
                Py_DECREF(q);
                goto fail;
            }
            if (!ok) {
                PyObject *index = PyLong_FromSsize_t(i);
                if (index == NULL || PyList_Append(stale, index) < 0) {
                    Py_XDECREF(index);
                    Py_DECREF(q);
                    goto fail;
                }
                Py_DECREF(index);
            } else {
                long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(offsets, i));
                long long epoch = PyLong_AsLongLong(PyTuple_GET_ITEM(epochs, i));
                if (PyErr_Occurred()) {
                    Py_DECREF(q);
                    goto fail;
                }
                if (same_int(PyTuple_GET_ITEM(q, 1), offset) &&
                    (epoch == -1 || same_int(PyTuple_GET_ITEM(q, 2), epoch)))
                    item = PyTuple_GET_ITEM(q, 4);
            }
            Py_INCREF(item);
            PyList_SET_ITEM(items, i, item);
            Py_DECREF(q);
            continue;
        }
        Py_INCREF(item);
        PyList_SET_ITEM(items, i, item);
    }
    PyObject *out = PyTuple_Pack(2, items, stale);
    Py_DECREF(items);
    Py_DECREF(stale);
    return out;
fail:
    Py_XDECREF(items);
    Py_XDECREF(stale);
    return NULL;
}
