/* A maker of one class's instances that skips its Python __init__ (util/slotted.py
 * slotted_maker_py is its twin: the class itself). Two kinds of class are taken:
 *
 * - a slotted dataclass (``@dataclass(slots=True)``, no __post_init__, no __dict__) whose
 *   __init__ only stores its fields, in the order of ``__slots__``: allocated and its slots
 *   filled from the positional arguments, the fields left out from their defaults (a
 *   default_factory is called, as __init__ calls it);
 * - a named tuple (a tuple subclass with ``_fields``, no extra storage): the tuple
 *   allocated with its fields, the ones left out from ``_field_defaults``. One whose fields
 *   are all atoms (ints, strings, None: nothing the cycle collector looks into) is untracked
 *   by it at once, as CPython untracks an exact tuple of atoms at its first collection (a
 *   tuple subclass it never untracks). The per-append ones (a producer's last batches, a
 *   segment's max timestamp, a log's end offset) live until later appends to the same
 *   partition replace them: over many partitions, thousands of requests, so tracked they
 *   were carried through the young collections into the old generation.
 *
 * Any call the maker cannot make as the class would (keywords, too few or too many
 * arguments) is handed to the class itself, which then raises its own TypeError. A class
 * of neither kind is not bound: ``slotted_maker`` returns the class.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "native.h"

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    int is_tuple;
    Py_ssize_t n;         /* fields */
    Py_ssize_t required;  /* the first ``required`` fields have no default */
    Py_ssize_t *offset;   /* dataclass: each field's slot offset */
    PyObject **fallback;  /* each field's default (NULL: required), or its factory */
    char *factory;        /* whether fallback[i] is a factory to call */
} maker_object;

static void
maker_dealloc(maker_object *m)
{
    PyObject_GC_UnTrack(m);
    Py_XDECREF(m->cls);
    if (m->fallback != NULL) {
        for (Py_ssize_t i = 0; i < m->n; i++)
            Py_XDECREF(m->fallback[i]);
    }
    PyMem_Free(m->offset);
    PyMem_Free(m->fallback);
    PyMem_Free(m->factory);
    PyObject_GC_Del(m);
}

static int
maker_traverse(maker_object *m, visitproc visit, void *arg)
{
    Py_VISIT(m->cls);
    if (m->fallback != NULL) {
        for (Py_ssize_t i = 0; i < m->n; i++)
            Py_VISIT(m->fallback[i]);
    }
    return 0;
}

/* Whether the cycle collector may need to see ``v``: CPython's _PyObject_GC_MAY_BE_TRACKED
 * (an exact tuple it has already untracked holds atoms only), an int answered first (the
 * fields of the per-append tuples are ints: no call for them). */
static inline int
may_be_tracked(PyObject *v)
{
    return !PyLong_CheckExact(v) && PyObject_IS_GC(v) &&
           (!PyTuple_CheckExact(v) || PyObject_GC_IsTracked(v));
}

static PyObject *
maker_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    maker_object *m = (maker_object *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL || nargs < m->required || nargs > m->n)
        return PyObject_Vectorcall((PyObject *)m->cls, args, nargsf, kwnames);
    PyObject *values[64]; /* (bound only for at most 64 fields) */
    Py_ssize_t i;
    for (i = 0; i < nargs; i++)
        values[i] = Py_NewRef(args[i]);
    for (; i < m->n; i++) {
        values[i] = m->factory[i] ? PyObject_CallNoArgs(m->fallback[i])
                                  : Py_NewRef(m->fallback[i]);
        if (values[i] == NULL) {
            while (--i >= 0)
                Py_DECREF(values[i]);
            return NULL;
        }
    }
    PyObject *o = m->cls->tp_alloc(m->cls, m->is_tuple ? m->n : 0);
    if (o == NULL) {
        for (i = 0; i < m->n; i++)
            Py_DECREF(values[i]);
        return NULL;
    }
    if (m->is_tuple) {
        int atoms = 1;
        for (i = 0; i < m->n; i++) {
            PyTuple_SET_ITEM(o, i, values[i]);
            atoms &= !may_be_tracked(values[i]);
        }
        if (atoms)
            PyObject_GC_UnTrack(o);
    } else {
        for (i = 0; i < m->n; i++)
            *(PyObject **)((char *)o + m->offset[i]) = values[i];
    }
    return o;
}

static PyObject *
maker_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

static PyObject *
maker_repr(maker_object *m)
{
    return PyUnicode_FromFormat("<slotted maker of %s>", m->cls->tp_name);
}

