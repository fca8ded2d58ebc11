/* A connection's one common Produce frame in one call, from the bytes read to the answer
 * written: server/connection_now.py ConnectionNow._take_one and _answer_one, its twin and
 * reference, step by step (connection_now.py binds it and says when it is called). It
 * reads and sets the connection's attributes they read and set, calls the same functions
 * (the decode, produce_one_now, the request metrics' record_timing) and the same methods
 * (the clock, the transport's write, the pause), in their order.
 *
 * Returns False when the read is not one whole Produce frame with nothing else going on
 * (the connection's general steps then, as the twin's False); None when it declined before
 * changing anything (the twin runs: another handler, a version out of range, acks=0, a
 * frame the decode refuses, produce_one_now switched off); True once the answer is written;
 * or (spec, header, request, timing, result, error) once produce_one_now returned something
 * else than the answer's bytes or raised: ConnectionNow._one_rest goes on from there.
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
    X(_writing_paused) X(_tasks) X(max_queued) X(_maybe_pause) X(abort) X(_send_failed)
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

/* _take_one's first tests, in its order: 1 one whole Produce frame with nothing else going on
 * (*writer set, a new reference), 0 not, -1 an error. */
static int
frame_ok(PyObject *conn, const uint8_t *b, Py_ssize_t end, PyObject **writer)
{
    static const int falsy[] = {T_closed, T_closed_for_auth, T__flush_scheduled, T_slots, T_buf};
    for (size_t i = 0; i < sizeof(falsy) / sizeof(falsy[0]); i++) {
        int r = truth(conn, falsy[i]);
        if (r != 0)
            return r < 0 ? -1 : 0;
    }
    int r = is_none(conn, T__large);
    if (r <= 0 || end < 12 || b[5] != 0 || b[4] != 0)
        return r < 0 ? -1 : 0;
    if ((r = is_none(conn, T_session)) <= 0 || (r = is_none(conn, T_faults)) <= 0)
        return r;
    long long size = (int32_t)tl_be(b, 4), max_frame;
    if (size != end - 4 || size >= tn_large_frame || ah_ll(conn, &tn[T_max_frame], &max_frame) < 0)
        return PyErr_Occurred() ? -1 : 0;
    if (size > max_frame || (r = truth(conn, T__muted_until)) != 0)
        return r < 0 ? -1 : 0;
    if ((*writer = get(conn, T_writer)) == NULL)
        return -1;
    if (*writer == Py_None || (r = is_none(conn, T_request_metrics)) != 0) {
        Py_CLEAR(*writer);
        return r < 0 ? -1 : 0;
    }
    return 1;
}

/* The registry's spec for Produce (a new reference) when its handle_now is the one bound and
 * takes the version: 1, 0 not (the twin's), -1. */
static int
spec_ok(PyObject *conn, long long version, PyObject **spec)
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
    long long lo = 0, hi = -1;
    if (r && (ah_ll(*spec, &tn[T_min_version], &lo) < 0 ||
              ah_ll(*spec, &tn[T_max_version], &hi) < 0))
        return -1;
    return r && lo <= version && version <= hi;
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

/* _answer_one's metrics: each of Produce's stats given the timing's stages (0, -1). */
static int
record(PyObject *conn, PyObject *timing, long long sent_ns)
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
    PyObject *it = r < 0 ? NULL : PyObject_GetIter(stats), *s;
    PyObject *sent = PyLong_FromLongLong(sent_ns), *end = PyLong_FromLongLong(end_ns);
    r = it == NULL || sent == NULL || end == NULL ? -1 : 0;
    while (r == 0 && (s = PyIter_Next(it)) != NULL) {
        PyObject *cells = get(s, T_cells), *requests = get(s, T_requests);
        PyObject *args[5] = {cells, requests, timing, sent, end}, *v = NULL;
        if (cells != NULL && requests != NULL)
            v = PyObject_Vectorcall(tn_record, args, 5, NULL);
        r = v == NULL ? -1 : 0;
        Py_XDECREF(v);
        Py_XDECREF(cells);
        Py_XDECREF(requests);
        Py_DECREF(s);
    }
    PyObject *owned[] = {metrics, by_key, stats, it, sent, end, zero};
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        Py_XDECREF(owned[i]);
    return r < 0 || PyErr_Occurred() ? -1 : 0;
}

/* _answer_one's write: behind a queued file chunk, or the transport's; a failed one's
 * OSError the connection's _send_failed (0, -1). */
