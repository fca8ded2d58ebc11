/* JSON's numbers as float() reads them (see json_text.h): Clinger's fast path, then
 * Eisel-Lemire over a table of 128-bit powers of ten, then Python's dtoa (correctly
 * rounded, what json.loads' float() uses) for what those cannot decide.  Written here:
 * fast_float, the library of these steps, is C++ (this core is C), Python's dtoa wants the
 * GIL (the pass runs without it), and strtod's speed and locale are the platform's. */
#define PY_SSIZE_T_CLEAN
#include <stdlib.h>

#include "json_text.h"

/* A validated number token as its digits m and power of ten (value m * 10^exp10); 0 past
 * 19 significant digits or an exponent of four digits. */
static int
decimal(const uint8_t *p, const uint8_t *e, uint64_t *m_out, long *exp_out)
{
    int digits = 0, frac = 0;
    long exp10 = 0;
    uint64_t m = 0;
    for (; p < e && ((*p >= '0' && *p <= '9') || (*p == '.' && !frac)); p++) {
        if (*p == '.') {
            frac = 1;
            continue;
        }
        if (m || *p != '0')
            digits++;
        m = m * 10 + (uint64_t)(*p - '0');
        exp10 -= frac;
        if (digits > 19)
            return 0;
    }
    if (p < e) { /* an exponent */
        int eneg = 0;
        long x = 0;
        p++;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        for (; p < e; p++) {
            x = x * 10 + (*p - '0');
            if (x > 1000)
                return 0;
        }
        exp10 += eneg ? -x : x;
    }
    *m_out = m;
    *exp_out = exp10;
    return 1;
}

/* 10^q as T * 2^E, T 128 bits (top bit set) truncated from the exact value (T <= exact <
 * T + 1), for q in [Q_MIN, Q_MAX] (every decimal exponent a double can use with 19 digits):
 * the table of the Eisel-Lemire algorithm, computed once from exact multiples and quotients
 * of powers of five (a small fixed-size big integer: 5^342 < 2^795). */
#define Q_MIN (-342)
#define Q_MAX 308
#define LIMBS 48 /* 1,536 bits */
static uint64_t pow10_hi[Q_MAX - Q_MIN + 1], pow10_lo[Q_MAX - Q_MIN + 1];
static int pow10_e[Q_MAX - Q_MIN + 1];
static int pow10_ready;

static int
bit_length(const uint32_t *x)
{
    for (int i = LIMBS - 1; i >= 0; i--)
        if (x[i])
            return 32 * i + 32 - __builtin_clz(x[i]);
    return 0;
}

/* The 128 bits of x from bit ``from`` up (bits below 0 read as zeros). */
static void
bits128(const uint32_t *x, int from, uint64_t *hi, uint64_t *lo)
{
    uint64_t h = 0, l = 0;
    for (int i = 127; i >= 0; i--) {
        int b = from + i;
        uint64_t bit = b >= 0 && (x[b / 32] >> (b % 32)) & 1;
        if (i >= 64)
            h |= bit << (i - 64);
        else
            l |= bit << i;
    }
    *hi = h;
    *lo = l;
}

static void
pow10_init(void)
{
    uint32_t x[LIMBS] = {1};
    for (int q = 0; q <= Q_MAX; q++) { /* x = 5^q */
        int len = bit_length(x), k = q - Q_MIN;
        bits128(x, len - 128, &pow10_hi[k], &pow10_lo[k]);
        pow10_e[k] = q + len - 128;
        uint64_t carry = 0;
        for (int i = 0; i < LIMBS; i++) {
            uint64_t v = (uint64_t)x[i] * 5 + carry;
            x[i] = (uint32_t)v;
            carry = v >> 32;
        }
    }
    memset(x, 0, sizeof x);
    x[LIMBS - 1] = 1u << 31; /* 2^(32 * LIMBS - 1) */
    for (int n = 1; n <= -Q_MIN; n++) { /* x = floor(2^1535 / 5^n) */
        uint64_t rem = 0;
        for (int i = LIMBS - 1; i >= 0; i--) {
            uint64_t v = (rem << 32) | x[i];
            x[i] = (uint32_t)(v / 5);
            rem = v % 5;
        }
        int len = bit_length(x), k = -n - Q_MIN;
        bits128(x, len - 128, &pow10_hi[k], &pow10_lo[k]);
        pow10_e[k] = -n - (32 * LIMBS - 1) + (len - 128);
    }
}

