/* A connection's whole common Produce frames at the start of a read in one call, from the
 * bytes read to their answers written together: server/connection_now.py
 * ConnectionNow._take_one and _answer, its twin and reference, step by step
 * (connection_now.py binds it and says when it is called). It reads and sets the
 * connection's attributes they read and set, calls the same functions (the decode,
 * produce_one_now, the request metrics' record_timing) and the same methods (the clock, the
 * transport's write or writelines, the pause), in their order.
 *
 * Returns where the frames it answered end (0: none, the connection's general steps take
 * the read from there, as from the twin's); None when it declined before doing anything
 * (the twin runs: produce_one_now switched off, data of another type); or (spec, header,
 * request, timing, result, error, end) once produce_one_now returned something else than a
 * frame's answer or raised, the answers before it written: ConnectionNow._one_rest goes on
 * from there, and the general steps from end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>

#include "attr_hint.h"
#include "native.h"

#define TN_NAMES(X)                                                                      \
    X(closed) X(closed_for_auth) X(_flush_scheduled) X(slots) X(buf) X(_large)          \
    X(session) X(faults) X(writer) X(max_frame) X(_muted_until) X(request_metrics)      \
    X(_clock) X(last_active) X(broker) X(registry) X(get) X(handle_now) X(min_version)  \
    X(max_version) X(acks) X(state) X(_last_produce) X(queue) X(transport) X(write)     \
    X(complete_ns) X(by_key) X(stats_of) X(cells) X(requests) X(_reading_paused)        \
    X(_writing_paused) X(_tasks) X(max_queued) X(_maybe_pause) X(abort) X(_send_failed)   \
    X(writelines)
#define TN_ENUM(n) T_##n,
#define TN_TEXT(n) #n,
enum { TN_NAMES(TN_ENUM) T_COUNT };

static ah_name tn[T_COUNT];
/* bound once (take_now_bind) */
static PyObject *tn_globals, *tn_handle_now, *tn_decode, *tn_new_timing, *tn_record;
static PyObject *tn_produce_name;
static long long tn_large_frame;

#define get(o, n) ah_get((o), &tn[n])
#define set(o, n, v) ah_set((o), &tn[n], (v))
#define truth(o, n) ah_truth((o), &tn[n])
#define is_none(o, n) ah_is_none((o), &tn[n])

/* perf_counter_ns's reading (CLOCK_MONOTONIC, as CPython's on Linux) */
static long long
perf_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* o.<name>(args...) (a new reference) */
static PyObject *
call(PyObject *o, int name, PyObject *const *args, size_t n)
{
    PyObject *f = get(o, name);
    if (f == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(f, args, n, NULL);
    Py_DECREF(f);
    return r;
}

/* _take_one's first tests, in its order: 1 nothing else going on (*writer set, a new
 * reference), 0 not, -1 an error. */
static int
conn_ok(PyObject *conn, PyObject **writer)
{
    static const int falsy[] = {T_closed, T_closed_for_auth, T__flush_scheduled, T_slots, T_buf};
    for (size_t i = 0; i < sizeof(falsy) / sizeof(falsy[0]); i++) {
        int r = truth(conn, falsy[i]);
        if (r != 0)
            return r < 0 ? -1 : 0;
    }
    static const int none[] = {T__large, T_session, T_faults};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        int r = is_none(conn, none[i]);
        if (r <= 0)
            return r;
    }
    int r = truth(conn, T__muted_until);
    if (r != 0)
        return r < 0 ? -1 : 0;
    if ((*writer = get(conn, T_writer)) == NULL)
        return -1;
    if (*writer == Py_None || (r = is_none(conn, T_request_metrics)) != 0) {
        Py_CLEAR(*writer);
        return r < 0 ? -1 : 0;
    }
    return 1;
}

/* _whole_produce: the size of the whole Produce frame at b[pos:end] (not a large one), or
 * -1. */
static long long
whole_produce(const uint8_t *b, Py_ssize_t pos, Py_ssize_t end, long long max_frame)
{
    if (end - pos < 12 || b[pos + 5] != 0 || b[pos + 4] != 0)
        return -1;
    long long size = (int32_t)tl_be(b + pos, 4);
    if (size < 8 || pos + 4 + size > end || size >= tn_large_frame || size > max_frame)
        return -1;
    return size;
}

