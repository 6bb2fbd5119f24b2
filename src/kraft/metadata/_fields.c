/*
 * The metadata record reader: a small interpreter of per-version plans that kraft.metadata.schema
 * compiles from each message class's declared fields.
 *
 * Why C: every replica decodes every committed metadata record, and under write load that
 * is the largest share of a node's CPU (a ConfigRecord took ~2 us through Python code
 * generated per version, mostly interpreter overhead around three string slices). A plan is
 * a list of field steps in wire order plus the known tags; this file runs it and builds the
 * message object directly. Writing stays in Python (schema.py), where a value that does not
 * fit its field must be reported by name and speed matters less.
 *
 * Only Kafka's flexible encoding (KIP-482) is read: compact strings and arrays (unsigned
 * varint length + 1, 0 for null) and a tagged-field section ending every struct, whose known
 * tags are filled in and unknown ones skipped. Fixed-width fields are big-endian.
 *
 * Objects are built as object.__new__(cls) followed by a store into each slot (what a
 * member descriptor's __set__ does, and what a frozen dataclass's __init__ amounts to),
 * so classes with their own __new__ or a __post_init__ are refused when a plan is made.
 *
 * Every problem with the bytes raises the error class the Decoder was given
 * (MetadataRecordError), naming the record type, the field and the byte position.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

/* ---------------------------------------------------------------- field layouts */

typedef enum {
    K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_BOOL, K_UUID, K_FLOAT64, K_STRING, K_BYTES, K_ARRAY, K_STRUCT
} kind_t;

static const struct {
    const char *name;
    kind_t kind;
    Py_ssize_t width; /* bytes of a fixed-width kind; 0 for variable width */
} KINDS[] = {
    {"int8", K_INT8, 1},   {"int16", K_INT16, 2}, {"int32", K_INT32, 4}, {"int64", K_INT64, 8},
    {"uint16", K_UINT16, 2}, {"bool", K_BOOL, 1}, {"uuid", K_UUID, 16}, {"float64", K_FLOAT64, 8},
    {"string", K_STRING, 0}, {"bytes", K_BYTES, 0},
};
#define NKINDS ((int)(sizeof(KINDS) / sizeof(KINDS[0])))

typedef struct PlanObject PlanObject;

typedef struct {
    kind_t kind;
    kind_t element;     /* K_ARRAY: the element's kind (fixed width, K_STRING or K_STRUCT) */
    Py_ssize_t width;   /* fixed width of the field, or of an array's element (0 for structs) */
    int nullable;
    uint64_t tag;       /* tagged fields only */
    Py_ssize_t offset;  /* where the slot lives in an instance */
    PyObject *name;     /* the field's name, for errors */
    PlanObject *struct_plan; /* K_ARRAY of K_STRUCT: the element's plan */
} field_t;

struct PlanObject {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *cls_name;
    Py_ssize_t nfields; /* untagged fields, in wire order */
    field_t *fields;
    Py_ssize_t ntagged; /* tagged fields this version knows */
    field_t *tagged;
    Py_ssize_t ndefaults; /* slots no untagged step fills: tagged fields and fields newer than the version */
    Py_ssize_t *default_offsets;
    PyObject **defaults;
    Py_ssize_t min_size; /* the fewest bytes an instance takes, to bound an array's count */
};

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* ---------------------------------------------------------------- reading */

typedef struct {
    const unsigned char *buf;
    PyObject *error; /* the exception class to raise */
} reader_t;

static inline uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* Raises the reader's error as "<prefix>: <message>", the message formatted as PyUnicode_FromFormat does. */
static void fail(reader_t *r, PyObject *prefix, const char *format, ...) {
    va_list va;
    va_start(va, format);
    PyObject *message = PyUnicode_FromFormatV(format, va);
    va_end(va);
    if (message == NULL) return;
    PyErr_Format(r->error, "%U: %U", prefix, message);
    Py_DECREF(message);
}

