/* vizexport.tinygrad._ranges: profile._range_fields_python in C, one pass over the events instead of a pass per field.
 *
 * fields(events, codes, ids) reads each ProfileRangeEvent's instance dict and gives its fields as columns (lists):
 * device, name, the name's code (codes[name] for a str, ids[id(name)] for anything else; None where absent), st, en
 * (None where absent), profile_key (None where absent) and is_copy (False where absent; the column is None where no
 * event has the field). A missing device, name or st raises KeyError(field), as the reference's itemgetter does. The
 * values are the events' own objects: what they mean is checked by the caller, for both paths alike. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { DEVICE, NAME, KEY, ST, EN, PROFILE_KEY, COPY, N_COLUMNS };

static PyObject *field_names[N_COLUMNS];  /* the dict keys read; NULL for the key column, which is looked up */

/* The column's field of d (a new reference): device, name and st are required (KeyError naming the field where
 * absent), is_copy is False where absent, the others None; NULL with an error set. */
static PyObject *get(PyObject *d, int column) {
    PyObject *v = PyDict_GetItemWithError(d, field_names[column]);
    if (v == NULL) {
        if (PyErr_Occurred())
            return NULL;
        if (column == DEVICE || column == NAME || column == ST) {
            PyErr_SetObject(PyExc_KeyError, field_names[column]);
            return NULL;
        }
        v = column == COPY ? Py_False : Py_None;
    }
    Py_INCREF(v);
    return v;
}

/* The code of a name: codes[name] for a str, ids[id(name)] otherwise; Py_None where absent (a new reference). */
static PyObject *code(PyObject *name, PyObject *codes, PyObject *ids) {
    PyObject *v;
    if (PyUnicode_CheckExact(name)) {
        v = PyDict_GetItemWithError(codes, name);
    } else {
        PyObject *id = PyLong_FromVoidPtr(name);
        if (id == NULL)
            return NULL;
        v = PyDict_GetItemWithError(ids, id);
        Py_DECREF(id);
    }
    if (v == NULL && PyErr_Occurred())
        return NULL;
    v = v == NULL ? Py_None : v;
    Py_INCREF(v);
    return v;
}

/* Event i's fields into the columns; 0, or -1 with an error set. */
static int read_event(PyObject *e, Py_ssize_t i, PyObject **columns, PyObject *codes, PyObject *ids, int *copies) {
    PyObject *d = PyObject_GenericGetDict(e, NULL);
    if (d == NULL)
        return -1;
    int ok = -1;
    for (int c = 0; c < N_COLUMNS; c++) {  /* the name comes before its code */
        PyObject *v = c == KEY ? code(PyList_GET_ITEM(columns[NAME], i), codes, ids) : get(d, c);
        if (v == NULL)
            goto done;
        PyList_SET_ITEM(columns[c], i, v);
    }
    if (!*copies) {
        int has = PyDict_Contains(d, field_names[COPY]);
        if (has < 0)
            goto done;
        *copies = has;
    }
    ok = 0;
done:
    Py_DECREF(d);
    return ok;
}

static PyObject *fields(PyObject *self, PyObject *args) {
    PyObject *events, *codes, *ids, *columns[N_COLUMNS] = {NULL}, *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &events, &PyDict_Type, &codes, &PyDict_Type, &ids))
        return NULL;
    Py_INCREF(events);  /* its items stay alive while read */
    Py_ssize_t n = PyList_GET_SIZE(events);
    int copies = 0;
    for (int c = 0; c < N_COLUMNS; c++)
        if ((columns[c] = PyList_New(n)) == NULL)
            goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_SIZE(events) != n) {  /* an allocation's garbage collection may run Python code */
            PyErr_SetString(PyExc_RuntimeError, "the events changed while read");
            goto done;
        }
        if (read_event(PyList_GET_ITEM(events, i), i, columns, codes, ids, &copies) < 0)
            goto done;
    }
    if (!copies) {
        Py_DECREF(columns[COPY]);
        Py_INCREF(Py_None);
        columns[COPY] = Py_None;
    }
    result = PyTuple_New(N_COLUMNS);
    if (result != NULL)
        for (int c = 0; c < N_COLUMNS; c++) {
            PyTuple_SET_ITEM(result, c, columns[c]);
            columns[c] = NULL;
        }
done:
    for (int c = 0; c < N_COLUMNS; c++)
        Py_XDECREF(columns[c]);  /* a list's unfilled items are NULL: freed as such */
    Py_DECREF(events);
    return result;
}

static PyMethodDef methods[] = {
    {"fields", fields, METH_VARARGS, "profile._range_fields_python: the events' fields as columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ranges", NULL, -1, methods};

PyMODINIT_FUNC PyInit__ranges(void) {
    static const char *names[N_COLUMNS] = {"device", "name", NULL, "st", "en", "profile_key", "is_copy"};
    for (int c = 0; c < N_COLUMNS; c++)
        if (names[c] != NULL && (field_names[c] = PyUnicode_InternFromString(names[c])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
