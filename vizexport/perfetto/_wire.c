/* vizexport.perfetto._wire: the two loops of the trace encoder that Python itself bounds, in C.
 *
 * packets: wire.packets' framing (Trace.packet{varint fields, then a tail}), packet after packet instead of numpy
 * column passes; the same bytes, including numpy's varint rule (1 + how many of 2^7 .. 2^56 a value reaches).
 *
 * annotations: proto._Sequence.annotations for a dict, and the dicts, lists and tuples nested in it, without a Python
 * call per item. A scalar item's encoding comes from the sequence's cache as in Python (the same key tuple, the same
 * dict); a miss, or any value of another type, calls the sequence's own Python methods, so interned names and values
 * are defined in the same order and the bytes are the same. wire.py's reference paths run where this module is not
 * built; the tests compare the two on real profiles and fuzzed values. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define WIRE_LEN 2
#define VARINT_MAX 10  /* bytes of a 64-bit varint */

/* ---- a growing byte buffer ---------------------------------------------------------------------------------- */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int reserve(Buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

/* Append a bytes object (what a Python method returned). */
static int put_bytes(Buf *b, PyObject *x) {
    char *s;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(x, &s, &n) < 0)
        return -1;
    return put(b, s, n);
}

/* Append what a Python call returned (a new reference to bytes, or NULL on its error). */
static int put_call(Buf *b, PyObject *made) {
    if (!made)
        return -1;
    int r = put_bytes(b, made);
    Py_DECREF(made);
    return r;
}

/* A varint of an unsigned value into s; returns its length. */
static int varint(uint8_t *s, uint64_t v) {
    int n = 0;
    while (v > 127) {
        s[n++] = (uint8_t)(v & 0x7F) | 0x80;
        v >>= 7;
    }
    s[n++] = (uint8_t)v;
    return n;
}

/* Make what was appended since `start` the payload of length-delimited field `num`: its tag and length go before. */
static int wrap(Buf *b, Py_ssize_t start, long num) {
    uint8_t head[2 * VARINT_MAX];
    Py_ssize_t payload = b->len - start;
    int h = varint(head, ((uint64_t)num << 3) | WIRE_LEN);
    h += varint(head + h, (uint64_t)payload);
    if (reserve(b, h) < 0)
        return -1;
    memmove(b->data + start + h, b->data + start, payload);
    memcpy(b->data + start, head, h);
    b->len += h;
    return 0;
}

/* ---- packets ------------------------------------------------------------------------------------------------- */

/* numpy's varint size in wire.varint_sizes: 1 + how many of 2^7, 2^14, ..., 2^56 the value is at or above. */
static inline int vsize(int64_t v) {
    int n = 1;
    for (int k = 1; k <= 8; k++)
        n += v >= ((int64_t)1 << (7 * k));
    return n;
}

/* wire._put_varints' bytes of one value: byte k is bits 7k.. of v, with the high bit set but on the last. */
static inline uint8_t *put_sized(uint8_t *out, int64_t v, int size) {
    for (int k = 0; k < size; k++)
        *out++ = (uint8_t)(((v >> (7 * k)) & 0x7F) | ((k + 1 < size) ? 0x80 : 0));
    return out;
}

typedef struct {
    Py_buffer values;
    const char *tag;
    Py_ssize_t tag_len;
} Field;

static void release_fields(Field *f, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        PyBuffer_Release(&f[i].values);
    PyMem_Free(f);
}

/* packets(packet_tag, fields: list[(tag bytes, int64 values)], tail_ids: int64, tails: list[bytes], ends: int64 out)
 * -> bytes. ends gets where each packet ends (wire.packets' second result). */