/* "Class.field", the prefix of a field's errors. */
static PyObject *field_path(const PlanObject *plan, const field_t *f) {
    return PyUnicode_FromFormat("%U.%U", plan->cls_name, f->name);
}

static void fail_field(reader_t *r, const PlanObject *plan, const field_t *f, const char *format, ...) {
    PyObject *path = field_path(plan, f);
    if (path == NULL) return;
    va_list va;
    va_start(va, format);
    PyObject *message = PyUnicode_FromFormatV(format, va);
    va_end(va);
    if (message != NULL) {
        PyErr_Format(r->error, "%U: %U", path, message);
        Py_DECREF(message);
    }
    Py_DECREF(path);
}

/* An unsigned varint of at most 5 bytes (Kafka's limit) ending before `end`.
   Returns 0, -1 if the bytes end inside it, -2 if it is longer than 5 bytes. */
static inline int read_uvarint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out) {
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) { /* the usual case: one byte */
        *out = buf[p];
        *pos = p + 1;
        return 0;
    }
    uint64_t value = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (p >= end) return -1;
        unsigned char b = buf[p++];
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = value;
            *pos = p;
            return 0;
        }
    }
    return -2;
}

static void fail_varint(reader_t *r, PyObject *prefix, int status, Py_ssize_t pos, Py_ssize_t end) {
    if (status == -1)
        fail(r, prefix, "the value ends early: a varint at byte %zd runs past byte %zd", pos, end);
    else
        fail(r, prefix, "varint longer than 5 bytes at byte %zd", pos);
}

/* A field's varint (a length or count); on error raises naming the field. */
static inline int field_uvarint(reader_t *r, const PlanObject *plan, const field_t *f, Py_ssize_t *pos,
                                Py_ssize_t end, uint64_t *out) {
    Py_ssize_t at = *pos;
    int status = read_uvarint(r->buf, end, pos, out);
    if (status < 0) {
        PyObject *path = field_path(plan, f);
        if (path != NULL) {
            fail_varint(r, path, status, at, end);
            Py_DECREF(path);
        }
    }
    return status;
}

static PyObject *read_fixed(const unsigned char *p, kind_t kind) {
    switch (kind) {
    case K_INT8: return PyLong_FromLong((int8_t)p[0]);
    case K_INT16: return PyLong_FromLong((int16_t)be16(p));
    case K_INT32: return PyLong_FromLong((int32_t)be32(p));
    case K_INT64: return PyLong_FromLongLong((int64_t)be64(p));
    case K_UINT16: return PyLong_FromLong(be16(p));
    case K_BOOL: return Py_NewRef(p[0] ? Py_True : Py_False);
    case K_UUID: return PyBytes_FromStringAndSize((const char *)p, 16);
    case K_FLOAT64: {
        uint64_t bits = be64(p);
        double value;
        memcpy(&value, &bits, sizeof value);
        return PyFloat_FromDouble(value);
    }
    default: break;
    }
    PyErr_SetString(PyExc_SystemError, "not a fixed-width kind");
    return NULL;
}

static PyObject *read_struct(reader_t *r, PlanObject *plan, Py_ssize_t *pos, Py_ssize_t end);

/* A compact string's or array's length (varint length + 1, 0 for null). Returns 1 with the
   length in *n, 0 for a null the field allows, -1 with the error raised. */
static int read_length(reader_t *r, const PlanObject *plan, const field_t *f, const char *what, Py_ssize_t *pos,
                       Py_ssize_t end, uint64_t *n) {
    Py_ssize_t at = *pos;
    if (field_uvarint(r, plan, f, pos, end, n) < 0) return -1;
    if (*n > 0) {
        *n -= 1;
        return 1;
    }
    if (f->nullable) return 0;
    fail_field(r, plan, f, "null %s at byte %zd where the schema does not allow null", what, at);
    return -1;
}

/* A compact string's or bytes' extent: 1 with its first byte in *start and its length in *n
   (*pos moved past it), 0 for a null the field allows, -1 with the error raised. */
