/* tidelog._native._core: MD5 as hashlib.md5(key).digest(), one key at a time and many
 * short keys at once in vector lanes (the cleaner's offset map, offset_map.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "native.h"

/* MD5 (RFC 1321), as hashlib.md5(key).digest().  One 64-byte block, unrolled: the rounds
 * as RFC 1321 writes them, constants inline (the loop form with its table lookups and round
 * branches ran at about half this speed). */
#define MD5_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MD5_G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))
#define MD5_STEP(f, a, b, c, d, x, k, s)                                                  \
    do {                                                                                 \
        (a) += f((b), (c), (d)) + (x) + (uint32_t)(k);                                  \
        (a) = ((a) << (s) | (a) >> (32 - (s))) + (b);                                   \
    } while (0)

/* The 64 steps over a, b, c, d and the message words w[16] (scalars or vector lanes). */
#define MD5_64_STEPS()                                                                      \
    do {                                                                                    \
        MD5_STEP(MD5_F, a, b, c, d, w[0], 0xd76aa478, 7);                                   \
        MD5_STEP(MD5_F, d, a, b, c, w[1], 0xe8c7b756, 12);                                  \
        MD5_STEP(MD5_F, c, d, a, b, w[2], 0x242070db, 17);                                  \
        MD5_STEP(MD5_F, b, c, d, a, w[3], 0xc1bdceee, 22);                                  \
        MD5_STEP(MD5_F, a, b, c, d, w[4], 0xf57c0faf, 7);                                   \
        MD5_STEP(MD5_F, d, a, b, c, w[5], 0x4787c62a, 12);                                  \
        MD5_STEP(MD5_F, c, d, a, b, w[6], 0xa8304613, 17);                                  \
        MD5_STEP(MD5_F, b, c, d, a, w[7], 0xfd469501, 22);                                  \
        MD5_STEP(MD5_F, a, b, c, d, w[8], 0x698098d8, 7);                                   \
        MD5_STEP(MD5_F, d, a, b, c, w[9], 0x8b44f7af, 12);                                  \
        MD5_STEP(MD5_F, c, d, a, b, w[10], 0xffff5bb1, 17);                                 \
        MD5_STEP(MD5_F, b, c, d, a, w[11], 0x895cd7be, 22);                                 \
        MD5_STEP(MD5_F, a, b, c, d, w[12], 0x6b901122, 7);                                  \
        MD5_STEP(MD5_F, d, a, b, c, w[13], 0xfd987193, 12);                                 \
        MD5_STEP(MD5_F, c, d, a, b, w[14], 0xa679438e, 17);                                 \
        MD5_STEP(MD5_F, b, c, d, a, w[15], 0x49b40821, 22);                                 \
        MD5_STEP(MD5_G, a, b, c, d, w[1], 0xf61e2562, 5);                                   \
        MD5_STEP(MD5_G, d, a, b, c, w[6], 0xc040b340, 9);                                   \
        MD5_STEP(MD5_G, c, d, a, b, w[11], 0x265e5a51, 14);                                 \
        MD5_STEP(MD5_G, b, c, d, a, w[0], 0xe9b6c7aa, 20);                                  \
        MD5_STEP(MD5_G, a, b, c, d, w[5], 0xd62f105d, 5);                                   \
        MD5_STEP(MD5_G, d, a, b, c, w[10], 0x02441453, 9);                                  \
        MD5_STEP(MD5_G, c, d, a, b, w[15], 0xd8a1e681, 14);                                 \
        MD5_STEP(MD5_G, b, c, d, a, w[4], 0xe7d3fbc8, 20);                                  \
        MD5_STEP(MD5_G, a, b, c, d, w[9], 0x21e1cde6, 5);                                   \
        MD5_STEP(MD5_G, d, a, b, c, w[14], 0xc33707d6, 9);                                  \
        MD5_STEP(MD5_G, c, d, a, b, w[3], 0xf4d50d87, 14);                                  \
        MD5_STEP(MD5_G, b, c, d, a, w[8], 0x455a14ed, 20);                                  \
        MD5_STEP(MD5_G, a, b, c, d, w[13], 0xa9e3e905, 5);                                  \
        MD5_STEP(MD5_G, d, a, b, c, w[2], 0xfcefa3f8, 9);                                   \
        MD5_STEP(MD5_G, c, d, a, b, w[7], 0x676f02d9, 14);                                  \
        MD5_STEP(MD5_G, b, c, d, a, w[12], 0x8d2a4c8a, 20);                                 \
        MD5_STEP(MD5_H, a, b, c, d, w[5], 0xfffa3942, 4);                                   \
        MD5_STEP(MD5_H, d, a, b, c, w[8], 0x8771f681, 11);                                  \
        MD5_STEP(MD5_H, c, d, a, b, w[11], 0x6d9d6122, 16);                                 \
        MD5_STEP(MD5_H, b, c, d, a, w[14], 0xfde5380c, 23);                                 \
        MD5_STEP(MD5_H, a, b, c, d, w[1], 0xa4beea44, 4);                                   \
        MD5_STEP(MD5_H, d, a, b, c, w[4], 0x4bdecfa9, 11);                                  \
        MD5_STEP(MD5_H, c, d, a, b, w[7], 0xf6bb4b60, 16);                                  \
        MD5_STEP(MD5_H, b, c, d, a, w[10], 0xbebfbc70, 23);                                 \
        MD5_STEP(MD5_H, a, b, c, d, w[13], 0x289b7ec6, 4);                                  \
        MD5_STEP(MD5_H, d, a, b, c, w[0], 0xeaa127fa, 11);                                  \
        MD5_STEP(MD5_H, c, d, a, b, w[3], 0xd4ef3085, 16);                                  \
        MD5_STEP(MD5_H, b, c, d, a, w[6], 0x04881d05, 23);                                  \
        MD5_STEP(MD5_H, a, b, c, d, w[9], 0xd9d4d039, 4);                                   \
        MD5_STEP(MD5_H, d, a, b, c, w[12], 0xe6db99e5, 11);                                 \
        MD5_STEP(MD5_H, c, d, a, b, w[15], 0x1fa27cf8, 16);                                 \
        MD5_STEP(MD5_H, b, c, d, a, w[2], 0xc4ac5665, 23);                                  \
        MD5_STEP(MD5_I, a, b, c, d, w[0], 0xf4292244, 6);                                   \
        MD5_STEP(MD5_I, d, a, b, c, w[7], 0x432aff97, 10);                                  \
        MD5_STEP(MD5_I, c, d, a, b, w[14], 0xab9423a7, 15);                                 \
        MD5_STEP(MD5_I, b, c, d, a, w[5], 0xfc93a039, 21);                                  \
        MD5_STEP(MD5_I, a, b, c, d, w[12], 0x655b59c3, 6);                                  \
        MD5_STEP(MD5_I, d, a, b, c, w[3], 0x8f0ccc92, 10);                                  \
        MD5_STEP(MD5_I, c, d, a, b, w[10], 0xffeff47d, 15);                                 \
        MD5_STEP(MD5_I, b, c, d, a, w[1], 0x85845dd1, 21);                                  \
        MD5_STEP(MD5_I, a, b, c, d, w[8], 0x6fa87e4f, 6);                                   \
        MD5_STEP(MD5_I, d, a, b, c, w[15], 0xfe2ce6e0, 10);                                 \
        MD5_STEP(MD5_I, c, d, a, b, w[6], 0xa3014314, 15);                                  \
        MD5_STEP(MD5_I, b, c, d, a, w[13], 0x4e0811a1, 21);                                 \
        MD5_STEP(MD5_I, a, b, c, d, w[4], 0xf7537e82, 6);                                   \
        MD5_STEP(MD5_I, d, a, b, c, w[11], 0xbd3af235, 10);                                 \
        MD5_STEP(MD5_I, c, d, a, b, w[2], 0x2ad7d2bb, 15);                                  \
        MD5_STEP(MD5_I, b, c, d, a, w[9], 0xeb86d391, 21);                                  \
    } while (0)

