/* The batches of a fetch response's records section: spark/fetch_runs.py batch_spans_py in C.
 *
 * One walk over the concatenated v2 batches (records/batch.py iter_batches' rules: a partial
 * trailing batch ends the walk quietly, a length field below Kafka's minimum, a bad magic or
 * a bad CRC stop it with the problem and its position) gives one int64 row of header fields
 * per complete batch, so the read path selects and decodes batches without a Python step
 * per batch. */
#define PY_SSIZE_T_CLEAN
#include "native.h"

#define SPAN_FIELDS 7
#define LOG_OVERHEAD 12
#define UP_TO_MAGIC 17
#define MIN_LENGTH 14
#define OVERHEAD 61
#define CRC_START 21

/* 0 for a good batch, else the problem (1 length field, 2 short, 3 magic, 4 CRC) with its
 * two figures in a, b. */
static int
check_batch(const uint8_t *p, int64_t size, int64_t *a, int64_t *b)
{
    if (size < OVERHEAD) {
        *a = size;
        return 2;
    }
    if (p[16] != 2) {
        *a = p[16];
        return 3;
    }
    uint32_t stored = (uint32_t)tl_be(p + 17, 4), computed = tl_crc32c(p + CRC_START,
                                                                    (size_t)(size - CRC_START));
    if (stored != computed) {
        *a = stored;
        *b = computed;
        return 4;
    }
    return 0;
}

PyObject *
tl_batch_spans(PyObject *self, PyObject *args)
{
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*:batch_spans", &view))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    int64_t limit = (int64_t)view.len, pos = 0, a = 0, b = 0;
    int problem = 0;
    Py_ssize_t n = 0, cap = 64;
    int64_t *rows = PyMem_Malloc((size_t)cap * SPAN_FIELDS * sizeof(int64_t));
    if (rows == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    while (limit - pos > UP_TO_MAGIC) {
        const uint8_t *p = buf + pos;
        int64_t length = (int32_t)tl_be(p + 8, 4);
        if (length < MIN_LENGTH) {
            problem = 1;
            a = length;
            break;
        }
        int64_t size = LOG_OVERHEAD + length;
        if (pos + size > limit)
            break;
        if ((problem = check_batch(p, size, &a, &b)) != 0)
            break;
        if (n == cap) {
            int64_t *grown = PyMem_Realloc(rows, (size_t)cap * 2 * SPAN_FIELDS * sizeof(int64_t));
            if (grown == NULL) {
                PyMem_Free(rows);
                PyBuffer_Release(&view);
                return PyErr_NoMemory();
            }
            rows = grown;
            cap *= 2;
        }
        int64_t *r = rows + n * SPAN_FIELDS;
        r[0] = pos;
        r[1] = size;
        r[2] = (int64_t)tl_be(p, 8);
        r[3] = (int32_t)tl_be(p + 23, 4);
        r[4] = (int16_t)tl_be(p + 21, 2);
        r[5] = (int64_t)tl_be(p + 43, 8);
        r[6] = (int32_t)tl_be(p + 57, 4);
        n++;
        pos += size;
    }
    PyBuffer_Release(&view);
    PyObject *out = Py_BuildValue("(y#iLLL)", (const char *)rows,
                                  (Py_ssize_t)(n * SPAN_FIELDS * sizeof(int64_t)), problem,
                                  (long long)pos, (long long)a, (long long)b);
    PyMem_Free(rows);
    return out;
}