static int read_span(reader_t *r, const PlanObject *plan, const field_t *f, const char *what, Py_ssize_t *pos,
                     Py_ssize_t end, Py_ssize_t *start, Py_ssize_t *n) {
    uint64_t length;
    int status = read_length(r, plan, f, what, pos, end, &length);
    if (status <= 0) return status;
    *start = *pos;
    if (length > (uint64_t)(end - *start)) {
        fail_field(r, plan, f, "%s of %llu bytes at byte %zd runs past the end (byte %zd)", what,
                   (unsigned long long)length, *start, end);
        return -1;
    }
    *n = (Py_ssize_t)length;
    *pos = *start + *n;
    return 1;
}

static PyObject *read_string(reader_t *r, const PlanObject *plan, const field_t *f, Py_ssize_t *pos,
                             Py_ssize_t end) {
    Py_ssize_t start, n;
    int status = read_span(r, plan, f, "string", pos, end, &start, &n);
    if (status <= 0) return status == 0 ? Py_NewRef(Py_None) : NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + start, n, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        fail_field(r, plan, f, "string of %zd bytes at byte %zd does not decode as UTF-8 (%S)", n, start, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    return s;
}

static PyObject *read_bytes(reader_t *r, const PlanObject *plan, const field_t *f, Py_ssize_t *pos,
                            Py_ssize_t end) {
    Py_ssize_t start, n;
    int status = read_span(r, plan, f, "bytes", pos, end, &start, &n);
    if (status <= 0) return status == 0 ? Py_NewRef(Py_None) : NULL;
    return PyBytes_FromStringAndSize((const char *)r->buf + start, n);
}

static PyObject *read_array(reader_t *r, const PlanObject *plan, const field_t *f, Py_ssize_t *pos,
                            Py_ssize_t end) {
    Py_ssize_t at = *pos;
    uint64_t n;
    int status = read_length(r, plan, f, "array", pos, end, &n);
    if (status <= 0) return status == 0 ? Py_NewRef(Py_None) : NULL;
    Py_ssize_t p = *pos;
    uint64_t room = (uint64_t)(end - p);
    uint64_t each = f->element == K_STRUCT ? (uint64_t)f->struct_plan->min_size
                    : f->element == K_STRING ? 1 /* its length varint */
                    : (uint64_t)f->width;
    if (n > room / each) { /* n and each are below 2**35, so n * each cannot overflow either */
        fail_field(r, plan, f, "array of %llu elements at byte %zd cannot fit in %llu bytes", (unsigned long long)n,
                   at, (unsigned long long)room);
        return NULL;
    }
    PyObject *items = PyTuple_New((Py_ssize_t)n);
    if (items == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        PyObject *item;
        if (f->element == K_STRUCT) {
            item = read_struct(r, f->struct_plan, &p, end);
        } else if (f->element == K_STRING) {
            field_t element = *f; /* the array's name for errors; its strings are never null */
            element.nullable = 0;
            item = read_string(r, plan, &element, &p, end);
        } else {
            item = read_fixed(r->buf + p, f->element); /* in bounds: checked for all n above */
            p += f->width;
        }
        if (item == NULL) {
            Py_DECREF(items);
            return NULL;
        }
        PyTuple_SET_ITEM(items, i, item);
    }
    *pos = p;
    return items;
}

static PyObject *read_field(reader_t *r, const PlanObject *plan, const field_t *f, Py_ssize_t *pos,
                            Py_ssize_t end) {
    switch (f->kind) {
    case K_STRING: return read_string(r, plan, f, pos, end);
    case K_BYTES: return read_bytes(r, plan, f, pos, end);
    case K_ARRAY: return read_array(r, plan, f, pos, end);
    default: break;
    }
    Py_ssize_t p = *pos;
    if (f->width > end - p) {
        fail_field(r, plan, f, "the value ends early: %zd bytes needed at byte %zd, it ends at byte %zd", f->width, p,
                   end);
        return NULL;
    }
    *pos = p + f->width;
    return read_fixed(r->buf + p, f->kind);
}

/* A tagged-field section: each known tag's value replaces that field's default; unknown
   tags are skipped, so records from newer writers still load. */
static int read_tagged(reader_t *r, PlanObject *plan, PyObject *obj, Py_ssize_t *pos, Py_ssize_t end) {
    const unsigned char *buf = r->buf;
    Py_ssize_t p = *pos;
    uint64_t count, tag, size;
    int status;
    Py_ssize_t at = p;
    if ((status = read_uvarint(buf, end, &p, &count)) < 0) goto bad_varint;
    for (uint64_t i = 0; i < count; i++) { /* each tag takes at least two bytes: bounded by `end` */
        at = p;
        if ((status = read_uvarint(buf, end, &p, &tag)) < 0) goto bad_varint;
        at = p;
        if ((status = read_uvarint(buf, end, &p, &size)) < 0) goto bad_varint;
        if (size > (uint64_t)(end - p)) {
            fail(r, plan->cls_name, "tagged field %llu of %llu bytes at byte %zd runs past the end (byte %zd)",
                 (unsigned long long)tag, (unsigned long long)size, p, end);
            return -1;
        }
        Py_ssize_t field_end = p + (Py_ssize_t)size;
        for (Py_ssize_t k = 0; k < plan->ntagged; k++) {
            const field_t *f = &plan->tagged[k];
            if (f->tag != tag) continue;
            Py_ssize_t q = p;
            PyObject *value = read_field(r, plan, f, &q, field_end);
            if (value == NULL) return -1;
            if (q != field_end) {
                Py_DECREF(value);
                fail_field(r, plan, f, "tagged field %llu at byte %zd declares %llu bytes but holds %zd",
                           (unsigned long long)tag, p, (unsigned long long)size, q - p);
                return -1;
            }
            Py_SETREF(SLOT(obj, f->offset), value);
            break;
        }
        p = field_end;
    }
    *pos = p;
    return 0;
bad_varint: {
    PyObject *prefix = PyUnicode_FromFormat("%U tagged fields", plan->cls_name);
    if (prefix != NULL) {
        fail_varint(r, prefix, status, at, end);
        Py_DECREF(prefix);
    }
    return -1;
}
}

/* One instance of the plan's class from the bytes at *pos, not reading past `end`. */
static PyObject *read_struct(reader_t *r, PlanObject *plan, Py_ssize_t *pos, Py_ssize_t end) {
    PyObject *obj = plan->cls->tp_alloc(plan->cls, 0);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < plan->ndefaults; i++) SLOT(obj, plan->default_offsets[i]) = Py_NewRef(plan->defaults[i]);
    Py_ssize_t p = *pos;
    for (Py_ssize_t i = 0; i < plan->nfields; i++) {
        const field_t *f = &plan->fields[i];
        PyObject *value = read_field(r, plan, f, &p, end);
        if (value == NULL) {
            Py_DECREF(obj); /* frees the slots filled so far */
            return NULL;
        }
        SLOT(obj, f->offset) = value;
    }
    if (p < end && r->buf[p] == 0) { /* the usual tagged section: empty */
        p++;
    } else if (read_tagged(r, plan, obj, &p, end) < 0) {
        Py_DECREF(obj);
        return NULL;
    }
    *pos = p;
    return obj;
}

