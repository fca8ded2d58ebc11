/* The index entries of the native plain append (append_segment.c al_booked): what
 * OffsetIndex.append and TimeIndex.maybe_append (storage/index) do for an entry they take,
 * done here: under the index's lock (taken without waiting, or not here), the entry written
 * to the file at its slot (open, pwrite, close, as AbstractIndex._pwrite_all, the GIL
 * released around them), then kept in the entries, counted, the index dirty, its last
 * entry. Taken only for an index of the classes bound (al_index_bind) whose methods are the
 * ones bound, loaded, outside deferred_writes; anything else, and every entry the Python
 * method refuses (a full index, an offset or timestamp going back, an offset out of the
 * segment's range), is the Python method's call: it raises its errors. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "append_leader.h"
#include "native.h"

#define METHODS 6
static const char *const method_text[2][METHODS] = {
    {"append", "_write_entry", "_pwrite_all", "relative_offset", "_ensure_loaded", NULL},
    {"maybe_append", "is_full", "_write_entry", "_pwrite_all", "relative_offset",
     "_ensure_loaded"}};
static PyObject *classes[2], *method_names[2][METHODS], *methods[2][METHODS];
static struct {
    PyTypeObject *type;
    unsigned int version;
    int ok;
} seen[2];

/* The index classes (OffsetIndex, TimeIndex) and their methods: 0, or -1 with the error set. */
int
al_index_bind(PyObject *offset_index, PyObject *time_index)
{
    PyObject *cls[2] = {offset_index, time_index};
    for (int k = 0; k < 2; k++) {
        if (!PyType_Check(cls[k])) {
            PyErr_SetString(PyExc_TypeError, "append_leader_bind: the index classes");
            return -1;
        }
        for (int i = 0; i < METHODS && method_text[k][i] != NULL; i++) {
            if (method_names[k][i] == NULL &&
                (method_names[k][i] = PyUnicode_InternFromString(method_text[k][i])) == NULL)
                return -1;
            PyObject *m = _PyType_Lookup((PyTypeObject *)cls[k], method_names[k][i]);
            Py_XSETREF(methods[k][i], Py_XNewRef(m));
        }
        Py_XSETREF(classes[k], Py_NewRef(cls[k]));
        seen[k].type = NULL;
    }
    return 0;
}

/* Whether idx is of class k (0 the offset index, 1 the time index) with its methods bound. */
static int
bound(PyObject *idx, int k)
{
    PyTypeObject *tp = Py_TYPE(idx);
    if ((PyObject *)tp != classes[k])
        return 0;
    if (seen[k].type == tp && seen[k].version == tp->tp_version_tag &&
        PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
        return seen[k].ok;
    int ok = 1;
    for (int i = 0; i < METHODS && method_names[k][i] != NULL; i++)
        ok = ok && _PyType_Lookup(tp, method_names[k][i]) == methods[k][i];
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
        return 0;
    seen[k].type = tp;
    seen[k].version = tp->tp_version_tag;
    seen[k].ok = ok;
    return ok;
}

/* ``n`` bytes at ``position`` of the file at ``path`` (GIL released): 0, or the errno with
 * *stage the step that failed (0 open, 1 pwrite, 2 no progress, 3 close). */
static int
file_write(const char *path, const char *data, Py_ssize_t n, long long position, int *stage)
{
    int err = 0, fd;
    Py_BEGIN_ALLOW_THREADS
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        *stage = 0;
    }
    for (Py_ssize_t done = 0; fd >= 0 && err == 0 && done < n;) {
        ssize_t w = pwrite(fd, data + done, (size_t)(n - done), (off_t)(position + done));
        if (w < 0 && errno != EINTR) {
            err = errno;
            *stage = 1;
        } else if (w == 0) {
            err = EIO;
            *stage = 2;
        }
        done += w > 0 ? w : 0;
    }
    if (fd >= 0 && close(fd) < 0 && err == 0) {
        err = errno;
        *stage = 3;
    }
    Py_END_ALLOW_THREADS
    return err;
}