/* The registry's spec for Produce (a new reference) and its versions, when its handle_now
 * is the one bound: 1, 0 not (the general steps'), -1. */
static int
spec_ok(PyObject *conn, PyObject **spec, long long *lo, long long *hi)
{
    PyObject *broker = get(conn, T_broker), *registry = NULL, *zero = PyLong_FromLong(0);
    if (broker != NULL)
        registry = get(broker, T_registry);
    *spec = registry == NULL ? NULL : call(registry, T_get, &zero, 1);
    Py_XDECREF(broker);
    Py_XDECREF(registry);
    Py_DECREF(zero);
    if (*spec == NULL)
        return -1;
    if (*spec == Py_None)
        return 0;
    PyObject *now = get(*spec, T_handle_now);
    if (now == NULL)
        return -1;
    int r = now == tn_handle_now;
    Py_DECREF(now);
    if (r && (ah_ll(*spec, &tn[T_min_version], lo) < 0 ||
              ah_ll(*spec, &tn[T_max_version], hi) < 0))
        return -1;
    return r;
}

/* The frame cut (its one copy) and decoded: (header, request) with acks other than 0 as a
 * new reference, Py_None (declined: the twin decodes it again and answers as it does), or
 * NULL. */
static PyObject *
decoded(const uint8_t *b, Py_ssize_t end, long long version)
{
    PyObject *piece = PyByteArray_FromStringAndSize((const char *)b + 4, end - 4);
    PyObject *frame = piece == NULL ? NULL : PyMemoryView_FromObject(piece);
    Py_XDECREF(piece);
    if (frame == NULL)
        return NULL;
    PyObject *v = PyLong_FromLongLong(version);
    PyObject *args[2] = {frame, v};
    PyObject *hr = v == NULL ? NULL : PyObject_Vectorcall(tn_decode, args, 2, NULL);
    Py_XDECREF(v);
    Py_DECREF(frame);
    if (hr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear(); /* (the twin's decode raises it again and closes the connection) */
        return Py_NewRef(Py_None);
    }
    long long acks;
    if (!PyTuple_CheckExact(hr) || PyTuple_GET_SIZE(hr) != 2 ||
        ah_ll(PyTuple_GET_ITEM(hr, 1), &tn[T_acks], &acks) < 0 || acks == 0) {
        Py_DECREF(hr);
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    return hr;
}

/* _answer's metrics: each of Produce's stats given each timing's stages (0, -1). */
static int
record(PyObject *conn, PyObject *timings, long long sent_ns)
{
    PyObject *metrics = get(conn, T_request_metrics), *stats = NULL, *zero = PyLong_FromLong(0);
    long long end_ns = perf_ns();
    PyObject *by_key = metrics == NULL ? NULL : get(metrics, T_by_key);
    if (by_key != NULL && PyDict_CheckExact(by_key)) {
        stats = Py_XNewRef(PyDict_GetItemWithError(by_key, zero));
    } else if (by_key != NULL) {
        stats = call(by_key, T_get, &zero, 1);
    }
    int r = by_key == NULL || PyErr_Occurred() ? -1 : stats == NULL ? 0 : PyObject_IsTrue(stats);
    if (r == 0) {
        Py_XSETREF(stats, call(metrics, T_stats_of, &zero, 1));
        r = stats == NULL ? -1 : 1;
    }
    PyObject *seq = r < 0 ? NULL : PySequence_Fast(stats, "a request's stats");
    PyObject *sent = PyLong_FromLongLong(sent_ns), *end = PyLong_FromLongLong(end_ns);
    r = seq == NULL || sent == NULL || end == NULL ? -1 : 0;
    for (Py_ssize_t t = 0; r == 0 && t < PyList_GET_SIZE(timings); t++) {
        PyObject *timing = PyList_GET_ITEM(timings, t);
        for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
            PyObject *cells = get(s, T_cells), *requests = get(s, T_requests);
            PyObject *args[5] = {cells, requests, timing, sent, end}, *v = NULL;
            if (cells != NULL && requests != NULL)
                v = PyObject_Vectorcall(tn_record, args, 5, NULL);
            r = v == NULL ? -1 : 0;
            Py_XDECREF(v);
            Py_XDECREF(cells);
            Py_XDECREF(requests);
        }
    }
    PyObject *owned[] = {metrics, by_key, stats, seq, sent, end, zero};
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        Py_XDECREF(owned[i]);
    return r < 0 || PyErr_Occurred() ? -1 : 0;
}

