/*
 * The shape check: walks a request or response frame against a "shape" compiled from kio's
 * schema classes (kraft.protocol.shape) and says whether every length and count in it fits
 * the bytes that came with it, before kio's reader sees them.
 *
 * Why: kio's native reader sizes each array from its count before reading an element
 * (a Vec with that capacity), so a 21-byte Metadata request whose topic count says 2^32-2
 * made the process abort on a 34 GB allocation. Here every count is checked against the
 * bytes left (count times the element's fewest bytes must fit), every string, bytes and
 * records length too, varints must end within 5 bytes and inside the frame, and nested
 * structs and known tagged fields are walked the same way. Nothing is allocated: the walk
 * only moves a position, so it costs a fraction of the decoding it protects.
 *
 * The walk must read exactly as kio reads, or kio could read a count this walk never saw.
 * Two places where readers differ are refused rather than guessed: a known tagged field
 * must take exactly the bytes its size declares (kio reads the value and goes on from its
 * end, the tolerant reader jumps to the declared end), and a nullable struct's marker must
 * be -1 (null) or non-negative (kio's native reader takes only -1 as null, Kafka and the
 * tolerant reader any negative).
 *
 * A problem raises ShapeError(position, reason), the reason naming the struct and field.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

static PyObject *ShapeError;

typedef enum {
    L_FIXED,   /* `width` bytes */
    L_LEN16,   /* int16 length then that many bytes; -1 null (legacy strings) */
    L_LEN32,   /* int32 length then that many bytes; -1 null (legacy bytes and records) */
    L_CLEN,    /* unsigned varint length + 1 then the bytes; 0 null (compact strings, bytes, records) */
    L_ARRAY32, /* int32 count then the elements; -1 null */
    L_CARRAY,  /* unsigned varint count + 1 then the elements; 0 null */
    L_STRUCT,  /* a nested struct, after an int8 null marker if `marker` */
} kind_t;

typedef struct ShapeObject ShapeObject;

typedef struct layout {
    kind_t kind;
    int nullable;           /* lengths and counts: -1 (null) is allowed */
    int marker;
    Py_ssize_t width;       /* L_FIXED */
    Py_ssize_t min_size;    /* the fewest bytes a value takes (at least 1 for an array element) */
    struct layout *element; /* arrays */
    ShapeObject *shape;     /* L_STRUCT */
} layout_t;

typedef struct {
    PyObject *name; /* for errors */
    uint64_t tag;   /* tagged fields only */
    layout_t layout;
} field_t;

struct ShapeObject {
    PyObject_HEAD
    PyObject *name;
    int flexible; /* ends with a tagged-field section */
    Py_ssize_t nfields;
    field_t *fields;
    Py_ssize_t ntagged;
    field_t *tagged;
    Py_ssize_t min_size;
};

static PyTypeObject ShapeType;

/* ---------------------------------------------------------------- the walk */

/* Raises ShapeError((at, "<struct>.<field>: <message>")). Returns -1. */
static int fail(const ShapeObject *shape, const field_t *f, Py_ssize_t at, const char *format, ...) {
    va_list va;
    va_start(va, format);
    PyObject *message = PyUnicode_FromFormatV(format, va);
    va_end(va);
    if (message == NULL) return -1;
    PyObject *reason = f != NULL ? PyUnicode_FromFormat("%U.%U: %U", shape->name, f->name, message)
                                 : PyUnicode_FromFormat("%U: %U", shape->name, message);
    Py_DECREF(message);
    if (reason == NULL) return -1;
    PyObject *args = Py_BuildValue("(nN)", at, reason);
    if (args != NULL) {
        PyErr_SetObject(ShapeError, args);
        Py_DECREF(args);
    }
    return -1;
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* An unsigned varint of at most 5 bytes (Kafka's and kio's limit) that ends before `end`. */
static int uvarint(const ShapeObject *shape, const field_t *f, const unsigned char *buf, Py_ssize_t *pos,
                   Py_ssize_t end, uint64_t *out) {
    Py_ssize_t p = *pos;
    uint64_t value = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (p >= end) return fail(shape, f, *pos, "a varint at byte %zd runs past the end (byte %zd)", *pos, end);
        unsigned char b = buf[p++];
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = value;
            *pos = p;
            return 0;
        }
    }
    return fail(shape, f, *pos, "a varint at byte %zd is longer than 5 bytes", *pos);
}

/* A length or count: `size` bytes big-endian (2 or 4), or a varint when `size` is 0.
   Sets *n to the length, or -1 for null. Other negative lengths are refused, as kio does. */
