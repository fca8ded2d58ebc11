/* The common Produce answered in one call: librdkafka's one partition of one topic, acks 1
 * or -1, a plain batch appended by the leader of an ISR of this broker alone (server/
 * produce_one.py binds it and says when it is called). Its reference and twin is the path
 * it stands for, step by step: handlers/produce.py handle_now, ReplicaAppends.append_one_now
 * and _append_async (server/replica_appends.py), Log.append_plain_as_leader (storage/log.py)
 * around the native append (append_leader.c), then the answer encoded (produce_encode.c).
 * It reads and sets the attributes they read and set, in their order, and calls the same
 * Python methods on the same paths (the lock, the HW callback, the topic's counters).
 *
 * Returns the answer's bytes; None when it declined before changing anything (whatever
 * the twin would answer otherwise than this path: the caller runs the twin); or a tuple
 * (partition, tp, outcome, phase) once the append was made but its end is the twin's:
 * phase 0 an exception raised under the log's lock (an OSError there is the twin's
 * KafkaStorageError), 1 one raised after it, 2 the HW did not move with the append, 3 it
 * did and the counters are counted but the ISR's answer is not known here
 * (ReplicaAppends.append_one_rest takes each from there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "native.h"
#include "produce_now.h"

ah_name pn[P_COUNT];
PyObject *pn_new_tp, *pn_new_result, *pn_encode, *pn_internal, *pn_log_type;
PyObject *pn_append, *pn_record_append;
long long pn_heavy;

/* The only item of o.<name>, a list or tuple of one (a new reference), or NULL: *ok 0 when it is
 * not one (declined), -1 on an error. */
static PyObject *
only(PyObject *o, int name, int *ok)
{
    PyObject *v = get(o, name);
    PyObject *item = NULL;
    *ok = v == NULL ? -1 : (PyList_CheckExact(v) || PyTuple_CheckExact(v)) &&
                               PySequence_Fast_GET_SIZE(v) == 1;
    if (*ok > 0)
        item = Py_NewRef(PySequence_Fast_GET_ITEM(v, 0));
    Py_XDECREF(v);
    return item;
}

/* handle_now's tests of the connection and the request, in its order: 1 the common case,
 * 0 not (declined), -1 an error. */
static int
request_ok(pn_call *c)
{
    long long version;
    PyObject *quotas = get(c->broker, P_client_quotas);
    if (quotas == NULL)
        return -1;
    int r = quotas == Py_None ? 0 : 1;
    if (r > 0) {
        PyObject *entries = get2(quotas, P_store, P_entries);
        r = entries == NULL ? -1 : PyObject_IsTrue(entries);
        r = r < 0 ? -1 : !r;
        Py_XDECREF(entries);
    }
    Py_DECREF(quotas);
    if (r > 0)
        r = is_none(c->state, P_produce_tail);
    PyObject *t = NULL;
    if (r > 0)
        t = only(c->request, P_topic_data, &r);
    if (r > 0)
        c->part = only(t, P_partition_data, &r);
    if (r > 0)
        r = is_none(c->broker, P_authorizer);
    if (r > 0)
        r = truth(c->broker, P_record_validators) == 0 ? 1 : -(PyErr_Occurred() != NULL);
    if (r > 0 && PyTuple_Check(c->header) && PyTuple_GET_SIZE(c->header) > 2)
        r = tl_arg_ll(PyTuple_GET_ITEM(c->header, 1), &version) < 0 ? -1
            : version < TOPIC_ID_VERSION;
    else if (r > 0)
        r = 0;
    if (r > 0)
        r = as_ll(c->request, P_acks, &c->acks) < 0 ? -1 : c->acks == 1 || c->acks == -1;
    if (r > 0)
        r = (c->name = get(t, P_name)) == NULL ? -1 : PyUnicode_CheckExact(c->name);
    Py_XDECREF(t);
    return r;
}

/* The batch's tests (handle_now's, then what the native append would decline before
 * anything: too short, compressed or transactional): 1, 0, -1. */