/* _answer's write: behind a queued file chunk, or the transport's (write of one, writelines
 * of several); a failed one's OSError the connection's _send_failed (0, -1). */
static int
write_answers(PyObject *conn, PyObject *writer, PyObject *answers)
{
    int q = truth(writer, T_queue);
    PyObject *v = NULL;
    if (q > 0) {
        v = call(writer, T_write, &answers, 1);
        return v == NULL ? -1 : (Py_DECREF(v), 0);
    }
    PyObject *transport = q < 0 ? NULL : get(conn, T_transport);
    if (transport != NULL && PyList_GET_SIZE(answers) == 1)
        v = call(transport, T_write, &PyList_GET_ITEM(answers, 0), 1);
    else if (transport != NULL)
        v = call(transport, T_writelines, &answers, 1);
    Py_XDECREF(transport);
    if (v != NULL || q < 0 || !PyErr_ExceptionMatches(PyExc_OSError))
        return v == NULL ? -1 : (Py_DECREF(v), 0);
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL)
        PyException_SetTraceback(exc, tb);
    v = call(writer, T_abort, NULL, 0);
    if (v != NULL) {
        Py_DECREF(v);
        v = call(conn, T__send_failed, &exc, 1);
    }
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    return v == NULL ? -1 : (Py_DECREF(v), 0);
}

/* _answer's end: the reads paused when the twin would pause them (0, -1). */
static int
maybe_pause(PyObject *conn, PyObject *writer)
{
    static const int any[] = {T__reading_paused, T__writing_paused, T__muted_until};
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(any) / sizeof(any[0]); i++)
        r = truth(conn, any[i]);
    if (r == 0)
        r = truth(writer, T_queue);
    if (r == 0) {
        long long slots, tasks, max_queued;
        PyObject *a = get(conn, T_slots), *b = get(conn, T__tasks);
        slots = a == NULL ? -1 : PyObject_Size(a);
        tasks = b == NULL ? -1 : PyObject_Size(b);
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (slots < 0 || tasks < 0 || ah_ll(conn, &tn[T_max_queued], &max_queued) < 0)
            return -1;
        r = slots + tasks >= max_queued;
    }
    if (r <= 0)
        return r;
    PyObject *v = call(conn, T__maybe_pause, NULL, 0);
    return v == NULL ? -1 : (Py_DECREF(v), 0);
}

/* _answer: the answers written, their requests' metrics, the pause: 0, -1. */
static int
answer(PyObject *conn, PyObject *writer, PyObject *answers, PyObject *timings)
{
    if (set(conn, T__last_produce, Py_None) < 0 || set(conn, T__flush_scheduled, Py_False) < 0)
        return -1;
    long long sent_ns = perf_ns();
    if (write_answers(conn, writer, answers) < 0)
        return -1;
    int closed = truth(conn, T_closed);
    if (closed != 0)
        return closed < 0 ? -1 : 0;
    return record(conn, timings, sent_ns) < 0 ? -1 : maybe_pause(conn, writer);
}

/* The request's timing (new_timing(0, version, start, now, start)), or NULL. */
static PyObject *
new_timing(long long version, long long start_ns)
{
    PyObject *t[5] = {PyLong_FromLong(0), PyLong_FromLongLong(version),
                      PyLong_FromLongLong(start_ns), PyLong_FromLongLong(perf_ns()), NULL};
    t[4] = Py_XNewRef(t[2]);
    PyObject *timing = t[0] && t[1] && t[2] && t[3] ? PyObject_Vectorcall(tn_new_timing, t, 5,
                                                                          NULL) : NULL;
    for (int i = 0; i < 5; i++)
        Py_XDECREF(t[i]);
    return timing;
}

/* produce_one_now's call for the decoded frame hr: *result its answer's bytes (1), or what it
 * returned otherwise or raised in *result or *error (0), or -1. */
