/* A leader's plain append in one call (storage/log_plain.py append_plain_py, its twin):
 * one uncompressed client batch checked as validate_plain checks it, its CRC computed
 * here (or given: a large batch's, computed by the caller with the crc32c package, whose
 * interleaved streams are faster than this one), patched (base offset, partition leader
 * epoch, max timestamp and then the CRC) and written with pwrite at the segment's end.
 *
 * Declined (None, the buffer untouched, nothing written): whatever validate_plain declines,
 * and a batch whose max timestamp is above ``max_ts_bound`` (the segment would roll for
 * it: the caller's reference path rolls first).  A failed write raises OSError with the
 * errno; the buffer is then patched and the file may hold part of it past the segment's
 * logical size, as after a failed FileRecords.append.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "native.h"

#define RECORD_BATCH_OVERHEAD 61
#define CRC_START 21

static inline void
put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* 0, or the errno of a failed write (the GIL is released around it). */
static int
write_all(int fd, const uint8_t *b, Py_ssize_t n, long long position)
{
    Py_ssize_t done = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < n) {
        ssize_t w = pwrite(fd, b + done, (size_t)(n - done), (off_t)(position + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            break;
        }
        if (w == 0) { /* no progress: never loop for ever */
            err = EIO;
            break;
        }
        done += w;
    }
    Py_END_ALLOW_THREADS
    return err;
}

/* The batch b[:n] checked, patched and written (append_plain's work once its arguments are
 * read): 1 written (count and max timestamp set), 0 declined (b untouched, nothing
 * written), -1 with OSError set (a failed write). crc < 0: computed here. */
int
tl_plain_write(uint8_t *b, Py_ssize_t n, long long offset, int leader_epoch, long long lo,
               long long hi, long long max_message_bytes, int compact, long long max_ts_bound,
               int fd, long long position, long long crc, int32_t *count, int64_t *max_ts)
{
    if (n >= RECORD_BATCH_OVERHEAD && crc < 0)
        crc = (long long)tl_crc32c(b + CRC_START, (size_t)(n - CRC_START));
    if (n < RECORD_BATCH_OVERHEAD ||
        !tl_plain_check(b, n, crc, lo, hi, max_message_bytes, compact, count, max_ts) ||
        *max_ts > max_ts_bound)
        return 0;
    put_be(b, (uint64_t)offset, 8);
    put_be(b + 12, (uint32_t)leader_epoch, 4);
    if ((int64_t)tl_be(b + 35, 8) != *max_ts) {
        put_be(b + 35, (uint64_t)*max_ts, 8);
        put_be(b + 17, tl_crc32c(b + CRC_START, (size_t)(n - CRC_START)), 4);
    }
    int err = write_all(fd, b, n, position);
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 1;
}

/* METH_FASTCALL: the arguments converted one by one as PyArg_ParseTuple's
 * "w*LiLLLpLiL|L" would (a tenth of its cost on the per-Produce call). */
PyObject *
tl_append_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    long long offset, lo, hi, max_message_bytes, max_ts_bound, position, crc = -1;
    int leader_epoch, compact, fd;
    (void)self;
    if (nargs < 10 || nargs > 11) {
        PyErr_Format(PyExc_TypeError, "append_plain() takes 10 or 11 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    if (tl_arg_ll(args[1], &offset) < 0 || tl_arg_int(args[2], &leader_epoch) < 0 ||
        tl_arg_ll(args[3], &lo) < 0 || tl_arg_ll(args[4], &hi) < 0 ||
        tl_arg_ll(args[5], &max_message_bytes) < 0 || (compact = PyObject_IsTrue(args[6])) < 0 ||
        tl_arg_ll(args[7], &max_ts_bound) < 0 || tl_arg_int(args[8], &fd) < 0 ||
        tl_arg_ll(args[9], &position) < 0 || (nargs == 11 && tl_arg_ll(args[10], &crc) < 0))
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0)
        return NULL;
    int32_t count;
    int64_t max_ts;
    int got = tl_plain_write((uint8_t *)view.buf, view.len, offset, leader_epoch, lo, hi,
                             max_message_bytes, compact, max_ts_bound, fd, position, crc,
                             &count, &max_ts);
    PyBuffer_Release(&view);
    if (got <= 0) {
        if (got < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *c = PyLong_FromLong(count), *m = c == NULL ? NULL : PyLong_FromLongLong(max_ts);
    PyObject *out = m == NULL ? NULL : PyTuple_New(2);
    if (out == NULL) {
        Py_XDECREF(c);
        Py_XDECREF(m);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, c);
    PyTuple_SET_ITEM(out, 1, m);
    return out;
}
