/*
 * Taking an image's entries out of CPython's cyclic garbage collector as they are built.
 *
 * Why: a metadata image is a tree of immutable tuples (PartitionRegistration, TopicImage and
 * their id lists) that can hold no reference cycle, and reference counting alone frees them.
 * CPython stops tracking an exact tuple of untracked items by itself, the first time a
 * collection sees it, but never a tuple subclass, and every NamedTuple is one: each partition
 * a batch replays stayed tracked for good, and every full collection walked it (after a zonal
 * outage at a million partitions, a million of them), which kraft.metadata.collector's
 * snapshot-load freeze spared only for what a snapshot load had built.
 *
 * untracked(obj) untracks `obj` when that is safe by the rule CPython applies to exact tuples
 * (_PyTuple_MaybeUntrack): it is a tuple, or a tuple subclass that adds no state (no __dict__,
 * no weak references, no slots: a NamedTuple), and each of its items is not a container at all
 * (an int, bytes, str, None) or is such a tuple itself (untracked first, depth first). Any
 * other container keeps it tracked, even one untracked for now: CPython untracks a dict of
 * atomic values and tracks it again once it holds a container, and a cycle through it and an
 * untracked tuple would hide from the collector. (An instance of a class written in Python also
 * holds its class, which only a class's own attributes could make a cycle of; an image's
 * classes live as long as their modules.) It returns `obj`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_DEPTH 8 /* an image's entries nest three deep (topic, partitions, id lists) */

static int adds_no_state(PyObject *op) {
    PyTypeObject *type = Py_TYPE(op);
    return PyTuple_Check(op) && type->tp_dictoffset == 0 && type->tp_weaklistoffset == 0 &&
           type->tp_basicsize == PyTuple_Type.tp_basicsize && type->tp_itemsize == PyTuple_Type.tp_itemsize;
}

/* 1 if `op` can hold no reference cycle and is not tracked (any more), 0 if it must stay tracked. */
static int untrack(PyObject *op, int depth) {
    if (!PyObject_IS_GC(op)) {
        return 1;
    }
    if (!adds_no_state(op)) {
        return 0; /* a container that may be tracked (again) at any time */
    }
    if (!PyObject_GC_IsTracked(op)) {
        return 1;
    }
    if (depth >= MAX_DEPTH) {
        return 0;
    }
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(op); i < n; i++) {
        if (!untrack(PyTuple_GET_ITEM(op, i), depth + 1)) {
            return 0;
        }
    }
    PyObject_GC_UnTrack(op);
    return 1;
}

static PyObject *untracked(PyObject *module, PyObject *op) {
    (void)module;
    untrack(op, 0);
    return Py_NewRef(op);
}

PyDoc_STRVAR(untracked_doc,
"untracked(obj, /)\n--\n\n"
"`obj`, no longer tracked by the cyclic garbage collector if it is a tuple (or a NamedTuple)\n"
"of untracked items or of such tuples; anything else is left as it is.");

static PyMethodDef methods[] = {
    {"untracked", untracked, METH_O, untracked_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_collector", "Untracking an image's immutable entries from the cyclic collector.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__collector(void) {
    return PyModule_Create(&module);
}
