/* The leader's plain append around its write, in one call (storage/log_plain.py
 * append_plain_leader_py, its twin): the gate (size, writes in flight, the leader epoch),
 * the producer's next sequence (next_in_sequence), the segment's room (LogSegment.plain_room),
 * the write (tl_plain_write, append_plain.c), then the segment's bookkeeping
 * (LogSegment.appended), the log end, the producer's retained batches and the append's
 * info. Each step reads and sets the same attributes the twin reads and sets, in the same
 * order, and calls the same Python methods on its rare paths (the first batch timestamp's
 * load, an index entry, a closed file's fileno, a failed write's append_error).
 *
 * Declined (None, nothing changed): whatever the twin declines. Raises what the twin raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

#include "append_leader.h"
#include "native.h"

#define RECORD_BATCH_OVERHEAD 61
#define TRANSACTIONAL_MASK 0x10
#define NUM_BATCHES_TO_RETAIN 5
#define SEQ_MAX 0x7FFFFFFFLL
#define PLAIN_APPEND_BYTES (64 * 1024)

/* The append's gate (the twin's first test, then the leader epoch's), the config's values
 * read into *c: 1 go on, 0 declined. */
static int
gate(PyObject *local, plain_config *c, PyObject *epochs, Py_ssize_t n, long long inline_below,
     long long leader_epoch)
{
    PyObject *config = al_get(local, N_config);
    if (config == NULL || al_config(config, c) < 0) {
        Py_XDECREF(config);
        return -1;
    }
    Py_DECREF(config);
    if (n >= inline_below || n < RECORD_BATCH_OVERHEAD)
        return 0;
    PyObject *writes = al_get(local, N_writes);
    if (writes == NULL)
        return -1;
    int busy = al_true(writes, N_count);
    Py_DECREF(writes);
    if (busy != 0)
        return busy < 0 ? -1 : 0;
    if (!c->plain_appends || leader_epoch < 0)
        return c->plain_appends;
    PyObject *known = al_get(epochs, N_live_entries);
    if (known == NULL)
        return -1;
    Py_ssize_t k = PyObject_Size(known);
    PyObject *latest = k > 0 ? PySequence_GetItem(known, k - 1) : NULL;
    Py_DECREF(known);
    if (k <= 0)
        return k < 0 ? -1 : 0;
    long long epoch;
    int r = latest == NULL ? -1 : al_ll(latest, N_epoch, &epoch);
    Py_XDECREF(latest);
    return r < 0 ? -1 : leader_epoch <= epoch;
}

/* A retained batch's last sequence and offset delta (BatchMetadata, a named tuple). */
static int
batch_seq(PyObject *m, long long *last_seq, long long *delta)
{
    if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) < 3) {
        PyErr_SetString(PyExc_TypeError, "a producer's batch metadata is not a BatchMetadata");
        return -1;
    }
    *last_seq = al_as_ll(PyTuple_GET_ITEM(m, 0));
    *delta = al_as_ll(PyTuple_GET_ITEM(m, 2));
    return PyErr_Occurred() ? -1 : 0;
}

/* next_in_sequence's test of the retained batches ``md``: 1 the batch is the next one and
 * no duplicate, 0 not, -1 error. */
static int
seq_fits(PyObject *md, long long base_seq, long long lod)
{
    Py_ssize_t len = PyObject_Size(md);
    if (len < 0)
        return -1;
    long long last_seq = -1, delta;
    if (len > 0) {
        PyObject *m = PySequence_GetItem(md, len - 1);
        int r = m == NULL ? -1 : batch_seq(m, &last_seq, &delta);
        Py_XDECREF(m);
        if (r < 0)
            return -1;
    }
    if (base_seq != last_seq + 1 && !(base_seq == 0 && last_seq == SEQ_MAX))
        return 0;
    long long want = (base_seq + lod) & SEQ_MAX;
    int fits = 1;
    for (Py_ssize_t i = 0; fits == 1 && i < len; i++) {  /* (a deque of at most five) */
        long long seq;
        PyObject *m = PySequence_GetItem(md, i);
        if (m == NULL || batch_seq(m, &seq, &delta) < 0)
            fits = -1;
        else if (seq == want && (seq - delta >= 0 ? seq - delta : SEQ_MAX - delta + seq + 1) ==
                                    base_seq)
            fits = 0;  /* (ProducerStateEntry.find_duplicate_batch) */
        Py_XDECREF(m);
    }
    return fits;
}