static int length(const ShapeObject *shape, const field_t *f, const unsigned char *buf, Py_ssize_t *pos,
                  Py_ssize_t end, int size, int64_t *n) {
    Py_ssize_t at = *pos;
    if (size == 0) {
        uint64_t v = 0;
        if (uvarint(shape, f, buf, pos, end, &v) < 0) return -1;
        *n = (int64_t)v - 1;
        return 0;
    }
    if (end - at < size)
        return fail(shape, f, at, "a %d-byte length at byte %zd runs past the end (byte %zd)", size, at, end);
    *n = size == 2 ? (int16_t)((buf[at] << 8) | buf[at + 1]) : be32(buf + at);
    *pos = at + size;
    if (*n < -1) return fail(shape, f, at, "negative length %lld at byte %zd", (long long)*n, at);
    return 0;
}

/* kio reads a null array where the schema allows none as None, and handlers then fail on
   it; Kafka's readers refuse it ("non-nullable field was serialized as null"), so do we. */
static int fail_null(const ShapeObject *shape, const field_t *f, Py_ssize_t at) {
    return fail(shape, f, at, "null at byte %zd where the schema does not allow null", at);
}

static int walk_shape(const ShapeObject *shape, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end);

static int walk(const ShapeObject *shape, const field_t *f, const layout_t *l, const unsigned char *buf,
                Py_ssize_t *pos, Py_ssize_t end) {
    Py_ssize_t at = *pos;
    int64_t n;
    switch (l->kind) {
    case L_FIXED:
        if (end - at < l->width)
            return fail(shape, f, at, "%zd bytes at byte %zd run past the end (byte %zd)", l->width, at, end);
        *pos = at + l->width;
        return 0;
    case L_LEN16:
    case L_LEN32:
    case L_CLEN:
        if (length(shape, f, buf, pos, end, l->kind == L_LEN16 ? 2 : l->kind == L_LEN32 ? 4 : 0, &n) < 0) return -1;
        if (n == -1 && !l->nullable) return fail_null(shape, f, at);
        if (n > end - *pos)
            return fail(shape, f, at, "%lld bytes at byte %zd run past the end (byte %zd)", (long long)n, *pos, end);
        if (n > 0) *pos += (Py_ssize_t)n;
        return 0;
    case L_ARRAY32:
    case L_CARRAY: {
        if (length(shape, f, buf, pos, end, l->kind == L_ARRAY32 ? 4 : 0, &n) < 0) return -1;
        if (n == -1 && !l->nullable) return fail_null(shape, f, at);
        if (n <= 0) return 0;
        const layout_t *e = l->element;
        if (n > (end - *pos) / e->min_size) /* the bound on what a reader may allocate for it */
            return fail(shape, f, at,
                        "%lld elements of at least %zd bytes at byte %zd cannot fit in the %zd bytes left",
                        (long long)n, e->min_size, at, end - *pos);
        if (e->kind == L_FIXED) {
            *pos += (Py_ssize_t)n * e->width;
            return 0;
        }
        for (int64_t i = 0; i < n; i++)
            if (walk(shape, f, e, buf, pos, end) < 0) return -1;
        return 0;
    }
    case L_STRUCT:
        if (l->marker) {
            if (at >= end) return fail(shape, f, at, "the null marker at byte %zd runs past the end", at);
            signed char marker = (signed char)buf[at];
            *pos = at + 1;
            if (marker == -1) return 0;
            if (marker < 0)
                return fail(shape, f, at, "null marker %d at byte %zd is neither -1 (null) nor 0 or more", marker, at);
        }
        return walk_shape(l->shape, buf, pos, end);
    }
    return fail(shape, f, at, "unknown layout");
}

/* The tagged-field section: known tags are walked within the bytes they declare, and
   must take exactly those; unknown tags are skipped. */