static int
batch_ok(pn_call *c)
{
    c->records = get(c->part, P_records);
    if (c->records == NULL)
        return -1;
    if (c->records == Py_None)
        return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(c->records, &view, PyBUF_SIMPLE) < 0)
        return -1;
    const uint8_t *b = view.buf;
    c->n = view.len;
    int r = RECORD_BATCH_OVERHEAD <= c->n && c->n < pn_heavy &&
            !(b[ATTRIBUTES_LOW_BYTE] & (TRANSACTIONAL_MASK | COMPRESSION_MASK));
    if (r)
        c->lod = (int32_t)tl_be(b + LAST_OFFSET_DELTA, 4);
    PyBuffer_Release(&view);
    if (r)
        r = PySet_Contains(pn_internal, c->name) == 0 ? 1 : -(PyErr_Occurred() != NULL);
    if (r > 0 && (c->rm = get(c->broker, P_replica_manager)) == NULL)
        return -1;
    if (r > 0) {
        PyObject *topics = get2(c->rm, P_store, P_topics);
        PyObject *known = topics == NULL ? NULL
                          : PyObject_CallMethodOneArg(topics, pn[P_get].name, c->name);
        r = known == NULL ? -1 : known != Py_None;
        Py_XDECREF(topics);
        Py_XDECREF(known);
    }
    if (r > 0)
        r = truth(c->rm, P_async_appends);
    return r;
}

/* _append_async's tests of the partition (led here, its log current, enough in the ISR
 * for acks -1), then this path's own: the ISR this broker alone, no group commit round
 * pending for it, a Log of the class bound: 1, 0, -1. */
static int
partition_ok(pn_call *c)
{
    long long mir = 0;
    PyObject *index = get(c->part, P_index);
    PyObject *partitions = index == NULL ? NULL : get(c->rm, P_partitions);
    if (partitions != NULL && PyDict_CheckExact(partitions))
        c->tp = PyObject_CallFunctionObjArgs(pn_new_tp, c->name, index, NULL);
    int r = c->tp == NULL ? -(PyErr_Occurred() != NULL) : 1;
    if (r > 0) {
        c->partition = Py_XNewRef(PyDict_GetItemWithError(partitions, c->tp));
        r = c->partition == NULL ? -(PyErr_Occurred() != NULL) : 1;
    }
    Py_XDECREF(index);
    Py_XDECREF(partitions);
    if (r > 0) {
        PyObject *v = get2(c->rm, P_logs, P_logs_by_dir);
        r = v == NULL ? -1 : compare(c->partition, P_logs_version, v, P_version, Py_EQ);
        Py_XDECREF(v);
    }
    if (r > 0)
        r = compare(c->partition, P_leader_id, NULL, P_local_broker_id, Py_EQ);
    if (r > 0)
        r = (c->lg = get(c->partition, P_log)) == NULL ? -1 : Py_TYPE(c->lg) == (PyTypeObject *)pn_log_type;
    if (r > 0) {
        PyObject *config = get(c->lg, P_config);
        r = config == NULL ? -1 : as_ll(config, P_min_insync_replicas, &mir) < 0 ? -1 : 1;
        Py_XDECREF(config);
    }
    long long isr = 0, maximal = 0;
    if (r > 0 && c->acks == -1)
        r = len2(c->partition, P_state, P_isr, &isr) < 0 ||
            len2(c->partition, P_state, P_maximal_isr, &maximal) < 0 ? -1
            : isr >= mir && mir <= maximal;
    if (r > 0)
        r = truth(c->partition, P_remote_replicas) == 0 ? 1 : -(PyErr_Occurred() != NULL);
    if (r > 0) {
        PyObject *pending = get2(c->rm, P_group_commit, P_pending);
        int busy = pending == NULL ? -1 : PyObject_IsTrue(pending);
        if (busy > 0)
            busy = PySequence_Contains(pending, c->tp);
        r = busy < 0 ? -1 : !busy;
        Py_XDECREF(pending);
    }
    return r;
}

/* Log.append_plain_as_leader's tests before its lock, with the HW's move to the new end
 * checked ahead (no flush.messages due with it), and its free-space count taken: 1, 0,
 * -1. */