/* next_in_sequence: 1 with *entry (a new reference) the producer's entry, 0 declined. */
static int
in_sequence(PyObject *psm, long long pid, long long epoch, long long base_seq, long long lod,
            int attrs, PyObject **entry)
{
    PyObject *producers = al_get(psm, N_producers), *key = NULL, *e = NULL;
    if (producers == NULL || (key = PyLong_FromLongLong(pid)) == NULL)
        goto fail;
    if (PyDict_CheckExact(producers)) {
        e = PyDict_GetItemWithError(producers, key);
        Py_XINCREF(e);
    } else {
        PyErr_SetString(PyExc_TypeError, "the producers are not a dict");
    }
    Py_CLEAR(key);
    Py_CLEAR(producers);
    if (e == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long long pe;
    if (al_ll(e, N_producer_epoch, &pe) < 0)
        goto fail;
    if (epoch != pe || epoch < 0 || base_seq < 0)
        goto declined;
    PyObject *txn = al_get(e, N_current_txn_first_offset);
    if (txn == NULL)
        goto fail;
    int open_txn = txn != Py_None;
    Py_DECREF(txn);
    if (((attrs & TRANSACTIONAL_MASK) != 0) != open_txn)
        goto declined;
    PyObject *md = al_get(e, N_batch_metadata);
    int fits = md == NULL ? -1 : seq_fits(md, base_seq, lod);
    Py_XDECREF(md);
    if (fits == 1) {
        *entry = e;
        return 1;
    }
    Py_DECREF(e);
    return fits;
declined:
    Py_DECREF(e);
    return 0;
fail:
    Py_XDECREF(key);
    Py_XDECREF(producers);
    Py_XDECREF(e);
    return -1;
}

/* The segment's descriptor (``fd``, or ``fileno()``: which raises for a closed file). */
static int
file_fd(PyObject *file, int *fd)
{
    PyObject *v = al_get(file, N_fd);
    if (v == Py_None) {
        Py_DECREF(v);
        v = PyObject_CallMethodNoArgs(file, al_names[N_fileno]);
    }
    if (v == NULL)
        return -1;
    int r = tl_arg_int(v, fd);
    Py_DECREF(v);
    return r;
}

/* A failed write's OSError raised as ``file.append_error(e, n)``, caused by it. */
static void
append_error(PyObject *file, Py_ssize_t n)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *e = PyObject_CallMethod(file, "append_error", "On", value, n);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (e == NULL) {
        Py_DECREF(value);
        return;
    }
    Py_INCREF(value);
    PyException_SetCause(e, value);  /* (raise ... from e: steals) */
    PyException_SetContext(e, value);  /* (steals) */
    PyErr_SetObject((PyObject *)Py_TYPE(e), e);
    Py_DECREF(e);
}

/* The write: the batch checked, patched and written (a read-only one copied first, as the
 * twin's bytearray); 1 written, 0 declined, -1 error. */
static int
write_batch(PyObject *records, const plain_config *c, PyObject *file, Py_ssize_t n,
            long long offset, long long leader_epoch, long long now, long long bound,
            long long position, int32_t *count, int64_t *max_ts)
{
    long long crc = -1;
    int fd, r = -1;
    int writable = PyByteArray_Check(records) ||
                   (PyMemoryView_Check(records) && !PyMemoryView_GET_BUFFER(records)->readonly);
    PyObject *buf = writable ? Py_NewRef(records) : PyByteArray_FromObject(records);
    Py_buffer view;
    if (buf == NULL || PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) < 0) {
        Py_XDECREF(buf);
        return -1;
    }
    if (n > PLAIN_APPEND_BYTES) {  /* (the crc32c package's interleaved streams) */
        PyObject *mv = PyMemoryView_FromMemory((char *)view.buf + 21, n - 21, PyBUF_READ);
        PyObject *c = mv == NULL ? NULL : PyObject_CallOneArg(al_crc32c, mv);
        Py_XDECREF(mv);
        if (c == NULL || tl_arg_ll(c, &crc) < 0) {
            Py_XDECREF(c);
            goto done;
        }
        Py_DECREF(c);
    }
    if (file_fd(file, &fd) < 0)
        goto done;
    __int128 lo = (__int128)now - c->before, hi = (__int128)now + c->after;
    r = tl_plain_write((uint8_t *)view.buf, n, offset, (int)leader_epoch,
                       lo < LLONG_MIN ? LLONG_MIN : (long long)lo,
                       hi > LLONG_MAX ? LLONG_MAX : (long long)hi, c->max_message_bytes,
                       c->compact, bound, fd, position, crc, count, max_ts);
    if (r < 0)
        append_error(file, n);
