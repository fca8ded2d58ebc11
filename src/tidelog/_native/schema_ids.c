/* The schema id of every value in Confluent's wire format: iceberg/rows.py schema_ids in C.
 *
 * A value is framed when it is present, at least 5 bytes long and starts with the magic
 * byte 0; its schema id is the big-endian int32 after it (as an unsigned 32-bit number,
 * like the numpy twin).  One pass over an Arrow binary array's offsets gives the ids and
 * the framed flags the twin builds with several numpy passes, and how many distinct ids the
 * framed values carry (0, 1, or 2 for "more than one"): a partition's values nearly always
 * carry one, and then the caller needs no grouping at all. */
#define PY_SSIZE_T_CLEAN
#include <string.h>

#include "native.h"

PyObject *
tl_schema_ids(PyObject *self, PyObject *args)
{
    Py_buffer data, offsets, present;
    PyObject *ids = NULL, *framed = NULL, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &offsets, &present))
        return NULL;
    Py_ssize_t n = offsets.len / 4 - 1;
    if (n < 0 || present.len != n || offsets.len % 4) {
        PyErr_SetString(PyExc_ValueError, "schema_ids: offsets and present do not agree");
        goto done;
    }
    ids = PyBytes_FromStringAndSize(NULL, n * 8);
    framed = PyBytes_FromStringAndSize(NULL, n);
    if (ids == NULL || framed == NULL)
        goto done;
    const uint8_t *d = data.buf, *has = present.buf;
    const int32_t *o = offsets.buf;
    int64_t *id = (int64_t *)PyBytes_AS_STRING(ids);
    uint8_t *ok = (uint8_t *)PyBytes_AS_STRING(framed);
    int64_t first = -1;
    int distinct = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t a = o[i], b = o[i + 1];
        id[i] = 0;
        ok[i] = 0;
        if (a < 0 || b < a || (Py_ssize_t)b > data.len) {
            bad = 1;
            break;
        }
        if (!has[i] || b - a < 5)
            continue;
        const uint8_t *p = d + a;
        int64_t got = ((int64_t)p[1] << 24) | ((int64_t)p[2] << 16) | ((int64_t)p[3] << 8) |
                      (int64_t)p[4];
        id[i] = got; /* the twin keeps the id of a framed-length value with another magic */
        if (p[0] != 0)
            continue;
        ok[i] = 1;
        if (distinct == 0) {
            first = got;
            distinct = 1;
        } else if (got != first) {
            distinct = 2;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "schema_ids: offsets outside the data");
        goto done;
    }
    out = Py_BuildValue("OOi", ids, framed, distinct);
done:
    Py_XDECREF(ids);
    Py_XDECREF(framed);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&present);
    return out;
}
