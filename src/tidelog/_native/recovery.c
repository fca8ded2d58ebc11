/* tidelog._native._core.recover_scan: the twin of storage/recovery_scan.py scan_run_py.
 *
 * A run over a buffer of whole batches for LogSegment.recover: header checks, CRC32C, the
 * segment's offset range, the sparse .index/.timeindex entries (packed big-endian), the
 * leader epochs to assign and the producer batches to replay.  It stops before the first
 * batch it does not take the common way and never raises for the data: the Python driver
 * hands that batch to the reference code, which raises the exact error.  Integers that
 * could leave int64 in Python's arithmetic are compared as 128-bit values.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

typedef __int128 i128;

#define RECORD_BATCH_OVERHEAD 61
#define LOG_OVERHEAD 12
#define MIN_LENGTH_FIELD (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD)
#define CRC_START 21
#define MAGIC_V2 2
#define INT32_MAX_ ((i128)2147483647)

/* -- CRC32C (Castagnoli), as the crc32c package computes it ----------------------------- */
static uint32_t crc_table[8][256];

static void
crc_init_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t
crc32c_sw(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c; /* little-endian hosts only reach here (see crc32c below) */
        c = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
            crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
            crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
            crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c ^ 0xFFFFFFFFu;
}

static uint32_t
crc32c_bytewise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_PATH 1
/* The crc32 instruction takes three cycles and can start one each cycle, so one stream of it
 * runs at a third of the unit's speed.  As Mark Adler's crc32c.c (the zlib author's public
 * code; the crc32c package does the same) does, three streams run over three adjacent
 * blocks, and the first two are moved past the following blocks with a "zeros operator"
 * (the CRC of n zero bytes as a linear map, applied by four byte tables) and xored in. */
#define CRC_POLY 0x82F63B78u /* CRC-32C, reflected */
#define CRC_LONG 4096        /* 12 KiB rounds: a 16 KiB batch is one and some short ones */
#define CRC_SHORT 256
static uint32_t crc_long[4][256], crc_short[4][256];

static uint32_t
gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void
gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

/* The operator appending len zero bytes (len a power of two) to a CRC register. */
static void
crc_zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32], row = 1;
    odd[0] = CRC_POLY; /* one zero bit */
    for (int n = 1; n < 32; n++, row <<= 1)
        odd[n] = row;
    gf2_square(even, odd); /* two bits */
    gf2_square(odd, even); /* four bits */
    for (;;) {             /* one byte, two, four ... until len is shifted out */
        gf2_square(even, odd);
        if ((len >>= 1) == 0)
            return;
        gf2_square(odd, even);
        if ((len >>= 1) == 0)
            break;
    }
    memcpy(even, odd, sizeof(odd));
}

static void
crc_zeros_tables(uint32_t zeros[4][256], size_t len)
{
    uint32_t op[32];
    crc_zeros_op(op, len);
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 0; k < 4; k++)
            zeros[k][n] = gf2_times(op, n << (8 * k));
}

static inline uint32_t
crc_shift(uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
           zeros[3][crc >> 24];
}

#define CRC_ROUNDS(BLOCK, TABLE)                                                              \
    while (n >= 3 * (BLOCK)) {                                                                \
        uint64_t c1 = 0, c2 = 0;                                                              \
        for (const uint8_t *end = p + (BLOCK); p < end; p += 8) {                             \
            uint64_t w0, w1, w2;                                                              \
            memcpy(&w0, p, 8);                                                                \
            memcpy(&w1, p + (BLOCK), 8);                                                      \
            memcpy(&w2, p + 2 * (BLOCK), 8);                                                  \
            c = __builtin_ia32_crc32di(c, w0);                                                \
            c1 = __builtin_ia32_crc32di(c1, w1);                                              \
            c2 = __builtin_ia32_crc32di(c2, w2);                                              \
        }                                                                                     \
        c = crc_shift(TABLE, (uint32_t)c) ^ (uint32_t)c1;                                     \
        c = crc_shift(TABLE, (uint32_t)c) ^ (uint32_t)c2;                                     \
        p += 2 * (BLOCK);                                                                     \
        n -= 3 * (BLOCK);                                                                     \
    }

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(const uint8_t *p, size_t n)
{
    uint64_t c = 0xFFFFFFFFu;
    CRC_ROUNDS(CRC_LONG, crc_long)
    CRC_ROUNDS(CRC_SHORT, crc_short)
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

static uint32_t (*crc32c_impl)(const uint8_t *, size_t) = crc32c_bytewise;

static void
crc_select(void)
{
    crc_init_table();
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe == 1)
        crc32c_impl = crc32c_sw;
#ifdef HAVE_SSE42_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_zeros_tables(crc_long, CRC_LONG);
        crc_zeros_tables(crc_short, CRC_SHORT);
        crc32c_impl = crc32c_hw;
    }