done:
    PyBuffer_Release(&view);
    Py_DECREF(buf);
    return r;
}

/* The bookkeeping after the write: the segment's, the log end, the producer's batches
 * (1, or -1 with the error set). */
static int
after_write(PyObject *local, PyObject *psm, PyObject *seg, PyObject *file, PyObject *entry,
            Py_ssize_t n, long long position, long long last, int64_t max_ts,
            long long base_seq, long long lod, long long base)
{
    if (al_booked(seg, file, n, position, last, max_ts) < 0)
        return -1;
    long long end[3] = {last + 1, base, position + n};
    PyObject *meta = al_make(al_new_offset_metadata, end, 3);
    if (meta == NULL || al_put(local, N_end_metadata, meta) < 0) {
        Py_XDECREF(meta);
        return -1;
    }
    Py_DECREF(meta);
    if (entry != NULL) {
        PyObject *md = al_get(entry, N_batch_metadata);
        long long fields[4] = {(base_seq + lod) & SEQ_MAX, last, lod, max_ts};
        PyObject *batch = md == NULL ? NULL : al_make(al_new_batch_metadata, fields, 4);
        PyObject *done = batch == NULL ? NULL : PyObject_CallMethodOneArg(md, al_names[N_append], batch);
        Py_XDECREF(batch);
        Py_ssize_t len = done == NULL ? -1 : PyObject_Size(md);
        Py_XDECREF(done);
        if (len > NUM_BATCHES_TO_RETAIN) {
            done = PyObject_CallMethodNoArgs(md, al_names[N_popleft]);
            len = done == NULL ? -1 : len;
            Py_XDECREF(done);
        }
        Py_XDECREF(md);
        if (len < 0 || al_set_ll(entry, N_last_timestamp, max_ts) < 0)
            return -1;
    }
    return al_set_ll(psm, N_last_map_offset, last + 1) < 0 ? -1 : 1;
}

/* ``local.clock.milliseconds()``: SystemClock's read here (time.time_ns() // 1_000_000, the
 * same clock_gettime), any other clock's called (the method found as LOAD_METHOD finds it:
 * no bound method made). */
static PyObject *
now_ms(PyObject *local)
{
    PyObject *clock = al_get(local, N_clock), *fn = NULL, *ms = NULL;
    struct timespec ts;
    if (clock == NULL)
        return NULL;
    int method = _PyObject_GetMethod(clock, al_names[N_milliseconds], &fn);
    if (fn != NULL && method && fn == al_system_ms && clock_gettime(CLOCK_REALTIME, &ts) == 0)
        ms = PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    else if (fn != NULL)
        ms = method ? PyObject_CallOneArg(fn, clock) : PyObject_CallNoArgs(fn);
    Py_XDECREF(fn);
    Py_DECREF(clock);
    return ms;
}

/* The segment, its file, the write position and the clock's now: 1, 0 declined (no
 * segment), -1 error. */
static int
active(PyObject *local, PyObject **seg, PyObject **file, long long *position, long long *now)
{
    *seg = al_attr2(local, N_segments, N_last_segment);
    if (*seg == NULL || *seg == Py_None) {
        int r = *seg == NULL ? -1 : 0;
        Py_XDECREF(*seg);
        return r;
    }
    PyObject *ms = NULL;
    if ((*file = al_get(*seg, N_log)) != NULL &&
        al_ll(*file, N_size_in_bytes, position) == 0) {
        ms = now_ms(local);
    }
    if (ms != NULL && ((*now = al_as_ll(ms)) != -1 || !PyErr_Occurred())) {
        Py_DECREF(ms);
        return 1;
    }
    Py_XDECREF(ms);
    Py_XDECREF(*file);
    Py_DECREF(*seg);
    return -1;
}

/* The batch's header fields, the producer's entry if it has one: 1, 0 declined. */
static int
header(PyObject *records, PyObject *psm, Py_ssize_t *n, long long fields[4],
       PyObject **entry)
{
    Py_buffer view;
    if (PyObject_GetBuffer(records, &view, PyBUF_SIMPLE) < 0)
        return -1;
    const uint8_t *b = view.buf;
    *n = view.len;
    int attrs = 0;
    if (*n >= RECORD_BATCH_OVERHEAD) {
        attrs = (int16_t)tl_be(b + 21, 2);
        fields[0] = (int32_t)tl_be(b + 23, 4);  /* last offset delta */
        fields[1] = (int64_t)tl_be(b + 43, 8);  /* producer id */
        fields[2] = (int16_t)tl_be(b + 51, 2);  /* producer epoch */
        fields[3] = (int32_t)tl_be(b + 53, 4);  /* base sequence */
    }
    PyBuffer_Release(&view);
    if (*n < RECORD_BATCH_OVERHEAD || fields[1] <= -1)
        return 1;
    return in_sequence(psm, fields[1], fields[2], fields[3], fields[0], attrs, entry);
}

