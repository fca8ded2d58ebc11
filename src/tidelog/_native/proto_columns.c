/* Protobuf (proto3) values into Arrow column buffers: iceberg/protobuf_native.py
 * proto_columns in C.
 *
 * Each value is one message of the plan's type, its fields read straight into the buffers
 * of the table's columns: the integer kinds (int32/sint32/sfixed32 -> int32; int64, sint64,
 * uint32, fixed32, uint64 and fixed64 (wrapped) -> int64), bool, float, double, string,
 * bytes, enum (its name, or its number as text), nested messages, repeated fields (packed
 * or not) and google.protobuf.Timestamp (microseconds, nanos cut toward zero); a field not
 * sent has its default (null for a message or a proto3 optional field).  The read is
 * strict: a value is taken only when the protobuf runtime, the reference, would give
 * exactly these columns.  Anything else rejects that value (its slots are rolled back to a
 * null row, its index returned, for the runtime to decode value by value): malformed wire
 * data (as proto_wire.c refuses it), a known field under another wire type, a singular
 * field sent twice (the runtime keeps the last, or merges), a string that is not UTF-8, a
 * Timestamp outside years 1 to 9999.  ptars, the other bulk path, builds the same columns
 * through dynamic messages, after a walk of the values (proto_wire.c), at about 1.3 times
 * this read's cost. */
#define PY_SSIZE_T_CLEAN
#include "proto_columns.h"

/* The wire type a kind is sent under (2: length-delimited). */
static inline int
wire_of(int kind)
{
    switch (kind) {
    case P_F32: case P_FX32U: case P_SFX32:
        return 5;
    case P_F64: case P_FX64:
        return 1;
    case P_STRING: case P_BYTES: case P_STRUCT: case P_TS: case P_LIST:
        return 2;
    }
    return 0;
}



static int
p_slot(PNode *nd, int valid)
{
    static const uint8_t zero[8] = {0};
    nd->count++;
    if (nd->kind == P_ABSENT)
        return 0;
    if (push_u8(&nd->valid, (uint8_t)valid) < 0)
        return -1;
    int w = width(nd->kind);
    if (w)
        return tlj_put(&nd->vals, zero, (size_t)w);
    switch (nd->kind) {
    case P_STRING: case P_BYTES: case P_ENUM:
        return poff(nd, nd->vals.len);
    case P_LIST:
        return poff(nd, (size_t)nd->child[0]->count);
    case P_STRUCT:
        for (int i = 0; i < nd->nchild; i++)
            if (pc_null(nd->child[i]) < 0)
                return -1;
    }
    return 0;
}

int
pc_null(PNode *nd)
{
    return p_slot(nd, 0);
}

static int
enum_name(PNode *nd, int32_t v)
{
    for (Py_ssize_t i = 0; i < nd->nsym; i++)
        if (nd->sym_num[i] == v)
            return tlj_put(&nd->vals, nd->sym[i], (size_t)nd->sym_len[i]);
    char text[16];
    int n = snprintf(text, sizeof text, "%d", v);
    return tlj_put(&nd->vals, text, (size_t)n);
}

/* A field's default when it is not sent (proto3: zero, empty, the enum's value 0). */
static int
p_default(PNode *nd)
{
    if (nd->kind == P_ENUM) {
        if (enum_name(nd, 0) < 0 || poff(nd, nd->vals.len) < 0 || push_u8(&nd->valid, 1) < 0)
            return -1;
        nd->count++;
        return 0;
    }
    return p_slot(nd, 1);
}


static inline int
p_taken(PNode *nd)
{
    nd->count++;
    return push_u8(&nd->valid, 1) < 0 ? -1 : 1;
}