static PyObject *packets(PyObject *self, PyObject *args) {
    int packet_tag;
    PyObject *fields_list, *tails_list, *out = NULL;
    Py_buffer ids, ends;
    if (!PyArg_ParseTuple(args, "iO!y*O!w*", &packet_tag, &PyList_Type, &fields_list, &ids, &PyList_Type, &tails_list,
                          &ends))
        return NULL;
    Py_ssize_t n = ids.len / 8, nf = PyList_GET_SIZE(fields_list), nt = PyList_GET_SIZE(tails_list), got = 0;
    Field *fields = PyMem_Calloc(nf ? nf : 1, sizeof(Field));
    const char **tail = PyMem_Calloc(nt ? nt : 1, sizeof(char *));
    Py_ssize_t *tail_len = PyMem_Calloc(nt ? nt : 1, sizeof(Py_ssize_t));
    if (!fields || !tail || !tail_len) {
        PyErr_NoMemory();
        goto done;
    }
    if (ends.len != ids.len) {
        PyErr_SetString(PyExc_ValueError, "ends and tail_ids differ in length");
        goto done;
    }
    for (; got < nf; got++) {
        PyObject *f = PyList_GET_ITEM(fields_list, got);
        if (!PyArg_ParseTuple(f, "y#y*", &fields[got].tag, &fields[got].tag_len, &fields[got].values))
            goto done;
        if (fields[got].values.len != ids.len) {
            got++;
            PyErr_SetString(PyExc_ValueError, "a field's values and tail_ids differ in length");
            goto done;
        }
    }
    for (Py_ssize_t t = 0; t < nt; t++)
        if (PyBytes_AsStringAndSize(PyList_GET_ITEM(tails_list, t), (char **)&tail[t], &tail_len[t]) < 0)
            goto done;
    const int64_t *id = ids.buf;
    int64_t *end = ends.buf, total = 0;
    for (Py_ssize_t k = 0; k < n; k++) {  /* sizes first: the bytes object is made once, at its length */
        if (id[k] < 0 || id[k] >= nt) {
            PyErr_SetString(PyExc_IndexError, "a tail id is out of range");
            goto done;
        }
        int64_t body = tail_len[id[k]];
        for (Py_ssize_t j = 0; j < nf; j++)
            body += fields[j].tag_len + vsize(((const int64_t *)fields[j].values.buf)[k]);
        total += 1 + vsize(body) + body;
        end[k] = total;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (!out)
        goto done;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++) {
        int64_t body = tail_len[id[k]];
        for (Py_ssize_t j = 0; j < nf; j++)
            body += fields[j].tag_len + vsize(((const int64_t *)fields[j].values.buf)[k]);
        *p++ = (uint8_t)packet_tag;
        p = put_sized(p, body, vsize(body));
        for (Py_ssize_t j = 0; j < nf; j++) {
            int64_t v = ((const int64_t *)fields[j].values.buf)[k];
            memcpy(p, fields[j].tag, fields[j].tag_len);
            p = put_sized(p + fields[j].tag_len, v, vsize(v));
        }
        memcpy(p, tail[id[k]], tail_len[id[k]]);
        p += tail_len[id[k]];
    }
done:
    if (fields)
        release_fields(fields, got);
    PyMem_Free(tail);
    PyMem_Free(tail_len);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&ends);
    return out;
}

/* ---- annotations --------------------------------------------------------------------------------------------- */

static long dict_entries, array_values;  /* DebugAnnotation's field numbers (set_fields) */
static uint8_t int_value_tag;  /* DebugAnnotation.int_value's tag */

typedef struct {
    PyObject *seq, *entries, *named;
} Seq;

static inline int is_scalar(PyObject *x) {  /* proto._SCALARS: exactly str, int, float or bool */
    return PyUnicode_CheckExact(x) || PyLong_CheckExact(x) || PyFloat_CheckExact(x) || PyBool_Check(x);
}

static int items(Seq *s, Buf *b, long num, PyObject *d);
static int annotation(Seq *s, Buf *b, PyObject *name, PyObject *v);
static int annotation_of(Seq *s, Buf *b, PyObject *name, PyObject *v);

static int name_field(Seq *s, Buf *b, PyObject *name);

/* _Sequence._keyed's commonest miss, an int64 under a string key (ids: each new value a miss): its field, cached
 * under `key`. 1: done; 0: not such an item (the Python method makes it); -1: error. */
