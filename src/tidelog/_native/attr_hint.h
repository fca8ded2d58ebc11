/* Attribute reads and writes by name that skip the generic lookup where the interpreter's
 * own specialised loads would (attr_hint.c): a __slots__ member read at its offset, an
 * instance attribute read in the instance's dict, as long as the type is unchanged (its
 * version tag) and has no data descriptor of that name (in 3.11 at the entry where it was
 * found last, as the interpreter's LOAD_ATTR_WITH_HINT); the generic lookup otherwise.
 * Each name keeps hints for the last two types it was read on. */
#ifndef TIDELOG_ATTR_HINT_H
#define TIDELOG_ATTR_HINT_H

#include <Python.h>
#include <stdint.h>

#include "append_leader.h"

enum { AH_GENERIC, AH_SLOT, AH_DICT };

typedef struct {
    PyTypeObject *type;
    unsigned int version;
    int kind, settable;
    Py_ssize_t offset; /* AH_SLOT: the member's; AH_DICT: the name's entry last found */
} ah_hint;

typedef struct {
    PyObject *name; /* interned */
    ah_hint h[2];
} ah_name;

/* names[i].name interned from texts[i] (once): 0, -1 */
int ah_intern(ah_name *names, const char *const *texts, int n);
/* o.<name> (a new reference), o.<name> = v (0, -1) */
PyObject *ah_get_full(PyObject *o, ah_name *name);
int ah_set(PyObject *o, ah_name *name, PyObject *v);
/* o.<a>.<b>; o.<name> is None (1, 0, -1); its truth (1, 0, -1); as a long long (0, -1);
 * len(o.<a>.<b>) (0, -1); o.<a> <op> p.<b> (1, 0, -1) */
PyObject *ah_get2(PyObject *o, ah_name *a, ah_name *b);
int ah_is_none_full(PyObject *o, ah_name *name);
int ah_truth_full(PyObject *o, ah_name *name);
int ah_ll_full(PyObject *o, ah_name *name, long long *out);
int ah_len2(PyObject *o, ah_name *a, ah_name *b, long long *out);
int ah_compare(PyObject *o, ah_name *a, PyObject *p, ah_name *b, int op);
/* o.<name> = value, an int (0, -1) */
int ah_set_ll(PyObject *o, ah_name *name, long long value);

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* 3.11's dict keys (Include/internal/pycore_dict.h: _dictkeysobject, PyDictUnicodeEntry),
 * read only to find an entry by its position, its key checked to be the name itself. */
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size, dk_log2_index_bytes, dk_kind;
    uint32_t dk_version;
    Py_ssize_t dk_usable, dk_nentries;
    char dk_indices[];
} ah_keys311;

typedef struct {
    PyObject *me_key, *me_value;
} ah_unicode_entry311;

#define AH_KEYS_GENERAL 0

/* d's entries, *n of them, when its keys are a str-keyed table; NULL for a general one */
static inline const ah_unicode_entry311 *
ah_entries(const PyDictObject *d, Py_ssize_t *n)
{
    const ah_keys311 *k = (const ah_keys311 *)d->ma_keys;
    *n = k->dk_nentries;
    return k->dk_kind == AH_KEYS_GENERAL ? NULL
        : (const ah_unicode_entry311 *)(k->dk_indices + ((size_t)1 << k->dk_log2_index_bytes));
}

/* The value at entry i of d (borrowed) when that entry's key is name itself in a str-keyed
 * table; NULL otherwise (another key, a general table, no value there). */
static inline PyObject *
ah_entry(const PyDictObject *d, Py_ssize_t i, PyObject *name)
{
    Py_ssize_t n;
    const ah_unicode_entry311 *e = ah_entries(d, &n);
    if (e == NULL || i < 0 || i >= n || e[i].me_key != name)
        return NULL;
    return d->ma_values != NULL ? ((PyObject **)d->ma_values)[i] : e[i].me_value;
}
#endif

/* o.<name> borrowed where the name's first hint is o's type's and reads it in a step or
 * two (a slot; in 3.11 an instance dict's entry where the name was found last), else NULL
 * (nothing known: the full lookup). A type changed since has another version tag (3.11
 * sets a modified type's to 0, which no hint holds). */
static inline PyObject *
ah_peek(PyObject *o, ah_name *name)
{
    PyTypeObject *tp = Py_TYPE(o);
    const ah_hint *h = &name->h[0];
    if (h->type != tp || h->version != tp->tp_version_tag || h->version == 0)
        return NULL;
    if (h->kind == AH_SLOT)
        return *(PyObject **)((char *)o + h->offset);
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (h->kind == AH_DICT && (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
        PyDictObject *d = (PyDictObject *)((PyObject **)o)[-3]; /* (its managed dict) */
        return d == NULL || !PyDict_CheckExact(d) ? NULL : ah_entry(d, h->offset, name->name);
    }
#endif
    return NULL;
}

/* o.<name> (a new reference) */
static inline PyObject *
ah_get(PyObject *o, ah_name *name)
{
    PyObject *v = ah_peek(o, name);
    return v != NULL ? Py_NewRef(v) : ah_get_full(o, name);
}

/* o.<name> is None (1, 0, -1) */
static inline int
ah_is_none(PyObject *o, ah_name *name)
{
    PyObject *v = ah_peek(o, name);
    return v != NULL ? v == Py_None : ah_is_none_full(o, name);
}

/* o.<name>'s truth (1, 0, -1): True, False and None read without a call, a builtin number
 * or container tested without a reference (no Python code runs); anything else tested
 * holding one (its __bool__ may drop the attribute) */
static inline int
ah_truth(PyObject *o, ah_name *name)
{
    PyObject *v = ah_peek(o, name);
    if (v == Py_True)
        return 1;
    if (v == Py_False || v == Py_None)
        return 0;
    if (v != NULL && (PyLong_CheckExact(v) || PyFloat_CheckExact(v) || PyList_CheckExact(v) ||
                      PyTuple_CheckExact(v) || PyDict_CheckExact(v) ||
                      PyByteArray_CheckExact(v)))
        return PyObject_IsTrue(v);
    return ah_truth_full(o, name);
}

/* o.<name> as a long long (0, -1): an int read without a reference (al_as_ll; anything
 * else converted holding one: its __index__ may drop the attribute) */
static inline int
ah_ll(PyObject *o, ah_name *name, long long *out)
{
    PyObject *v = ah_peek(o, name);
    if (v == NULL || !PyLong_CheckExact(v))
        return ah_ll_full(o, name, out);
    *out = al_as_ll(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

#endif