/* One scalar of ``nd``'s kind from [*pp, end) (already known to be under its wire type). */
static int
read_scalar(const uint8_t **pp, const uint8_t *end, PNode *nd)
{
    uint64_t v = 0;
    int64_t x64;
    int32_t x32;
    const uint8_t *p = *pp;
    switch (nd->kind) {
    case P_I32: case P_SI32: case P_U32: case P_I64: case P_SI64: case P_BOOL: case P_ENUM:
        TRY(proto_varint(&p, end, &v));
        break;
    case P_F32: case P_FX32U: case P_SFX32:
        if (end - p < 4)
            return 0;
        if (nd->kind == P_F32) { /* a NaN's payload may change on the runtime's way */
            float f;
            memcpy(&f, p, 4);
            if (f != f)
                return 0;
        }
        break;
    case P_F64: case P_FX64:
        if (end - p < 8)
            return 0;
        break;
    }
    switch (nd->kind) {
    case P_I32:
        x32 = (int32_t)(uint32_t)v;
        if (tlj_put(&nd->vals, &x32, 4) < 0)
            return -1;
        break;
    case P_SI32: {
        uint32_t u = (uint32_t)v;
        x32 = (int32_t)(u >> 1) ^ -(int32_t)(u & 1);
        if (tlj_put(&nd->vals, &x32, 4) < 0)
            return -1;
        break;
    }
    case P_U32:
        x64 = (int64_t)(uint32_t)v;
        if (tlj_put(&nd->vals, &x64, 8) < 0)
            return -1;
        break;
    case P_I64:
        x64 = (int64_t)v;
        if (tlj_put(&nd->vals, &x64, 8) < 0)
            return -1;
        break;
    case P_SI64:
        x64 = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        if (tlj_put(&nd->vals, &x64, 8) < 0)
            return -1;
        break;
    case P_BOOL:
        if (push_u8(&nd->vals, v != 0) < 0)
            return -1;
        break;
    case P_ENUM:
        if (enum_name(nd, (int32_t)(uint32_t)v) < 0 || poff(nd, nd->vals.len) < 0)
            return -1;
        break;
    case P_F32: case P_SFX32:
        if (tlj_put(&nd->vals, p, 4) < 0)
            return -1;
        p += 4;
        break;
    case P_FX32U: {
        uint32_t u;
        memcpy(&u, p, 4);
        x64 = u;
        if (tlj_put(&nd->vals, &x64, 8) < 0)
            return -1;
        p += 4;
        break;
    }
    case P_F64: case P_FX64:
        if (tlj_put(&nd->vals, p, 8) < 0)
            return -1;
        p += 8;
        break;
    default:
        return 0;
    }
    *pp = p;
    return p_taken(nd);
}

#define MIN_S (-62135596800LL)
#define MAX_S 253402300799LL
#define MIN_US (-62135596800000000LL)
#define MAX_US 253402300799999999LL

/* A google.protobuf.Timestamp message as microseconds. */
static int
read_ts(const uint8_t *p, const uint8_t *end, PNode *nd)
{
    uint64_t tag, v, seconds = 0, nanos = 0;
    int seen = 0;
    while (p < end) {
        const uint8_t *at = p;
        TRY(proto_varint(&p, end, &tag));
        if (p - at > 5 || tag > 0xFFFFFFFFu || (tag >> 3) == 0)
            return 0;
        int wire = (int)(tag & 7), number = (int)(tag >> 3);
        if ((number == 1 || number == 2) && wire == 0) {
            if (seen & number)
                return 0;
            seen |= number;
            TRY(proto_varint(&p, end, &v));
            if (number == 1)
                seconds = v;
            else
                nanos = v;
        } else if (number == 1 || number == 2 || wire == 3 || wire == 4 || wire > 5) {
            return 0;
        } else if (wire == 0) {
            TRY(proto_varint(&p, end, &v));
        } else if (wire == 1 || wire == 5) {
            if (end - p < (wire == 1 ? 8 : 4))
                return 0;
            p += wire == 1 ? 8 : 4;
        } else {
            TRY(proto_varint(&p, end, &v));
            if (v > (uint64_t)(end - p))
                return 0;
            p += v;
        }
    }
    int64_t s = (int64_t)seconds;
    int32_t n = (int32_t)(uint32_t)nanos;
    if (s < MIN_S - 3 || s > MAX_S + 3)
        return 0;
    int64_t us = s * 1000000 + n / 1000;
    if (us < MIN_US || us > MAX_US)
        return 0;
    if (tlj_put(&nd->vals, &us, 8) < 0)
        return -1;
    return p_taken(nd);
}

