/* vizexport.pickles._opscan: pass 1's frame walk (opscan.frame_memos) in C, one frame after another.
 *
 * It gives exactly what opscan's numpy lockstep walk gives (its reference and the fallback without a compiler; the
 * tests compare the two on real and fuzzed frames): per frame the memo entries it makes, or False for the block.
 * The bytes are untrusted: every read is of the block or of the PAD zero bytes numpy appends, and the arithmetic is
 * numpy's int64 (an 8-byte count wraps exactly as there). The opcode tables come from opscan (set_tables), so the
 * opcode rules live in one place. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PAD 16        /* opscan.PAD: zero bytes numpy appends to a block; a step must stay below the block + PAD */
#define MEMOIZE 0x94  /* pickle.MEMOIZE */
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

static PyMethodDef methods[] = {
    {"set_tables", set_tables, METH_VARARGS,
     "set_tables(length, count): the opcode tables, 256 int64 lengths and 256 int8 count widths (-1: refused)."},
    {"frame_memos", frame_memos, METH_VARARGS,
     "frame_memos(raw, cur, end, out) -> bool: walk the frames from cur[i] to end[i] of the block raw (int64 "
     "offsets into it) and put each one's memo entries in out; False as soon as one is not taken."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_opscan", "pass 1's frame walk in C (opscan).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__opscan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "PAD", PAD) < 0 || PyModule_AddIntConstant(m, "MEMOIZE", MEMOIZE) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
