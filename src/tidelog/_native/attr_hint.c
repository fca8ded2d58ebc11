/* Attribute reads and writes by name, specialised per type as the interpreter's loads are
 * (attr_hint.h). Python 3.11 reads an instance's dict through _PyObject_GetDictPtr (which
 * makes the dict of an instance that kept its values inline, as an attribute set from C
 * or vars() would); other versions take the generic lookup for dict attributes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "append_leader.h"
#include "attr_hint.h"
#include "native.h"

int
ah_intern(ah_name *names, const char *const *texts, int n)
{
    for (int i = 0; i < n; i++)
        if (names[i].name == NULL &&
            (names[i].name = PyUnicode_InternFromString(texts[i])) == NULL)
            return -1;
    return 0;
}

/* What o's type holds of <name>: a hint for it (the generic one when nothing is known). */
static ah_hint *
learn(PyObject *o, ah_name *name)
{
    static ah_hint generic = {NULL, 0, AH_GENERIC, 0, -1};
    PyTypeObject *tp = Py_TYPE(o);
    PyObject *d = _PyType_Lookup(tp, name->name); /* (borrowed; gives tp its version tag) */
    if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ||
        tp->tp_getattro != PyObject_GenericGetAttr)
        return &generic;
    int plain_set = tp->tp_setattro == PyObject_GenericSetAttr;
    ah_hint h = {tp, tp->tp_version_tag, AH_GENERIC, 0, -1};
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX) {
            h.kind = AH_SLOT;
            h.offset = m->offset;
            h.settable = !(m->flags & READONLY) && plain_set;
        }
    } else if ((d == NULL || Py_TYPE(d)->tp_descr_set == NULL) &&
               (tp->tp_dictoffset != 0 || PyType_HasFeature(tp, Py_TPFLAGS_MANAGED_DICT))) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        h.kind = AH_DICT;
        h.settable = plain_set;
#endif
    }
    name->h[1] = name->h[0];
    name->h[0] = h;
    return &name->h[0];
}

static inline ah_hint *
hint(PyObject *o, ah_name *name)
{
    PyTypeObject *tp = Py_TYPE(o);
    if (PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG)) {
        if (name->h[0].type == tp && name->h[0].version == tp->tp_version_tag)
            return &name->h[0];
        if (name->h[1].type == tp && name->h[1].version == tp->tp_version_tag)
            return &name->h[1];
    }
    return learn(o, name);
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* d[name] (borrowed) or NULL (an error set, or none): read at entry *at when its key is
 * name (a str key's table: ah_entry), else looked up and *at set to where it is. */
static PyObject *
dict_at(PyDictObject *d, PyObject *name, Py_ssize_t *at)
{
    PyObject *v = ah_entry(d, *at, name);
    if (v != NULL)
        return v;
    Py_ssize_t n, i = 0;
    const ah_unicode_entry311 *e = ah_entries(d, &n);
    while (e != NULL && i < n && e[i].me_key != name)
        i++;
    if (e != NULL && i < n && (v = ah_entry(d, *at = i, name)) != NULL)
        return v;
    return PyDict_GetItemWithError((PyObject *)d, name);
}
#else
static PyObject *
dict_at(PyDictObject *d, PyObject *name, Py_ssize_t *at)
{
    (void)at;
    return PyDict_GetItemWithError((PyObject *)d, name);
}
#endif

/* o's instance dict (borrowed), or NULL */
static inline PyObject *
dict_of(PyObject *o)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    PyObject **p = _PyObject_GetDictPtr(o);
    return p == NULL ? NULL : *p;
#else
    (void)o;
    return NULL;
#endif
}

PyObject *
ah_get_full(PyObject *o, ah_name *name)
{
    ah_hint *h = hint(o, name);
    PyObject *v = NULL;
    if (h->kind == AH_SLOT) {
        v = *(PyObject **)((char *)o + h->offset);
    } else if (h->kind == AH_DICT) {
        PyObject *d = dict_of(o);
        if (d != NULL && PyDict_CheckExact(d)) {
            v = dict_at((PyDictObject *)d, name->name, &h->offset);
            if (v == NULL && PyErr_Occurred())
                return NULL;
        }
    }
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(o, name->name);
}