static int
produce(PyObject *conn, PyObject *hr, PyObject *produce_one, PyObject **result,
        PyObject **error)
{
    PyObject *broker = get(conn, T_broker), *state = get(conn, T_state);
    PyObject *args[4] = {broker, state, PyTuple_GET_ITEM(hr, 0), PyTuple_GET_ITEM(hr, 1)};
    *result = *error = NULL;
    if (broker != NULL && state != NULL)
        *result = PyObject_Vectorcall(produce_one, args, 4, NULL);
    Py_XDECREF(broker);
    Py_XDECREF(state);
    if (*result != NULL) {
        int closed = PyBytes_CheckExact(*result) ? truth(conn, T_closed) : 1;
        return closed < 0 ? -1 : !closed;
    }
    if (broker == NULL || state == NULL || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) ||
        PyErr_ExceptionMatches(PyExc_SystemExit))
        return -1;
    PyObject *type, *tb; /* (the handler's exception, as _take_one keeps it) */
    PyErr_Fetch(&type, error, &tb);
    PyErr_NormalizeException(&type, error, &tb);
    if (tb != NULL)
        PyException_SetTraceback(*error, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return 0;
}

/* The loop's state: what it holds across frames. */
typedef struct {
    PyObject *conn, *data, *writer, *produce_one, *spec, *answers, *timings;
    long long max_frame, lo, hi;
} take_state;

/* The read's bytes as they are now (a call may have run Python meanwhile), or NULL when
 * they are no longer end long. */
static const uint8_t *
bytes_of(PyObject *data, Py_ssize_t end)
{
    if (PyByteArray_CheckExact(data) && end <= PyByteArray_GET_SIZE(data))
        return (const uint8_t *)PyByteArray_AS_STRING(data);
    if (PyBytes_CheckExact(data) && end <= PyBytes_GET_SIZE(data))
        return (const uint8_t *)PyBytes_AS_STRING(data);
    return NULL;
}

/* The first frame's steps: the connection active, the spec read: 1, 3 (not the bound
 * handler's: declined, the twin's), -1. */
static int
first_frame(take_state *st)
{
    PyObject *now = call(st->conn, T__clock, NULL, 0);
    int r = now == NULL ? -1 : set(st->conn, T_last_active, now);
    Py_XDECREF(now);
    r = r < 0 ? -1 : spec_ok(st->conn, &st->spec, &st->lo, &st->hi);
    return r == 0 ? 3 : r;
}

/* One whole frame at b + pos of size bytes: 1 answered (its answer and timing kept), 0 not
 * taken (the general steps from pos), 2 with *rest set (its tuple but for the end), 3 the
 * first frame declined (nothing done: the twin's), -1. */
static int
take_frame(take_state *st, const uint8_t *b, Py_ssize_t pos, long long size, PyObject **rest)
{
    long long start_ns = perf_ns(), version = (int16_t)tl_be(b + pos + 6, 2);
    int r = st->spec == NULL ? first_frame(st) : 1;
    if (r != 1 || version < st->lo || version > st->hi)
        return r == 1 ? 0 : r;
    PyObject *hr = decoded(b + pos, (Py_ssize_t)size + 4, version), *timing = NULL;
    if (hr == NULL || hr == Py_None) {
        Py_XDECREF(hr);
        return hr == NULL ? -1 : 0;
    }
    PyObject *result = NULL, *error = NULL;
    if (set(st->conn, T__flush_scheduled, Py_True) < 0 ||
        (timing = new_timing(version, start_ns)) == NULL)
        r = -1;
    else
        r = produce(st->conn, hr, st->produce_one, &result, &error);
    if (r > 0) {
        r = ah_set_ll(timing, &tn[T_complete_ns], perf_ns()) < 0 ||
            PyList_Append(st->answers, result) < 0 || PyList_Append(st->timings, timing) < 0
            ? -1 : 1;
    } else if (r == 0) {
        *rest = PyTuple_Pack(6, st->spec, PyTuple_GET_ITEM(hr, 0), PyTuple_GET_ITEM(hr, 1),
                             timing, result ? result : Py_None, error ? error : Py_None);
        r = *rest == NULL ? -1 : 2;
    }
    Py_XDECREF(result);
    Py_XDECREF(error);
    Py_XDECREF(timing);
    Py_DECREF(hr);
    return r;
}