/* One element or value of ``nd`` sent under ``wire`` at [*pp, end). */
static int
read_one(const uint8_t **pp, const uint8_t *end, PNode *nd, int wire, int depth)
{
    int want = wire_of(nd->kind);
    if (want != 2) {
        if (wire != want)
            return 0;
        return read_scalar(pp, end, nd);
    }
    uint64_t len;
    const uint8_t *p = *pp;
    if (wire != 2)
        return 0;
    TRY(proto_varint(&p, end, &len));
    if (len > (uint64_t)(end - p))
        return 0;
    const uint8_t *stop = p + len;
    *pp = stop;
    switch (nd->kind) {
    case P_STRING:
        if (!tl_utf8_ok(p, stop))
            return 0;
        /* fall through */
    case P_BYTES:
        if (tlj_put(&nd->vals, p, (size_t)len) < 0 || poff(nd, nd->vals.len) < 0)
            return -1;
        return p_taken(nd);
    case P_STRUCT:
        return pc_read_message(p, stop, nd, depth + 1);
    case P_TS:
        return read_ts(p, stop, nd);
    }
    return 0;
}

/* Packed elements of ``el`` filling [p, end) exactly. */
static int
read_packed(const uint8_t *p, const uint8_t *end, PNode *el)
{
    if (wire_of(el->kind) == 2)
        return 0;
    int w = wire_of(el->kind) == 5 ? 4 : wire_of(el->kind) == 1 ? 8 : 0;
    if (w && (end - p) % w)
        return 0;
    while (p < end)
        TRY(read_scalar(&p, end, el));
    return 1;
}

static int
skip_unknown(const uint8_t **pp, const uint8_t *end, int wire)
{
    uint64_t v;
    switch (wire) {
    case 0:
        return proto_varint(pp, end, &v);
    case 1:
    case 5: {
        int n = wire == 1 ? 8 : 4;
        if (end - *pp < n)
            return 0;
        *pp += n;
        return 1;
    }
    case 2:
        TRY(proto_varint(pp, end, &v));
        if (v > (uint64_t)(end - *pp))
            return 0;
        *pp += v;
        return 1;
    }
    return 0;
}

static inline int
find_child(PNode *nd, uint32_t number, int *hint)
{
    int i = *hint;
    if (i < nd->nchild && nd->child[i]->number == number) {
        *hint = i + 1;
        return i;
    }
    for (i = 0; i < nd->nchild; i++)
        if (nd->child[i]->number == number) {
            *hint = i + 1;
            return i;
        }
    return -1;
}

int
pc_read_message(const uint8_t *p, const uint8_t *end, PNode *nd, int depth)
{
    uint64_t seen = 0, tag;
    int hint = 0;
    if (depth > P_MAX_DEPTH)
        return 0;
    while (p < end) {
        const uint8_t *at = p;
        TRY(proto_varint(&p, end, &tag));
        if (p - at > 5 || tag > 0xFFFFFFFFu || (tag >> 3) == 0)
            return 0;
        int wire = (int)(tag & 7);
        int i = find_child(nd, (uint32_t)(tag >> 3), &hint);
        if (i < 0) {
            TRY(skip_unknown(&p, end, wire));
            continue;
        }
        PNode *f = nd->child[i];
        if (f->kind == P_LIST) {
            PNode *el = f->child[0];
            if (wire == 2 && wire_of(el->kind) != 2) {
                uint64_t len;
                TRY(proto_varint(&p, end, &len));
                if (len > (uint64_t)(end - p))
                    return 0;
                TRY(read_packed(p, p + len, el));
                p += len;
            } else {
                TRY(read_one(&p, end, el, wire, depth));
            }
        } else {
            if (seen & ((uint64_t)1 << i))
                return 0; /* the runtime keeps the last (or merges): it decides */
            TRY(read_one(&p, end, f, wire, depth));
        }
        seen |= (uint64_t)1 << i;
    }
    for (int i = 0; i < nd->nchild; i++) {
        PNode *f = nd->child[i];
        int r = 0;
        if (f->kind == P_LIST) {
            r = poff(f, (size_t)f->child[0]->count) < 0 || p_taken(f) < 0 ? -1 : 0;
        } else if (!(seen & ((uint64_t)1 << i))) {
            r = f->presence || f->kind == P_ABSENT ? pc_null(f) : p_default(f);
        }
        if (r < 0)
            return -1;
    }
    return p_taken(nd);
}
