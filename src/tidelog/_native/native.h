/* Functions of tidelog._native._core defined outside _core.c. */
#ifndef TIDELOG_NATIVE_H
#define TIDELOG_NATIVE_H

#include <Python.h>

/* offset_map.c: storage/cleaner/offset_map.py SkimpyOffsetMap.put/get's slot work */
PyObject *tl_omap_put(PyObject *self, PyObject *args);
PyObject *tl_omap_get(PyObject *self, PyObject *args);
PyObject *tl_md5(PyObject *self, PyObject *arg);
PyObject *tl_omap_put_records(PyObject *self, PyObject *args);
PyObject *tl_omap_get_many(PyObject *self, PyObject *args);
PyObject *tl_md5_many(PyObject *self, PyObject *keys);

/* recovery.c: storage/recovery_scan.py scan_run_py (LogSegment.recover's fast path) */
PyObject *tl_recover_scan(PyObject *self, PyObject *args);
void tl_recovery_init(void);

#endif
