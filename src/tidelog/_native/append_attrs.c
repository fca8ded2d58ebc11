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

al_slot_hint al_hints[N_COUNT];

/* al_slot_of's lookup for a type not seen (or changed) since: the hint learned. */
Py_ssize_t
al_learn_slot(PyObject *o, int name)
{
    PyTypeObject *tp = Py_TYPE(o);
    al_slot_hint *h = &al_hints[name];
    PyObject *d = _PyType_Lookup(tp, al_names[name]);  /* (borrowed; gives tp its version tag) */
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
        return -1;
    h->type = tp;
    h->version = tp->tp_version_tag;
    h->offset = -1;
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type && tp->tp_getattro ==
            PyObject_GenericGetAttr && tp->tp_setattro == PyObject_GenericSetAttr) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY))
            h->offset = m->offset;
    }
    return h->offset;
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
        args[i] = PyLong_FromLongLong(values[i]);
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