#endif
}

/* -- big-endian reads and writes -------------------------------------------------------- */
static inline int64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline void
put32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static inline void
put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* The ScanState fields, in order (storage/recovery_scan.py). */
typedef struct {
    long long valid, last_entry, mx_ts, mx_off, oi_last, oi_room, ti_ts, ti_off, ti_room,
        epoch_max;
} scan_state;

/* Growing byte output for the packed index entries. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} out_buf;

static int
out_reserve(out_buf *o, size_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    size_t cap = o->cap ? o->cap * 2 : 4096;
    while (cap < o->n + more)
        cap *= 2;
    uint8_t *p = PyMem_Realloc(o->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

static int
append_pair(PyObject *list, long long a, long long b)
{
    PyObject *t = Py_BuildValue("(LL)", a, b);
    if (t == NULL)
        return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

static int
append_int(PyObject *list, Py_ssize_t v)
{
    PyObject *x = PyLong_FromSsize_t(v);
    if (x == NULL)
        return -1;
    int rc = PyList_Append(list, x);
    Py_DECREF(x);
    return rc;
}

/* The end of the run of whole batches from ``off`` whose framing and CRC hold (the CRC
 * work, done without the GIL so recoveries of other partitions and the reads run meanwhile);
 * the scan below then skips the CRC of the batches before it, and stops where it would. */
#define CRC_WINDOW (4 << 20) /* batches checked ahead per pass: a scan stopping early wastes
                                at most this much CRC work */

static Py_ssize_t
crc_checked_end(const uint8_t *buf, Py_ssize_t len, Py_ssize_t off, Py_ssize_t until)
{
    while (off < until && len - off >= RECORD_BATCH_OVERHEAD) {
        const uint8_t *b = buf + off;
        int32_t length = be32(b + 8);
        i128 size = (i128)LOG_OVERHEAD + length;
        if (length < MIN_LENGTH_FIELD || size < RECORD_BATCH_OVERHEAD || (int8_t)b[16] != MAGIC_V2)
            break;
        if (size > len - off ||
            crc32c_impl(b + CRC_START, (size_t)size - CRC_START) != (uint32_t)be32(b + 17))
            break;
        off += (Py_ssize_t)size;
    }
    return off;
}

/* One batch at b (n bytes left): 1 taken (state, outputs updated), 0 stop, -1 error.
 * ``crc_ok``: the batch's CRC was checked already. */