static int keyed_int(Seq *s, Buf *b, PyObject *key, long num, PyObject *name, PyObject *x) {
    int overflow;
    if (!PyUnicode_CheckExact(name) || !PyLong_CheckExact(x))
        return 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow)
        return 0;
    if (v == -1 && PyErr_Occurred())
        return -1;
    Buf f = {NULL, 0, 0};
    uint8_t value[1 + VARINT_MAX];
    value[0] = int_value_tag;
    int r = -1, n = 1 + varint(value + 1, (uint64_t)v);  /* a negative one as its two's complement, as wire.varint */
    if (name_field(s, &f, name) == 0 && put(&f, (const char *)value, n) == 0 && wrap(&f, 0, num) == 0) {
        PyObject *enc = PyBytes_FromStringAndSize(f.data, f.len);
        if (enc) {
            r = PyDict_SetItem(s->entries, key, enc) < 0 ? -1 : put(b, f.data, f.len) < 0 ? -1 : 1;
            Py_DECREF(enc);
        }
    }
    PyMem_Free(f.data);
    return r;
}

/* A scalar's cached field, or the Python method `miss`(key, num, name, x) that makes and caches it. */
static int scalar(Seq *s, Buf *b, const char *miss, long num, PyObject *name, PyObject *x) {
    PyObject *n = PyLong_FromLong(num);
    if (!n)
        return -1;
    PyObject *key = PyTuple_Pack(4, n, name, (PyObject *)Py_TYPE(x), x);
    int r = -1;
    if (!key)
        goto done;
    PyObject *hit = PyDict_GetItemWithError(s->entries, key);  /* borrowed */
    if (!hit && PyErr_Occurred())
        goto done;
    int truth = hit ? PyObject_IsTrue(hit) : 0;
    if (truth < 0)
        goto done;
    if (truth) {
        r = put_bytes(b, hit);
    } else if ((r = keyed_int(s, b, key, num, name, x)) != 0) {  /* (an array value has no name: never) */
        r = r < 0 ? -1 : 0;
    } else {
        r = put_call(b, PyObject_CallMethod(s->seq, miss, "OOOO", key, n, name, x));
    }
done:
    Py_XDECREF(key);
    Py_DECREF(n);
    return r;
}

/* Field `num` holding the annotation `name` (None: an array value) of a value that is not a scalar. */
static int nested(Seq *s, Buf *b, long num, PyObject *name, PyObject *v) {
    Py_ssize_t start = b->len;
    if (annotation(s, b, name, v) < 0)
        return -1;
    return wrap(b, start, num);
}

/* _Sequence.annotations: a field `num` per item of the dict d (exactly a dict). */
static int items(Seq *s, Buf *b, long num, PyObject *d) {
    Py_ssize_t pos = 0, size = PyDict_GET_SIZE(d);
    PyObject *k, *x;
    while (PyDict_Next(d, &pos, &k, &x)) {
        Py_INCREF(k);
        Py_INCREF(x);
        int r;
        if (is_scalar(x)) {
            r = scalar(s, b, "_keyed", num, k, x);
        } else {
            PyObject *name = PyUnicode_CheckExact(k) ? (Py_INCREF(k), k) : PyObject_Str(k);
            r = name ? nested(s, b, num, name, x) : -1;
            Py_XDECREF(name);
        }
        Py_DECREF(k);
        Py_DECREF(x);
        if (r < 0)
            return -1;
        if (PyDict_GET_SIZE(d) != size) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return -1;
        }
    }
    return 0;
}

