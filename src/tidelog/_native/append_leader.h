/* The native plain append (append_leader.c) and its helpers: the attributes it reads and
 * sets (append_attrs.c), the segment's room and bookkeeping (append_segment.c). */
#ifndef TIDELOG_APPEND_LEADER_H
#define TIDELOG_APPEND_LEADER_H

#include <Python.h>

#define NAMES(X)                                                                              \
    X(config) X(writes) X(count) X(plain_appends) X(live_entries) X(epoch) X(producers)      \
    X(producer_epoch) X(current_txn_first_offset) X(batch_metadata) X(end_metadata)          \
    X(message_offset) X(segments) X(last_segment) X(log) X(size_in_bytes) X(clock)           \
    X(milliseconds) X(offset_index) X(time_index) X(_loaded) X(_entries) X(_max_entries)     \
    X(base_offset) X(segment_bytes) X(max_segment_ms) X(roll_jitter_ms) X(_t)                \
    X(rolling_based_timestamp) X(_load_first_batch_timestamp) X(created) X(fd) X(fileno)     \
    X(timestamp_before_max_ms) X(timestamp_after_max_ms) X(max_message_bytes) X(compact)     \
    X(append_error) X(max_timestamp_and_offset) X(max_timestamp_and_offset_so_far)           \
    X(timestamp) X(offset) X(bytes_since_last_index_entry) X(index_interval_bytes) X(append) \
    X(maybe_append) X(popleft) X(last_timestamp) X(last_map_offset) X(_deferred_from)       \
    X(_mmap) X(_path) X(_lock) X(_dirty) X(_last_offset) X(_last_entry) X(acquire)          \
    X(release)
#define ENUM(n) N_##n,
#define TEXT(n) #n,
enum { NAMES(ENUM) N_COUNT };

/* the names, interned (append_leader_bind); what append_leader makes and calls */
extern PyObject *al_names[N_COUNT];
extern PyObject *al_new_batch_metadata, *al_new_info, *al_new_offset_metadata;
extern PyObject *al_new_timestamp_offset, *al_unknown_ts_offset, *al_crc32c, *al_system_ms;

/* A log's config values (LogConfig: frozen, so read once per config object). */
typedef struct {
    long long segment_bytes, max_segment_ms, before, after, max_message_bytes;
    int compact, plain_appends;
} plain_config;

/* Where <name> sits in a type's instances, as long as the type is unchanged (its version
 * tag): a __slots__ member at ``offset`` (read there, and set there when ``settable``: the
 * type's __setattr__ is the generic one), or a named tuple's field at ``item``; -1 both:
 * the generic lookup. Two types per name (the offset and time indexes share theirs). The
 * slotted classes: LocalLog, LogSegments, LogSegment, its _Tracking, FileRecords, the
 * indexes, ProducerStateManager, ProducerStateEntry, PendingWrites, EpochEntry; the named
 * tuples: LogOffsetMetadata, TimestampOffset. */
typedef struct {
    PyTypeObject *type;
    unsigned int version;
    int settable;
    Py_ssize_t offset, item;
} al_slot_hint;

extern al_slot_hint al_hints[N_COUNT][2];
al_slot_hint *al_learn_slot(PyObject *o, int name);

/* Where <name> sits in o's type. */
static inline const al_slot_hint *
al_slot_of(PyObject *o, int name)
{
    PyTypeObject *tp = Py_TYPE(o);
    al_slot_hint *h = al_hints[name];
    if (PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
        if (h[0].type == tp && h[0].version == tp->tp_version_tag)
            return &h[0];
        if (h[1].type == tp && h[1].version == tp->tp_version_tag)
            return &h[1];
    }
    return al_learn_slot(o, name);
}

/* o.<name>, a new reference. */
static inline PyObject *
al_get(PyObject *o, int name)
{
    const al_slot_hint *h = al_slot_of(o, name);
    PyObject *v = NULL;
    if (h->offset >= 0)
        v = *(PyObject **)((char *)o + h->offset);
    else if (h->item >= 0 && h->item < PyTuple_GET_SIZE(o))
        v = PyTuple_GET_ITEM(o, h->item);
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(o, al_names[name]);
}

/* o.<name> = v: 0, or -1 with the error set. */
static inline int
al_put(PyObject *o, int name, PyObject *v)
{
    const al_slot_hint *h = al_slot_of(o, name);
    Py_ssize_t at = h->settable ? h->offset : -1;
    if (at < 0)
        return PyObject_SetAttr(o, al_names[name], v);
    PyObject **addr = (PyObject **)((char *)o + at), *old = *addr;
    *addr = Py_NewRef(v);
    Py_XDECREF(old);
    return 0;
}

/* v as a long long, as PyLong_AsLongLong gives it (an int of at most two digits read here:
 * the generic conversion costs some 200 instructions past one digit). */
static inline long long
al_as_ll(PyObject *v)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(v)) {
        const digit *d = ((PyLongObject *)v)->ob_digit;
        switch (Py_SIZE(v)) {
        case 0:
            return 0;
        case 1:
            return (long long)d[0];
        case -1:
            return -(long long)d[0];
        case 2:
            return (long long)d[0] | (long long)d[1] << PyLong_SHIFT;
        case -2:
            return -((long long)d[0] | (long long)d[1] << PyLong_SHIFT);
        }
    }
#endif
    return PyLong_AsLongLong(v);
}

/* An int of value v (a new reference): the one made for the same value lately, if any. */
PyObject *al_long(long long v);

/* o.<name> as a long long: 0, or -1 with the error set. */
static inline int
al_ll(PyObject *o, int name, long long *out)
{
    PyObject *v = al_get(o, name);
    if (v == NULL)
        return -1;
    *out = al_as_ll(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* o.<name> truth: 1, 0, or -1 with the error set. */
static inline int
al_true(PyObject *o, int name)
{
    PyObject *v = al_get(o, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static inline int
al_set_ll(PyObject *o, int name, long long value)
{
    PyObject *v = al_long(value);
    if (v == NULL)
        return -1;
    int r = al_put(o, name, v);
    Py_DECREF(v);
    return r;
}

/* append_attrs.c: o.<name>.<name2>, maker(values...), a config's values (0, or -1 with the
 * error set) */
PyObject *al_attr2(PyObject *o, int name, int name2);
PyObject *al_make(PyObject *maker, const long long *values, Py_ssize_t n);
int al_config(PyObject *config, plain_config *c);
int al_intern_names(void);

/* append_segment.c: LogSegment.plain_room and LogSegment.appended (1 / 0 declined, -1) */
int al_room(PyObject *seg, const plain_config *c, long long n, long long position,
            long long last, long long now, long long base, long long *bound);
int al_booked(PyObject *seg, PyObject *file, long long n, long long position, long long last,
              long long max_ts);

/* append_index.c: offset_index.append(last, position), time_index.maybe_append(ts, offset)
 * (0, or -1 with the error set), natively for the classes bound (al_index_bind) while their
 * methods are the ones bound; the Python methods otherwise (and to raise their errors). */
int al_index_entries(PyObject *oi, PyObject *ti, long long last, long long position,
                     PyObject *ts, PyObject *offset);
int al_index_bind(PyObject *offset_index, PyObject *time_index);

#endif
