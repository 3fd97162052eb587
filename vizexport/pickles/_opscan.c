/* vizexport.pickles._opscan: pass 1's frame walk (opscan.frame_memos) in C, one frame after another.
 *
 * It gives exactly what opscan's numpy lockstep walk gives (its reference and the fallback without a compiler; the
 * tests compare the two on real and fuzzed frames): per frame the memo entries it makes, or False for the block.
 * The bytes are untrusted: every read is of the block or of the PAD zero bytes numpy appends, and the arithmetic is
 * numpy's int64 (an 8-byte count wraps exactly as there). The opcode tables come from opscan (set_tables), so the
 * opcode rules live in one place.
 *
 * fetch_scan: opscan.fetch_candidates' byte search for LONG_BINGET, one chunk of the file per call: the last place of
 * each distinct index (in a small open-addressing table, bounded: past the limit it gives None, as numpy's unique
 * does) and the late rows, identical to its numpy search (the reference without the module). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define PAD 16        /* opscan.PAD: zero bytes numpy appends to a block; a step must stay below the block + PAD */
#define MEMOIZE 0x94  /* pickle.MEMOIZE */
#define LONG_BINGET 0x6a  /* pickle.LONG_BINGET, then a 4-byte little-endian index */
#define INDEX 4
#define TABLE_BITS 12  /* the table's first size: 4096 slots (real profiles: a few thousand indices per chunk) */
#define OPS 256

static int64_t op_length[OPS];  /* opscan._LENGTH: an opcode's bytes without its counted payload */
static int8_t op_count[OPS];    /* opscan._COUNT: its count's bytes (0, 1, 4, 8), or -1: refused */
static int tables_set;

/* The block's byte at i, or a PAD zero past its end (i >= 0 always: cursors only move forward from >= 0). */
static inline uint8_t byte_at(const uint8_t *raw, int64_t n, int64_t i) { return i < n ? raw[i] : 0; }

/* One frame's walk from cur to end, as each numpy cursor goes: its memo entries, or -1 where numpy gives None.
 * Steps are summed modulo 2^64 as numpy's int64 wraps; 0 < step < n + PAD as int64 is 1 <= step < n + PAD unsigned. */
static int64_t walk(const uint8_t *raw, int64_t n, int64_t cur, int64_t end) {
    const uint64_t limit = (uint64_t)n + PAD;
    int64_t memo = 0;
    do {  /* numpy takes one step of every frame before it looks at its end */
        const uint8_t op = byte_at(raw, n, cur);
        const int width = op_count[op];
        uint64_t count = 0;
        if (width < 0) return -1;
        for (int j = width; j-- > 0;) count = (count << 8) | byte_at(raw, n, cur + 1 + j);  /* little-endian */
        const uint64_t step = (uint64_t)op_length[op] + count;
        if (step == 0 || step >= limit) return -1;
        memo += op == MEMOIZE;
        cur += (int64_t)step;  /* cur < n + limit: no overflow */
        if (cur < end && byte_at(raw, n, cur) == MEMOIZE) {  /* most objects are memoized right after */
            memo++;
            cur++;
        }
    } while (cur < end);
    return cur == end ? memo : -1;
}