static PyTypeObject maker_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tidelog._native._core.SlottedMaker",
    .tp_basicsize = sizeof(maker_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(maker_object, vectorcall),
    .tp_call = maker_call,
    .tp_dealloc = (destructor)maker_dealloc,
    .tp_traverse = (traverseproc)maker_traverse,
    .tp_repr = (reprfunc)maker_repr,
    .tp_doc = "A class's instances made without its Python __init__ (util/slotted.py).",
};

/* Whether ``cls.__init__`` is the one @dataclass wrote (its code made from a string) taking
 * exactly the ``n`` fields positionally. */
static int
generated_init(PyObject *cls, Py_ssize_t n)
{
    PyObject *init = PyObject_GetAttrString(cls, "__init__");
    PyObject *code = init != NULL && PyFunction_Check(init) ? PyFunction_GET_CODE(init) : NULL;
    int ok = 0;
    if (code != NULL && PyCode_Check(code)) {
        PyCodeObject *co = (PyCodeObject *)code;
        ok = co->co_argcount == n + 1 && co->co_kwonlyargcount == 0 &&
             !(co->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) &&
             PyUnicode_CompareWithASCIIString(co->co_filename, "<string>") == 0;
    }
    Py_XDECREF(init);
    PyErr_Clear();
    return ok;
}

/* The dataclass's field defaults in ``m``, its fields ``names`` (``__slots__``, which must
 * be ``dataclasses.fields(cls)`` in order): 1, 0 (not bindable), -1. */
static int
dataclass_defaults(maker_object *m, PyObject *cls, PyObject *names)
{
    PyObject *dataclasses = PyImport_ImportModule("dataclasses");
    PyObject *missing = NULL, *fields = NULL;
    int ok = 0;
    if (dataclasses == NULL)
        goto fail;
    missing = PyObject_GetAttrString(dataclasses, "MISSING");
    if (missing == NULL)
        goto fail;
    if (!PyObject_HasAttrString(cls, "__dataclass_fields__") || !generated_init(cls, m->n))
        goto done;
    fields = PyObject_CallMethod(dataclasses, "fields", "O", cls);
    if (fields == NULL)
        goto fail;
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != m->n)
        goto done;
    ok = 1;
    m->required = 0;
    for (Py_ssize_t i = 0; ok && i < m->n; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        PyObject *name = PyObject_GetAttrString(f, "name");
        PyObject *init = PyObject_GetAttrString(f, "init");
        PyObject *kw_only = PyObject_GetAttrString(f, "kw_only");
        PyObject *d = PyObject_GetAttrString(f, "default");
        PyObject *fac = PyObject_GetAttrString(f, "default_factory");
        if (name == NULL || init == NULL || kw_only == NULL || d == NULL || fac == NULL) {
            ok = -1;
        } else if (PyUnicode_Compare(name, PyTuple_GET_ITEM(names, i)) != 0 ||
                   init != Py_True || kw_only == Py_True) {
            ok = 0;
        } else if (d != missing) {
            m->fallback[i] = Py_NewRef(d);
        } else if (fac != missing) {
            m->fallback[i] = Py_NewRef(fac);
            m->factory[i] = 1;
        } else if (m->required == i) {
            m->required = i + 1;
        } else {
            ok = 0; /* (a required field after a defaulted one: not a dataclass __init__) */
        }
        Py_XDECREF(name);
        Py_XDECREF(init);
        Py_XDECREF(kw_only);
        Py_XDECREF(d);
        Py_XDECREF(fac);
    }
    if (ok < 0)
        goto fail;
    goto done;
fail:
    ok = -1;
done:
    Py_XDECREF(fields);
    Py_XDECREF(dataclasses);
    Py_XDECREF(missing);
    return ok;
}

/* The slot offsets of a slotted dataclass's fields ``names``: 1, 0 (not bindable). */
static int
slot_offsets(maker_object *m, PyObject *cls, PyObject *names)
{
    for (Py_ssize_t i = 0; i < m->n; i++) {
        PyObject *d = PyObject_GetAttr(cls, PyTuple_GET_ITEM(names, i));
        if (d == NULL) {
            PyErr_Clear();
            return 0;
        }
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok)
            m->offset[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok)
            return 0;
    }
    return 1;
}

/* Named tuple defaults: the last fields' from ``_field_defaults``: 1, 0, -1. */
static int
tuple_defaults(maker_object *m, PyObject *cls, PyObject *names)
{
    PyObject *defaults = PyObject_GetAttrString(cls, "_field_defaults");
    if (defaults == NULL || !PyDict_Check(defaults)) {
        Py_XDECREF(defaults);
        PyErr_Clear();
        return 0;
    }
    int ok = 1;
    m->required = 0;
    for (Py_ssize_t i = 0; i < m->n; i++) {
        PyObject *d = PyDict_GetItemWithError(defaults, PyTuple_GET_ITEM(names, i));
        if (d != NULL) {
            m->fallback[i] = Py_NewRef(d);
        } else if (PyErr_Occurred()) {
            ok = -1;
            break;
        } else if (m->required == i) {
            m->required = i + 1;
        } else {
            ok = 0;
            break;
        }
    }
    Py_DECREF(defaults);
    return ok;
}