static int walk_tags(const ShapeObject *shape, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end) {
    uint64_t count = 0, tag = 0, size = 0;
    if (uvarint(shape, NULL, buf, pos, end, &count) < 0) return -1;
    for (uint64_t i = 0; i < count; i++) { /* each tag takes at least two bytes: bounded by `end` */
        if (uvarint(shape, NULL, buf, pos, end, &tag) < 0 || uvarint(shape, NULL, buf, pos, end, &size) < 0)
            return -1;
        Py_ssize_t at = *pos;
        if (size > (uint64_t)(end - at))
            return fail(shape, NULL, at, "tagged field %llu of %llu bytes at byte %zd runs past the end (byte %zd)",
                        (unsigned long long)tag, (unsigned long long)size, at, end);
        Py_ssize_t field_end = at + (Py_ssize_t)size;
        for (Py_ssize_t k = 0; k < shape->ntagged; k++) {
            const field_t *f = &shape->tagged[k];
            if (f->tag != tag) continue;
            Py_ssize_t p = at;
            if (walk(shape, f, &f->layout, buf, &p, field_end) < 0) return -1;
            if (p != field_end)
                return fail(shape, f, at, "tagged field %llu at byte %zd declares %llu bytes but holds %zd",
                            (unsigned long long)tag, at, (unsigned long long)size, p - at);
            break;
        }
        *pos = field_end;
    }
    return 0;
}

static int walk_shape(const ShapeObject *shape, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end) {
    for (Py_ssize_t i = 0; i < shape->nfields; i++) {
        const field_t *f = &shape->fields[i];
        if (walk(shape, f, &f->layout, buf, pos, end) < 0) return -1;
    }
    if (!shape->flexible) return 0;
    if (*pos < end && buf[*pos] == 0) { /* the usual tagged section: empty */
        *pos += 1;
        return 0;
    }
    return walk_tags(shape, buf, pos, end);
}

static PyObject *check(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyObject_TypeCheck(args[0], &ShapeType)) {
        PyErr_SetString(PyExc_TypeError, "check(shape, buffer, position)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) return NULL;
    int status;
    if (pos < 0 || pos > view.len) {
        PyErr_Format(PyExc_ValueError, "position %zd is outside the %zd-byte buffer", pos, view.len);
        status = -1;
    } else {
        status = walk_shape((ShapeObject *)args[0], view.buf, &pos, view.len);
    }
    PyBuffer_Release(&view);
    return status < 0 ? NULL : PyLong_FromSsize_t(pos);
}

PyDoc_STRVAR(check_doc,
"check(shape, buffer, position) -> end\n--\n\n"
"Walks one value of `shape` in `buffer` from `position` and returns where it ends. Raises\n"
"ShapeError(position, reason) at the first length or count that does not fit the bytes left,\n"
"varint that runs too long, or tagged field that does not hold what it declares.");

/* ---------------------------------------------------------------- Shape */

static void clear_layout(layout_t *l) {
    if (l->element != NULL) {
        clear_layout(l->element);
        PyMem_Free(l->element);
        l->element = NULL;
    }
    Py_CLEAR(l->shape);
}

static void free_fields(field_t *fields, Py_ssize_t n) {
    if (fields == NULL) return;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(fields[i].name);
        clear_layout(&fields[i].layout);
    }
    PyMem_Free(fields);
}

static void shape_dealloc(ShapeObject *self) {
    Py_XDECREF(self->name);
    free_fields(self->fields, self->nfields);
    free_fields(self->tagged, self->ntagged);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const struct {
    const char *name;
    kind_t kind;
    Py_ssize_t min_size;
} KINDS[] = {
    {"fixed", L_FIXED, 0}, {"len16", L_LEN16, 2},    {"len32", L_LEN32, 4},   {"clen", L_CLEN, 1},
    {"array32", L_ARRAY32, 4}, {"carray", L_CARRAY, 1}, {"struct", L_STRUCT, 0},
};
#define NKINDS ((int)(sizeof(KINDS) / sizeof(KINDS[0])))

/* A layout from its description: ("fixed", width), ("len16", nullable), ("len32", nullable),
   ("clen", nullable), ("array32", element, nullable), ("carray", element, nullable) or
   ("struct", Shape, marker). */
static int parse_layout(PyObject *desc, layout_t *l) {
    if (!PyTuple_Check(desc) || PyTuple_GET_SIZE(desc) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(desc, 0))) {
        PyErr_Format(PyExc_TypeError, "a layout is a tuple starting with its kind, not %R", desc);
        return -1;
    }
    const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(desc, 0));
    if (name == NULL) return -1;
    int k = 0;
    while (k < NKINDS && strcmp(KINDS[k].name, name) != 0) k++;
    if (k == NKINDS) {
        PyErr_Format(PyExc_ValueError, "unknown layout kind in %R", desc);
        return -1;
    }
    l->kind = KINDS[k].kind;
    l->min_size = KINDS[k].min_size;
    PyObject *kind_name, *arg;
    switch (l->kind) {
    case L_FIXED:
        if (!PyArg_ParseTuple(desc, "Un:fixed layout", &kind_name, &l->width)) return -1;
        if (l->width < 1) {
            PyErr_Format(PyExc_ValueError, "a fixed width is at least 1: %R", desc);
            return -1;
        }
        l->min_size = l->width;
        return 0;
    case L_ARRAY32:
    case L_CARRAY:
        if (!PyArg_ParseTuple(desc, "UOp:array layout", &kind_name, &arg, &l->nullable)) return -1;
        l->element = PyMem_Calloc(1, sizeof(layout_t));
        if (l->element == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (parse_layout(arg, l->element) < 0) return -1;
        if (l->element->min_size < 1) l->element->min_size = 1; /* a count is bounded by the bytes left */
        return 0;
    case L_STRUCT:
        if (!PyArg_ParseTuple(desc, "UO!p:struct layout", &kind_name, &ShapeType, &arg, &l->marker)) return -1;
        l->shape = (ShapeObject *)Py_NewRef(arg);
        l->min_size = l->marker ? 1 : l->shape->min_size;
        return 0;
    default:
        return PyArg_ParseTuple(desc, "Up:length layout", &kind_name, &l->nullable) ? 0 : -1;
    }
}