void
tlj_init(void)
{
    if (!pow10_ready) {
        pow10_init();
        pow10_ready = 1;
    }
}

/* m * 10^q (m < 2^64) as the correctly rounded double (Eisel-Lemire: the 128-bit product
 * of m and 10^q's truncated table entry is within 2 units of its lower word of the exact
 * product, so its upper word is exact when the lower word is not within 2 of a carry), or
 * 0 when it cannot decide (near a carry; a tie, except where the product is exact: 10^q <
 * 2^64; a result past the normal doubles): the caller asks a slower path. */
static int
eisel_lemire(uint64_t m, long q, int neg, double *out)
{
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
        return 1;
    }
    if (q < Q_MIN || q > Q_MAX)
        return 0;
    int lz = __builtin_clzll(m), k = (int)(q - Q_MIN);
    uint64_t w = m << lz;
    unsigned __int128 first = (unsigned __int128)w * pow10_hi[k];
    unsigned __int128 second = (unsigned __int128)w * pow10_lo[k];
    uint64_t hi = (uint64_t)(first >> 64), lo = (uint64_t)first, add = (uint64_t)(second >> 64);
    lo += add;
    hi += lo < add;
    int exact = q >= 0 && q <= 27; /* 5^27 < 2^64: the table's entry and product are exact */
    if (!exact && (lo < 2 || lo > UINT64_MAX - 2))
        return 0;
    int upper = (int)(hi >> 63), shift = upper + 9;
    uint64_t bits = hi >> shift; /* 54 bits: the mantissa and a rounding bit */
    /* the value: bits * 2^(shift + 128 + E - lz) (and what is below) */
    long e2 = (long)shift + 128 + pow10_e[k] - lz + 1 + 52 + 1023; /* biased, of bits / 2 */
    int below = (hi & (((uint64_t)1 << shift) - 1)) != 0 || lo != 0;
    if ((bits & 1) && !below && !(bits & 2)) /* a tie, to even: down */
        bits -= 1;
    bits = (bits + (bits & 1)) >> 1;
    if (bits >> 53) {
        bits >>= 1;
        e2++;
    }
    if (e2 <= 0 || e2 >= 0x7FF)
        return 0;
    uint64_t word = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)e2 << 52) |
                    ((uint64_t)neg << 63);
    memcpy(out, &word, 8);
    return 1;
}

/* A decimal token of at most 19 significant digits, as float() reads it, or 0 (the caller
 * asks Python's dtoa): within 2^53 and 10^22 one double operation is exact enough
 * (Clinger's fast path), else Eisel-Lemire. */
static int
exact_double(const uint8_t *s, size_t n, double *out)
{
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                   1e20, 1e21, 1e22};
    int neg = *s == '-';
    uint64_t m;
    long exp10;
    if (!decimal(s + neg, s + n, &m, &exp10))
        return 0;
    if (m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)m;
        d = exp10 < 0 ? d / p10[-exp10] : d * p10[exp10];
        *out = neg ? -d : d;
        return 1;
    }
    return eisel_lemire(m, exp10, neg, out);
}

/* The number token at ``s`` (ending at c->p) as float() reads it: the exact fast path, or
 * Python's correctly rounded dtoa (which json.loads uses), with the GIL; inf past the
 * range as float('1e400'), but an integer token past it is not taken (json.loads gives an
 * int, which float() refuses), and float(int("-0")) is 0.0. */