/* 1: ``cls`` has an attribute ``name`` of its own, not ``base``'s (a method the maker
 * would skip). */
static int
defines(PyObject *cls, const char *name, PyTypeObject *base)
{
    PyObject *mine = PyObject_GetAttrString(cls, name);
    PyObject *theirs = PyObject_GetAttrString((PyObject *)base, name);
    int differs = mine != NULL && theirs != NULL && mine != theirs;
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    PyErr_Clear();
    return differs;
}

/* 1: ``cls.__new__`` is the one collections.namedtuple wrote (``tuple.__new__`` of its
 * ``n`` fields, made in a namespace named ``namedtuple_<typename>``). */
static int
namedtuple_new(PyObject *cls, Py_ssize_t n)
{
    PyObject *fn = PyObject_GetAttrString(cls, "__new__");
    int ok = 0;
    if (fn != NULL && PyFunction_Check(fn)) {
        PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(fn);
        PyObject *module = PyDict_GetItemString(PyFunction_GET_GLOBALS(fn), "__name__");
        ok = co->co_argcount == n + 1 && co->co_kwonlyargcount == 0 &&
             !(co->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) && module != NULL &&
             PyUnicode_Check(module);
        if (ok) {
            PyObject *prefix = PyUnicode_FromString("namedtuple_");
            ok = prefix != NULL && PyUnicode_Tailmatch(module, prefix, 0, PY_SSIZE_T_MAX, -1) == 1;
            Py_XDECREF(prefix);
        }
    }
    Py_XDECREF(fn);
    PyErr_Clear();
    return ok;
}

PyObject *
tl_slotted_maker(PyObject *self, PyObject *cls)
{
    (void)self;
    if (!PyType_Check(cls))
        return Py_NewRef(cls);
    PyTypeObject *tp = (PyTypeObject *)cls;
    int is_tuple = PyType_IsSubtype(tp, &PyTuple_Type);
    PyObject *names = NULL;
    if (is_tuple) {
        if (tp->tp_basicsize != PyTuple_Type.tp_basicsize || tp->tp_dictoffset != 0 ||
            defines(cls, "__init__", &PyTuple_Type))
            return Py_NewRef(cls);
        names = PyObject_GetAttrString(cls, "_fields");
        if (names != NULL && (!PyTuple_Check(names) ||
                              !namedtuple_new(cls, PyTuple_GET_SIZE(names))))
            Py_CLEAR(names);
    } else {
        if (tp->tp_dictoffset != 0 || tp->tp_new != PyBaseObject_Type.tp_new ||
            PyObject_HasAttrString(cls, "__post_init__"))
            return Py_NewRef(cls);
        names = PyObject_GetAttrString(cls, "__slots__");
    }
    if (names == NULL) {
        PyErr_Clear();
        return Py_NewRef(cls);
    }
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) > 64) {
        Py_DECREF(names);
        return Py_NewRef(cls);
    }
    maker_object *m = PyObject_GC_New(maker_object, &maker_type);
    if (m == NULL) {
        Py_DECREF(names);
        return NULL;
    }
    m->vectorcall = maker_vectorcall;
    m->cls = (PyTypeObject *)Py_NewRef(cls);
    m->is_tuple = is_tuple;
    m->n = PyTuple_GET_SIZE(names);
    m->required = m->n;
    m->offset = PyMem_Calloc((size_t)m->n + 1, sizeof(Py_ssize_t));
    m->fallback = PyMem_Calloc((size_t)m->n + 1, sizeof(PyObject *));
    m->factory = PyMem_Calloc((size_t)m->n + 1, 1);
    PyObject_GC_Track(m);
    int ok;
    if (m->offset == NULL || m->fallback == NULL || m->factory == NULL) {
        PyErr_NoMemory();
        ok = -1;
    } else if (is_tuple) {
        ok = tuple_defaults(m, cls, names);
    } else {
        ok = slot_offsets(m, cls, names);
        if (ok == 1)
            ok = dataclass_defaults(m, cls, names);
    }
    Py_DECREF(names);
    if (ok == 1)
        return (PyObject *)m;
    Py_DECREF(m);
    return ok < 0 ? NULL : Py_NewRef(cls);
}

int
tl_slotted_ready(PyObject *module)
{
    (void)module;
    return PyType_Ready(&maker_type);
}
