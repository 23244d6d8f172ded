/* The buffer protocol for streamlet's arrays on every CPython: `memoryview(a)`,
 * `bytes(a)`, `np.frombuffer(a)`.  CPython 3.12 lets a class export a buffer from
 * Python (`__buffer__`); 3.10 and 3.11 need a C slot, and even 3.12's Python-level
 * exports cannot name a format NumPy does not know (MLX's "bfloat16").
 *
 * `Exporter` is the base class of `streamlet.core.array`.  Its getbuffer calls
 * `self._buffer_source()`, which returns `(source, format)`: an object whose buffer
 * holds the array's elements (a NumPy view of the evaluated data) and None or the
 * format to report instead of the source's.  The source's buffer is lent under the
 * array's name: `view->obj` is the array, so a memoryview keeps the array alive, and
 * releasing the view releases the source's buffer.  An error raised by
 * `_buffer_source` (a failed computation, say) propagates as raised.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    Py_buffer source;  /* the buffer borrowed from the source object */
    PyObject *format;  /* a bytes object whose text replaces the format, or NULL */
} Lent;

static int
getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    PyObject *pair = PyObject_CallMethod(self, "_buffer_source", NULL);
    if (pair == NULL)
        return -1;
    PyObject *source, *format;
    if (!PyArg_ParseTuple(pair, "OO:_buffer_source", &source, &format)) {
        Py_DECREF(pair);
        return -1;
    }
    if (format != Py_None && !PyBytes_Check(format)) {
        PyErr_SetString(PyExc_TypeError, "_buffer_source: the format must be bytes or None");
        Py_DECREF(pair);
        return -1;
    }
    Lent *lent = PyMem_Calloc(1, sizeof(Lent));
    if (lent == NULL) {
        Py_DECREF(pair);
        PyErr_NoMemory();
        return -1;
    }
    if (PyObject_GetBuffer(source, &lent->source, flags) < 0) {
        PyMem_Free(lent);
        Py_DECREF(pair);
        return -1;
    }
    *view = lent->source;
    view->obj = self;
    Py_INCREF(self);
    view->internal = lent;
    if (format != Py_None) {
        lent->format = format;
        Py_INCREF(format);
        if (flags & PyBUF_FORMAT)
            view->format = PyBytes_AS_STRING(format);
    }
    Py_DECREF(pair);
    return 0;
}

static void
releasebuffer(PyObject *self, Py_buffer *view)
{
    Lent *lent = view->internal;
    PyBuffer_Release(&lent->source);
    Py_XDECREF(lent->format);
    PyMem_Free(lent);
}

static PyBufferProcs exporter_buffer = {getbuffer, releasebuffer};

static PyTypeObject ExporterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "streamlet.core._buffer.Exporter",
    .tp_doc = "A base class whose buffer is the one `_buffer_source()` names.",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_as_buffer = &exporter_buffer,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_buffer", "The buffer protocol for streamlet's arrays.", -1,
};

PyMODINIT_FUNC
PyInit__buffer(void)
{
    if (PyType_Ready(&ExporterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ExporterType);
    if (PyModule_AddObject(m, "Exporter", (PyObject *)&ExporterType) < 0) {
        Py_DECREF(&ExporterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