static int
log_ok(pn_call *c)
{
    long long end = 0, recovery = 0, headroom = 0, flush_messages = 0;
    c->local = get(c->lg, P__local);
    PyObject *config = c->local == NULL ? NULL : get(c->local, P_config);
    PyObject *meta = c->local == NULL ? NULL : get(c->local, P_end_metadata);
    int r = config == NULL || meta == NULL || as_ll(config, P_flush_messages,
                                                     &flush_messages) < 0 ||
            as_ll(meta, P_message_offset, &end) < 0 ||
            as_ll(c->local, P_recovery_point, &recovery) < 0 ? -1 : 1;
    Py_XDECREF(config);
    Py_XDECREF(meta);
    if (r > 0)
        r = end + c->lod + 1 - recovery < flush_messages;
    if (r > 0)
        r = (c->space = get(c->lg, P_append_space)) == NULL ? -1 : 1;
    if (r > 0 && c->space == Py_None) /* no count kept: the guard's, if any, is the twin's */
        return is_none(c->lg, P_append_guard);
    if (r > 0)
        r = as_ll(c->space, P_headroom, &headroom) < 0 ? -1 : c->n < headroom;
    return r > 0 ? (ah_set_ll(c->space, &pn[P_headroom], headroom - c->n) < 0 ? -1 : 1) : r;
}

/* The free-space count given back (an append declined under the lock): 0, -1. */
static int
give_back(pn_call *c)
{
    return c->space == Py_None ? 0 : pn_bump(c->space, P_headroom, c->n);
}

/* The HW to the new log end unless a flush is due (``high_watermark_to_end``), and the
 * log's state stamps, as the twin does them once its append is made: 0, -1. */
static int
to_end(pn_call *c, PyObject *psm)
{
    PyObject *end = get(c->local, P_end_metadata);
    PyObject *config = c->local == NULL ? NULL : get(c->local, P_config);
    PyObject *hw = end == NULL ? NULL : get(end, P_message_offset);
    long long h = 0, recovery = 0, flush = 0;
    int r = hw == NULL || config == NULL || tl_arg_ll(hw, &h) < 0 ||
            as_ll(c->local, P_recovery_point, &recovery) < 0 ||
            as_ll(config, P_flush_messages, &flush) < 0 ? -1 : 0;
    if (r == 0 && h - recovery < flush) {
        r = set(c->lg, P_high_watermark, hw) < 0 ||
            set(c->lg, P__hw_meta, end) < 0 || pn_bump(c->lg, P__state_stamp, 1) < 0 ? -1 : 0;
        int txns = r < 0 ? -1 : truth(psm, P_unreplicated_txns);
        PyObject *v = txns > 0 ? PyObject_CallMethodOneArg(
                                     psm, pn[P_on_high_watermark_updated].name, hw) : NULL;
        r = txns < 0 || (txns > 0 && v == NULL) ? -1 : 0;
        Py_XDECREF(v);
    }
    Py_XDECREF(end);
    Py_XDECREF(config);
    Py_XDECREF(hw);
    if (r == 0)
        r = pn_bump(c->lg, P__state_stamp, 1);
    PyObject *cell = r < 0 ? NULL : get(c->lg, P_stamp_cell);
    if (cell != NULL && cell != Py_None) {
        PyObject *v = PyObject_CallMethodOneArg(c->lg, pn[P_mirror_stamp].name, cell);
        r = v == NULL ? -1 : 0;
        Py_XDECREF(v);
    }
    r = r < 0 || (cell == NULL) ? -1 : 0;
    Py_XDECREF(cell);
    return r;
}

/* The native append with the twin's arguments (log_plain.append_plain): 1 made (c->info),
 * 0 declined, -1 an error. */
static int
append(pn_call *c, PyObject *psm)
{
    PyObject *epochs = get(c->lg, P_leader_epoch_cache);
    PyObject *epoch = epochs == NULL ? NULL : get(c->partition, P_leader_epoch);
    PyObject *below = epoch == NULL ? NULL : get(c->rm, P_inline_append_bytes);
    PyObject *start = below == NULL ? NULL : get(c->lg, P__log_start_offset);
    if (start != NULL) {
        PyObject *args[7] = {c->local, psm, epochs, c->records, epoch, below, start};
        c->info = PyObject_Vectorcall(pn_append, args, 7, NULL);
    }
    Py_XDECREF(epochs);
    Py_XDECREF(epoch);
    Py_XDECREF(below);
    Py_XDECREF(start);
    if (c->info == NULL)
        return -1;
    return c->info != Py_None;
}