/* A 1-D C-contiguous buffer of `count` items of `itemsize` bytes whose format is one of `formats`. */
static int get_array(PyObject *obj, Py_buffer *view, int flags, Py_ssize_t itemsize, const char *formats) {
    if (PyObject_GetBuffer(obj, view, flags | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '=' || *f == '<' || *f == '@') f++;
    if (view->ndim != 1 || view->itemsize != itemsize || strlen(f) != 1 || !strchr(formats, *f)) {
        PyErr_Format(PyExc_TypeError, "expected a 1-D array of %zd-byte integers", itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *set_tables(PyObject *self, PyObject *args) {
    PyObject *length_obj, *count_obj;
    Py_buffer length, count;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO:set_tables", &length_obj, &count_obj)) return NULL;
    if (get_array(length_obj, &length, PyBUF_SIMPLE, 8, "lq") < 0) return NULL;
    if (get_array(count_obj, &count, PyBUF_SIMPLE, 1, "b") < 0) {
        PyBuffer_Release(&length);
        return NULL;
    }
    int ok = length.shape[0] == OPS && count.shape[0] == OPS;
    for (int i = 0; ok && i < OPS; i++) {  /* what walk() relies on; a taken opcode's step is checked only where */
        const int8_t w = ((const int8_t *)count.buf)[i];  /* numpy checks it too: one below PAD always passes */
        const int64_t len = ((const int64_t *)length.buf)[i];
        ok = w == -1 || ((w == 0 || w == 1 || w == 4 || w == 8) && len >= 1 && len < PAD);
    }
    if (ok) {
        memcpy(op_length, length.buf, sizeof op_length);
        memcpy(op_count, count.buf, sizeof op_count);
        tables_set = 1;
    } else {
        PyErr_SetString(PyExc_ValueError, "tables: 256 lengths, 1 to PAD - 1 where taken, and counts of -1, 0, 1, 4 or 8 bytes");
    }
    PyBuffer_Release(&length);
    PyBuffer_Release(&count);
    return ok ? Py_NewRef(Py_None) : NULL;
}

/* Every cursor and end inside the block (numpy's take would raise past its buffer); an end may be below its cursor
 * (the frame is then refused after one step, as in numpy). */
static int in_block(const int64_t *cur, const int64_t *end, Py_ssize_t frames, int64_t n) {
    for (Py_ssize_t i = 0; i < frames; i++)
        if (cur[i] < 0 || cur[i] > n || end[i] > n) return 0;
    return 1;
}

/* Walk each frame; out[i]: frame i's memo entries. 1 if every frame walked, 0 at the first that does not. */
static int walk_all(const Py_buffer *raw, const int64_t *cur, const int64_t *end, int64_t *out, Py_ssize_t frames) {
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS  /* the buffers stay held: other threads may run */
    for (Py_ssize_t i = 0; ok && i < frames; i++) {
        out[i] = walk((const uint8_t *)raw->buf, (int64_t)raw->len, cur[i], end[i]);
        ok = out[i] >= 0;
    }
    Py_END_ALLOW_THREADS
    return ok;
}

static PyObject *frame_memos(PyObject *self, PyObject *args) {
    PyObject *raw_obj, *cur_obj, *end_obj, *out_obj, *result = NULL;
    Py_buffer raw, cur, end, out;
    Py_ssize_t frames;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:frame_memos", &raw_obj, &cur_obj, &end_obj, &out_obj)) return NULL;
    if (!tables_set) return PyErr_Format(PyExc_RuntimeError, "set_tables was not called");
    if (PyObject_GetBuffer(raw_obj, &raw, PyBUF_SIMPLE) < 0) return NULL;
    if (get_array(cur_obj, &cur, PyBUF_SIMPLE, 8, "lq") < 0) goto no_cur;
    if (get_array(end_obj, &end, PyBUF_SIMPLE, 8, "lq") < 0) goto no_end;
    if (get_array(out_obj, &out, PyBUF_WRITABLE, 8, "lq") < 0) goto no_out;
    frames = cur.shape[0];
    if (end.shape[0] != frames || out.shape[0] != frames)
        PyErr_SetString(PyExc_ValueError, "cursors, ends and out differ in length");
    else if (!in_block(cur.buf, end.buf, frames, (int64_t)raw.len))
        PyErr_SetString(PyExc_ValueError, "a cursor or end outside the block");
    else
        result = PyBool_FromLong(walk_all(&raw, cur.buf, end.buf, out.buf, frames));
    PyBuffer_Release(&out);
no_out:
    PyBuffer_Release(&end);
no_end:
    PyBuffer_Release(&cur);
no_cur:
    PyBuffer_Release(&raw);
    return result;
}

/* ---- fetch_scan ---- */

/* The last place of each distinct index seen in a chunk: open addressing, linear probing, grown at half full.
 * key: index + 1 (0: an empty slot). At most `limit` indices: one more and the chunk gives up. */
typedef struct {
    uint64_t *key;
    int64_t *last;
    int bits;
    Py_ssize_t count, limit;
} Table;

typedef struct {  /* the late rows found: (index, offset) pairs */
    int64_t *v;
    size_t n, cap;  /* in int64s */
} Rows;

typedef struct {
    int64_t base, reach, late_at, floor;  /* the chunk's file offset; an index's lowest; the late rows' bounds */
    int late;                             /* whether late rows are wanted */
} Search;

enum { PUT_OK = 0, PUT_FULL = 1, PUT_NOMEM = 2 };

static inline size_t slot_of(uint64_t key, int bits) { return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> (64 - bits)); }

static int table_alloc(Table *t, int bits) {
    t->bits = bits;
    t->key = PyMem_RawCalloc((size_t)1 << bits, sizeof *t->key);
    t->last = PyMem_RawMalloc(((size_t)1 << bits) * sizeof *t->last);
    return t->key && t->last ? 0 : -1;
}

static void table_free(Table *t) {
    PyMem_RawFree(t->key);
    PyMem_RawFree(t->last);
    t->key = NULL;
    t->last = NULL;
}

static int table_grow(Table *t) {
    Table old = *t;
    if (table_alloc(t, old.bits + 1) < 0) {
        table_free(t);
        *t = old;
        return -1;
    }
    const size_t mask = ((size_t)1 << t->bits) - 1;
    for (size_t i = 0; i < (size_t)1 << old.bits; i++) {
        if (!old.key[i]) continue;
        size_t s = slot_of(old.key[i], t->bits);
        while (t->key[s]) s = (s + 1) & mask;
        t->key[s] = old.key[i];
        t->last[s] = old.last[i];
    }
    table_free(&old);
    return 0;
}

static int table_put(Table *t, uint32_t idx, int64_t at) {
    const uint64_t key = (uint64_t)idx + 1;
    const size_t mask = ((size_t)1 << t->bits) - 1;
    size_t s = slot_of(key, t->bits);
    while (t->key[s] && t->key[s] != key) s = (s + 1) & mask;
    if (!t->key[s]) {
        if (t->count >= t->limit) return PUT_FULL;
        t->key[s] = key;
        t->count++;
    }
    t->last[s] = at;
    if ((size_t)t->count * 2 > mask + 1 && table_grow(t) < 0) return PUT_NOMEM;
    return PUT_OK;
}

static int rows_push(Rows *r, int64_t idx, int64_t at) {
    if (r->n + 2 > r->cap) {
        const size_t cap = r->cap ? r->cap * 2 : 1 << 16;
        int64_t *v = PyMem_RawRealloc(r->v, cap * sizeof *v);
        if (!v) return -1;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = idx;
    r->v[r->n++] = at;
    return 0;
}

/* One LONG_BINGET byte at p: if its index is at least reach, into the table, and into the rows where late. */
static inline int take(const uint8_t *p, int64_t at, const Search *q, Table *t, Rows *r) {
    const uint32_t idx = (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 | (uint32_t)p[4] << 24;
    if ((int64_t)idx < q->reach) return PUT_OK;
    const int put = table_put(t, idx, at);
    if (put != PUT_OK) return put;
    if (q->late && at >= q->late_at && (int64_t)idx >= q->floor && rows_push(r, idx, at) < 0) return PUT_NOMEM;
    return PUT_OK;
}

/* Every LONG_BINGET byte at i < lim (lim + INDEX <= the buffer's length: its index is inside), in order, through
 * take. PUT_OK, PUT_FULL or PUT_NOMEM. */
static int scan(const uint8_t *buf, Py_ssize_t lim, const Search *q, Table *t, Rows *r) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128i want = _mm_set1_epi8((char)LONG_BINGET);
    for (; i + 16 <= lim; i += 16) {  /* 16 bytes at a time: a mask of the matches, taken lowest first */
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(buf + i)), want));
        for (; mask; mask &= mask - 1) {
            const Py_ssize_t at = i + __builtin_ctz(mask);
            const int put = take(buf + at, q->base + at, q, t, r);
            if (put != PUT_OK) return put;
        }
    }
#endif
    for (; i < lim; i++) {
        if (buf[i] != LONG_BINGET) continue;
        const int put = take(buf + i, q->base + i, q, t, r);
        if (put != PUT_OK) return put;
    }
    return PUT_OK;
}

/* The table's (index, last offset) pairs as two bytes objects of int64s, in the table's order. */
static PyObject *table_pairs(const Table *t) {
    PyObject *idx = PyBytes_FromStringAndSize(NULL, t->count * 8), *last = PyBytes_FromStringAndSize(NULL, t->count * 8);
    if (!idx || !last) {
        Py_XDECREF(idx);
        Py_XDECREF(last);
        return NULL;
    }
    int64_t *i_out = (int64_t *)PyBytes_AS_STRING(idx), *l_out = (int64_t *)PyBytes_AS_STRING(last);
    for (size_t s = 0, k = 0; s < (size_t)1 << t->bits; s++) {
        if (!t->key[s]) continue;
        i_out[k] = (int64_t)(t->key[s] - 1);
        l_out[k++] = t->last[s];
    }
    return Py_BuildValue("(NN)", idx, last);
}

/* Append the rows to the bytearray `out` (its size then a multiple of 16 more). */
static int rows_out(const Rows *r, PyObject *out) {
    const Py_ssize_t had = PyByteArray_GET_SIZE(out), more = (Py_ssize_t)(r->n * sizeof *r->v);
    if (!more) return 0;
    if (had > PY_SSIZE_T_MAX - more) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(out, had + more) < 0) return -1;  /* (a BufferError where its buffer is held) */
    memcpy(PyByteArray_AS_STRING(out) + had, r->v, (size_t)more);
    return 0;
}

