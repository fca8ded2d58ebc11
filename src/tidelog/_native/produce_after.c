/* The common Produce's native call once its append is made (produce_now.c has the call and
 * says what it returns): the HW's move and callback, the topic's counters, the ISR's
 * answer and the encoded answer, as ReplicaAppends._append_async, append_one_now and
 * handle_now go on; or the rest handed to Python where they would go elsewhere. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "native.h"
#include "produce_now.h"

/* (partition, tp, outcome, phase): the rest is the twin's (the module's comment). An
 * exception's outcome is the exception raised, unless it is no Exception (then raised). */
PyObject *
pn_rest(pn_call *c, int phase)
{
    PyObject *outcome = c->info;
    if (phase < 2) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value == NULL || !PyObject_TypeCheck(value, (PyTypeObject *)PyExc_Exception)) {
            PyErr_Restore(type, value, tb);
            return NULL;
        }
        if (tb != NULL)
            PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        Py_XSETREF(c->info, value);
        outcome = value;
    }
    return Py_BuildValue("(OOOi)", c->partition, c->tp, outcome, phase);
}

/* The HW moved with the append: the partition's committed offset follows, its callback
 * is told (_append_async's): 0, -1. */
static int
moved(pn_call *c)
{
    PyObject *hw = get(c->lg, P_high_watermark);
    if (hw == NULL || set(c->partition, P_local_committed_offset, hw) < 0) {
        Py_XDECREF(hw);
        return -1;
    }
    Py_DECREF(hw);
    PyObject *notify = get(c->partition, P_on_high_watermark);
    PyObject *v = notify == NULL || notify == Py_None ? Py_XNewRef(notify)
                  : PyObject_CallOneArg(notify, c->tp);
    Py_XDECREF(notify);
    Py_XDECREF(v);
    return v == NULL ? -1 : 0;
}

/* BrokerTopicStats.record_append(stats, topic, size, messages) here while it is the method
 * bound and the topic has its TopicStats: both those and the all-topics' bumped as it bumps
 * them (1 done, 0 not: the method's to call, -1 an error). */
static int
bumped(PyObject *stats, pn_call *c, long long messages)
{
    if (_PyType_Lookup(Py_TYPE(stats), pn[P_record_append].name) != pn_record_append)
        return 0;
    PyObject *topics = get(stats, P__topics);
    PyObject *t = topics != NULL && PyDict_CheckExact(topics)
                      ? Py_XNewRef(PyDict_GetItemWithError(topics, c->name)) : NULL;
    Py_XDECREF(topics);
    PyObject *all = t == NULL ? NULL : get(stats, P_all_topics);
    int r = all == NULL ? -(PyErr_Occurred() != NULL) : 1;
    PyObject *each[2] = {t, all};
    for (int i = 0; i < 2 && r > 0; i++)
        r = pn_bump(each[i], P_total_produce_requests, 1) < 0 ||
            pn_bump(each[i], P_bytes_in, c->n) < 0 ||
            pn_bump(each[i], P_messages_in, messages) < 0 ? -1 : 1;
    Py_XDECREF(t);
    Py_XDECREF(all);
    return r;
}

/* The topic's BytesIn / MessagesIn (``stats.record_append``): 0, -1 (raised, as the
 * twin's). */
static int
counted(pn_call *c)
{
    PyObject *stats = get(c->rm, P_topic_stats);
    if (stats == NULL || stats == Py_None) {
        Py_XDECREF(stats);
        return stats == NULL ? -1 : 0;
    }
    long long messages = 0;
    int dup = truth(c->info, P_duplicate);
    int r = dup < 0 || (!dup && as_ll(c->info, P_num_messages, &messages) < 0) ? -1
            : bumped(stats, c, messages);
    if (r == 0) {
        PyObject *n = PyLong_FromLongLong(c->n), *count = PyLong_FromLongLong(messages);
        PyObject *v = NULL;
        if (n != NULL && count != NULL) {
            PyObject *args[4] = {stats, c->name, n, count};
            v = PyObject_VectorcallMethod(pn[P_record_append].name, args, 4, NULL);
        }
        r = v == NULL ? -1 : 1;
        Py_XDECREF(n);
        Py_XDECREF(count);
        Py_XDECREF(v);
    }
    Py_DECREF(stats);
    return r < 0 ? -1 : 0;
}

/* acks -1: the ISR's answer known now (append_one_now's test: the HW past the batch, the
 * leader here, min.insync.replicas within the ISR): 1, 0 (the twin's to find), -1. */
static int
replicated(pn_call *c)
{
    long long last, hw, mir, maximal;
    if (c->acks != -1)
        return 1;
    if (as_ll(c->info, P_last_offset, &last) < 0)
        return -1;
    if (last < 0)
        return 1;
    PyObject *config = get(c->lg, P_config);
    int r = config == NULL || as_ll(c->lg, P_high_watermark, &hw) < 0 ||
            as_ll(config, P_min_insync_replicas, &mir) < 0 ? -1 : hw >= last + 1;
    Py_XDECREF(config);
    if (r > 0)
        r = compare(c->partition, P_leader_id, NULL, P_local_broker_id, Py_EQ);
    if (r > 0)
        r = len2(c->partition, P_state, P_maximal_isr, &maximal) < 0 ? -1 : mir <= maximal;
    return r;
}

/* The answer: handle_now's result of one partition, encoded (encode_produce_response). */
static PyObject *
answer(pn_call *c)
{
    PyObject *index = get(c->part, P_index);
    PyObject *result = index == NULL ? NULL : PyObject_CallOneArg(pn_new_result, index);
    Py_XDECREF(index);
    if (result == NULL)
        return NULL;
    int names[3][2] = {{P_base_offset, P_first_offset}, {P_log_append_time, P_log_append_time},
                       {P_log_start_offset, P_log_start_offset}};
    for (int i = 0; i < 3; i++) {
        PyObject *v = get(c->info, names[i][1]);
        if (v == NULL || set(result, names[i][0], v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(v);
    }
    PyObject *topics = Py_BuildValue("[(O[N])]", c->name, result);
    PyObject *zero = topics == NULL ? NULL : PyLong_FromLong(0);
    PyObject *out = NULL;
    if (zero != NULL) {
        PyObject *args[4] = {PyTuple_GET_ITEM(c->header, 2), PyTuple_GET_ITEM(c->header, 1),
                             topics, zero};
        out = PyObject_Vectorcall(pn_encode, args, 4, NULL);
    }
    Py_XDECREF(topics);
    Py_XDECREF(zero);
    return out;
}

/* From the append made on (produce_now.h): the HW moved (else the rest, phase 2), the
 * counters, the ISR's answer (else phase 3), the answer's bytes. */
PyObject *
pn_after_append(pn_call *c)
{
    int r = compare(c->lg, P_high_watermark, c->info, P_last_offset, Py_GT);
    if (r < 0 || (r > 0 && moved(c) < 0))
        return pn_rest(c, 1);
    if (r == 0)
        return pn_rest(c, 2);
    if (counted(c) < 0)
        return NULL;
    r = replicated(c);
    if (r < 0)
        return NULL;
    return r == 0 ? pn_rest(c, 3) : answer(c);
}
