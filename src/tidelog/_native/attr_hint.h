/* Attribute reads and writes by name that skip the generic lookup where the interpreter's
 * own specialised loads would (attr_hint.c): a __slots__ member read at its offset, an
 * instance attribute read in the instance's dict, as long as the type is unchanged (its
 * version tag) and has no data descriptor of that name (in 3.11 at the entry where it was
 * found last, as the interpreter's LOAD_ATTR_WITH_HINT); the generic lookup otherwise.
 * Each name keeps hints for the last two types it was read on. */
#ifndef TIDELOG_ATTR_HINT_H
#define TIDELOG_ATTR_HINT_H

#include <Python.h>

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
PyObject *ah_get(PyObject *o, ah_name *name);
int ah_set(PyObject *o, ah_name *name, PyObject *v);
/* o.<a>.<b>; o.<name> is None (1, 0, -1); its truth (1, 0, -1); as a long long (0, -1);
 * len(o.<a>.<b>) (0, -1); o.<a> <op> p.<b> (1, 0, -1) */
PyObject *ah_get2(PyObject *o, ah_name *a, ah_name *b);
int ah_is_none(PyObject *o, ah_name *name);
int ah_truth(PyObject *o, ah_name *name);
int ah_ll(PyObject *o, ah_name *name, long long *out);
int ah_len2(PyObject *o, ah_name *a, ah_name *b, long long *out);
int ah_compare(PyObject *o, ah_name *a, PyObject *p, ah_name *b, int op);
/* o.<name> = value, an int (0, -1) */
int ah_set_ll(PyObject *o, ah_name *name, long long value);

#endif