/* fetch_scan's checks and the scan itself (the GIL released); the result: the pairs, None, or NULL (an error). */
static PyObject *fetch_chunk(const Py_buffer *buf, Py_ssize_t scan_len, Search *q, Py_ssize_t limit, PyObject *rows) {
    if (scan_len < 0 || limit < 0 || q->base < 0 || q->base > INT64_MAX - (int64_t)buf->len)
        return PyErr_Format(PyExc_ValueError, "a negative length, limit or offset, or an offset past int64");
    Table t = {NULL, NULL, 0, 0, limit};
    Rows r = {NULL, 0, 0};
    PyObject *result = NULL;
    int put = PUT_NOMEM;
    /* below lim: a byte of the chunk (not of the next one's first bytes) with its whole index in the buffer */
    const Py_ssize_t lim = buf->len < INDEX + 1 ? 0 : (scan_len < buf->len - INDEX ? scan_len : buf->len - INDEX);
    if (table_alloc(&t, TABLE_BITS) == 0) {
        Py_BEGIN_ALLOW_THREADS  /* the buffer stays held: other threads may run */
        put = scan(buf->buf, lim, q, &t, &r);
        Py_END_ALLOW_THREADS
    }
    if (put == PUT_NOMEM)
        PyErr_NoMemory();
    else if (put == PUT_FULL)
        result = Py_NewRef(Py_None);
    else if (!q->late || rows_out(&r, rows) == 0)
        result = table_pairs(&t);
    table_free(&t);
    PyMem_RawFree(r.v);
    return result;
}