/* ---------------------------------------------------------------- Plan */

static int plan_traverse(PlanObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->cls);
    for (Py_ssize_t i = 0; i < self->nfields; i++) Py_VISIT(self->fields[i].struct_plan);
    for (Py_ssize_t i = 0; i < self->ntagged; i++) Py_VISIT(self->tagged[i].struct_plan);
    for (Py_ssize_t i = 0; i < self->ndefaults; i++) Py_VISIT(self->defaults[i]);
    return 0;
}

static int plan_clear(PlanObject *self) {
    Py_CLEAR(self->cls);
    for (Py_ssize_t i = 0; i < self->nfields; i++) Py_CLEAR(self->fields[i].struct_plan);
    for (Py_ssize_t i = 0; i < self->ntagged; i++) Py_CLEAR(self->tagged[i].struct_plan);
    for (Py_ssize_t i = 0; i < self->ndefaults; i++) Py_CLEAR(self->defaults[i]);
    return 0;
}

static void free_fields(field_t *fields, Py_ssize_t n) {
    if (fields == NULL) return;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(fields[i].name);
        Py_XDECREF(fields[i].struct_plan);
    }
    PyMem_Free(fields);
}

static void plan_dealloc(PlanObject *self) {
    PyObject_GC_UnTrack(self);
    plan_clear(self);
    Py_XDECREF(self->cls_name);
    free_fields(self->fields, self->nfields);
    free_fields(self->tagged, self->ntagged);
    PyMem_Free(self->default_offsets);
    PyMem_Free(self->defaults);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject PlanType;

/* The offset of `cls`'s slot behind member descriptor `descr`, or -1 (raised) if it is not
   an object slot of cls: only then may the reader store into it directly. */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *descr) {
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%R is not a slot (member descriptor)", descr);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (!PyType_IsSubtype(cls, PyDescr_TYPE(descr)) || member->type != T_OBJECT_EX || (member->flags & READONLY) ||
        member->offset < (Py_ssize_t)sizeof(PyObject) ||
        member->offset + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
        PyErr_Format(PyExc_TypeError, "%R is not a writable object slot of %R", descr, cls);
        return -1;
    }
    return member->offset;
}

