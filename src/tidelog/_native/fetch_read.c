/* The read of one partition with new records: the offset-index lookup and the walk over
 * the batch headers of the `.log` in one call, the twin of storage/file_records.py
 * ``find_batch_py`` (OffsetIndex.lookup, then FileRecords.search_for_offset_with_size).
 *
 * find_batch(index, entries, base_offset, target, start, fd, limit)
 *   -> (last offset, position, size)
 * of the first batch at or after the index's floor entry of ``target`` (and at or after
 * ``start``) whose last offset is >= ``target``; None when there is none below ``limit`` (the
 * file's logical size; a partial trailing batch is invisible); or an int, the position the
 * walk started from, when it met something only the twin answers (a header it would reject,
 * fewer than a search's header bytes before ``limit``, a failed or short read): the caller
 * runs the twin's search from there, which gives the same answer or raises the same error
 * (from the same start its reads are the same chunks).
 *
 * ``index`` holds the index's ``entries`` valid entries first (8 bytes each, big-endian
 * relative offset and position, increasing). It is searched with the GIL held (the buffer is a bytearray an
 * append may resize: it is let go before anything else runs). The walk first reads only
 * what the page cache holds (preadv2 with RWF_NOWAIT), with the GIL held: the tail a
 * consumer reads is there, and letting the GIL go and taking it back cost more than such a
 * read (a futex wake of the threads waiting for it, then the wait for it). When a read
 * would wait for the disk, the walk starts again with blocking reads and the GIL released. Only the 27 bytes a search needs of each header are looked at;
 * the headers are read in chunks of 4 KiB doubling up to 64 KiB, as the twin does. */
#include "native.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#define LOG_OVERHEAD 12
#define UP_TO_MAGIC 17
#define MIN_LENGTH 14
#define BATCH_OVERHEAD 61
#define SEARCH_BYTES 27
#define FIRST_CHUNK 4096
#define MAX_CHUNK 65536

static int64_t
rd64(const uint8_t *p)
{
    return (int64_t)tl_be(p, 8);
}

static int32_t
rd32(const uint8_t *p)
{
    return (int32_t)(uint32_t)tl_be(p, 4);
}

/* The position of the index's floor entry of ``rel`` (relative target), 0 if none. */
static int64_t
floor_position(const uint8_t *idx, Py_ssize_t n, int64_t rel)
{
    if (n == 0 || rd32(idx) > rel)
        return 0;
    Py_ssize_t lo = 0, hi = n - 1;
    if (rd32(idx + hi * 8) <= rel)
        lo = hi; /* a caught-up consumer reads past the last entry: no search */
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi + 1) >> 1;
        if (rd32(idx + mid * 8) <= rel)
            lo = mid;
        else
            hi = mid - 1;
    }
    return rd32(idx + lo * 8 + 4);
}

enum { FOUND, NONE, TWIN, BLOCK };

/* pread all of ``n`` bytes: 0, TWIN on an error or end of file, or with ``nowait`` BLOCK
 * when the bytes are not all in the page cache (the read would wait for the disk). */
static int
read_full(int fd, uint8_t *buf, int64_t n, int64_t at, int nowait)
{
    int64_t got = 0;
    while (got < n) {
        ssize_t r;
#ifdef RWF_NOWAIT
        if (nowait) {
            struct iovec v = {buf + got, (size_t)(n - got)};
            r = preadv2(fd, &v, 1, (off_t)(at + got), RWF_NOWAIT);
            if (r < 0 && errno != EINTR)
                return BLOCK; /* EAGAIN, or a kernel or file system without it */
            if (r == 0)
                return BLOCK; /* the end of the file: the blocking read tells */
        } else
#endif
        {
            if (nowait)
                return BLOCK;
            r = pread(fd, buf + got, (size_t)(n - got), (off_t)(at + got));
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return TWIN;
        got += r;
    }
    return 0;
}

/* The walk from ``pos``: FOUND with *out set, NONE, TWIN, or with ``nowait`` BLOCK (a read
 * would wait for the disk: walk again without ``nowait`` and the GIL). The chunks
 * are the twin's (4 KiB doubling up to 64 KiB, never past ``limit``), so that a read short
 * of ``limit`` (a file shorter than its logical size) fails here where it fails there. */
static int
walk(int fd, int64_t pos, int64_t limit, int64_t target, int64_t out[3], int nowait)
{
    uint8_t first[FIRST_CHUNK];
    uint8_t *buf = first, *big = NULL;
    int64_t buf_start = pos, buf_len = 0, chunk = FIRST_CHUNK;
    int rc = NONE;
    while (limit - pos > UP_TO_MAGIC) {
        int64_t off = pos - buf_start;
        if (off + SEARCH_BYTES > buf_len) {
            int64_t want = limit - pos < chunk ? limit - pos : chunk;
            if (want > FIRST_CHUNK && big == NULL) {
                big = malloc(MAX_CHUNK);
                buf = big;
            }
            if (want < SEARCH_BYTES || buf == NULL) {
                rc = TWIN;
                break;
            }
            int r = read_full(fd, buf, want, pos, nowait);
            if (r != 0) {
                rc = r;
                break;
            }
            buf_start = pos, buf_len = want, off = 0;
            chunk = chunk * 2 > MAX_CHUNK ? MAX_CHUNK : chunk * 2;
        }
        const uint8_t *h = buf + off;
        int64_t base = rd64(h);
        int32_t length = rd32(h + 8);
        int64_t size = LOG_OVERHEAD + (int64_t)length;
        if (length < MIN_LENGTH || size < BATCH_OVERHEAD || h[16] != 2) {
            rc = TWIN;
            break;
        }
        if (size > limit - pos)
            break; /* a partial trailing batch is invisible */
        int64_t last = base + rd32(h + 23);
        if (last >= target) {
            out[0] = last, out[1] = pos, out[2] = size;
            rc = FOUND;
            break;
        }
        pos += size;
    }
    free(big);
    return rc;
}

PyObject *
tl_find_batch(PyObject *self, PyObject *args)
{
    Py_buffer index;
    Py_ssize_t entries;
    long long base, target, start, limit;
    int fd;
    if (!PyArg_ParseTuple(args, "y*nLLLiL:find_batch", &index, &entries, &base, &target,
                          &start, &fd, &limit))
        return NULL;
    if (entries < 0 || entries > index.len / 8)
        entries = index.len / 8;
    int64_t rel;
    if (__builtin_sub_overflow((int64_t)target, (int64_t)base, &rel))
        rel = target < 0 ? INT64_MIN : INT64_MAX;
    int64_t pos = floor_position((const uint8_t *)index.buf, entries, rel);
    PyBuffer_Release(&index);
    if (pos < start)
        pos = start;
    int64_t out[3];
    int rc;
    rc = walk(fd, pos, limit, target, out, 1);
    if (rc == BLOCK) {
        Py_BEGIN_ALLOW_THREADS
        rc = walk(fd, pos, limit, target, out, 0);
        Py_END_ALLOW_THREADS
    }
    if (rc == FOUND)
        return Py_BuildValue("(LLL)", (long long)out[0], (long long)out[1], (long long)out[2]);
    if (rc == NONE)
        Py_RETURN_NONE;
    return PyLong_FromLongLong((long long)pos);
}