int
ah_set(PyObject *o, ah_name *name, PyObject *v)
{
    ah_hint *h = hint(o, name);
    if (h->settable && h->kind == AH_SLOT) {
        PyObject **addr = (PyObject **)((char *)o + h->offset), *old = *addr;
        *addr = Py_NewRef(v);
        Py_XDECREF(old);
        return 0;
    }
    PyObject *d = h->settable && h->kind == AH_DICT ? dict_of(o) : NULL;
    if (d != NULL && PyDict_CheckExact(d))
        return PyDict_SetItem(d, name->name, v);
    return PyObject_SetAttr(o, name->name, v);
}

PyObject *
ah_get2(PyObject *o, ah_name *a, ah_name *b)
{
    PyObject *v = ah_get(o, a);
    if (v == NULL)
        return NULL;
    PyObject *w = ah_get(v, b);
    Py_DECREF(v);
    return w;
}

int
ah_is_none_full(PyObject *o, ah_name *name)
{
    PyObject *v = ah_get(o, name);
    if (v == NULL)
        return -1;
    int r = v == Py_None;
    Py_DECREF(v);
    return r;
}

int
ah_truth_full(PyObject *o, ah_name *name)
{
    PyObject *v = ah_get(o, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

int
ah_ll_full(PyObject *o, ah_name *name, long long *out)
{
    PyObject *v = ah_get(o, name);
    if (v == NULL)
        return -1;
    *out = al_as_ll(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

int
ah_len2(PyObject *o, ah_name *a, ah_name *b, long long *out)
{
    PyObject *v = ah_get2(o, a, b);
    if (v == NULL)
        return -1;
    Py_ssize_t k = PyObject_Size(v);
    Py_DECREF(v);
    *out = k;
    return k < 0 ? -1 : 0;
}

int
ah_compare(PyObject *o, ah_name *a, PyObject *p, ah_name *b, int op)
{
    PyObject *x = ah_get(o, a);
    if (x == NULL)
        return -1;
    PyObject *y = ah_get(p, b);
    int r = y == NULL ? -1 : PyObject_RichCompareBool(x, y, op);
    Py_DECREF(x);
    Py_XDECREF(y);
    return r;
}

int
ah_set_ll(PyObject *o, ah_name *name, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    int r = v == NULL ? -1 : ah_set(o, name, v);
    Py_XDECREF(v);
    return r;
}

/* METH_FASTCALL: attr_hint_read(o, name, how) -> o.<name> read as the native calls read it:
 * how 0 the value (ah_get), 1 its truth (ah_truth), 2 whether it is None (ah_is_none), 3 as
 * an int (ah_ll). Each name keeps its hints across calls (at most 16 names), so that a
 * test can hold the reads to getattr's while the objects and their types change
 * (tests/native/test_attr_hint.py). */
PyObject *
tl_attr_hint_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static ah_name names[16];
    (void)self;
    long how;
    if (nargs != 3 || !PyUnicode_CheckExact(args[1]) || (how = PyLong_AsLong(args[2])) < 0 ||
        how > 3) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "attr_hint_read(o, name: str, how: 0-3)");
        return NULL;
    }
    int i = 0;
    for (; i < 16 && names[i].name != NULL; i++)
        if (PyUnicode_Compare(names[i].name, args[1]) == 0)
            break;
    if (i == 16) {
        PyErr_SetString(PyExc_ValueError, "attr_hint_read keeps at most 16 names");
        return NULL;
    }
    if (names[i].name == NULL) {
        Py_INCREF(args[1]);
        PyObject *name = args[1];
        PyUnicode_InternInPlace(&name);
        names[i].name = name;
    }
    ah_name *n = &names[i];
    long long v;
    int r;
    switch (how) {
    case 0:
        return ah_get(args[0], n);
    case 1:
        r = ah_truth(args[0], n);
        return r < 0 ? NULL : PyBool_FromLong(r);
    case 2:
        r = ah_is_none(args[0], n);
        return r < 0 ? NULL : PyBool_FromLong(r);
    default:
        return ah_ll(args[0], n, &v) < 0 ? NULL : PyLong_FromLongLong(v);
    }
}
