/* tidelog._native._core: the cleaner's batch runs, twins of storage/cleaner/batch_runs.py
 * map_run_py and filter_run_py.
 *
 * A run walks the batches of a chunk of a segment as long as each one is *plain*: whole in
 * the chunk, a good header and CRC, neither transactional nor control, and records that the
 * strict walk below reads (varints as Kafka writes them); a compressed one is decompressed
 * (and a re-written one re-compressed) by the reference code's own codec functions, passed
 * in.  A plain batch is mapped (pass 1) or filtered (pass 2: dropped, copied or re-written)
 * here without a Python object per record; the run stops *before* the first batch it does
 * not take, which the cleaner hands to its reference per-batch code (errors, transactions,
 * headers of emptied batches).  A run never raises for what it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"
#include "cleaner_plain.h"

/* What both passes check first: the codecs, the offset into the chunk, the map's buffer.
 * 0/1 (codecs given) or -1 with an exception set and ``view`` released. */
static int
run_buffers(Py_buffer *view, Py_ssize_t off, PyObject *map, long long slots, int writable,
            PyObject *codecs, Py_buffer *mb)
{
    int with_codecs = tl_codecs_arg(codecs);
    if (with_codecs >= 0 && (off < 0 || off > view->len)) {
        PyErr_SetString(PyExc_ValueError, "offset outside the buffer");
        with_codecs = -1;
    }
    if (with_codecs >= 0 && tl_omap_map_buffer(map, mb, slots, writable) < 0)
        with_codecs = -1;
    if (with_codecs < 0)
        PyBuffer_Release(view);
    return with_codecs;
}

/* The records of the batch at ``at`` (decompressed when it is) into ``s``, with room for a
 * keep flag each in ``want``: 1; 0 where the reference code must take the batch; -1 with an
 * exception set. ``holder`` keeps a decompressed payload alive until the next batch. */
static int
batch_records(const uint8_t *at, const plain_header *h, PyObject *codecs, PyObject **holder,
              scratch *s, char **want, const uint8_t **payload, Py_ssize_t *plen)
{
    Py_CLEAR(*holder);
    int rc = tl_batch_payload(at, h, codecs, holder, payload, plen);
    if (rc <= 0)
        return rc;
    if (tl_scratch_reserve(s, h->count) < 0)
        return -1;
    char *w = PyMem_Realloc(*want, (size_t)(s->cap ? s->cap : 1));
    if (w == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *want = w;
    return tl_plain_records(*payload, *plen, h->count, h->base_offset, h->base_ts, s->recs) != 0;
}

static int
append_pos(PyObject *list, long long pos)
{
    PyObject *v = PyLong_FromLongLong(pos);
    int rc = v == NULL ? -1 : PyList_Append(list, v);
    Py_XDECREF(v);
    return rc;
}

/* -- pass 1: the offset map ------------------------------------------------------------ */

typedef struct {
    long long start, entries, max_entries, track;
    long long read, added, probes, lookups, latest;
    int full, overflow, any_latest;
} map_state;

/* Put one plain batch's keyed records from ``start`` (SkimpyOffsetMap.put_records). */
static int
map_batch(scratch *s, const uint8_t *payload, int32_t count, uint8_t *map, long long slots,
          map_state *m, PyObject *positions, char *want)
{
    for (int32_t i = 0; i < count; i++)
        want[i] = s->recs[i].key >= 0 && s->recs[i].offset >= m->start;
    tl_hash_keys(s, payload, count, want, map, slots);
    for (int32_t i = 0; i < count; i++) {
        if (want[i]) {
            if (m->entries + m->added >= m->max_entries) {
                m->full = 1;
                return 0;
            }
            int found;
            long long p, pos = tl_omap_find(map, slots, s->digest[s->at[i]], &found, &p);
            m->lookups++;
            m->probes += p;
            if (pos < 0) {
                m->overflow = 1;
                return 0;
            }
            if (!found) {
                memcpy(map + pos, s->digest[s->at[i]], 16);
                m->added++;
                if (m->entries + m->added <= m->track && append_pos(positions, pos) < 0)
                    return -1;
            }
            uint64_t v = (uint64_t)s->recs[i].offset;
            for (int j = 0; j < 8; j++)
                map[pos + 16 + j] = (uint8_t)(v >> (56 - 8 * j));
            m->latest = s->recs[i].offset;
            m->any_latest = 1;
        }
        m->read++;
    }
    return 0;
}

PyObject *
tl_clean_map_run(PyObject *self, PyObject *args)
{
    Py_buffer view, mb;
    Py_ssize_t off;
    PyObject *map, *codecs;
    long long slots;
    map_state m = {0};
    if (!PyArg_ParseTuple(args, "y*nOLLLLLO:clean_map_run", &view, &off, &map, &slots, &m.start,
                          &m.entries, &m.max_entries, &m.track, &codecs))
        return NULL;
    int with_codecs = run_buffers(&view, off, map, slots, 1, codecs, &mb);
    if (with_codecs < 0)
        return NULL;
    scratch s = {0};
    char *want = NULL;
    PyObject *positions = PyList_New(0), *result = NULL, *holder = NULL;
    long long batches = 0, nbytes = 0, last_offset = 0;
    const uint8_t *b = view.buf;
    plain_header h;
    while (positions != NULL && tl_plain_header_at(b + off, view.len - off, &h, with_codecs)) {
        const uint8_t *payload;
        Py_ssize_t plen;
        int rc = batch_records(b + off, &h, codecs, &holder, &s, &want, &payload, &plen);
        if (rc < 0)
            goto done;
        if (rc == 0)
            break;
        batches++;
        nbytes += h.size;
        off += h.size;
        last_offset = h.last_offset;
        if (map_batch(&s, payload, h.count, (uint8_t *)mb.buf, slots, &m, positions, want) < 0)
            goto done;
        Py_CLEAR(holder);
        if (m.full || m.overflow)
            break;
        if (h.last_offset >= m.start) {
            m.latest = h.last_offset;
            m.any_latest = 1;
        }
    }
    if (positions == NULL)
        goto done;
    PyObject *latest = m.any_latest ? PyLong_FromLongLong(m.latest) : Py_NewRef(Py_None);
    PyObject *last = batches ? PyLong_FromLongLong(last_offset) : Py_NewRef(Py_None);
    if (latest != NULL && last != NULL)
        result = Py_BuildValue("(nLLLNLLLNONi)", off, batches, nbytes, m.read,
                               PyBool_FromLong(m.full), m.added, m.probes, m.lookups, latest,
                               positions, last, m.overflow);
    else {
        Py_XDECREF(latest);
        Py_XDECREF(last);
    }
done:
    Py_XDECREF(holder);
    Py_XDECREF(positions);
    PyMem_Free(want);
    tl_scratch_free(&s);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&view);
    return result;
}