/* Fields from (name, layout) pairs, or (tag, name, layout) triples when `tagged`. */
static int parse_fields(PyObject *seq, int tagged, field_t **out, Py_ssize_t *count) {
    PyObject *fast = PySequence_Fast(seq, "fields must be a sequence");
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    field_t *fields = PyMem_Calloc(n ? n : 1, sizeof(field_t));
    if (fields == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    *out = fields;
    int status = 0;
    for (Py_ssize_t i = 0; i < n && status == 0; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i), *layout;
        unsigned long long tag = 0;
        *count = i + 1; /* so that a failure frees what this field took */
        if (tagged ? !PyArg_ParseTuple(item, "KUO:tagged field", &tag, &fields[i].name, &layout)
                   : !PyArg_ParseTuple(item, "UO:field", &fields[i].name, &layout)) {
            fields[i].name = NULL;
            status = -1;
            break;
        }
        Py_INCREF(fields[i].name);
        fields[i].tag = tag;
        status = parse_layout(layout, &fields[i].layout);
    }
    Py_DECREF(fast);
    return status;
}

static PyObject *shape_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"name", "flexible", "fields", "tagged", NULL};
    PyObject *name, *fields, *tagged;
    int flexible;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UpOO:Shape", kwlist, &name, &flexible, &fields, &tagged))
        return NULL;
    ShapeObject *self = (ShapeObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->name = Py_NewRef(name);
    self->flexible = flexible;
    if (parse_fields(fields, 0, &self->fields, &self->nfields) < 0 ||
        parse_fields(tagged, 1, &self->tagged, &self->ntagged) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->min_size = flexible; /* the tagged-field count */
    for (Py_ssize_t i = 0; i < self->nfields; i++) self->min_size += self->fields[i].layout.min_size;
    return (PyObject *)self;
}

static PyObject *shape_min_size(ShapeObject *self, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(self->min_size);
}

static PyGetSetDef shape_getset[] = {
    {"min_size", (getter)shape_min_size, NULL, "the fewest bytes a value of this shape takes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(shape_doc,
"Shape(name, flexible, fields, tagged)\n--\n\n"
"One message class, compiled for check(): `fields` are the untagged fields in wire order as\n"
"(name, layout), `tagged` the known tagged fields as (tag, name, layout); a flexible shape\n"
"ends with a tagged-field section. A layout is ('fixed', width), ('len16', nullable),\n"
"('len32', nullable), ('clen', nullable), ('array32', element, nullable), ('carray',\n"
"element, nullable) or ('struct', Shape, marker).");

static PyTypeObject ShapeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kraft.protocol._shape.Shape",
    .tp_basicsize = sizeof(ShapeObject),
    .tp_dealloc = (destructor)shape_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = shape_doc,
    .tp_getset = shape_getset,
    .tp_new = shape_new,
};

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL, check_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_shape", "Checks a frame's lengths and counts against the bytes that came with it.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shape(void) {
    if (PyType_Ready(&ShapeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    ShapeError = PyErr_NewExceptionWithDoc("kraft.protocol._shape.ShapeError",
                                           "(position, reason): where a frame first fails its shape, and why",
                                           PyExc_ValueError, NULL);
    if (ShapeError == NULL || PyModule_AddObjectRef(m, "Shape", (PyObject *)&ShapeType) < 0 ||
        PyModule_AddObjectRef(m, "ShapeError", ShapeError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
