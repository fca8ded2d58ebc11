/* Kafka's RequestMetrics for one answered request in one call: the request rate by version
 * and the six stage histograms (total, request_queue, local, remote, response_queue,
 * response_send). observe_stages takes the five stage readings (metrics/requests.py record_py
 * is its twin); observe_request computes them from a RequestTiming's clock readings, read
 * from its slots (record_timing_py is its twin).
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
#include <structmember.h>

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

/* ns[1..5]: the five stage readings; ns[0] becomes their total */
static PyObject *
observe(PyObject *table, PyObject *requests, PyObject *version, int64_t ns[STAGES])
{
    int64_t sums[STAGES];
    if (!PyDict_CheckExact(requests)) {
        PyErr_SetString(PyExc_TypeError, "observe_stages: requests must be a dict");
        return NULL;
    }
    __int128 total = 0;  /* five int64 readings cannot overflow it; only the result must fit */
    for (int i = 1; i < STAGES; i++)
        total += ns[i];
    if (total > INT64_MAX || total <= INT64_MIN) {
        PyErr_SetString(PyExc_OverflowError, "request total time outside int64");
        return NULL;
    }
    ns[0] = (int64_t)total;
    Py_buffer view;
    if (check_table(table, &view) < 0)
        return NULL;
    int64_t *cells = (int64_t *)view.buf;
    for (int i = 0; i < STAGES; i++)
        if (__builtin_add_overflow(cells[i * CELLS + BUCKETS], ns[i], &sums[i])) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_OverflowError, "request stage sum outside int64");
            return NULL;
        }
    if (count_version(requests, version) < 0) {
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

static PyObject *
tl_observe_stages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t ns[STAGES];
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "observe_stages(cells, requests, version, queue, "
                        "local, remote, rqueue, send)");
        return NULL;
    }
    for (int i = 1; i < STAGES; i++)
        if (reading(args[2 + i], &ns[i]) < 0)
            return NULL;
    return observe(args[0], args[1], args[2], ns);
}

/* RequestTiming's slots, read where CPython keeps them (its member descriptors' offsets) */
enum { API_VERSION, START, DEQUEUE, COMPLETE, REMOTE, FIELDS };
static const char *const field_names[FIELDS] = {
    "api_version", "start_ns", "dequeue_ns", "complete_ns", "remote_ns",
};
static PyTypeObject *timing_type;
static Py_ssize_t field_offsets[FIELDS];

static PyObject *
tl_observe_request_bind(PyObject *self, PyObject *type)
{
    Py_ssize_t offsets[FIELDS];
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "observe_request_bind wants RequestTiming");
        return NULL;
    }
    for (int i = 0; i < FIELDS; i++) {
        PyObject *d = PyObject_GetAttrString(type, field_names[i]);
        if (d == NULL)
            return NULL;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok)
            offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "RequestTiming.%s is not a slot", field_names[i]);
            return NULL;
        }
    }
    memcpy(field_offsets, offsets, sizeof offsets);
    Py_INCREF(type);
    Py_XSETREF(timing_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

static int
field(PyObject *timing, int i, PyObject **out)
{
    *out = *(PyObject **)((char *)timing + field_offsets[i]);
    if (*out == NULL) {
        PyErr_Format(PyExc_AttributeError, "RequestTiming.%s is unset", field_names[i]);
        return -1;
    }
    return 0;
}

static int
difference(__int128 d, int64_t *out)
{
    if (d > INT64_MAX || d <= INT64_MIN) {
        PyErr_SetString(PyExc_OverflowError, "request stage reading outside int64");
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

static PyObject *
tl_observe_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t at[FIELDS], resp, end, ns[STAGES];
    PyObject *obj, *version;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "observe_request(cells, requests, timing, "
                        "response_dequeue_ns, end_ns)");
        return NULL;
    }
    if (timing_type == NULL || !Py_IS_TYPE(args[2], timing_type)) {
        PyErr_SetString(PyExc_TypeError, "observe_request wants the bound RequestTiming");
        return NULL;
    }
    if (field(args[2], API_VERSION, &version) < 0)
        return NULL;
    for (int i = START; i < FIELDS; i++)
        if (field(args[2], i, &obj) < 0 || reading(obj, &at[i]) < 0)
            return NULL;
    if (reading(args[3], &resp) < 0 || reading(args[4], &end) < 0)
        return NULL;
    /* metrics/requests.py RequestMetrics.record: the stages between the clock readings */
    if (difference((__int128)at[DEQUEUE] - at[START], &ns[1]) < 0
        || difference((__int128)at[COMPLETE] - at[DEQUEUE] - at[REMOTE], &ns[2]) < 0
        || difference((__int128)resp - at[COMPLETE], &ns[4]) < 0
        || difference((__int128)end - resp, &ns[5]) < 0)
        return NULL;
    ns[3] = at[REMOTE];
    return observe(args[0], args[1], version, ns);
}

static PyMethodDef stages_methods[] = {
    {"observe_stages", (PyCFunction)(void (*)(void))tl_observe_stages, METH_FASTCALL,
     "observe_stages(cells, requests, version, queue, local, remote, rqueue, send): one "
     "request's rate and six stage observations (metrics/requests.py record_py)."},
    {"observe_request_bind", tl_observe_request_bind, METH_O,
     "observe_request_bind(RequestTiming): the class observe_request reads the slots of."},
    {"observe_request", (PyCFunction)(void (*)(void))tl_observe_request, METH_FASTCALL,
     "observe_request(cells, requests, timing, response_dequeue_ns, end_ns): observe_stages "
     "of a RequestTiming's readings (metrics/requests.py record_timing_py)."},
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