/* -- pass 2: the filter ---------------------------------------------------------------- */

typedef struct {
    long long latest, now, new_horizon, upper, group_end;
    PyObject *last_data; /* {producer id: last data offset} of the active producers */
} filter_args;

/* A producer's last batch, or the round's or group's last one: kept as an empty header
 * when nothing in it is kept (the reference code writes that header). */
static int
retain_empty(const plain_header *h, const filter_args *a)
{
    int64_t next = h->last_offset + 1;
    if (next == a->upper || next == a->group_end)
        return 1;
    if (h->pid < 0)
        return 0;
    PyObject *k = PyLong_FromLongLong(h->pid);
    if (k == NULL)
        return -1;
    PyObject *v = PyDict_GetItemWithError(a->last_data, k);
    Py_DECREF(k);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    long long last = PyLong_AsLongLong(v);
    if (last == -1 && PyErr_Occurred())
        return -1;
    return last == h->last_offset;
}

/* Records of one plain batch kept by _CleanerFilter.retain_records: the count, keep[i] per
 * record, *tombstone if a kept one is a tombstone, with its lookups, probes and keyless
 * records. */
static long long
keep_count(scratch *s, const uint8_t *payload, const plain_header *h, const uint8_t *map,
           long long slots, const filter_args *a, char *keep, int *tombstone,
           long long *lookups, long long *probes, long long *invalid)
{
    int has_horizon = (h->attrs & ATTR_DELETE_HORIZON) != 0;
    int tombstones_kept = !has_horizon || a->now < h->base_ts;
    for (int32_t i = 0; i < h->count; i++)
        keep[i] = s->recs[i].offset <= a->latest && s->recs[i].key >= 0; /* to look up */
    tl_hash_keys(s, payload, h->count, keep, map, slots);
    long long kept = 0;
    *tombstone = 0;
    for (int32_t i = 0; i < h->count; i++) {
        const plain_record *r = &s->recs[i];
        if (r->offset > a->latest) {
            keep[i] = 1;
        } else if (r->key < 0) {
            (*invalid)++;
            keep[i] = 0;
        } else {
            int found;
            long long p, pos = tl_omap_find(map, slots, s->digest[s->at[i]], &found, &p);
            long long stored = -1;
            if (pos >= 0 && found)
                stored = (long long)rd64(map + pos + 16);
            (*lookups)++;
            *probes += p;
            keep[i] = r->offset >= stored && (r->has_value || tombstones_kept);
        }
        if (keep[i]) {
            kept++;
            *tombstone |= !r->has_value;
        }
    }
    return kept;
}

