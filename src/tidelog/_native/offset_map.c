/* tidelog._native._core, the cleaner's offset map: SkimpyOffsetMap's slot work (MD5: md5.c).
 * Twin of storage/cleaner/offset_map.py (see _core.c for the module). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

/* -- the cleaner's offset map (storage/cleaner/offset_map.py SkimpyOffsetMap) ------------- */

#define OMAP_HASH 16
#define OMAP_ENTRY 24
#define OMAP_WINDOWS (OMAP_HASH - 4)

static inline uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const uint8_t omap_empty[OMAP_HASH] = {0};

/* SkimpyOffsetMap._find: the digest's slot (found=1), else the first empty one (found=0),
 * else -1; *probes as the twin adds to its probe count. */
static long long
omap_find(const uint8_t *buf, long long slots, const uint8_t *digest, int *found,
          long long *probes)
{
    long long pos = (long long)(be32(digest) % (uint64_t)slots) * OMAP_ENTRY;
    *probes = 0;
    if (memcmp(buf + pos, digest, OMAP_HASH) == 0) { *found = 1; return pos; }
    if (memcmp(buf + pos, omap_empty, OMAP_HASH) == 0) { *found = 0; return pos; }
    uint64_t last = be32(digest + OMAP_WINDOWS);
    for (long long attempt = 1; attempt < slots + OMAP_WINDOWS; attempt++) {
        uint64_t slot = attempt < OMAP_WINDOWS
            ? be32(digest + attempt) % (uint64_t)slots
            : (last + (uint64_t)(attempt - OMAP_WINDOWS)) % (uint64_t)slots;
        pos = (long long)slot * OMAP_ENTRY;
        int hit = memcmp(buf + pos, digest, OMAP_HASH) == 0;
        if (hit || memcmp(buf + pos, omap_empty, OMAP_HASH) == 0) {
            *probes = attempt;
            *found = hit;
            return pos;
        }
    }
    *probes = slots + OMAP_WINDOWS;
    *found = 0;
    return -1;
}

long long
tl_omap_find(const uint8_t *buf, long long slots, const uint8_t *digest, int *found,
             long long *probes)
{
    return omap_find(buf, slots, digest, found, probes);
}

