/* Functions of tidelog._native._core defined outside _core.c. */
#ifndef TIDELOG_NATIVE_H
#define TIDELOG_NATIVE_H

#include <Python.h>
#include <limits.h>
#include <stdint.h>

/* A METH_FASTCALL argument converted as PyArg_ParseTuple's "L" converts it: 0, or -1 with the
 * error set. */
static inline int
tl_arg_ll(PyObject *o, long long *out)
{
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* ... as "i" converts it (OverflowError out of an int's range). */
static inline int
tl_arg_int(PyObject *o, int *out)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v > INT_MAX || v < INT_MIN) {
        PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A key inside some buffer (the map hashes many at once). */
typedef struct {
    const uint8_t *p;
    size_t n;
} tl_key_ref;

/* md5.c: MD5 of one key, and of many (short ones in vector lanes) */
void tl_md5_digest(const uint8_t *data, size_t len, uint8_t out[16]);
void tl_md5_keys(const tl_key_ref *keys, Py_ssize_t n, uint8_t (*out)[16]);

/* offset_map.c: storage/cleaner/offset_map.py SkimpyOffsetMap.put/get's slot work */
long long tl_omap_find(const uint8_t *buf, long long slots, const uint8_t *digest, int *found,
                       long long *probes);
PyObject *tl_omap_put(PyObject *self, PyObject *args);
PyObject *tl_omap_get(PyObject *self, PyObject *args);
PyObject *tl_md5(PyObject *self, PyObject *arg);
PyObject *tl_omap_put_records(PyObject *self, PyObject *args);
PyObject *tl_omap_get_many(PyObject *self, PyObject *args);
PyObject *tl_md5_many(PyObject *self, PyObject *keys);
PyObject *tl_omap_clear(PyObject *self, PyObject *args);
int tl_omap_map_buffer(PyObject *map, Py_buffer *mb, long long slots, int writable);

/* _core.c: the produce validator's record walk (storage/validator.py _walk_py) */
int walk_loop(const uint8_t *b, Py_ssize_t end, Py_ssize_t *n_out, __int128 *min_out,
              __int128 *max_out, int *seq_out, Py_ssize_t *nulls_out);

/* validate_plain.c: storage/validator.py validate_plain_py */
PyObject *tl_validate_plain(PyObject *self, PyObject *args);

/* recovery.c: storage/recovery_scan.py scan_run_py (LogSegment.recover's fast path) */
PyObject *tl_recover_scan(PyObject *self, PyObject *args);
uint32_t tl_crc32c(const uint8_t *p, size_t n);

/* cleaner_runs.c: storage/cleaner/batch_runs.py map_run_py / filter_run_py */
PyObject *tl_clean_map_run(PyObject *self, PyObject *args);
PyObject *tl_clean_filter_run(PyObject *self, PyObject *args);
void tl_recovery_init(void);

/* spark_fields.c: spark/decode.py record_fields_py */
PyObject *tl_record_fields(PyObject *self, PyObject *args);
PyObject *tl_gather(PyObject *self, PyObject *args);

/* fetch_scan.c: server/quiet_table.py quiet_runs_py */
PyObject *tl_quiet_runs(PyObject *self, PyObject *args);
PyObject *tl_fetch_ids_distinct(PyObject *self, PyObject *args);
PyObject *tl_fetch_ids_bits(PyObject *self, PyObject *args);
int tl_record_at(const uint8_t *b, int64_t len, int64_t start, int headers, int64_t row[8]);

/* fetch_read.c: storage/file_records.py find_batch_py */
PyObject *tl_find_batch(PyObject *self, PyObject *args);

/* _core.c: spark/decode.py record_starts_py's walk; -1 with IndexError set */
int tl_record_starts(const uint8_t *b, uint64_t len, Py_ssize_t count, int64_t *starts);
/* the same walk with no Python call (the GIL may be released): 0 or one of these */
#define TL_STARTS_RANGE 1 /* "index out of range" */
#define TL_STARTS_BIG 2   /* "cannot fit 'int' into an index-sized integer" */
int tl_record_starts_raw(const uint8_t *b, uint64_t len, Py_ssize_t count, int64_t *starts);
void tl_record_starts_error(int rc);

/* A big-endian unsigned integer of ``n`` bytes. */
static inline uint64_t
tl_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* spark_columns.c: spark/columns.py decode_columns_py */
PyObject *tl_decode_columns(PyObject *self, PyObject *args);
PyObject *tl_decode_runs(PyObject *self, PyObject *args);

/* spark_runs.c: spark/fetch_runs.py batch_spans_py */
PyObject *tl_batch_spans(PyObject *self, PyObject *args);

/* json_columns.c: iceberg/json_native.py's strict JSON -> Arrow buffers */
PyObject *tl_json_columns(PyObject *self, PyObject *args);
PyObject *tl_schema_ids(PyObject *self, PyObject *args);

/* proto_wire.c: iceberg/protobuf_bulk.py check_wire_py, value_codec.py strip_prefix_py */
PyObject *tl_proto_check(PyObject *self, PyObject *args);
PyObject *tl_strip_prefix(PyObject *self, PyObject *args);
int tl_utf8_ok(const uint8_t *p, const uint8_t *end); /* well-formed UTF-8 */

/* avro_columns.c: iceberg/avro_native.py's Avro -> Arrow buffers */
PyObject *tl_avro_columns(PyObject *self, PyObject *args);

/* proto_columns.c: iceberg/protobuf_native.py's Protobuf -> Arrow buffers */
PyObject *tl_proto_columns(PyObject *self, PyObject *args);

/* validate_plain.c: the plain batch check (1 accepted, 0 declined; nothing written) */
int tl_plain_check(const uint8_t *b, Py_ssize_t n, long long crc, long long lo, long long hi,
                   long long max_message_bytes, int compact, int32_t *count, int64_t *max_ts);
/* append_plain.c: storage/log_plain.py append_plain_py (the leader's plain append) */
PyObject *tl_slotted_maker(PyObject *self, PyObject *cls);
int tl_slotted_ready(PyObject *module);
PyObject *tl_append_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
int tl_plain_write(uint8_t *b, Py_ssize_t n, long long offset, int leader_epoch, long long lo,
                   long long hi, long long max_message_bytes, int compact, long long max_ts_bound,
                   int fd, long long position, long long crc, int32_t *count, int64_t *max_ts);

/* append_leader.c: storage/log_plain.py append_plain_leader_py (the plain append's
 * bookkeeping around tl_plain_write) */
PyObject *tl_append_leader_bind(PyObject *self, PyObject *args);
PyObject *tl_append_leader(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_index_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* produce_decode.c: protocol/produce_in_place.py decode_produce_in_place's twin */
PyObject *tl_produce_decode_bind(PyObject *self, PyObject *args);
PyObject *tl_produce_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_produce_decode_in_place(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* produce_encode.c: protocol/fast.py encode_produce_response_py's twin */
PyObject *tl_produce_response_bind(PyObject *self, PyObject *arg);
PyObject *tl_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_produce_one_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_produce_now_bind(PyObject *self, PyObject *args);
PyObject *tl_take_one_now(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_take_now_bind(PyObject *self, PyObject *args);
PyObject *tl_attr_hint_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *tl_produce_response_twin(PyObject *self, PyObject *arg);
PyObject *tl_encode_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
