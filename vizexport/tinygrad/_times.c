/* vizexport.tinygrad._times: common._exact_ns in C, text after text instead of numpy passes per width and position.
 *
 * tinygrad writes each timestamp as Decimal(text), µs with exactly 3 decimals ('422507829.456'); the safe unpickler
 * keeps the text. exact_ns(texts, out) fills out (int64) with each text's ns (its digits without the point) and gives
 * True, or gives False where any text is not in that form: not a str, not ASCII, not 5 to 19 characters (at most 18
 * digits fit int64), no point before the last 3 digits, or any other character not a digit. The same rule as the
 * numpy reference (the fallback without a compiler; the tests compare the two on real and fuzzed texts). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define DECIMALS 3
#define SHORTEST 5   /* a digit, the point and the decimals: '0.000' */
#define LONGEST 19   /* 18 digits and the point */

#define NOT_NS -1
#define ERROR -2  /* with a Python error set */

/* One text's ns, or NOT_NS if it is not in the form. */
static int64_t text_ns(PyObject *x) {
    if (!PyUnicode_Check(x))
        return NOT_NS;
    if (PyUnicode_READY(x) < 0)
        return ERROR;
    if (!PyUnicode_IS_ASCII(x))
        return NOT_NS;
    Py_ssize_t w = PyUnicode_GET_LENGTH(x);
    if (w < SHORTEST || w > LONGEST)
        return NOT_NS;
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(x);
    int64_t value = 0;
    for (Py_ssize_t i = 0; i < w; i++) {
        if (i == w - DECIMALS - 1) {
            if (c[i] != '.')
                return NOT_NS;
            continue;
        }
        unsigned digit = (unsigned)c[i] - '0';
        if (digit > 9)
            return NOT_NS;
        value = value * 10 + digit;
    }
    return value;
}

static PyObject *exact_ns(PyObject *self, PyObject *args) {
    PyObject *texts, *result = NULL;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!w*", &PyList_Type, &texts, &out))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(texts), i = 0;
    int64_t *ns = out.buf, v = 0;
    if (out.len != n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "out must hold an int64 per text");
    } else {
        while (i < n && (v = text_ns(PyList_GET_ITEM(texts, i))) >= 0)
            ns[i++] = v;
        result = v == ERROR ? NULL : PyBool_FromLong(i == n);
    }
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"exact_ns", exact_ns, METH_VARARGS, "common._exact_ns: each text's ns into out, or False."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_times", NULL, -1, methods};

PyMODINIT_FUNC PyInit__times(void) { return PyModule_Create(&module); }