/* Buffers of one call: the map (writable) and the key. */
/* The map's slot buffer, checked against its slot count; -1 with an exception set. */
int
tl_omap_map_buffer(PyObject *map, Py_buffer *mb, long long slots, int writable)
{
    if (PyObject_GetBuffer(map, mb, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (slots < 1 || mb->len < slots * OMAP_ENTRY) {
        PyBuffer_Release(mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return -1;
    }
    return 0;
}

static int
omap_buffers(PyObject *map, PyObject *key, long long slots, int writable, Py_buffer *mb,
             Py_buffer *kb)
{
    if (tl_omap_map_buffer(map, mb, slots, writable) < 0)
        return -1;
    if (PyObject_GetBuffer(key, kb, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(mb);
        return -1;
    }
    return 0;
}


PyObject *
tl_omap_put(PyObject *self, PyObject *args)
{
    PyObject *map, *key;
    long long slots, offset;
    if (!PyArg_ParseTuple(args, "OLOL:omap_put", &map, &slots, &key, &offset))
        return NULL;
    Py_buffer mb, kb;
    if (omap_buffers(map, key, slots, 1, &mb, &kb) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    tl_md5_digest((const uint8_t *)kb.buf, (size_t)kb.len, digest);
    uint8_t *buf = (uint8_t *)mb.buf;
    int found;
    long long probes, pos = omap_find(buf, slots, digest, &found, &probes);
    if (pos >= 0) {
        if (!found)
            memcpy(buf + pos, digest, OMAP_HASH);
        uint64_t v = (uint64_t)offset;
        for (int i = 0; i < 8; i++)
            buf[pos + OMAP_HASH + i] = (uint8_t)(v >> (56 - 8 * i));
    }
    PyBuffer_Release(&kb);
    PyBuffer_Release(&mb);
    return Py_BuildValue("LNL", pos, PyBool_FromLong(found), probes);
}


PyObject *
tl_omap_get(PyObject *self, PyObject *args)
{
    PyObject *map, *key;
    long long slots;
    if (!PyArg_ParseTuple(args, "OLO:omap_get", &map, &slots, &key))
        return NULL;
    Py_buffer mb, kb;
    if (omap_buffers(map, key, slots, 0, &mb, &kb) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    tl_md5_digest((const uint8_t *)kb.buf, (size_t)kb.len, digest);
    const uint8_t *buf = (const uint8_t *)mb.buf;
    int found;
    long long probes, pos = omap_find(buf, slots, digest, &found, &probes);
    long long offset = -1;
    if (pos >= 0 && found) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = v << 8 | buf[pos + OMAP_HASH + i];
        offset = (long long)v;
    }
    PyBuffer_Release(&kb);
    PyBuffer_Release(&mb);
    return Py_BuildValue("LL", offset, probes);
}


PyObject *
tl_md5(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint8_t digest[OMAP_HASH];
    tl_md5_digest((const uint8_t *)b.buf, (size_t)b.len, digest);
    PyBuffer_Release(&b);
    return PyBytes_FromStringAndSize((const char *)digest, OMAP_HASH);
}

/* Digests of the keys of one call, computed before any slot is probed (lanes), with the
 * first slot of each prefetched: the probes then overlap their cache and TLB misses in a
 * map of up to hundreds of MiB instead of paying them one after another. */
typedef struct {
    uint8_t (*digest)[16];
    char *have; /* 1 where digest[i] holds key i's digest */
} digests;

static void
digests_free(digests *d)
{
    PyMem_Free(d->digest);
    PyMem_Free(d->have);
}

/* Hash the keys of ``n`` objects (``key_at`` picks each one's key, or NULL: none) that are
 * bytes; others are left to the caller's per-key path. -1 on memory error. */
static int
digests_fill(digests *d, PyObject *const *objs, Py_ssize_t n, PyObject *(*key_at)(PyObject *),
             const uint8_t *buf, long long slots)
{
    d->digest = PyMem_Malloc((size_t)(n ? n : 1) * 16);
    d->have = PyMem_Calloc((size_t)(n ? n : 1), 1);
    tl_key_ref *refs = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(tl_key_ref));
    Py_ssize_t *at = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    uint8_t (*tmp)[16] = PyMem_Malloc((size_t)(n ? n : 1) * 16);
    if (d->digest == NULL || d->have == NULL || refs == NULL || at == NULL || tmp == NULL) {
        PyMem_Free(refs);
        PyMem_Free(at);
        PyMem_Free(tmp);
        digests_free(d);
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = key_at(objs[i]);
        if (key != NULL && PyBytes_CheckExact(key)) {
            refs[k].p = (const uint8_t *)PyBytes_AS_STRING(key);
            refs[k].n = (size_t)PyBytes_GET_SIZE(key);
            at[k++] = i;
        }
    }
    tl_md5_keys(refs, k, tmp);
    for (Py_ssize_t j = 0; j < k; j++) {
        memcpy(d->digest[at[j]], tmp[j], 16);
        d->have[at[j]] = 1;
        __builtin_prefetch(buf + (be32(tmp[j]) % (uint64_t)slots) * OMAP_ENTRY);
    }
    PyMem_Free(refs);
    PyMem_Free(at);
    PyMem_Free(tmp);
    return 0;
}

static PyObject *
key_itself(PyObject *o)
{
    return o;
}

static PyObject *
record_key(PyObject *rec)
{
    return PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) >= 3 ? PyTuple_GET_ITEM(rec, 2) : NULL;
}

/* SkimpyOffsetMap.put_records: the cleaner's map loop over one batch's ScannedRecords (offset
 * at index 0, key at 2). Returns (read, full, added, probes, lookups, latest, positions,
 * overflow): ``positions`` of new slots while ``track`` allows, ``latest`` None if no put,
 * ``overflow`` 1 when a put found no empty slot (the twin raises OffsetMapFullError there),
 * 2 at an offset beyond int64 (the caller goes on in Python from record ``read``). */
PyObject *
tl_omap_put_records(PyObject *self, PyObject *args)
{
    PyObject *map, *records;
    long long slots, start, entries, max_entries, track;
    if (!PyArg_ParseTuple(args, "OLO!LLLL:omap_put_records", &map, &slots, &PyList_Type,
                          &records, &start, &entries, &max_entries, &track))
        return NULL;
    Py_buffer mb;
    if (tl_omap_map_buffer(map, &mb, slots, 1) < 0)
        return NULL;
    uint8_t *buf = (uint8_t *)mb.buf;
    Py_ssize_t n = PyList_GET_SIZE(records), read = 0;
    digests dg;
    if (digests_fill(&dg, ((PyListObject *)records)->ob_item, n, record_key, buf, slots) < 0) {
        PyBuffer_Release(&mb);
        return NULL;
    }
    PyObject *positions = PyList_New(0);
    long long added = 0, probes = 0, lookups = 0, latest = 0;
    int full = 0, overflow = 0, any = 0;
    for (; positions != NULL && read < n; read++) {
        PyObject *rec = PyList_GET_ITEM(records, read);
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 3) {
            PyErr_SetString(PyExc_TypeError, "records must be ScannedRecord tuples");
            Py_CLEAR(positions);
            break;
        }
        PyObject *key = PyTuple_GET_ITEM(rec, 2);
        if (key == Py_None)
            continue;
        long long offset = PyLong_AsLongLong(PyTuple_GET_ITEM(rec, 0));
        if (offset == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                Py_CLEAR(positions);
                break;
            }
            PyErr_Clear(); /* beyond int64: the Python twin goes on from this record */
            overflow = 2;
            break;
        }
        if (offset < start)
            continue;
        if (entries + added >= max_entries) {
            full = 1;
            break;
        }
        uint8_t digest[OMAP_HASH];
        if (dg.have[read]) {
            memcpy(digest, dg.digest[read], OMAP_HASH);
        } else {
            Py_buffer kb;
            if (PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE) < 0) {
                Py_CLEAR(positions);
                break;
            }
            tl_md5_digest((const uint8_t *)kb.buf, (size_t)kb.len, digest);
            PyBuffer_Release(&kb);
        }
        int found;
        long long p, pos = omap_find(buf, slots, digest, &found, &p);
        lookups++;
        probes += p;
        if (pos < 0) {
            overflow = 1;
            break;
        }
        if (!found) {
            memcpy(buf + pos, digest, OMAP_HASH);
            added++;
            if (entries + added <= track) {
                PyObject *v = PyLong_FromLongLong(pos);
                if (v == NULL || PyList_Append(positions, v) < 0) {
                    Py_XDECREF(v);
                    Py_CLEAR(positions);
                    break;
                }
                Py_DECREF(v);
            }
        }
        uint64_t v = (uint64_t)offset;
        for (int i = 0; i < 8; i++)
            buf[pos + OMAP_HASH + i] = (uint8_t)(v >> (56 - 8 * i));
        latest = offset;
        any = 1;
    }
    digests_free(&dg);
    PyBuffer_Release(&mb);
    if (positions == NULL)
        return NULL;
    PyObject *lat = any ? PyLong_FromLongLong(latest) : (Py_INCREF(Py_None), Py_None);
    return Py_BuildValue("nNLLLNNi", read, PyBool_FromLong(full), added, probes, lookups, lat,
                         positions, overflow);
}