/* Fills `f` from a field description (slot descriptor, layout, nullable), where the layout
   is a kind name ("int32", "string"...) or ("array", element) with element a fixed-width
   kind name or the Plan of a struct. */
static int parse_field(PyTypeObject *cls, PyObject *desc, field_t *f) {
    PyObject *descr, *layout;
    int nullable;
    if (!PyArg_ParseTuple(desc, "OOp:field", &descr, &layout, &nullable)) return -1;
    f->offset = slot_offset(cls, descr);
    if (f->offset < 0) return -1;
    f->name = Py_NewRef(PyDescr_NAME(descr));
    f->nullable = nullable;
    PyObject *element = NULL;
    const char *name;
    if (PyTuple_Check(layout)) {
        if (!PyArg_ParseTuple(layout, "sO:array layout", &name, &element)) return -1;
        if (strcmp(name, "array") != 0) {
            PyErr_Format(PyExc_ValueError, "unknown layout %R", layout);
            return -1;
        }
        f->kind = K_ARRAY;
        if (PyObject_TypeCheck(element, &PlanType)) {
            f->element = K_STRUCT;
            f->struct_plan = (PlanObject *)Py_NewRef(element);
            return 0;
        }
        if (!PyUnicode_Check(element) || (name = PyUnicode_AsUTF8(element)) == NULL) {
            PyErr_Format(PyExc_TypeError, "an array's element is a kind name or a Plan, not %R", element);
            return -1;
        }
    } else if (!PyUnicode_Check(layout) || (name = PyUnicode_AsUTF8(layout)) == NULL) {
        PyErr_Format(PyExc_TypeError, "a field's layout is a kind name or ('array', element), not %R", layout);
        return -1;
    }
    for (int k = 0; k < NKINDS; k++) {
        if (strcmp(KINDS[k].name, name) != 0) continue;
        if (element == NULL) {
            f->kind = KINDS[k].kind;
            f->width = KINDS[k].width;
            if (f->width == 0 || !nullable) return 0;
        } else {
            f->element = KINDS[k].kind;
            f->width = KINDS[k].width;
            if (f->width > 0 || f->element == K_STRING) return 0;
        }
        break;
    }
    PyErr_Format(PyExc_ValueError,
                 "layout %R of %R cannot be read: the reader takes the fixed-width kinds, strings, bytes, and "
                 "arrays of fixed-width kinds, strings or structs, and a fixed-width field is never null",
                 layout, descr);
    return -1;
}