/* _Sequence.array: an array's values (a list or tuple, exactly). */
static int array(Seq *s, Buf *b, PyObject *v) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {  /* re-read: a callback may shrink a list */
        PyObject *x = PySequence_Fast_GET_ITEM(v, i);
        Py_INCREF(x);
        int r;
        if (PyDict_CheckExact(x)) {
            Py_ssize_t start = b->len;
            r = items(s, b, dict_entries, x) < 0 ? -1 : wrap(b, start, array_values);
        } else if (is_scalar(x)) {
            r = scalar(s, b, "_scalar", array_values, Py_None, x);
        } else {
            r = nested(s, b, array_values, Py_None, x);
        }
        Py_DECREF(x);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* _Sequence.annotation of a value that is not a scalar: its name's field, then a dict's entries or an array's values;
 * anything else (a subclass, None, bytes, ...) is the Python method's. */
static int annotation(Seq *s, Buf *b, PyObject *name, PyObject *v) {
    if (Py_EnterRecursiveCall(" while encoding a debug annotation"))  /* nested past the limit: RecursionError */
        return -1;
    int r = annotation_of(s, b, name, v);
    Py_LeaveRecursiveCall();
    return r;
}

static int annotation_of(Seq *s, Buf *b, PyObject *name, PyObject *v) {
    int exact = PyDict_CheckExact(v) || PyList_CheckExact(v) || PyTuple_CheckExact(v);
    if (!exact)
        return put_call(b, PyObject_CallMethod(s->seq, "annotation", "OO", name, v));
    if (name != Py_None && name_field(s, b, name) < 0)  /* the name first: its iid is defined before any its value holds */
        return -1;
    if (PyDict_CheckExact(v))
        return items(s, b, dict_entries, v);
    return array(s, b, v);
}

/* An annotation's name field: cached, or made (its iid defined) by the sequence's _name. */
static int name_field(Seq *s, Buf *b, PyObject *name) {
    PyObject *hit = PyDict_GetItemWithError(s->named, name);
    if (!hit && PyErr_Occurred())
        return -1;
    int truth = hit ? PyObject_IsTrue(hit) : 0;
    if (truth < 0)
        return -1;
    return truth ? put_bytes(b, hit) : put_call(b, PyObject_CallMethod(s->seq, "_name", "O", name));
}

/* annotations(seq, num, d) -> bytes: seq._annotations_py(num, d)'s bytes, for a dict d. */
static PyObject *annotations(PyObject *self, PyObject *args) {
    PyObject *seq, *d;
    long num;
    if (!PyArg_ParseTuple(args, "OlO!", &seq, &num, &PyDict_Type, &d))
        return NULL;
    Seq s = {seq, PyObject_GetAttrString(seq, "entries"), PyObject_GetAttrString(seq, "named")};
    Buf b = {NULL, 0, 0};
    PyObject *out = NULL;
    if (!s.entries || !s.named)
        goto done;
    if (!PyDict_Check(s.entries) || !PyDict_Check(s.named)) {
        PyErr_SetString(PyExc_TypeError, "a sequence's entries and named must be dicts");
        goto done;
    }
    if (items(&s, &b, num, d) == 0)
        out = PyBytes_FromStringAndSize(b.data ? b.data : "", b.len);
done:
    PyMem_Free(b.data);
    Py_XDECREF(s.entries);
    Py_XDECREF(s.named);
    return out;
}

/* ---- tails --------------------------------------------------------------------------------------------------- */

static long debug_annotations, track_event, interned_data;  /* TrackEvent's and TracePacket's field numbers */
static char flow_tag[2][VARINT_MAX];  /* TrackEvent's flow_ids and terminating_flow_ids tags (fixed64) */
static Py_ssize_t flow_tag_len[2];

/* The dict's value under the int key i, or NULL (borrowed; NULL with an error set on failure). */
static PyObject *at(PyObject *d, Py_ssize_t i) {
    PyObject *key = PyLong_FromSsize_t(i);
    if (!key)
        return NULL;
    PyObject *v = PyDict_GetItemWithError(d, key);
    Py_DECREF(key);
    return v;
}

/* proto._event: the TrackEvent's type and name (cached per name and kind), then its args. */
static int event(Seq *s, Buf *b, PyObject *heads, int32_t name, int instant, PyObject *args) {
    PyObject *key = Py_BuildValue("(iO)", name, instant ? Py_True : Py_False);
    if (!key)
        return -1;
    PyObject *hit = PyDict_GetItemWithError(heads, key);
    Py_DECREF(key);
    int truth = hit ? PyObject_IsTrue(hit) : PyErr_Occurred() ? -1 : 0;
    if (truth < 0 || (truth ? put_bytes(b, hit) : put_call(b, PyObject_CallMethod(s->seq, "head", "iO", name,
                                                                                    instant ? Py_True : Py_False))) < 0)
        return -1;
    truth = args ? PyObject_IsTrue(args) : 0;
    if (truth <= 0)
        return truth;
    if (PyDict_CheckExact(args))
        return items(s, b, debug_annotations, args);
    return put_call(b, PyObject_CallMethod(s->seq, "annotations", "lO", debug_annotations, args));
}

/* An event's flow ids, each a fixed64 field after `tag`. */
static int flow_ids(Buf *b, int which, PyObject *ids) {
    int truth = ids ? PyObject_IsTrue(ids) : 0;
    if (truth <= 0)
        return truth;
    PyObject *seq = PySequence_Fast(ids, "flow ids must be a sequence");
    if (!seq)
        return -1;
    int r = 0;
    for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(seq) && r == 0; k++) {
        uint64_t f = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, k));  /* as int.to_bytes(8): >= 0 */
        uint8_t le[8];
        for (int j = 0; j < 8; j++)
            le[j] = (uint8_t)(f >> (8 * j));
        r = (f == (uint64_t)-1 && PyErr_Occurred()) ? -1 : put(b, flow_tag[which], flow_tag_len[which]);
        r = r < 0 ? -1 : put(b, (const char *)le, 8);
    }
    Py_DECREF(seq);
    return r;
}