/* SkimpyOffsetMap.get_many: get() for each key (bytes) of a list; (offsets, probes). */
PyObject *
tl_omap_get_many(PyObject *self, PyObject *args)
{
    PyObject *map, *keys;
    long long slots;
    if (!PyArg_ParseTuple(args, "OLO!:omap_get_many", &map, &slots, &PyList_Type, &keys))
        return NULL;
    Py_buffer mb;
    if (tl_omap_map_buffer(map, &mb, slots, 0) < 0)
        return NULL;
    const uint8_t *buf = (const uint8_t *)mb.buf;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    digests dg;
    if (digests_fill(&dg, ((PyListObject *)keys)->ob_item, n, key_itself, buf, slots) < 0) {
        PyBuffer_Release(&mb);
        return NULL;
    }
    PyObject *out = PyList_New(n);
    long long probes = 0;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        uint8_t digest[OMAP_HASH];
        if (dg.have[i]) {
            memcpy(digest, dg.digest[i], OMAP_HASH);
        } else {
            Py_buffer kb;
            if (PyObject_GetBuffer(PyList_GET_ITEM(keys, i), &kb, PyBUF_SIMPLE) < 0) {
                Py_CLEAR(out);
                break;
            }
            tl_md5_digest((const uint8_t *)kb.buf, (size_t)kb.len, digest);
            PyBuffer_Release(&kb);
        }
        int found;
        long long p, pos = omap_find(buf, slots, digest, &found, &p), offset = -1;
        probes += p;
        if (pos >= 0 && found) {
            uint64_t v = 0;
            for (int j = 0; j < 8; j++)
                v = v << 8 | buf[pos + OMAP_HASH + j];
            offset = (long long)v;
        }
        PyObject *o = PyLong_FromLongLong(offset);
        if (o == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, o);
    }
    digests_free(&dg);
    PyBuffer_Release(&mb);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("NL", out, probes);
}