/* The append's info: LogAppendInfo(offset, last, max_ts, last, -1, log_start_offset, count,
 * n). */
static PyObject *
append_info(long long offset, long long last, int64_t max_ts, PyObject *log_start_offset,
            int32_t count, Py_ssize_t n)
{
    long long v[8] = {offset, last, max_ts, last, -1, 0, count, n};
    PyObject *args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = i == 5 ? Py_NewRef(log_start_offset) : al_long(v[i]);
        if (args[i] == NULL) {
            while (i-- > 0)
                Py_DECREF(args[i]);
            return NULL;
        }
    }
    PyObject *out = PyObject_Vectorcall(al_new_info, args, 8, NULL);
    for (int i = 0; i < 8; i++)
        Py_DECREF(args[i]);
    return out;
}

/* METH_FASTCALL: append_leader(local, psm, epochs, records, leader_epoch, inline_below,
 * log_start_offset) -> LogAppendInfo or None, as append_plain_leader_py. */
PyObject *
tl_append_leader(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7 || al_new_info == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "append_leader() takes 7 arguments, once append_leader_bind ran");
        return NULL;
    }
    PyObject *local = args[0], *psm = args[1], *records = args[3];
    PyObject *entry = NULL, *seg = NULL, *file = NULL, *out = NULL, *end;
    long long leader_epoch, inline_below, f[4] = {0, -1, -1, -1}, offset = 0, last = 0;
    long long position = 0, now = 0, bound = 0, base = 0;
    plain_config c;
    int32_t count = 0;
    int64_t max_ts = 0;
    Py_ssize_t n = PyObject_Size(records);
    if (n < 0 || tl_arg_ll(args[4], &leader_epoch) < 0 || tl_arg_ll(args[5], &inline_below) < 0)
        return NULL;
    int r = gate(local, &c, args[2], n, inline_below, leader_epoch);
    if (r > 0)
        r = header(records, psm, &n, f, &entry);
    if (r > 0) {
        end = al_attr2(local, N_end_metadata, N_message_offset);
        r = end == NULL || ((offset = al_as_ll(end)) == -1 && PyErr_Occurred())
                ? -1 : offset <= LLONG_MAX - INT32_MAX - 1;
        Py_XDECREF(end);
        last = offset + f[0];
    }
    if (r > 0)
        r = active(local, &seg, &file, &position, &now);
    if (r > 0)
        r = al_ll(seg, N_base_offset, &base) < 0 ? -1 : 1;
    if (r > 0)
        r = al_room(seg, &c, n, position, last, now, base, &bound);
    if (r > 0)
        r = write_batch(records, &c, file, n, offset, leader_epoch, now, bound, position,
                        &count, &max_ts);
    if (r > 0)
        r = after_write(local, psm, seg, file, entry, n, position, last, max_ts, f[3], f[0],
                        base);
    if (r > 0)
        out = append_info(offset, last, max_ts, args[6], count, n);
    else if (r == 0)
        out = Py_NewRef(Py_None);
    Py_XDECREF(entry);
    Py_XDECREF(seg);
    Py_XDECREF(file);
    return out;
}

/* append_leader_bind(al_new_batch_metadata, al_new_info, al_new_offset_metadata,
 * al_new_timestamp_offset, UNKNOWN_TIMESTAMP_OFFSET, crc32c, SystemClock.milliseconds,
 * OffsetIndex, TimeIndex): what append_leader makes and calls (storage/log_plain.py). */
PyObject *
tl_append_leader_bind(PyObject *self, PyObject *args)
{
    PyObject *o[7], *offset_index, *time_index;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &offset_index, &time_index))
        return NULL;
    if (al_intern_names() < 0 || al_index_bind(offset_index, time_index) < 0)
        return NULL;
    PyObject **slots[7] = {&al_new_batch_metadata, &al_new_info, &al_new_offset_metadata,
                           &al_new_timestamp_offset, &al_unknown_ts_offset, &al_crc32c, &al_system_ms};
    for (int i = 0; i < 7; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}
