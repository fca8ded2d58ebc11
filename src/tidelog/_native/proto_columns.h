/* Shared by proto_columns.c (the read of the values) and proto_plan.c (the plan from
 * Python, the pass over the rows, the columns back to Python). */
#ifndef TIDELOG_PROTO_COLUMNS_H
#define TIDELOG_PROTO_COLUMNS_H

#include <stdlib.h>

#include "json_text.h"
#include "native.h"
#include "proto_varint.h"

enum { P_ABSENT = 0, P_I32, P_SI32, P_U32, P_I64, P_SI64, P_BOOL, P_F32, P_F64, P_FX32U,
       P_SFX32, P_FX64, P_STRING, P_BYTES, P_ENUM, P_STRUCT, P_LIST, P_TS };
#define P_MAX_NODES 1024
#define P_MAX_FIELDS 64
#define P_MAX_DEPTH 64

typedef struct PNode {
    int kind, large, presence, nchild;
    uint32_t number;
    struct PNode **child;
    Py_ssize_t nsym;       /* enum: its values (numbers, names) */
    int32_t *sym_num;
    const char **sym;
    Py_ssize_t *sym_len;
    TLJ_COLUMN;
} PNode;

static inline int
poff(PNode *nd, size_t v)
{
    if (nd->large) {
        int64_t o = (int64_t)v;
        return tlj_put(&nd->offs, &o, 8);
    }
    if (v > INT32_MAX) {
        tlj_error = E_TOO_BIG;
        return -1;
    }
    int32_t o = (int32_t)v;
    return tlj_put(&nd->offs, &o, 4);
}

static inline int
width(int kind)
{
    switch (kind) {
    case P_I32: case P_SI32: case P_SFX32: case P_F32:
        return 4;
    case P_U32: case P_I64: case P_SI64: case P_FX32U: case P_FX64: case P_F64: case P_TS:
        return 8;
    case P_BOOL:
        return 1;
    }
    return 0;
}

/* A null row of ``nd`` (its children's slots too); -1 on no memory. */
int pc_null(PNode *nd);

/* One message of ``nd``'s type from [p, end): 1 taken, 0 rejected, -1 on an error. */
int pc_read_message(const uint8_t *p, const uint8_t *end, PNode *nd, int depth);

#endif