typedef struct {
    Seq s;
    PyObject *heads, *new_interned, *needs, *args, *flows[2];
    const int32_t *names;
    const int64_t *dur;
    Py_ssize_t n;
} Track;

/* proto._tail: event i's packet tail (its track_event, the interned data it defines, the sequence and flags) as a new
 * bytes object; *reusable: whether it defined none. */
static PyObject *tail(Track *t, Py_ssize_t i, int *reusable) {
    Buf b = {NULL, 0, 0};
    if (i < 0 || i >= t->n) {
        PyErr_SetString(PyExc_IndexError, "an event index is out of range");
        return NULL;
    }
    PyObject *out = NULL, *args = at(t->args, i), *flows[2];
    if (!args && PyErr_Occurred())
        return NULL;
    for (int w = 0; w < 2; w++)
        if (!(flows[w] = at(t->flows[w], i)) && PyErr_Occurred())
            return NULL;
    Py_XINCREF(args);  /* held: a Python method called below may change the dicts */
    Py_XINCREF(flows[0]);
    Py_XINCREF(flows[1]);
    if (event(&t->s, &b, t->heads, t->names[i], t->dur[i] < 0, args) < 0 || flow_ids(&b, 0, flows[0]) < 0 ||
        flow_ids(&b, 1, flows[1]) < 0 || wrap(&b, 0, track_event) < 0)
        goto done;
    Py_ssize_t defined = PyByteArray_GET_SIZE(t->new_interned), start = b.len;
    *reusable = defined == 0;
    if (defined && (put(&b, PyByteArray_AS_STRING(t->new_interned), defined) < 0 || wrap(&b, start, interned_data) < 0 ||
                    PyByteArray_Resize(t->new_interned, 0) < 0))
        goto done;
    if (put_bytes(&b, t->needs) == 0)
        out = PyBytes_FromStringAndSize(b.data, b.len);
done:
    PyMem_Free(b.data);
    Py_XDECREF(args);
    Py_XDECREF(flows[0]);
    Py_XDECREF(flows[1]);
    return out;
}

/* Append x (a new reference, or NULL on error) to the list. */
static int push(PyObject *list, PyObject *x) {
    int r = x ? PyList_Append(list, x) : -1;
    Py_XDECREF(x);
    return r;
}

/* Append the index of the list's last item to `ids`. */
static int last(PyObject *ids, PyObject *list) {
    return push(ids, PyLong_FromSsize_t(PyList_GET_SIZE(list) - 1));
}

/* tails(seq, names: int32, dur: int64, args, flows_out, flows_in, firsts: list[int], many: list[bool], tails: list)
 * -> (first tail ids, later tail ids): proto._tails. */