static void
md5_block(uint32_t h[4], const uint8_t *p)
{
    uint32_t w[16], a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
               (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
    MD5_64_STEPS();
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

void
tl_md5_digest(const uint8_t *data, size_t len, uint8_t out[16])
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

/* MD5 of many short keys at once: keys of up to 55 bytes (one padded block) are hashed
 * MD5_LANES at a time in vector lanes (GCC/Clang vector extensions: SSE2 on any x86-64,
 * NEON on arm64), each lane the scalar steps above; longer keys go through md5().  MD5 is
 * one long dependency chain per key, so lanes are where the speed is. */

#if defined(__GNUC__) || defined(__clang__)
#define MD5_LANES 8
typedef uint32_t md5_vec __attribute__((vector_size(4 * MD5_LANES)));

static void
md5_lanes(const tl_key_ref *keys, int n, uint8_t (*out)[16])
{
    uint8_t blocks[MD5_LANES][64];
    md5_vec w[16];
    memset(blocks, 0, sizeof(blocks));
    for (int l = 0; l < n; l++) {
        memcpy(blocks[l], keys[l].p, keys[l].n);
        blocks[l][keys[l].n] = 0x80;
        uint64_t bits = (uint64_t)keys[l].n * 8;
        for (int i = 0; i < 8; i++)
            blocks[l][56 + i] = (uint8_t)(bits >> (8 * i));
    }
    for (int i = 0; i < 16; i++)
        for (int l = 0; l < MD5_LANES; l++) {
            const uint8_t *q = blocks[l] + 4 * i;
            w[i][l] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                      (uint32_t)q[3] << 24;
        }
    md5_vec a = {0}, b = {0}, c = {0}, d = {0};
    a += 0x67452301; b += 0xefcdab89; c += 0x98badcfe; d += 0x10325476;
    MD5_64_STEPS();
    a += 0x67452301; b += 0xefcdab89; c += 0x98badcfe; d += 0x10325476;
    for (int l = 0; l < n; l++) {
        uint32_t h[4] = {a[l], b[l], c[l], d[l]};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                out[l][4 * i + j] = (uint8_t)(h[i] >> (8 * j));
    }
}
#endif

void
tl_md5_keys(const tl_key_ref *keys, Py_ssize_t n, uint8_t (*out)[16])
{
#ifdef MD5_LANES
    tl_key_ref lane[MD5_LANES];
    Py_ssize_t at[MD5_LANES];
    uint8_t res[MD5_LANES][16];
    int k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (keys[i].n > 55) {
            tl_md5_digest(keys[i].p, keys[i].n, out[i]);
            continue;
        }
        lane[k] = keys[i];
        at[k++] = i;
        if (k == MD5_LANES) {
            md5_lanes(lane, k, res);
            for (int l = 0; l < k; l++)
                memcpy(out[at[l]], res[l], 16);
            k = 0;
        }
    }
    if (k > 0) {
        md5_lanes(lane, k, res);
        for (int l = 0; l < k; l++)
            memcpy(out[at[l]], res[l], 16);
    }
#else
    for (Py_ssize_t i = 0; i < n; i++)
        tl_md5_digest(keys[i].p, keys[i].n, out[i]);
#endif
}
