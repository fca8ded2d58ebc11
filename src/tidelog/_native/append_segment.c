/* The segment's part of the native plain append (append_leader.c): LogSegment.plain_room
 * (the room for one batch, the roll's timestamp bound) and LogSegment.appended (the file's
 * size, the max timestamp so far, the index entries), as storage/segment.py has them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>

#include "append_leader.h"

/* An index open and not full, ``keep`` slots kept (the time index's last, for the roll). */
static int
index_room(PyObject *seg, int which, long long keep)
{
    PyObject *idx = al_get(seg, which);
    if (idx == NULL)
        return -1;
    long long entries, max_entries;
    int r = al_true(idx, N__loaded);
    if (r > 0)
        r = al_ll(idx, N__entries, &entries) < 0 || al_ll(idx, N__max_entries, &max_entries) < 0
                ? -1 : entries < max_entries - keep;
    Py_DECREF(idx);
    return r;
}

/* The roll's bound from the segment's first batch timestamp, or its creation time. */
static int
roll_bound(PyObject *seg, long long now, __int128 limit, long long *bound)
{
    PyObject *t = al_get(seg, N__t), *ts = NULL;
    if (t == NULL || (ts = al_get(t, N_rolling_based_timestamp)) == NULL)
        goto fail;
    if (ts == Py_None) {
        Py_DECREF(ts);
        ts = NULL;
        PyObject *done = PyObject_CallMethodNoArgs(seg, al_names[N__load_first_batch_timestamp]);
        if (done == NULL)
            goto fail;
        Py_DECREF(done);
        if ((ts = al_get(t, N_rolling_based_timestamp)) == NULL)
            goto fail;
    }
    long long created, tsv = ts == Py_None ? -1 : al_as_ll(ts);
    Py_CLEAR(ts);
    if (tsv == -1 && PyErr_Occurred())
        goto fail;
    if (tsv >= 0) {  /* rolls when max timestamp - ts > limit */
        Py_DECREF(t);
        __int128 b = (__int128)tsv + limit;
        *bound = b > (__int128)LLONG_MAX ? LLONG_MAX : (long long)b;
        return b >= (__int128)LLONG_MIN;
    }
    int r = al_ll(t, N_created, &created);
    Py_DECREF(t);
    if (r < 0)
        return -1;
    *bound = LLONG_MAX;
    return (__int128)now - created <= limit;
fail:
    Py_XDECREF(ts);
    Py_XDECREF(t);
    return -1;
}

/* LogSegment.plain_room: 1 with *bound (the highest max timestamp the batch may carry),
 * 0 declined. */
int
al_room(PyObject *seg, const plain_config *c, long long n, long long position, long long last,
     long long now, long long base, long long *bound)
{
    long long seg_bytes = c->segment_bytes, seg_ms = c->max_segment_ms, jitter;
    __int128 rel = (__int128)last - base;
    if (position == 0 || position > seg_bytes - n || position > INT32_MAX - n || rel < 0 ||
        rel > INT32_MAX)
        return 0;
    int r = index_room(seg, N_offset_index, 0);
    if (r > 0)
        r = index_room(seg, N_time_index, 1);
    if (r <= 0)
        return r;
    if (al_ll(seg, N_roll_jitter_ms, &jitter) < 0)
        return -1;
    return roll_bound(seg, now, (__int128)seg_ms - jitter, bound);
}

/* The index entries of a batch up to ``last`` at ``position``, ``mx`` the max timestamp
 * so far: offset_index.append(last, position), time_index.maybe_append(mx.timestamp,
 * mx.offset). */
static int
index_entry(PyObject *seg, PyObject *mx, long long last, long long position)
{
    PyObject *ts = al_get(mx, N_timestamp);
    PyObject *off = ts == NULL ? NULL : al_get(mx, N_offset);
    PyObject *oi = off == NULL ? NULL : al_get(seg, N_offset_index);
    PyObject *ti = oi == NULL ? NULL : al_get(seg, N_time_index);
    int r = ti == NULL ? -1 : al_index_entries(oi, ti, last, position, ts, off);
    Py_XDECREF(ts);
    Py_XDECREF(off);
    Py_XDECREF(oi);
    Py_XDECREF(ti);
    return r;
}

/* LogSegment.appended: the file's size, the max timestamp so far, the index entries. */
int
al_booked(PyObject *seg, PyObject *file, long long n, long long position, long long last,
       long long max_ts)
{
    long long size, mx_ts, since, interval;
    if (al_ll(file, N_size_in_bytes, &size) < 0 || al_set_ll(file, N_size_in_bytes, size + n) < 0)
        return -1;
    PyObject *t = al_get(seg, N__t), *mx = NULL;
    if (t == NULL || (mx = al_get(t, N_max_timestamp_and_offset)) == NULL)
        goto fail;
    int unknown = PyObject_RichCompareBool(mx, al_unknown_ts_offset, Py_EQ);
    if (unknown < 0)
        goto fail;
    if (unknown) {
        Py_DECREF(mx);
        if ((mx = al_get(seg, N_max_timestamp_and_offset_so_far)) == NULL)
            goto fail;
    }
    if (al_ll(mx, N_timestamp, &mx_ts) < 0)
        goto fail;
    if (max_ts > mx_ts) {
        long long v[2] = {max_ts, last};
        Py_DECREF(mx);
        if ((mx = al_make(al_new_timestamp_offset, v, 2)) == NULL ||
            al_put(t, N_max_timestamp_and_offset, mx) < 0)
            goto fail;
    }
    if (al_ll(t, N_bytes_since_last_index_entry, &since) < 0 ||
        al_ll(seg, N_index_interval_bytes, &interval) < 0)
        goto fail;
    if (since > interval) {
        if (index_entry(seg, mx, last, position) < 0)
            goto fail;
        since = 0;
    }
    Py_DECREF(mx);
    int r = al_set_ll(t, N_bytes_since_last_index_entry, since + n);
    Py_DECREF(t);
    return r;
fail:
    Py_XDECREF(mx);
    Py_XDECREF(t);
    return -1;
}