static int parse_fields(PyTypeObject *cls, PyObject *seq, int with_tags, field_t **out, Py_ssize_t *count) {
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
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *desc = PySequence_Fast_GET_ITEM(fast, i);
        *count = i + 1; /* so that a failure frees what this field took */
        if (with_tags) {
            unsigned long long tag;
            PyObject *rest;
            if (!PyArg_ParseTuple(desc, "KO:tagged field", &tag, &rest) || parse_field(cls, rest, &fields[i]) < 0) {
                Py_DECREF(fast);
                return -1;
            }
            fields[i].tag = tag;
        } else if (parse_field(cls, desc, &fields[i]) < 0) {
            Py_DECREF(fast);
            return -1;
        }
    }
    *count = n;
    Py_DECREF(fast);
    return 0;
}

/* Every slot of the class is filled exactly once before the tagged fields are read (by an
   untagged step or a default), so no instance has an empty slot and a tag's value always
   replaces one. */
static int check_slots(PlanObject *self) {
    Py_ssize_t slots = (self->cls->tp_basicsize - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
    Py_ssize_t filled = self->nfields + self->ndefaults;
    for (Py_ssize_t i = 0; i < filled; i++) {
        Py_ssize_t a = i < self->nfields ? self->fields[i].offset : self->default_offsets[i - self->nfields];
        for (Py_ssize_t j = i + 1; j < filled; j++) {
            Py_ssize_t b = j < self->nfields ? self->fields[j].offset : self->default_offsets[j - self->nfields];
            if (a == b) {
                PyErr_Format(PyExc_ValueError, "the plan of %R fills a slot twice", self->cls);
                return -1;
            }
        }
    }
    if (filled != slots) {
        PyErr_Format(PyExc_ValueError, "%R has %zd slots, the plan fills %zd", self->cls, slots, filled);
        return -1;
    }
    return 0;
}

static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"cls", "fields", "tagged", "defaults", NULL};
    PyTypeObject *cls;
    PyObject *fields, *tagged, *defaults;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOO:Plan", kwlist, &PyType_Type, &cls, &fields, &tagged,
                                     &defaults))
        return NULL;
    if (cls->tp_new != PyBaseObject_Type.tp_new || PyObject_HasAttrString((PyObject *)cls, "__post_init__")) {
        PyErr_Format(PyExc_TypeError,
                     "%R is built slot by slot, without __init__: it may not have its own __new__ or __post_init__",
                     cls);
        return NULL;
    }
    PlanObject *self = (PlanObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->cls_name = PyType_GetName(cls);
    if (self->cls_name == NULL || parse_fields(cls, fields, 0, &self->fields, &self->nfields) < 0 ||
        parse_fields(cls, tagged, 1, &self->tagged, &self->ntagged) < 0)
        goto error;
    PyObject *fast = PySequence_Fast(defaults, "defaults must be a sequence of (slot, value)");
    if (fast == NULL) goto error;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    self->default_offsets = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    self->defaults = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    if (self->default_offsets == NULL || self->defaults == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *descr, *value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "OO:default", &descr, &value) ||
            (self->default_offsets[i] = slot_offset(cls, descr)) < 0) {
            Py_DECREF(fast);
            goto error;
        }
        self->defaults[i] = Py_NewRef(value);
        self->ndefaults = i + 1;
    }
    Py_DECREF(fast);
    if (check_slots(self) < 0) goto error;
    self->min_size = 1; /* the tagged-field count */
    for (Py_ssize_t i = 0; i < self->nfields; i++) {
        const field_t *f = &self->fields[i];
        self->min_size += f->width == 0 ? 1 : f->width; /* a variable-width field: at least its length */
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

PyDoc_STRVAR(plan_doc,
"Plan(cls, fields, tagged, defaults)\n--\n\n"
"One message class at one version, compiled for the reader: `fields` are the untagged\n"
"fields in wire order as (slot, layout, nullable), `tagged` the known tagged fields as\n"
"(tag, (slot, layout, nullable)), `defaults` (slot, value) for every other slot. A slot is\n"
"the class's member descriptor; a layout is a kind name (int8, int16, int32, int64,\n"
"uint16, bool, uuid, float64, string, bytes) or ('array', element), element a fixed-width\n"
"kind, 'string' or a Plan.");

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kraft.metadata._fields.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = plan_doc,
    .tp_traverse = (traverseproc)plan_traverse,
    .tp_clear = (inquiry)plan_clear,
    .tp_new = plan_new,
};