/* ``_write_entry(entry)`` outside deferred_writes, ``entries`` the index's count: the file,
 * then the kept entries (``del mm[position:]; mm += entry``), the count, dirty. 1 done,
 * 0 not taken (nothing changed), -1 error. */
static int
write_entry(PyObject *idx, const char *entry, Py_ssize_t size, long long entries)
{
    PyObject *mm = al_get(idx, N__mmap), *path = NULL, *fs = NULL;
    int r = -1, stage = 0;
    if (mm == NULL || !PyByteArray_CheckExact(mm)) {
        r = mm == NULL ? -1 : 0;
        goto done;
    }
    PyObject *p = al_get(idx, N__path);  /* (os.open names the error's file by its str) */
    path = p == NULL ? NULL : PyOS_FSPath(p);
    Py_XDECREF(p);
    if (path == NULL || !PyUnicode_FSConverter(path, &fs))
        goto done;
    long long position = entries * size;
    int err = file_write(PyBytes_AS_STRING(fs), entry, size, position, &stage);
    if (err != 0) {
        errno = err;
        if (stage == 0)
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        else if (stage == 2)
            PyErr_Format(PyExc_OSError, "short write to %S", path);
        else
            PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    Py_ssize_t at = PyByteArray_GET_SIZE(mm) < position ? PyByteArray_GET_SIZE(mm) : position;
    if (PyByteArray_Resize(mm, at + size) < 0)
        goto done;
    memcpy(PyByteArray_AS_STRING(mm) + at, entry, (size_t)size);
    r = al_set_ll(idx, N__entries, entries + 1) < 0 || al_put(idx, N__dirty, Py_True) < 0 ? -1 : 1;
done:
    Py_XDECREF(fs);
    Py_XDECREF(path);
    Py_XDECREF(mm);
    return r;
}

/* The index's state before an entry: 1 loaded, outside deferred_writes, with *entries and
 * *max_entries read; 0 not taken; -1 error. */
static int
open_state(PyObject *idx, long long base, long long offset, long long *entries,
           long long *max_entries)
{
    int r = al_true(idx, N__loaded);
    if (r <= 0)
        return r;
    PyObject *deferred = al_get(idx, N__deferred_from);
    if (deferred == NULL)
        return -1;
    r = deferred == Py_None;
    Py_DECREF(deferred);
    if (r > 0 && (al_ll(idx, N__entries, entries) < 0 || al_ll(idx, N__max_entries, max_entries) < 0))
        return -1;
    return r > 0 && offset - base >= 0 && offset - base <= INT32_MAX;
}

static void
put_be(char *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (char)(v & 0xFF);
}

/* OffsetIndex.append(offset, position), the lock held: 1 done, 0 not taken, -1 error. */
static int
offset_entry(PyObject *oi, long long offset, long long position)
{
    long long base, entries, max_entries, last_offset;
    int r = al_ll(oi, N_base_offset, &base) < 0 ? -1 : 1;
    if (r > 0)
        r = open_state(oi, base, offset, &entries, &max_entries);
    if (r > 0 && (entries >= max_entries || position < INT32_MIN || position > INT32_MAX))
        r = 0;
    if (r > 0 && entries != 0)
        r = al_ll(oi, N__last_offset, &last_offset) < 0 ? -1 : offset > last_offset;
    if (r > 0) {
        char entry[8];
        put_be(entry, (uint64_t)(offset - base), 4);
        put_be(entry + 4, (uint64_t)position, 4);
        r = write_entry(oi, entry, 8, entries);
    }
    return r > 0 ? (al_set_ll(oi, N__last_offset, offset) < 0 ? -1 : 1) : r;
}

/* TimeIndex.maybe_append(ts, offset), the lock held: 1 done (or nothing to add), 0 not
 * taken, -1 error. */
static int
time_entry(PyObject *ti, long long ts, long long offset)
{
    long long base, entries, max_entries, last_ts, last_offset;
    int r = al_ll(ti, N_base_offset, &base) < 0 ? -1 : 1;
    if (r > 0)
        r = open_state(ti, base, offset, &entries, &max_entries);
    if (r > 0 && entries >= max_entries - 1)  /* (is_full) */
        r = 0;
    if (r > 0) {
        PyObject *last = al_get(ti, N__last_entry);
        r = last == NULL || al_ll(last, N_timestamp, &last_ts) < 0 ||
            al_ll(last, N_offset, &last_offset) < 0 ? -1 : 1;
        Py_XDECREF(last);
    }
    if (r > 0 && entries != 0 && (offset < last_offset || ts < last_ts))
        r = 0;
    if (r <= 0 || ts <= last_ts)
        return r;
    char entry[12];
    put_be(entry, (uint64_t)ts, 8);
    put_be(entry + 8, (uint64_t)(offset - base), 4);
    if ((r = write_entry(ti, entry, 12, entries)) <= 0)
        return r;
    long long v[2] = {ts, offset};
    PyObject *e = al_make(al_new_timestamp_offset, v, 2);
    r = e == NULL || al_put(ti, N__last_entry, e) < 0 ? -1 : 1;
    Py_XDECREF(e);
    return r;
}

/* One entry natively (k 0: offset_entry(a, b), 1: time_entry(b, a)) under the index's lock
 * when it is free: 1 done, 0 not taken, -1 error. */
static int
locked_entry(PyObject *idx, int k, long long a, long long b)
{
    if (!bound(idx, k))
        return 0;
    PyObject *lock = al_get(idx, N__lock), *got;
    if (lock == NULL)
        return -1;
    if ((got = PyObject_CallMethodOneArg(lock, al_names[N_acquire], Py_False)) == NULL ||
        got != Py_True) {
        Py_XDECREF(got);
        Py_DECREF(lock);
        return got == NULL ? -1 : 0;
    }
    Py_DECREF(got);
    int r = k == 0 ? offset_entry(idx, a, b) : time_entry(idx, b, a);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *done = PyObject_CallMethodNoArgs(lock, al_names[N_release]);
    Py_DECREF(lock);
    if (done == NULL && type == NULL)
        return -1;
    Py_XDECREF(done);
    PyErr_Restore(type, value, tb);
    return r;
}

/* METH_FASTCALL: index_entries(offset_index, time_index, last, position, timestamp, offset):
 * the Python twin's two calls (storage/log_plain.py index_entries_py), for the tests. */
PyObject *
tl_index_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long last, position;
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "index_entries() takes 6 arguments");
        return NULL;
    }
    if (tl_arg_ll(args[2], &last) < 0 || tl_arg_ll(args[3], &position) < 0 ||
        al_intern_names() < 0 || al_index_entries(args[0], args[1], last, position, args[4],
                                                  args[5]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

int
al_index_entries(PyObject *oi, PyObject *ti, long long last, long long position,
                 PyObject *ts, PyObject *offset)
{
    PyObject *done;
    long long t = 0, o = 0;
    int native = tl_arg_ll(ts, &t) == 0 && tl_arg_ll(offset, &o) == 0;
    PyErr_Clear();  /* (not int64s: the Python methods take them) */
    int r = locked_entry(oi, 0, last, position);
    if (r == 0) {
        if ((done = PyObject_CallMethod(oi, "append", "LL", last, position)) == NULL)
            return -1;
        Py_DECREF(done);
    }
    r = r < 0 ? -1 : native ? locked_entry(ti, 1, o, t) : 0;
    if (r == 0) {
        done = PyObject_CallMethodObjArgs(ti, al_names[N_maybe_append], ts, offset, NULL);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
    }
    return r < 0 ? -1 : 0;
}