/* md5_many(keys) -> digests: the lanes' MD5 of each bytes key (tests hold it to hashlib). */
PyObject *
tl_md5_many(PyObject *self, PyObject *keys)
{
    if (!PyList_Check(keys)) {
        PyErr_SetString(PyExc_TypeError, "md5_many takes a list of bytes");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyBytes_CheckExact(PyList_GET_ITEM(keys, i))) {
            PyErr_SetString(PyExc_TypeError, "md5_many takes a list of bytes");
            return NULL;
        }
    static const uint8_t one_slot[OMAP_ENTRY] = {0};
    digests dg;
    if (digests_fill(&dg, ((PyListObject *)keys)->ob_item, n, key_itself, one_slot, 1) < 0)
        return NULL;
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)dg.digest[i], OMAP_HASH);
        if (b == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, b);
    }
    digests_free(&dg);
    return out;
}

/* SkimpyOffsetMap.clear's loop while few slots are used: zero the slot at each byte position
 * of ``positions`` (an array of int64, the slots the map recorded as it filled them). */
PyObject *
tl_omap_clear(PyObject *self, PyObject *args)
{
    PyObject *map, *positions;
    if (!PyArg_ParseTuple(args, "OO:omap_clear", &map, &positions))
        return NULL;
    Py_buffer mb, pb;
    if (PyObject_GetBuffer(map, &mb, PyBUF_WRITABLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(positions, &pb, PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&mb);
        return NULL;
    }
    int ok = pb.itemsize == 8 && pb.format != NULL && (strcmp(pb.format, "q") == 0 ||
                                                        strcmp(pb.format, "l") == 0);
    const int64_t *pos = (const int64_t *)pb.buf;
    Py_ssize_t n = ok ? pb.len / 8 : 0;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = pos[i] >= 0 && pos[i] <= mb.len - OMAP_ENTRY;
    if (ok)
        for (Py_ssize_t i = 0; i < n; i++)
            memset((uint8_t *)mb.buf + pos[i], 0, OMAP_ENTRY);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&mb);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "positions must be int64 slot positions in the map");
        return NULL;
    }
    Py_RETURN_NONE;
}