/* ---------------------------------------------------------------- Decoder */

typedef struct {
    PyObject *name; /* NULL: no record type has this API key */
    uint64_t low, high;
    PlanObject **plans; /* one per version, low..high */
} record_type_t;

typedef struct {
    PyObject_HEAD
    PyObject *error;
    uint64_t frame_version;
    Py_ssize_t nkeys; /* API keys 0..nkeys-1 */
    record_type_t *keys;
} DecoderObject;

static void decoder_dealloc(DecoderObject *self) {
    Py_XDECREF(self->error);
    for (Py_ssize_t k = 0; k < self->nkeys; k++) {
        record_type_t *t = &self->keys[k];
        Py_XDECREF(t->name);
        if (t->plans != NULL) {
            for (uint64_t v = 0; v <= t->high - t->low; v++) Py_XDECREF(t->plans[v]);
            PyMem_Free(t->plans);
        }
    }
    PyMem_Free(self->keys);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *decoder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"error", "frame_version", "record_types", NULL};
    PyObject *error, *types;
    unsigned long long frame_version;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OKO:Decoder", kwlist, &error, &frame_version, &types)) return NULL;
    if (!PyExceptionClass_Check(error)) {
        PyErr_Format(PyExc_TypeError, "error must be an exception class, not %R", error);
        return NULL;
    }
    PyObject *fast = PySequence_Fast(types, "record_types must be a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    Py_ssize_t nkeys = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        Py_ssize_t key = PyTuple_Check(item) && PyTuple_GET_SIZE(item) > 0 ? PyLong_AsSsize_t(PyTuple_GET_ITEM(item, 0)) : -1;
        if (key < 0 || key > 0xFFFF) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%R: an API key is 0..65535", item);
            Py_DECREF(fast);
            return NULL;
        }
        if (key + 1 > nkeys) nkeys = key + 1;
    }
    DecoderObject *self = (DecoderObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    self->error = Py_NewRef(error);
    self->frame_version = frame_version;
    self->keys = PyMem_Calloc(nkeys ? nkeys : 1, sizeof(record_type_t));
    if (self->keys == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    self->nkeys = nkeys;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t key;
        PyObject *name, *plans;
        unsigned long long low, high;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "nUKKO:record type", &key, &name, &low, &high, &plans))
            goto error;
        record_type_t *t = &self->keys[key];
        if (t->name != NULL || high < low || high - low > 255 || !PyTuple_Check(plans) ||
            (unsigned long long)PyTuple_GET_SIZE(plans) != high - low + 1) {
            PyErr_Format(PyExc_ValueError, "API key %zd: a second record type, or not one Plan per version %llu-%llu",
                         key, low, high);
            goto error;
        }
        t->plans = PyMem_Calloc(high - low + 1, sizeof(PlanObject *));
        if (t->plans == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        t->name = Py_NewRef(name);
        t->low = low;
        t->high = high;
        for (unsigned long long v = 0; v <= high - low; v++) {
            PyObject *plan = PyTuple_GET_ITEM(plans, v);
            if (!PyObject_TypeCheck(plan, &PlanType)) {
                PyErr_Format(PyExc_TypeError, "API key %zd version %llu: not a Plan: %R", key, low + v, plan);
                goto error;
            }
            t->plans[v] = (PlanObject *)Py_NewRef(plan);
        }
    }
    Py_DECREF(fast);
    return (PyObject *)self;
error:
    Py_DECREF(fast);
    Py_DECREF(self);
    return NULL;
}