/* The loop over the read's whole frames from its start: where it ended (a new int), or the
 * rest's tuple, or NULL. */
static PyObject *
take_frames(take_state *st, Py_ssize_t end)
{
    Py_ssize_t pos = 0;
    long long size;
    const uint8_t *b;
    PyObject *rest = NULL;
    int r = 1;
    while ((b = bytes_of(st->data, end)) != NULL &&
           (size = whole_produce(b, pos, end, st->max_frame)) >= 0) {
        r = take_frame(st, b, pos, size, &rest);
        if (r == 3)
            return Py_NewRef(Py_None);
        if (r <= 0)
            break;
        pos += 4 + (Py_ssize_t)size;
        if (r == 2)
            break;
    }
    if (r >= 0 && PyList_GET_SIZE(st->answers) > 0) {
        r = answer(st->conn, st->writer, st->answers, st->timings) < 0 ? -1 : r;
        if (r == 2 && set(st->conn, T__flush_scheduled, Py_True) < 0)
            r = -1;
    }
    if (r < 0) {
        Py_XDECREF(rest);
        return NULL;
    }
    if (r != 2)
        return PyLong_FromSsize_t(pos);
    PyObject *at = PyLong_FromSsize_t(pos), *out = NULL;
    if (at != NULL) {
        out = PyTuple_New(7);
        for (Py_ssize_t i = 0; out != NULL && i < 6; i++)
            PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(rest, i)));
        if (out != NULL)
            PyTuple_SET_ITEM(out, 6, Py_NewRef(at));
        Py_DECREF(at);
    }
    Py_DECREF(rest);
    return out;
}

/* METH_FASTCALL: take_one_now(connection, data, end) -> where it ended, None or the rest's
 * tuple, as the module's comment says. */
PyObject *
tl_take_one_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_ssize_t end;
    if (nargs != 3 || tn_decode == NULL || (end = PyLong_AsSsize_t(args[2])) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "take_one_now(connection, data, end), once take_now_bind ran");
        return NULL;
    }
    take_state st = {.conn = args[0], .data = args[1]};
    if (bytes_of(st.data, end) == NULL)
        return Py_NewRef(Py_None); /* (the twin's) */
    PyObject *produce_one = PyDict_GetItemWithError(tn_globals, tn_produce_name);
    if (produce_one == NULL || produce_one == Py_None)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    int r = conn_ok(st.conn, &st.writer);
    if (r <= 0)
        return r < 0 ? NULL : PyLong_FromLong(0);
    PyObject *out = NULL;
    st.produce_one = Py_NewRef(produce_one); /* (borrowed from the module's dict, which a
                                                call may change) */
    st.answers = PyList_New(0);
    st.timings = PyList_New(0);
    if (st.answers != NULL && st.timings != NULL &&
        ah_ll(st.conn, &tn[T_max_frame], &st.max_frame) == 0)
        out = take_frames(&st, end);
    PyObject *owned[] = {st.writer, st.produce_one, st.spec, st.answers, st.timings};
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        Py_XDECREF(owned[i]);
    return out;
}

/* take_now_bind(connection_now's globals, handle_now, decode_produce_in_place, new_timing,
 * record_timing, LARGE_FRAME): what take_one_now calls and tests against. */
PyObject *
tl_take_now_bind(PyObject *self, PyObject *args)
{
    PyObject *o[5];
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OOOOL", &PyDict_Type, &o[0], &o[1], &o[2], &o[3], &o[4],
                          &tn_large_frame))
        return NULL;
    static const char *const texts[T_COUNT] = {TN_NAMES(TN_TEXT)};
    if (ah_intern(tn, texts, T_COUNT) < 0)
        return NULL;
    if (tn_produce_name == NULL &&
        (tn_produce_name = PyUnicode_InternFromString("produce_one_now")) == NULL)
        return NULL;
    PyObject **slots[5] = {&tn_globals, &tn_handle_now, &tn_decode, &tn_new_timing,
                           &tn_record};
    for (int i = 0; i < 5; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}