int
tlj_double(Cur *c, const uint8_t *s, int is_int, double *out)
{
    char tmp[128], *stop;
    size_t n = (size_t)(c->p - s);
    double x;
    if (!exact_double(s, n, &x)) {
        if (n >= sizeof tmp)
            return 0;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        if (c->ts) /* Python's dtoa wants the GIL (its big integers' free lists) */
            PyEval_RestoreThread(c->ts);
        x = PyOS_string_to_double(tmp, &stop, NULL);
        int failed = x == -1.0 && PyErr_Occurred();
        if (c->ts)
            c->ts = PyEval_SaveThread();
        if (failed) {
            tlj_error = E_PYTHON;
            return -1;
        }
        if (stop != tmp + n || (is_int && (x == Py_HUGE_VAL || x == -Py_HUGE_VAL)))
            return 0;
    }
    *out = is_int && x == 0 ? 0.0 : x;
    return 1;
}

/* Eight ASCII digits in a little-endian word: whether they are, and their value (the
 * SWAR steps of fast_float's parse_eight_digits_unrolled). */
static inline int
eight_digits(uint64_t w)
{
    return !(((w + 0x4646464646464646ULL) | (w - 0x3030303030303030ULL)) &
             0x8080808080808080ULL);
}

static inline uint64_t
eight_value(uint64_t w)
{
    const uint64_t mask = 0x000000FF000000FFULL;
    w -= 0x3030303030303030ULL;
    w = (w * 10) + (w >> 8);
    return (((w & mask) * 0x000F424000000064ULL) +
            (((w >> 16) & mask) * 0x0000271000000001ULL)) >> 32;
}

/* The digits at ``p`` into *m, at most *room of them (*room less those), eight at a time
 * where they are; returns the end of all the digits there, *more when some were left. */
static inline const uint8_t *
take_digits(const uint8_t *p, const uint8_t *e, uint64_t *m, int *room, int *more)
{
    const uint8_t *start = p, *stop = e - p > *room ? p + *room : e;
    uint64_t v = *m;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (stop - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        if (!eight_digits(w))
            break;
        v = v * 100000000 + eight_value(w);
        p += 8;
    }
#endif
    while (p < stop && (unsigned)(*p - '0') < 10)
        v = v * 10 + (uint64_t)(*p++ - '0');
    *room -= (int)(p - start);
    *m = v;
    const uint8_t *q = p;
    while (q < e && (unsigned)(*q - '0') < 10)
        q++;
    *more = q != p;
    return q;
}

/* A number (c->p at its first byte) by JSON's grammar, as float() reads it: one scan that
 * checks the grammar and gathers up to 19 significant digits and the power of ten, then
 * the exact fast paths; tlj_double with the token's text for the others. */
int
tlj_number(Cur *c, double *out)
{
    const uint8_t *s = c->p, *p = s, *e = c->end;
    int neg = 0, is_int = 1, slow = 0, room = 19, more;
    uint64_t m = 0;
    long exp10 = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= e || (unsigned)(*p - '0') >= 10)
        return 0;
    if (*p == '0')
        p++;
    else {
        p = take_digits(p, e, &m, &room, &more);
        slow |= more;
    }
    if (p < e && *p == '.') {
        is_int = 0;
        p++;
        if (p >= e || (unsigned)(*p - '0') >= 10)
            return 0;
        if (m == 0) { /* zeros before the first significant digit */
            const uint8_t *z = p;
            while (p < e && *p == '0')
                p++;
            exp10 -= (long)(p - z);
        }
        int before = room;
        p = take_digits(p, e, &m, &room, &more);
        exp10 -= before - room;
        slow |= more;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        long x = 0;
        int eneg = 0;
        is_int = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p >= e || (unsigned)(*p - '0') >= 10)
            return 0;
        for (; p < e && (unsigned)(*p - '0') < 10; p++)
            if ((x = x * 10 + (*p - '0')) > 100000)
                slow = 1, x = 100000;
        exp10 += eneg ? -x : x;
    }
    c->p = p;
    static const double p10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                   1e20, 1e21, 1e22};
    double x;
    if (slow)
        return tlj_double(c, s, is_int, out);
    if (m <= ((uint64_t)1 << 53) && exp10 >= -22 && exp10 <= 22) {
        x = (double)m;
        x = exp10 < 0 ? x / p10[-exp10] : x * p10[exp10];
        x = neg ? -x : x;
    } else if (!eisel_lemire(m, exp10, neg, &x))
        return tlj_double(c, s, is_int, out);
    *out = is_int && x == 0 ? 0.0 : x;
    return 1;
}