/* The frame header, read slowly: a varint of more than one byte, or a problem to report. */
static PlanObject *read_header(DecoderObject *self, const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos) {
    uint64_t values[3];
    static const char *what[3] = {"frame version", "API key", "version"};
    for (int i = 0; i < 3; i++) {
        Py_ssize_t at = *pos;
        int status = read_uvarint(buf, len, pos, &values[i]);
        if (status == -1) {
            PyErr_Format(self->error, "metadata record value of %zd bytes ends early in its header (the %s)", len,
                         what[i]);
            return NULL;
        }
        if (status == -2) {
            PyErr_Format(self->error, "metadata record header: %s varint longer than 5 bytes at byte %zd", what[i], at);
            return NULL;
        }
        if (i == 0 && values[0] != self->frame_version) {
            PyErr_Format(self->error, "unknown metadata record frame version %llu", (unsigned long long)values[0]);
            return NULL;
        }
    }
    uint64_t key = values[1], version = values[2];
    record_type_t *t = key < (uint64_t)self->nkeys ? &self->keys[key] : NULL;
    if (t == NULL || t->name == NULL) {
        PyErr_Format(self->error, "unknown metadata record API key %llu", (unsigned long long)key);
        return NULL;
    }
    if (version < t->low || version > t->high) {
        PyErr_Format(self->error, "%U version %llu is not supported (this build reads %llu-%llu)", t->name,
                     (unsigned long long)version, (unsigned long long)t->low, (unsigned long long)t->high);
        return NULL;
    }
    return t->plans[version - t->low];
}

static PyObject *decode_value(DecoderObject *self, const unsigned char *buf, Py_ssize_t len) {
    if (len == 0) {
        PyErr_SetString(self->error, "metadata record without a value");
        return NULL;
    }
    PlanObject *plan = NULL;
    Py_ssize_t pos = 3;
    if (len >= 3 && buf[0] == self->frame_version && buf[1] < self->nkeys && buf[2] < 0x80) {
        record_type_t *t = &self->keys[buf[1]]; /* the usual header: three one-byte varints */
        if (t->name != NULL && buf[2] >= t->low && buf[2] <= t->high) plan = t->plans[buf[2] - t->low];
    }
    if (plan == NULL) {
        pos = 0;
        plan = read_header(self, buf, len, &pos);
        if (plan == NULL) return NULL;
    }
    reader_t r = {buf, self->error};
    PyObject *record = read_struct(&r, plan, &pos, len);
    if (record != NULL && pos != len) {
        PyErr_Format(self->error, "%U has %zd trailing bytes (from byte %zd of %zd)", plan->cls_name, len - pos, pos,
                     len);
        Py_CLEAR(record);
    }
    return record;
}

static PyObject *decoder_decode(DecoderObject *self, PyObject *value) {
    if (PyBytes_CheckExact(value))
        return decode_value(self, (const unsigned char *)PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
    if (value == Py_None) {
        PyErr_SetString(self->error, "metadata record without a value");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *record = decode_value(self, view.buf, view.len);
    PyBuffer_Release(&view);
    return record;
}

PyDoc_STRVAR(decoder_decode_doc,
"decode(value) -> record\n--\n\n"
"The metadata record in one framed value (bytes-like): frame version, API key and version\n"
"as unsigned varints, then the record. A value that is missing, cut short, too long or\n"
"malformed raises the Decoder's error class, saying what is wrong where.");

static PyMethodDef decoder_methods[] = {
    {"decode", (PyCFunction)decoder_decode, METH_O, decoder_decode_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(decoder_doc,
"Decoder(error, frame_version, record_types)\n--\n\n"
"Reads framed metadata records. `record_types` holds (api_key, name, low, high, plans) with\n"
"one Plan per version low..high; every problem with a value raises `error`.");

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kraft.metadata._fields.Decoder",
    .tp_basicsize = sizeof(DecoderObject),
    .tp_dealloc = (destructor)decoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = decoder_doc,
    .tp_methods = decoder_methods,
    .tp_new = decoder_new,
};

/* ---------------------------------------------------------------- module */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fields", "The metadata record reader: plans compiled from message schemas, run in C.",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fields(void) {
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&DecoderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0 ||
        PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