static int
write_answer(PyObject *conn, PyObject *writer, PyObject *answer)
{
    int q = truth(writer, T_queue);
    PyObject *v = NULL;
    if (q > 0) {
        PyObject *one = PyList_New(1);
        if (one != NULL) {
            PyList_SET_ITEM(one, 0, Py_NewRef(answer));
            v = call(writer, T_write, &one, 1);
            Py_DECREF(one);
        }
        return v == NULL ? -1 : (Py_DECREF(v), 0);
    }
    PyObject *transport = q < 0 ? NULL : get(conn, T_transport);
    v = transport == NULL ? NULL : call(transport, T_write, &answer, 1);
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

/* _answer_one's end: the reads paused when the twin would pause them (0, -1). */
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

/* _answer_one: the answer written, the request's metrics, the pause: 0, -1. */
static int
answer_one(PyObject *conn, PyObject *answer, PyObject *timing, PyObject *writer)
{
    if (set(conn, T__last_produce, Py_None) < 0 || set(conn, T__flush_scheduled, Py_False) < 0)
        return -1;
    long long sent_ns = perf_ns();
    if (ah_set_ll(timing, &tn[T_complete_ns], sent_ns) < 0 ||
        write_answer(conn, writer, answer) < 0)
        return -1;
    int closed = truth(conn, T_closed);
    if (closed != 0)
        return closed < 0 ? -1 : 0;
    return record(conn, timing, sent_ns) < 0 ? -1 : maybe_pause(conn, writer);
}

/* From the frame decoded on, as the twin: the connection active, its flush held, the
 * request's timing, produce_one_now's call, then the answer written or the rest handed back
 * (a new reference, NULL on an error). */
static PyObject *
produce(PyObject *conn, PyObject *spec, PyObject *hr, PyObject *produce_one, PyObject *writer,
        long long version, long long start_ns)
{
    PyObject *now = call(conn, T__clock, NULL, 0);
    int r = now == NULL ? -1 : set(conn, T_last_active, now);
    Py_XDECREF(now);
    if (r < 0 || set(conn, T__flush_scheduled, Py_True) < 0)
        return NULL;
    PyObject *t[5] = {PyLong_FromLong(0), PyLong_FromLongLong(version),
                      PyLong_FromLongLong(start_ns), PyLong_FromLongLong(perf_ns()), NULL};
    t[4] = Py_XNewRef(t[2]);
    PyObject *timing = t[0] && t[1] && t[2] && t[3] ? PyObject_Vectorcall(tn_new_timing, t, 5,
                                                                          NULL) : NULL;
    for (int i = 0; i < 5; i++)
        Py_XDECREF(t[i]);
    if (timing == NULL)
        return NULL;
    PyObject *broker = get(conn, T_broker), *state = get(conn, T_state), *result = NULL;
    PyObject *header = PyTuple_GET_ITEM(hr, 0), *request = PyTuple_GET_ITEM(hr, 1);
    PyObject *args[4] = {broker, state, header, request}, *error = NULL, *out = NULL;
    if (broker != NULL && state != NULL)
        result = PyObject_Vectorcall(produce_one, args, 4, NULL);
    Py_XDECREF(broker);
    Py_XDECREF(state);
    if (result == NULL) { /* (the handler's exception, as _take_one keeps it) */
        if (broker == NULL || state == NULL ||
            PyErr_ExceptionMatches(PyExc_KeyboardInterrupt) ||
            PyErr_ExceptionMatches(PyExc_SystemExit)) {
            Py_DECREF(timing);
            return NULL;
        }
        PyObject *type, *tb;
        PyErr_Fetch(&type, &error, &tb);
        PyErr_NormalizeException(&type, &error, &tb);
        if (tb != NULL)
            PyException_SetTraceback(error, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
    } else if (PyBytes_CheckExact(result) && (r = truth(conn, T_closed)) == 0) {
        out = answer_one(conn, result, timing, writer) < 0 ? NULL : Py_NewRef(Py_True);
        Py_DECREF(result);
        Py_DECREF(timing);
        return out;
    }
    if (r >= 0)
        out = PyTuple_Pack(6, spec, header, request, timing, result ? result : Py_None,
                           error ? error : Py_None);
    Py_XDECREF(result);
    Py_XDECREF(error);
    Py_DECREF(timing);
    return out;
}

/* METH_FASTCALL: take_one_now(connection, data, end) -> False, None, True or the rest's
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
    PyObject *conn = args[0], *data = args[1];
    const uint8_t *b;
    if (PyByteArray_CheckExact(data) && end <= PyByteArray_GET_SIZE(data))
        b = (const uint8_t *)PyByteArray_AS_STRING(data);
    else if (PyBytes_CheckExact(data) && end <= PyBytes_GET_SIZE(data))
        b = (const uint8_t *)PyBytes_AS_STRING(data);
    else
        return Py_NewRef(Py_None); /* (the twin's) */
    PyObject *writer = NULL, *spec = NULL, *hr = NULL, *out = NULL;
    int r = frame_ok(conn, b, end, &writer);
    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_False);
    long long start_ns = perf_ns(), version = (int16_t)tl_be(b + 6, 2);
    PyObject *produce_one = PyDict_GetItemWithError(tn_globals, tn_produce_name);
    if (produce_one == NULL || produce_one == Py_None)
        r = PyErr_Occurred() ? -1 : 0;
    else
        r = spec_ok(conn, version, &spec);
    if (r > 0) {
        Py_INCREF(produce_one); /* (borrowed from the module's dict, which a call may change) */
        hr = decoded(b, end, version);
        out = hr == NULL || hr == Py_None ? Py_XNewRef(hr)
              : produce(conn, spec, hr, produce_one, writer, version, start_ns);
        Py_DECREF(produce_one);
    } else if (r == 0) {
        out = Py_NewRef(Py_None);
    }
    Py_XDECREF(hr);
    Py_XDECREF(spec);
    Py_DECREF(writer);
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