PyObject *
tl_clean_filter_run(PyObject *self, PyObject *args)
{
    Py_buffer view, mb;
    Py_ssize_t off;
    PyObject *map, *codecs;
    long long slots, budget, max_ts;
    filter_args a;
    if (!PyArg_ParseTuple(args, "y*nOLLLLLLO!LLO:clean_filter_run", &view, &off, &map, &slots,
                          &a.latest, &a.now, &a.new_horizon, &a.upper, &a.group_end,
                          &PyDict_Type, &a.last_data, &budget, &max_ts, &codecs))
        return NULL;
    int with_codecs = run_buffers(&view, off, map, slots, 0, codecs, &mb);
    if (with_codecs < 0)
        return NULL;
    scratch s = {0};
    growing out = {0};
    char *want = NULL;
    PyObject *result = NULL, *holder = NULL;
    long long batches = 0, nread = 0, messages = 0, retained = 0, bytes_retained = 0,
              shallow = -1, max_offset = -1, written = -1, last = 0, invalid = 0,
              lookups = 0, probes = 0;
    int any_written = 0, raised = 0;
    const uint8_t *b = view.buf;
    plain_header h;
    while (nread < budget && tl_plain_header_at(b + off, view.len - off, &h, with_codecs)) {
        const uint8_t *payload;
        Py_ssize_t plen;
        int rc = batch_records(b + off, &h, codecs, &holder, &s, &want, &payload, &plen);
        if (rc < 0)
            goto done;
        if (rc == 0)
            break;
        long long lk = 0, pr = 0, inv = 0;
        int tombstone;
        long long kept = keep_count(&s, payload, &h, mb.buf, slots, &a, want, &tombstone, &lk,
                                    &pr, &inv);
        int need_horizon = tombstone && !(h.attrs & ATTR_DELETE_HORIZON);
        if (kept == 0) {
            int r = retain_empty(&h, &a);
            if (r < 0)
                goto done;
            if (r)
                break; /* an empty header: the reference code writes it */
        } else {
            size_t before = out.n;
            int64_t bmax = h.max_ts, last_kept = h.last_offset;
            if (kept != h.count || need_horizon) {
                int r = tl_rebuild(&out, b + off, payload, &h, &s, want, need_horizon,
                                a.new_horizon, codecs, &bmax, &last_kept);
                if (r < 0)
                    goto done;
                if (r == 0)
                    break; /* odd timestamps: the reference code rebuilds it */
            } else if (tl_grow_append(&out, b + off, (size_t)h.size) < 0) {
                goto done;
            }
            if (bmax > max_ts) {
                max_ts = bmax;
                shallow = h.last_offset;
                raised = 1;
            }
            if (last_kept > max_offset)
                max_offset = last_kept;
            retained += kept;
            bytes_retained += (long long)(out.n - before);
            written = h.last_offset;
            any_written = 1;
        }
        batches++;
        nread += h.size;
        messages += h.count;
        invalid += inv;
        lookups += lk;
        probes += pr;
        last = h.last_offset;
        off += h.size;
    }
    PyObject *w_obj = any_written ? PyLong_FromLongLong(written) : Py_NewRef(Py_None);
    PyObject *l_obj = batches ? PyLong_FromLongLong(last) : Py_NewRef(Py_None);
    PyObject *s_obj = raised ? PyLong_FromLongLong(shallow) : Py_NewRef(Py_None);
    if (w_obj != NULL && l_obj != NULL && s_obj != NULL)
        result = Py_BuildValue("(nLLLy#LLLNLNLLLN)", off, batches, nread, messages,
                               (const char *)(out.p ? out.p : (uint8_t *)""), (Py_ssize_t)out.n,
                               retained, bytes_retained, max_ts, s_obj, max_offset, w_obj,
                               invalid, lookups, probes, l_obj);
    else {
        Py_XDECREF(w_obj);
        Py_XDECREF(l_obj);
        Py_XDECREF(s_obj);
    }
done:
    Py_XDECREF(holder);
    PyMem_Free(want);
    PyMem_Free(out.p);
    tl_scratch_free(&s);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&view);
    return result;
}