static PyObject *fetch_scan(PyObject *self, PyObject *args) {
    PyObject *buf_obj, *late_obj, *rows = NULL, *result;
    Py_buffer buf;
    Py_ssize_t scan_len, limit;
    Search q = {0, 0, 0, 0, 0};
    (void)self;
    if (!PyArg_ParseTuple(args, "OnLLnO:fetch_scan", &buf_obj, &scan_len, &q.base, &q.reach, &limit, &late_obj))
        return NULL;
    q.late = late_obj != Py_None;
    if (q.late && !PyArg_ParseTuple(late_obj, "LLO!:fetch_scan's late", &q.late_at, &q.floor, &PyByteArray_Type, &rows))
        return NULL;
    if (get_array(buf_obj, &buf, PyBUF_SIMPLE, 1, "Bbc") < 0) return NULL;
    result = fetch_chunk(&buf, scan_len, &q, limit, rows);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"set_tables", set_tables, METH_VARARGS,
     "set_tables(length, count): the opcode tables, 256 int64 lengths and 256 int8 count widths (-1: refused)."},
    {"frame_memos", frame_memos, METH_VARARGS,
     "frame_memos(raw, cur, end, out) -> bool: walk the frames from cur[i] to end[i] of the block raw (int64 "
     "offsets into it) and put each one's memo entries in out; False as soon as one is not taken."},
    {"fetch_scan", fetch_scan, METH_VARARGS,
     "fetch_scan(buf, chunk, base, reach, limit, late) -> (index bytes, last bytes) or None: every LONG_BINGET byte "
     "in buf[:chunk] whose 4-byte index is inside buf and at least reach; its distinct indices and the file offset "
     "(base + place) of the last of each, as int64 bytes, or None past limit distinct indices. late: None or "
     "(offset, floor, rows), rows a bytearray that gets (index, offset) int64 pairs at/past offset with index >= floor."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_opscan", "pass 1's frame walk and fetch search in C (opscan).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__opscan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "PAD", PAD) < 0 || PyModule_AddIntConstant(m, "MEMOIZE", MEMOIZE) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