static int
take_batch(const uint8_t *b, Py_ssize_t n, Py_ssize_t off, long long interval,
           long long seg_base, scan_state *s, out_buf *oi, out_buf *ti, PyObject *epochs,
           PyObject *producers, long long *next_offset, Py_ssize_t *size_out, int crc_ok)
{
    int64_t base = be64(b);
    int32_t length = be32(b + 8), epoch = be32(b + 12), delta = be32(b + 23);
    int8_t magic = (int8_t)b[16];
    uint32_t crc = (uint32_t)be32(b + 17);
    int64_t max_ts = be64(b + 35), pid = be64(b + 43);
    i128 size = (i128)LOG_OVERHEAD + length;
    if (length < MIN_LENGTH_FIELD || size < RECORD_BATCH_OVERHEAD || magic != MAGIC_V2)
        return 0;
    if (size > n || (!crc_ok && crc32c_impl(b + CRC_START, (size_t)size - CRC_START) != crc))
        return 0;
    i128 last = (i128)base + delta, rel = last - seg_base;
    if (rel < 0 || rel > INT32_MAX_ || s->valid > INT32_MAX_ || last >= INT64_MAX)
        return 0;
    i128 new_ts = s->mx_ts, new_off = s->mx_off;
    if (max_ts > s->mx_ts) {
        new_ts = max_ts;
        new_off = last;
    }
    if ((i128)s->valid - s->last_entry > interval) {
        if (s->oi_room <= 0 || last <= s->oi_last || s->ti_room <= 0)
            return 0;
        if (new_off < s->ti_off || new_ts < s->ti_ts)
            return 0;
        int add_time = new_ts > s->ti_ts;
        if (add_time && (new_off - seg_base < 0 || new_off - seg_base > INT32_MAX_))
            return 0;
        if (out_reserve(oi, 8) < 0 || (add_time && out_reserve(ti, 12) < 0))
            return -1;
        put32(oi->p + oi->n, (uint32_t)(int32_t)rel);
        put32(oi->p + oi->n + 4, (uint32_t)(int32_t)s->valid);
        oi->n += 8;
        s->oi_last = (long long)last;
        s->oi_room--;
        if (add_time) {
            put64(ti->p + ti->n, (uint64_t)(int64_t)new_ts);
            put32(ti->p + ti->n + 8, (uint32_t)(int32_t)(new_off - seg_base));
            ti->n += 12;
            s->ti_ts = (long long)new_ts;
            s->ti_off = (long long)new_off;
            s->ti_room--;
        }
        s->last_entry = s->valid;
    }
    s->mx_ts = (long long)new_ts;
    s->mx_off = (long long)new_off;
    if (epoch >= 0 && s->epoch_max < epoch) {
        if (append_pair(epochs, epoch, base) < 0)
            return -1;
        s->epoch_max = epoch;
    }
    if (pid >= 0 && append_int(producers, off) < 0)
        return -1;
    *next_offset = (long long)(last + 1);
    s->valid += (long long)size;
    *size_out = (Py_ssize_t)size;
    return 1;
}

PyObject *
tl_recover_scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t off;
    long long interval, seg_base;
    PyObject *state_in;
    scan_state s;
    if (!PyArg_ParseTuple(args, "y*nLLO!", &view, &off, &interval, &seg_base, &PyTuple_Type,
                          &state_in))
        return NULL;
    PyObject *result = NULL, *epochs = NULL, *producers = NULL;
    out_buf oi = {0}, ti = {0};
    if (!PyArg_ParseTuple(state_in, "LLLLLLLLLL;state: 10 ints", &s.valid, &s.last_entry,
                          &s.mx_ts, &s.mx_off, &s.oi_last, &s.oi_room, &s.ti_ts, &s.ti_off,
                          &s.ti_room, &s.epoch_max))
        goto done;
    if (off < 0 || off > view.len) {
        PyErr_SetString(PyExc_ValueError, "offset outside the buffer");
        goto done;
    }
    epochs = PyList_New(0);
    producers = PyList_New(0);
    if (epochs == NULL || producers == NULL)
        goto done;
    const uint8_t *buf = view.buf;
    long long next_offset = -1;
    Py_ssize_t checked = off;
    while (view.len - off >= RECORD_BATCH_OVERHEAD) {
        Py_ssize_t size = 0;
        if (off >= checked) {
            Py_ssize_t from = off;
            Py_BEGIN_ALLOW_THREADS
            checked = crc_checked_end(buf, view.len, from, from + CRC_WINDOW);
            Py_END_ALLOW_THREADS
        }
        int rc = take_batch(buf + off, view.len - off, off, interval, seg_base, &s, &oi, &ti,
                            epochs, producers, &next_offset, &size, off < checked);
        if (rc < 0)
            goto done;
        if (rc == 0)
            break;
        off += size;
    }
    result = Py_BuildValue(
        "(n(LLLLLLLLLL)y#y#OOL)", off, s.valid, s.last_entry, s.mx_ts, s.mx_off, s.oi_last,
        s.oi_room, s.ti_ts, s.ti_off, s.ti_room, s.epoch_max, (const char *)(oi.p ? oi.p : (uint8_t *)""),
        (Py_ssize_t)oi.n, (const char *)(ti.p ? ti.p : (uint8_t *)""), (Py_ssize_t)ti.n, epochs,
        producers, next_offset);
done:
    PyMem_Free(oi.p);
    PyMem_Free(ti.p);
    Py_XDECREF(epochs);
    Py_XDECREF(producers);
    PyBuffer_Release(&view);
    return result;
}

uint32_t
tl_crc32c(const uint8_t *p, size_t n)
{
    return crc32c_impl(p, n);
}

void
tl_recovery_init(void)
{
    crc_select();
}
