/* Protobuf's base-128 varint, read alike by proto_wire.c (the walk), proto_columns.c (the
 * column read) and avro_columns.c (under Avro's zig-zag longs). */
#ifndef TIDELOG_PROTO_VARINT_H
#define TIDELOG_PROTO_VARINT_H

#include <stdint.h>

/* One varint of at most 10 bytes (the 10th at most 1: a value under 2^64); 0 when bad. */
static inline int
proto_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) { /* one byte: nearly every tag and length */
        *out = *p;
        *pp = p + 1;
        return 1;
    }
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return 0;
        uint8_t b = *p++;
        if (i == 9 && b > 1)
            return 0;
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 1;
        }
    }
    return 0;
}

#endif
