/* Kafka's RequestMetrics for one answered request in one call (metrics/requests.py
 * RequestStats.record_py is its twin): the request rate by version and the six stage
 * histograms (total, request_queue, local, remote, response_queue, response_send).
 *
 * The histograms live in one int64 table per request name (array('q')): per stage, BUCKETS
 * counts (bucket k holds |ns| of bit length k, as int.bit_length) then the sum of the
 * readings. Every reading, the total and the new sums are checked before anything is
 * written: a value outside int64 (or -2^63, whose bucket would be 64) raises OverflowError
 * and leaves the table and the rate untouched. Its own small module, not part of _core, so
 * that it builds and loads on its own. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define BUCKETS 64
#define STAGES 6
#define CELLS (BUCKETS + 1)

static int
bucket_of(int64_t ns)
{
    uint64_t m = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    return m ? 64 - __builtin_clzll(m) : 0;
}

static int
reading(PyObject *obj, int64_t *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v == INT64_MIN) {
        PyErr_SetString(PyExc_OverflowError, "request stage reading outside int64");
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static int
count_version(PyObject *requests, PyObject *version)
{
    PyObject *seen = PyDict_GetItemWithError(requests, version);  /* borrowed */
    long long n = 0;
    if (seen == NULL && PyErr_Occurred())
        return -1;
    if (seen != NULL) {
        n = PyLong_AsLongLong(seen);
        if (n == -1 && PyErr_Occurred())
            return -1;
    }
    PyObject *next = PyLong_FromLongLong(n + 1);
    if (next == NULL)
        return -1;
    int rc = PyDict_SetItem(requests, version, next);
    Py_DECREF(next);
    return rc;
}

static int
check_table(PyObject *cells, Py_buffer *view)
{
    if (PyObject_GetBuffer(cells, view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "q") != 0
        || view->len != (Py_ssize_t)(STAGES * CELLS * 8)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "observe_stages wants an array('q') of 6 * 65 cells");
        return -1;
    }
    return 0;
}

static PyObject *
tl_observe_stages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t ns[STAGES], sums[STAGES];
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "observe_stages(cells, requests, version, queue, "
                        "local, remote, rqueue, send)");
        return NULL;
    }
    if (!PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "observe_stages: requests must be a dict");
        return NULL;
    }
    for (int i = 1; i < STAGES; i++)
        if (reading(args[2 + i], &ns[i]) < 0)
            return NULL;
    __int128 total = 0;  /* five int64 readings cannot overflow it; only the result must fit */
    for (int i = 1; i < STAGES; i++)
        total += ns[i];
    if (total > INT64_MAX || total <= INT64_MIN) {
        PyErr_SetString(PyExc_OverflowError, "request total time outside int64");
        return NULL;
    }
    ns[0] = (int64_t)total;
    Py_buffer view;
    if (check_table(args[0], &view) < 0)
        return NULL;
    int64_t *cells = (int64_t *)view.buf;
    for (int i = 0; i < STAGES; i++)
        if (__builtin_add_overflow(cells[i * CELLS + BUCKETS], ns[i], &sums[i])) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_OverflowError, "request stage sum outside int64");
            return NULL;
        }
    if (count_version(args[1], args[2]) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    for (int i = 0; i < STAGES; i++) {
        cells[i * CELLS + bucket_of(ns[i])] += 1;
        cells[i * CELLS + BUCKETS] = sums[i];
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef stages_methods[] = {
    {"observe_stages", (PyCFunction)(void (*)(void))tl_observe_stages, METH_FASTCALL,
     "observe_stages(cells, requests, version, queue, local, remote, rqueue, send): one "
     "request's rate and six stage observations (metrics/requests.py RequestStats.record_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef stages_module = {
    PyModuleDef_HEAD_INIT, "tidelog._native._stages",
    "Kafka's RequestMetrics stage histograms, one call per request (see tidelog._native).", -1,
    stages_methods,
};

PyMODINIT_FUNC
PyInit__stages(void)
{
    return PyModule_Create(&stages_module);
}
