/* tidelog._native._core, the cleaner's offset map: MD5 and SkimpyOffsetMap's slot work.
 * Twin of storage/cleaner/offset_map.py (see _core.c for the module). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

/* -- the cleaner's offset map (storage/cleaner/offset_map.py SkimpyOffsetMap) ------------- */

/* MD5 (RFC 1321), as hashlib.md5(key).digest(). */
static const uint32_t md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391};
static const uint8_t md5_r[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20,
    5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void
md5_block(uint32_t h[4], const uint8_t *p)
{
    uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
               (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        uint32_t t = d;
        d = c;
        c = b;
        uint32_t x = a + f + md5_k[i] + w[g];
        b = b + ((x << md5_r[i]) | (x >> (32 - md5_r[i])));
        a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

static void
md5(const uint8_t *data, size_t len, uint8_t out[16])
{
    uint32_t h[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    size_t full = len & ~(size_t)63;
    for (size_t i = 0; i < full; i += 64)
        md5_block(h, data + i);
    uint8_t tail[128] = {0};
    size_t rest = len - full;
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    size_t tlen = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tlen - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (tlen == 128)
        md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(h[i] >> (8 * j));
}

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

/* Buffers of one call: the map (writable) and the key. */
static int
omap_buffers(PyObject *map, PyObject *key, long long slots, int writable, Py_buffer *mb,
             Py_buffer *kb)
{
    if (PyObject_GetBuffer(map, mb, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (slots < 1 || mb->len < slots * OMAP_ENTRY) {
        PyBuffer_Release(mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return -1;
    }
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
    md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
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
    md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
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
    md5((const uint8_t *)b.buf, (size_t)b.len, digest);
    PyBuffer_Release(&b);
    return PyBytes_FromStringAndSize((const char *)digest, OMAP_HASH);
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
    if (PyObject_GetBuffer(map, &mb, PyBUF_WRITABLE) < 0)
        return NULL;
    if (slots < 1 || mb.len < slots * OMAP_ENTRY) {
        PyBuffer_Release(&mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return NULL;
    }
    uint8_t *buf = (uint8_t *)mb.buf;
    PyObject *positions = PyList_New(0);
    Py_ssize_t n = PyList_GET_SIZE(records), read = 0;
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
        Py_buffer kb;
        if (PyObject_GetBuffer(key, &kb, PyBUF_SIMPLE) < 0) {
            Py_CLEAR(positions);
            break;
        }
        uint8_t digest[OMAP_HASH];
        md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
        PyBuffer_Release(&kb);
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
    if (PyObject_GetBuffer(map, &mb, PyBUF_SIMPLE) < 0)
        return NULL;
    if (slots < 1 || mb.len < slots * OMAP_ENTRY) {
        PyBuffer_Release(&mb);
        PyErr_SetString(PyExc_ValueError, "offset map buffer smaller than its slots");
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)mb.buf;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *out = PyList_New(n);
    long long probes = 0;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_buffer kb;
        if (PyObject_GetBuffer(PyList_GET_ITEM(keys, i), &kb, PyBUF_SIMPLE) < 0) {
            Py_CLEAR(out);
            break;
        }
        uint8_t digest[OMAP_HASH];
        md5((const uint8_t *)kb.buf, (size_t)kb.len, digest);
        PyBuffer_Release(&kb);
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
    PyBuffer_Release(&mb);
    if (out == NULL)
        return NULL;
    return Py_BuildValue("NL", out, probes);
}
