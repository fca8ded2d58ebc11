/* What the common Produce's native call shares between its two files: produce_now.c (the
 * call, its tests and the append under the log's lock) and produce_after.c (what follows
 * the append: the HW's callback, the counters, the answer, or the rest handed to Python). */
#ifndef TIDELOG_PRODUCE_NOW_H
#define TIDELOG_PRODUCE_NOW_H

#include <Python.h>

#include "attr_hint.h"

#define RECORD_BATCH_OVERHEAD 61
#define ATTRIBUTES_LOW_BYTE 22
#define TRANSACTIONAL_MASK 0x10
#define COMPRESSION_MASK 0x07
#define LAST_OFFSET_DELTA 23
#define TOPIC_ID_VERSION 13

#define PN_NAMES(X)                                                                      \
    X(client_quotas) X(store) X(entries) X(produce_tail) X(topic_data)                   \
    X(partition_data) X(authorizer) X(record_validators) X(acks) X(name) X(records)      \
    X(index) X(replica_manager) X(topics) X(get) X(async_appends) X(partitions)          \
    X(logs) X(logs_by_dir) X(version) X(logs_version) X(leader_id) X(local_broker_id)    \
    X(log) X(config) X(min_insync_replicas) X(state) X(isr) X(maximal_isr)               \
    X(remote_replicas) X(group_commit) X(pending) X(_local) X(end_metadata)              \
    X(message_offset) X(recovery_point) X(flush_messages) X(append_space)                \
    X(append_guard) X(headroom) X(_lock) X(acquire) X(release) X(closed) X(writes)       \
    X(error) X(_producer_state) X(leader_epoch_cache) X(leader_epoch)                    \
    X(inline_append_bytes) X(_log_start_offset) X(high_watermark) X(_hw_meta)            \
    X(_state_stamp) X(unreplicated_txns) X(on_high_watermark_updated) X(stamp_cell)      \
    X(mirror_stamp) X(last_offset) X(local_committed_offset) X(on_high_watermark)        \
    X(topic_stats) X(record_append) X(duplicate) X(num_messages) X(first_offset)         \
    X(base_offset) X(log_append_time) X(log_start_offset) X(_topics) X(all_topics)       \
    X(total_produce_requests) X(bytes_in) X(messages_in)
#define PN_ENUM(n) P_##n,
#define PN_TEXT(n) #n,
enum { PN_NAMES(PN_ENUM) P_COUNT };

extern ah_name pn[P_COUNT];
/* bound once (produce_now_bind) */
extern PyObject *pn_new_tp, *pn_new_result, *pn_encode, *pn_internal, *pn_log_type;
extern PyObject *pn_append, *pn_record_append;
extern long long pn_heavy;

/* One call's objects (owned, released at its end) and values. */
typedef struct {
    PyObject *broker, *state, *header, *request; /* borrowed: the arguments */
    PyObject *name, *part, *records, *rm, *tp, *partition, *lg, *local, *space, *lock;
    PyObject *info;
    long long acks, n, lod;
} pn_call;

#define get(o, n) ah_get((o), &pn[n])
#define get2(o, a, b) ah_get2((o), &pn[a], &pn[b])
#define set(o, n, v) ah_set((o), &pn[n], (v))
#define is_none(o, n) ah_is_none((o), &pn[n])
#define truth(o, n) ah_truth((o), &pn[n])
#define as_ll(o, n, out) ah_ll((o), &pn[n], (out))
#define len2(o, a, b, out) ah_len2((o), &pn[a], &pn[b], (out))

/* o.<a> <op> o.<b> (or p.<b> when p): 1, 0, -1 */
static inline int
compare(PyObject *o, int a, PyObject *p, int b, int op)
{
    return ah_compare(o, &pn[a], p != NULL ? p : o, &pn[b], op);
}

/* o.<name> += n: 0, -1 */
static inline int
pn_bump(PyObject *o, int name, long long n)
{
    long long v;
    return ah_ll(o, &pn[name], &v) < 0 ? -1 : ah_set_ll(o, &pn[name], v + n);
}

/* produce_after.c: from the append made on: the answer's bytes, or the rest tuple (the
 * exception's phase 0 or 1, after the twin's raise) */
PyObject *pn_after_append(pn_call *c);
PyObject *pn_rest(pn_call *c, int phase);

#endif