static PyObject *tails(PyObject *self, PyObject *a) {
    Track t = {{NULL, NULL, NULL}, NULL, NULL, NULL, NULL, {NULL, NULL}, NULL, NULL, 0};
    PyObject *seq, *firsts, *many, *list, *first = PyList_New(0), *later = PyList_New(0), *out = NULL;
    Py_buffer names = {0}, dur = {0};
    if (!first || !later || !PyArg_ParseTuple(a, "Oy*y*O!O!O!O!O!O!", &seq, &names, &dur, &PyDict_Type, &t.args,
                                              &PyDict_Type, &t.flows[0], &PyDict_Type, &t.flows[1], &PyList_Type,
                                              &firsts, &PyList_Type, &many, &PyList_Type, &list))
        goto done;
    t.s = (Seq){seq, PyObject_GetAttrString(seq, "entries"), PyObject_GetAttrString(seq, "named")};
    t.heads = PyObject_GetAttrString(seq, "heads");
    t.new_interned = PyObject_GetAttrString(seq, "new_interned");
    t.needs = PyObject_GetAttrString(seq, "needs");
    if (!t.s.entries || !t.s.named || !t.heads || !t.new_interned || !t.needs)
        goto done;
    if (!PyDict_Check(t.s.entries) || !PyDict_Check(t.s.named) || !PyDict_Check(t.heads) ||
        !PyByteArray_CheckExact(t.new_interned) || names.len / 4 != dur.len / 8 || PyList_GET_SIZE(firsts) !=
        PyList_GET_SIZE(many)) {
        PyErr_SetString(PyExc_TypeError, "tails: a sequence's tables, or the columns, are not as proto makes them");
        goto done;
    }
    t.names = names.buf;
    t.dur = dur.buf;
    t.n = dur.len / 8;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(firsts); j++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(firsts, j));
        int more = PyObject_IsTrue(PyList_GET_ITEM(many, j)), reusable = 1, again;
        if ((i == -1 && PyErr_Occurred()) || more < 0 || push(list, tail(&t, i, &reusable)) < 0 ||
            last(first, list) < 0)
            goto done;
        if (!reusable && more && push(list, tail(&t, i, &again)) < 0)  /* later events: without the definitions */
            goto done;
        if (last(later, list) < 0)
            goto done;
    }
    out = PyTuple_Pack(2, first, later);
done:
    Py_XDECREF(first);
    Py_XDECREF(later);
    Py_XDECREF(t.s.entries);
    Py_XDECREF(t.s.named);
    Py_XDECREF(t.heads);
    Py_XDECREF(t.new_interned);
    Py_XDECREF(t.needs);
    if (names.obj)
        PyBuffer_Release(&names);
    if (dur.obj)
        PyBuffer_Release(&dur);
    return out;
}

/* set_fields(dict_entries, array_values, int_value_tag, debug_annotations, track_event, interned_data, flow_out_tag,
 * flow_in_tag): the field numbers and tags written, from wire.py (one place for them). */
static PyObject *set_fields(PyObject *self, PyObject *args) {
    const char *tag[2];
    if (!PyArg_ParseTuple(args, "llbllly#y#", &dict_entries, &array_values, &int_value_tag, &debug_annotations,
                          &track_event, &interned_data, &tag[0], &flow_tag_len[0], &tag[1], &flow_tag_len[1]))
        return NULL;
    for (int w = 0; w < 2; w++) {
        if (flow_tag_len[w] > VARINT_MAX) {
            PyErr_SetString(PyExc_ValueError, "a flow tag is longer than a varint");
            return NULL;
        }
        memcpy(flow_tag[w], tag[w], flow_tag_len[w]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"packets", packets, METH_VARARGS, "wire.packets' framing, packet after packet."},
    {"annotations", annotations, METH_VARARGS, "proto._Sequence.annotations of a dict, nested values in C."},
    {"tails", tails, METH_VARARGS, "proto._tails: the packet tails of event groups."},
    {"set_fields", set_fields, METH_VARARGS, "The field numbers and tags written."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