/* Under the log's lock: the log open, the append, the HW and stamps: 1, 0 (declined, the
 * free-space count given back), -1. */
static int
locked(pn_call *c)
{
    int r = truth(c->local, P_closed);
    if (r == 0) {
        PyObject *writes = get(c->local, P_writes);
        int none = writes == NULL ? -1 : is_none(writes, P_error);
        r = none < 0 ? -1 : !none;
        Py_XDECREF(writes);
    }
    if (r != 0) /* closed or failed: the twin's check_open raises */
        return r < 0 ? -1 : give_back(c);
    PyObject *psm = get(c->lg, P__producer_state);
    r = psm == NULL ? -1 : append(c, psm);
    if (r == 0)
        r = give_back(c);
    else if (r > 0)
        r = to_end(c, psm) < 0 ? -1 : 1;
    Py_XDECREF(psm);
    return r;
}

/* Log.append_plain_as_leader from its lock on: ``locked`` between acquire and release: 1,
 * 0, -1 an error before the lock or at its release, -2 one under it. */
static int
append_under_lock(pn_call *c)
{
    if ((c->lock = get(c->lg, P__lock)) == NULL)
        return -1;
    PyObject *v = PyObject_CallMethodNoArgs(c->lock, pn[P_acquire].name);
    if (v == NULL)
        return -1;
    Py_DECREF(v);
    int r = locked(c) < 0 ? -2 : c->info != NULL && c->info != Py_None;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    v = PyObject_CallMethodNoArgs(c->lock, pn[P_release].name);
    if (v == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(v);
    PyErr_Restore(type, value, tb);
    return r;
}

/* METH_FASTCALL: produce_one_now(broker, connection_state, header, request) -> bytes, None
 * or (partition, tp, outcome, phase), as the module's comment says. */
PyObject *
tl_produce_one_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || pn_append == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "produce_one_now() takes 4 arguments, once produce_now_bind ran");
        return NULL;
    }
    pn_call c = {args[0], args[1], args[2], args[3]};
    int r = request_ok(&c);
    if (r > 0)
        r = batch_ok(&c);
    if (r > 0)
        r = partition_ok(&c);
    if (r > 0)
        r = log_ok(&c);
    PyObject *out = NULL;
    if (r == 0) {
        out = Py_NewRef(Py_None);
    } else if (r > 0) { /* from the free-space count taken on: the append, then its end */
        r = append_under_lock(&c);
        out = r == 0 ? Py_NewRef(Py_None) : r < 0 ? pn_rest(&c, r == -2 ? 0 : 1)
                                                  : pn_after_append(&c);
    }
    PyObject *owned[] = {c.name, c.part, c.records, c.rm, c.tp, c.partition, c.lg, c.local,
                         c.space, c.lock, c.info};
    for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
        Py_XDECREF(owned[i]);
    return out;
}

/* produce_now_bind(new_tp, new_result, encode_produce_response, INTERNAL_TOPICS, Log,
 * append_plain, HEAVY_COMPRESSED_BYTES, BrokerTopicStats.record_append): what
 * produce_one_now makes, calls and tests against (server/produce_one.py). */
PyObject *
tl_produce_now_bind(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO!O!OLO", &o[0], &o[1], &o[2], &PyFrozenSet_Type, &o[3],
                          &PyType_Type, &o[4], &o[5], &pn_heavy, &o[6]))
        return NULL;
    static const char *const texts[P_COUNT] = {PN_NAMES(PN_TEXT)};
    if (ah_intern(pn, texts, P_COUNT) < 0)
        return NULL;
    PyObject **slots[7] = {&pn_new_tp, &pn_new_result, &pn_encode, &pn_internal, &pn_log_type,
                           &pn_append, &pn_record_append};
    for (int i = 0; i < 7; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    Py_RETURN_NONE;
}
