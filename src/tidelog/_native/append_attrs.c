/* The attributes the native plain append reads and sets (append_leader.c): a __slots__
 * member at its offset while its type is unchanged, a frozen config's values once per config
 * object, anything else through the generic lookup. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "append_leader.h"

static const char *const name_text[] = {NAMES(TEXT)};
PyObject *al_names[N_COUNT];
PyObject *al_new_batch_metadata, *al_new_info, *al_new_offset_metadata;
PyObject *al_new_timestamp_offset, *al_unknown_ts_offset, *al_crc32c, *al_system_ms;

/* The names interned (once): 0, or -1 with the error set. */
int
al_intern_names(void)
{
    for (int i = 0; i < N_COUNT; i++)
        if (al_names[i] == NULL && (al_names[i] = PyUnicode_InternFromString(name_text[i])) == NULL)
            return -1;
    return 0;
}

al_slot_hint al_hints[N_COUNT][2];
static al_slot_hint generic = {NULL, 0, 0, -1, -1};

/* A named tuple field's index (its descriptor, a _collections._tuplegetter, reduces to
 * (type, (index, doc))), or -1. */
static Py_ssize_t
tuple_field(PyObject *d)
{
    Py_ssize_t index = -1;
    PyObject *r = PyObject_CallMethod(d, "__reduce__", NULL);
    if (r != NULL && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2 &&
            PyTuple_Check(PyTuple_GET_ITEM(r, 1)) && PyTuple_GET_SIZE(PyTuple_GET_ITEM(r, 1)) == 2)
        index = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyTuple_GET_ITEM(r, 1), 0));
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        index = -1;
    }
    return index;
}

/* al_slot_of's lookup for a type not seen (or changed) since: the hint learned, in place of
 * the older of the name's two. */
al_slot_hint *
al_learn_slot(PyObject *o, int name)
{
    PyTypeObject *tp = Py_TYPE(o);
    PyObject *d = _PyType_Lookup(tp, al_names[name]);  /* (borrowed; gives tp its version tag) */
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ||
            tp->tp_getattro != PyObject_GenericGetAttr)
        return &generic;
    al_slot_hint h = {tp, tp->tp_version_tag, 0, -1, -1};
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX) {
            h.offset = m->offset;
            h.settable = !(m->flags & READONLY) && tp->tp_setattro == PyObject_GenericSetAttr;
        }
    } else if (d != NULL && PyTuple_Check(o) &&
               strcmp(Py_TYPE(d)->tp_name, "_collections._tuplegetter") == 0) {
        Py_INCREF(d);
        h.item = tuple_field(d);
        Py_DECREF(d);
        if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ||
                tp->tp_version_tag != h.version)
            return &generic;  /* (changed meanwhile) */
    }
    al_slot_hint *hs = al_hints[name];
    hs[1] = hs[0];
    hs[0] = h;
    return &hs[0];
}

static PyObject *config_seen;  /* the config last read (held: its address stays its own) */
static plain_config config_read;

/* The values of ``config`` into *c: 0, or -1 with the error set. */
int
al_config(PyObject *config, plain_config *c)
{
    if (config != config_seen) {
        plain_config v;
        if (al_ll(config, N_segment_bytes, &v.segment_bytes) < 0 ||
            al_ll(config, N_max_segment_ms, &v.max_segment_ms) < 0 ||
            al_ll(config, N_timestamp_before_max_ms, &v.before) < 0 ||
            al_ll(config, N_timestamp_after_max_ms, &v.after) < 0 ||
            al_ll(config, N_max_message_bytes, &v.max_message_bytes) < 0 ||
            (v.compact = al_true(config, N_compact)) < 0 ||
            (v.plain_appends = al_true(config, N_plain_appends)) < 0)
            return -1;
        config_read = v;
        Py_XSETREF(config_seen, Py_NewRef(config));
    }
    *c = config_read;
    return 0;
}

#define RECENT 16  /* (direct-mapped: one compare a lookup) */
static PyObject *recent[RECENT];
static long long recent_value[RECENT];

/* (an append makes its last offset, max timestamp, end offset and position an int each for
 * several objects: one int each, kept until a value of the same slot replaces it; ints are
 * immutable) */
PyObject *
al_long(long long v)
{
    if (v >= -5 && v <= 256)
        return PyLong_FromLongLong(v);  /* (the interpreter's own) */
    unsigned int at = (unsigned int)(((unsigned long long)v * 0x9E3779B97F4A7C15ULL) >> 60);
    if (recent[at] != NULL && recent_value[at] == v)
        return Py_NewRef(recent[at]);
    PyObject *o = PyLong_FromLongLong(v);
    if (o != NULL) {
        Py_XSETREF(recent[at], Py_NewRef(o));
        recent_value[at] = v;
    }
    return o;
}

/* o.<name>.<name2> */
PyObject *
al_attr2(PyObject *o, int name, int name2)
{
    PyObject *v = al_get(o, name);
    if (v == NULL)
        return NULL;
    PyObject *w = al_get(v, name2);
    Py_DECREF(v);
    return w;
}

/* maker(a, b[, c...]) of long longs */
PyObject *
al_make(PyObject *maker, const long long *values, Py_ssize_t n)
{
    PyObject *args[8] = {NULL};
    if (n > 8) {
        PyErr_SetString(PyExc_ValueError, "al_make: at most 8 values");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        args[i] = al_long(values[i]);
        if (args[i] == NULL) {
            while (i-- > 0)
                Py_DECREF(args[i]);
            return NULL;
        }
    }
    PyObject *out = PyObject_Vectorcall(maker, args, (size_t)n, NULL);
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(args[i]);
    return out;
}
