/*
 * Kafka RecordBatch v2 in C where Python's per-item cost dominates: per-record varint
 * encoding and decoding, and the batch walker.
 *
 * Why C: a record is seven varint-framed fields, and a Python loop over them runs at
 * 20-80 MB/s while the batch header, CRC and replication paths run at GB/s. The walker reads
 * and checks batch headers (CRC by the crc32c package, called once per batch) and, for a
 * leader's append, stamps offsets and the epoch in the same pass: in Python those per-batch
 * steps cost more than writing the batch to disk. Compression, building batches and raising
 * the project's error types stay in Python (kraft/records/batch.py).
 *
 * Errors are raised as ValueError(message, relative_position), or ValueError(message, None)
 * for a batch whose header fields contradict each other; the Python side turns them into
 * CorruptRecordError with the absolute position in the file or buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- Record */

/*
 * A decoded record is a tuple (offset, timestamp, key, value, headers) with named fields.
 * A tuple subclass of our own rather than a struct sequence: its fields are T_OBJECT_EX
 * members, which CPython's attribute cache turns into a direct slot load (a struct
 * sequence's T_OBJECT members take the generic path on every `r.value`), and creating
 * one costs no look-up of the field count in the type's dict. It is built once per record,
 * so both show in decode throughput.
 */
#define RECORD_FIELDS 5
#define RECORD_ITEM(i) (offsetof(PyTupleObject, ob_item) + (i) * sizeof(PyObject *))

static PyMemberDef record_members[] = {
    {"offset", T_OBJECT_EX, RECORD_ITEM(0), READONLY, "absolute offset of the record in the log"},
    {"timestamp", T_OBJECT_EX, RECORD_ITEM(1), READONLY, "timestamp in milliseconds"},
    {"key", T_OBJECT_EX, RECORD_ITEM(2), READONLY, "key bytes, or None"},
    {"value", T_OBJECT_EX, RECORD_ITEM(3), READONLY, "value bytes, or None"},
    {"headers", T_OBJECT_EX, RECORD_ITEM(4), READONLY, "tuple of (str key, bytes-or-None value)"},
    {NULL, 0, 0, 0, NULL},
};

/* Record(iterable of five items), as tuple() and struct sequences take it; also how
   copy and pickle rebuild one (tuple.__getnewargs__). */
static PyObject *record_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *items;
    static char *kwlist[] = {"sequence", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Record", kwlist, &items)) return NULL;
    PyObject *seq = PySequence_Fast(items, "Record() takes a sequence of five items");
    if (seq == NULL) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != RECORD_FIELDS) {
        PyErr_Format(PyExc_TypeError, "Record() takes 5 items (offset, timestamp, key, value, headers), got %zd",
                     PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return NULL;
    }
    PyObject *rec = type->tp_alloc(type, RECORD_FIELDS);
    if (rec != NULL) {
        for (Py_ssize_t i = 0; i < RECORD_FIELDS; i++)
            PyTuple_SET_ITEM(rec, i, Py_NewRef(PySequence_Fast_GET_ITEM(seq, i)));
    }
    Py_DECREF(seq);
    return rec;
}

static PyObject *record_repr(PyObject *self) {
    return PyUnicode_FromFormat("Record(offset=%R, timestamp=%R, key=%R, value=%R, headers=%R)",
                                PyTuple_GET_ITEM(self, 0), PyTuple_GET_ITEM(self, 1), PyTuple_GET_ITEM(self, 2),
                                PyTuple_GET_ITEM(self, 3), PyTuple_GET_ITEM(self, 4));
}

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kraft.records.Record",
    .tp_basicsize = sizeof(PyTupleObject) - sizeof(PyObject *),
    .tp_itemsize = sizeof(PyObject *),
    .tp_repr = record_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded record: (offset, timestamp, key, value, headers), a tuple with named fields.",
    .tp_members = record_members,
    .tp_new = record_new,
};

/* A new Record owning the five references given (each may be NULL after a failed
   allocation: then everything is released and NULL returned).

   The decoder's records are left out of the cycle collector: they hold only ints, bytes,
   None and tuples of str and bytes, so they can never be part of a cycle, and a batch
   decodes into a list of a thousand of them at once. Tracked, they set off a collection
   that walks them all every few hundred records, which cost more than decoding them. */
static PyObject *make_record(PyObject *offset, PyObject *timestamp, PyObject *key, PyObject *value,
                             PyObject *headers) {
    PyObject *items[RECORD_FIELDS] = {offset, timestamp, key, value, headers};
    PyTupleObject *rec = NULL;
    if (offset && timestamp && key && value && headers) rec = PyObject_GC_NewVar(PyTupleObject, &RecordType, RECORD_FIELDS);
    if (rec == NULL) {
        for (int i = 0; i < RECORD_FIELDS; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    memcpy(rec->ob_item, items, sizeof items);
    return (PyObject *)rec;
}

/* ---------------------------------------------------------------- varints */

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline Py_ssize_t varint_size(int64_t v) {
    uint64_t u = zigzag(v);
    Py_ssize_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline unsigned char *put_varint(unsigned char *p, int64_t v) {
    uint64_t u = zigzag(v);
    while (u >= 0x80) {
        *p++ = (unsigned char)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    *p++ = (unsigned char)u;
    return p;
}

/* Reads a zigzag varint of at most max_bytes bytes. Returns 0, or -1 on overrun, -2 when too long. */
static inline int get_varint(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, int max_bytes,
                             int64_t *out) {
    uint64_t u = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= len) return -1;
        unsigned char b = buf[p++];
        u |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pos = p;
            *out = (int64_t)((u >> 1) ^ (~(u & 1) + 1));
            return 0;
        }
        shift += 7;
    }
    return -2;
}

/* Sets ValueError((what, pos)): a problem at byte `pos` of the records section. */
static PyObject *corrupt(const char *what, Py_ssize_t pos) {
    PyObject *args = Py_BuildValue("(sn)", what, pos);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* Sets ValueError((what, None)): the batch header's fields contradict each other. */
static PyObject *corrupt_batch(const char *what) {
    PyObject *args = Py_BuildValue("(sO)", what, Py_None);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* ---------------------------------------------------------------- encode */

typedef struct {
    const char *key;
    Py_ssize_t key_len; /* -1 for null */
    const char *value;
    Py_ssize_t value_len; /* -1 for null */
    PyObject *headers;    /* encoded header bytes (count included), or NULL for none */
    int64_t ts_delta;
    Py_ssize_t body_len;
} slot_t;

/* Returns a borrowed pointer and length for bytes-like or None; converted objects are kept in owners. */
static int bytes_field(PyObject *obj, PyObject *owners, const char **ptr, Py_ssize_t *len, const char *name,
                       Py_ssize_t index) {
    if (obj == Py_None) {
        *ptr = NULL;
        *len = -1;
        return 0;
    }
    if (!PyBytes_Check(obj)) {
        PyObject *converted = PyBytes_FromObject(obj);
        if (converted == NULL) {
            PyErr_Format(PyExc_TypeError, "record %zd: %s must be bytes-like or None, not %.80s", index, name,
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        if (PyList_Append(owners, converted) < 0) {
            Py_DECREF(converted);
            return -1;
        }
        Py_DECREF(converted);
        obj = converted;
    }
    *ptr = PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

/* Encodes a record's headers (count, then key/value pairs) into a new bytes object. */
static PyObject *encode_headers(PyObject *headers, Py_ssize_t index) {
    PyObject *seq = PySequence_Fast(headers, "headers must be a sequence of (key, value) pairs");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *parts = PyList_New(0);
    PyObject *result = NULL;
    if (parts == NULL) goto done;
    Py_ssize_t total = varint_size(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "record %zd: header %zd must be a (key, value) tuple", index, i);
            goto done;
        }
        PyObject *k = PyTuple_GET_ITEM(pair, 0);
        PyObject *v = PyTuple_GET_ITEM(pair, 1);
        PyObject *kb;
        if (PyUnicode_Check(k)) {
            kb = PyUnicode_AsUTF8String(k);
        } else if (PyBytes_Check(k)) {
            kb = Py_NewRef(k);
        } else {
            PyErr_Format(PyExc_TypeError, "record %zd: header %zd key must be str", index, i);
            goto done;
        }
        if (kb == NULL) goto done;
        if (PyList_Append(parts, kb) < 0) {
            Py_DECREF(kb);
            goto done;
        }
        Py_DECREF(kb);
        total += varint_size(PyBytes_GET_SIZE(kb)) + PyBytes_GET_SIZE(kb);
        if (v == Py_None) {
            if (PyList_Append(parts, Py_None) < 0) goto done;
            total += 1;
        } else {
            PyObject *vb = PyBytes_FromObject(v);
            if (vb == NULL) {
                PyErr_Format(PyExc_TypeError, "record %zd: header %zd value must be bytes-like or None", index, i);
                goto done;
            }
            if (PyList_Append(parts, vb) < 0) {
                Py_DECREF(vb);
                goto done;
            }
            Py_DECREF(vb);
            total += varint_size(PyBytes_GET_SIZE(vb)) + PyBytes_GET_SIZE(vb);
        }
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(result);
    p = put_varint(p, n);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (part == Py_None) {
            p = put_varint(p, -1);
            continue;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(part);
        p = put_varint(p, len);
        memcpy(p, PyBytes_AS_STRING(part), (size_t)len);
        p += len;
    }
done:
    Py_XDECREF(parts);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(encode_records_doc,
             "encode_records(records, base_timestamp, default_timestamp) -> (bytes, max_timestamp)\n\n"
             "Encodes the records section of a batch. Each record is a tuple\n"
             "(key, value[, headers[, timestamp]]); a timestamp of None means default_timestamp.\n"
             "Offset deltas are the record's index.");

static PyObject *encode_records(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *records;
    long long base_ts, default_ts;
    if (!PyArg_ParseTuple(args, "OLL", &records, &base_ts, &default_ts)) return NULL;
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *owners = PyList_New(0);
    slot_t *slots = PyMem_Calloc((size_t)(n ? n : 1), sizeof(slot_t));
    PyObject *out = NULL;
    int64_t max_ts = INT64_MIN;
    Py_ssize_t total = 0;
    if (owners == NULL || slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 2 || PyTuple_GET_SIZE(item) > 4) {
            PyErr_Format(PyExc_TypeError,
                         "record %zd must be a tuple (key, value[, headers[, timestamp]]), not %.80s", i,
                         Py_TYPE(item)->tp_name);
            goto done;
        }
        Py_ssize_t arity = PyTuple_GET_SIZE(item);
        slot_t *s = &slots[i];
        if (bytes_field(PyTuple_GET_ITEM(item, 0), owners, &s->key, &s->key_len, "key", i) < 0) goto done;
        if (bytes_field(PyTuple_GET_ITEM(item, 1), owners, &s->value, &s->value_len, "value", i) < 0) goto done;
        Py_ssize_t headers_len = 1; /* a zero count */
        if (arity >= 3) {
            PyObject *headers = PyTuple_GET_ITEM(item, 2);
            if (headers != Py_None && PyObject_Length(headers) != 0) {
                if (PyErr_Occurred()) goto done;
                PyObject *encoded = encode_headers(headers, i);
                if (encoded == NULL) goto done;
                if (PyList_Append(owners, encoded) < 0) {
                    Py_DECREF(encoded);
                    goto done;
                }
                Py_DECREF(encoded);
                s->headers = encoded;
                headers_len = PyBytes_GET_SIZE(encoded);
            } else if (PyErr_Occurred()) {
                goto done;
            }
        }
        int64_t ts = default_ts;
        if (arity == 4 && PyTuple_GET_ITEM(item, 3) != Py_None) {
            ts = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 3));
            if (ts == -1 && PyErr_Occurred()) goto done;
        }
        if (ts > max_ts) max_ts = ts;
        s->ts_delta = ts - base_ts;
        s->body_len = 1 + varint_size(s->ts_delta) + varint_size(i) + varint_size(s->key_len) +
                      (s->key_len > 0 ? s->key_len : 0) + varint_size(s->value_len) +
                      (s->value_len > 0 ? s->value_len : 0) + headers_len;
        total += varint_size(s->body_len) + s->body_len;
    }
    PyObject *body = PyBytes_FromStringAndSize(NULL, total);
    if (body == NULL) goto done;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(body);
    for (Py_ssize_t i = 0; i < n; i++) {
        slot_t *s = &slots[i];
        p = put_varint(p, s->body_len);
        *p++ = 0; /* record attributes: unused in v2 */
        p = put_varint(p, s->ts_delta);
        p = put_varint(p, i);
        p = put_varint(p, s->key_len);
        if (s->key_len > 0) {
            memcpy(p, s->key, (size_t)s->key_len);
            p += s->key_len;
        }
        p = put_varint(p, s->value_len);
        if (s->value_len > 0) {
            memcpy(p, s->value, (size_t)s->value_len);
            p += s->value_len;
        }
        if (s->headers != NULL) {
            Py_ssize_t hl = PyBytes_GET_SIZE(s->headers);
            memcpy(p, PyBytes_AS_STRING(s->headers), (size_t)hl);
            p += hl;
        } else {
            *p++ = 0;
        }
    }
    out = Py_BuildValue("(NL)", body, (long long)max_ts);
done:
    PyMem_Free(slots);
    Py_XDECREF(owners);
    Py_DECREF(seq);
    return out;
}

/* ---------------------------------------------------------------- decode */

/* Reads a varint length-prefixed byte string (-1 for null) as a new reference, or sets *err. */
static PyObject *get_bytes(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, const char **err) {
    int64_t n;
    int rc = get_varint(buf, len, pos, 5, &n);
    if (rc != 0) {
        *err = rc == -1 ? "length varint runs past the end of the records" : "length varint longer than 5 bytes";
        return NULL;
    }
    if (n == -1) return Py_NewRef(Py_None);
    if (n < -1) {
        *err = "negative length";
        return NULL;
    }
    if (n > len - *pos) {
        *err = "field length runs past the end of the record";
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)n);
    *pos += (Py_ssize_t)n;
    return b;
}

/* What the records of one batch share while they are decoded. */
typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    int64_t base_offset, last_offset_delta, base_ts;
    int64_t prev_delta; /* the previous record's offset delta; -1 before the first */
    int log_append;     /* LOG_APPEND_TIME: every record gets `ts` */
    int64_t ts_delta;   /* the timestamp delta `ts` stands for */
    PyObject *ts;       /* the last timestamp made, shared by the records that repeat it */
} decoder_t;

/* The record's timestamp as a new reference. Records of a batch mostly share one
   timestamp (LOG_APPEND_TIME always does), so they share one int object too. */
static PyObject *record_timestamp(decoder_t *d, int64_t ts_delta, const char **err) {
    if (d->ts != NULL && (d->log_append || ts_delta == d->ts_delta)) return Py_NewRef(d->ts);
    int64_t ts;
    if (__builtin_add_overflow(d->base_ts, ts_delta, &ts)) {
        *err = "timestamp delta takes the timestamp past the int64 range";
        return NULL;
    }
    PyObject *obj = PyLong_FromLongLong(ts);
    if (obj == NULL) return NULL;
    Py_XSETREF(d->ts, Py_NewRef(obj));
    d->ts_delta = ts_delta;
    return obj;
}

static PyObject *decode_one(decoder_t *d, Py_ssize_t *pos, Py_ssize_t index) {
    const unsigned char *buf = d->buf;
    Py_ssize_t start = *pos;
    const char *err = NULL;
    char detail[160];
    int64_t body_len, ts_delta, off_delta, nheaders;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *ts;
    int rc = get_varint(buf, d->len, pos, 5, &body_len);
    if (rc != 0 || body_len < 6 || body_len > d->len - *pos) {
        return corrupt(rc ? "record length varint is malformed" : "record length out of range", start);
    }
    Py_ssize_t end = *pos + (Py_ssize_t)body_len;
    (*pos)++; /* attributes */
    if (get_varint(buf, end, pos, 10, &ts_delta) != 0) return corrupt("timestamp delta is malformed", start);
    if (get_varint(buf, end, pos, 5, &off_delta) != 0) return corrupt("offset delta is malformed", start);
    /* Deltas rise strictly within 0..last_offset_delta. Gaps are allowed: Kafka's log
       cleaner leaves them when it drops records from a batch, and its readers accept them. */
    if (off_delta < 0 || off_delta > d->last_offset_delta) {
        snprintf(detail, sizeof detail, "offset delta %lld is outside the batch's offsets %lld..%lld",
                 (long long)off_delta, (long long)d->base_offset, (long long)(d->base_offset + d->last_offset_delta));
        err = detail;
        goto fail;
    }
    if (off_delta <= d->prev_delta) {
        snprintf(detail, sizeof detail, "offset %lld does not follow the previous record's offset %lld",
                 (long long)(d->base_offset + off_delta), (long long)(d->base_offset + d->prev_delta));
        err = detail;
        goto fail;
    }
    key = get_bytes(buf, end, pos, &err);
    if (key == NULL) goto fail;
    value = get_bytes(buf, end, pos, &err);
    if (value == NULL) goto fail;
    if (get_varint(buf, end, pos, 5, &nheaders) != 0 || nheaders < 0 || nheaders > end - *pos) {
        err = "header count is malformed";
        goto fail;
    }
    headers = PyTuple_New((Py_ssize_t)nheaders);
    if (headers == NULL) goto fail;
    for (Py_ssize_t h = 0; h < nheaders; h++) {
        PyObject *hk_bytes = get_bytes(buf, end, pos, &err);
        if (hk_bytes == NULL) goto fail;
        if (hk_bytes == Py_None) {
            Py_DECREF(hk_bytes);
            err = "null header key";
            goto fail;
        }
        PyObject *hk = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(hk_bytes), PyBytes_GET_SIZE(hk_bytes), "strict");
        Py_DECREF(hk_bytes);
        if (hk == NULL) {
            PyErr_Clear();
            err = "header key is not UTF-8";
            goto fail;
        }
        PyObject *hv = get_bytes(buf, end, pos, &err);
        if (hv == NULL) {
            Py_DECREF(hk);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, hk, hv);
        Py_DECREF(hk);
        Py_DECREF(hv);
        if (pair == NULL) goto fail;
        PyTuple_SET_ITEM(headers, h, pair);
    }
    if (*pos != end) {
        err = "record length does not match its fields";
        goto fail;
    }
    ts = record_timestamp(d, ts_delta, &err);
    if (ts == NULL) goto fail;
    d->prev_delta = off_delta;
    /* fits: off_delta <= last_offset_delta, and decode_records checked base + last_offset_delta */
    return make_record(PyLong_FromLongLong(d->base_offset + off_delta), ts, key, value, headers);
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    if (err == NULL) return NULL; /* a Python error (memory) is already set */
    PyErr_Clear();
    char msg[200];
    snprintf(msg, sizeof msg, "record %zd: %s", index, err);
    return corrupt(msg, start);
}

PyDoc_STRVAR(decode_records_doc,
             "decode_records(buffer, base_offset, last_offset_delta, base_timestamp, count, log_append_time)\n"
             "    -> list[Record]\n\n"
             "Decodes exactly `count` records that fill `buffer`, whose offsets must rise strictly within\n"
             "base_offset..base_offset + last_offset_delta. log_append_time is None for CreateTime\n"
             "batches, or the batch's max timestamp, which then stamps every record. Raises\n"
             "ValueError((reason, position in buffer)) for a bad record, ValueError((reason, None))\n"
             "when the header fields given do not fit together.");

static PyObject *decode_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long base_offset, last_offset_delta, base_ts;
    Py_ssize_t count;
    PyObject *log_append, *list = NULL;
    if (!PyArg_ParseTuple(args, "y*LLLnO", &view, &base_offset, &last_offset_delta, &base_ts, &count, &log_append))
        return NULL;
    decoder_t d = {view.buf, view.len, base_offset, last_offset_delta, base_ts, -1, log_append != Py_None, 0, NULL};
    char reason[160];
    if (d.log_append) {
        long long ts = PyLong_AsLongLong(log_append);
        if ((ts == -1 && PyErr_Occurred()) || (d.ts = PyLong_FromLongLong(ts)) == NULL) goto done;
    }
    if (last_offset_delta < 0 || base_offset > INT64_MAX - last_offset_delta) {
        snprintf(reason, sizeof reason, "base offset %lld + last offset delta %lld is outside the offset range",
                 base_offset, last_offset_delta);
        corrupt_batch(reason);
        goto done;
    }
    /* Every record takes at least 7 bytes, so a count above len/7 is corrupt, not a reason
       to allocate. (A count above the batch's offsets fails at the first record past them.) */
    if (count < 0 || count > view.len / 7 + 1) {
        snprintf(reason, sizeof reason, "record count %zd does not fit the %zd bytes of records", count, view.len);
        corrupt_batch(reason);
        goto done;
    }
    list = PyList_New(count);
    if (list == NULL) goto done;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *rec = decode_one(&d, &pos, i);
        if (rec == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, rec);
    }
    if (pos != view.len) {
        Py_CLEAR(list);
        corrupt("bytes left over after the last record", pos);
    }
done:
    Py_XDECREF(d.ts);
    PyBuffer_Release(&view);
    return list;
}

/* ---------------------------------------------------------------- batch walker */

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_START 21
#define HEADER_FIELDS 14

static PyObject *crc32c_fn = NULL; /* crc32c.crc32c, the hardware-accelerated CRC the Python side uses */

static inline int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int16_t be16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline void put_be64(unsigned char *p, int64_t v) {
    for (int i = 7; i >= 0; i--, v = (int64_t)((uint64_t)v >> 8)) p[i] = (unsigned char)(v & 0xff);
}
static inline void put_be32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24), p[1] = (unsigned char)(u >> 16), p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}

/* An instance of the BatchHeader named tuple, built the way tuple.__new__ builds a subclass. */
static PyObject *make_header(PyTypeObject *type, Py_ssize_t position, const unsigned char *p) {
    PyObject *h = type->tp_alloc(type, HEADER_FIELDS);
    if (h == NULL) return NULL;
    PyObject *items[HEADER_FIELDS] = {
        PyLong_FromSsize_t(position), PyLong_FromLongLong(be64(p)),         PyLong_FromLong(be32(p + 8)),
        PyLong_FromLong(be32(p + 12)), PyLong_FromLong((signed char)p[16]), PyLong_FromUnsignedLong((uint32_t)be32(p + 17)),
        PyLong_FromLong(be16(p + 21)), PyLong_FromLong(be32(p + 23)),       PyLong_FromLongLong(be64(p + 27)),
        PyLong_FromLongLong(be64(p + 35)), PyLong_FromLongLong(be64(p + 43)), PyLong_FromLong(be16(p + 51)),
        PyLong_FromLong(be32(p + 53)), PyLong_FromLong(be32(p + 57)),
    };
    int failed = 0;
    for (int i = 0; i < HEADER_FIELDS; i++) {
        if (items[i] == NULL) failed = 1;
        PyTuple_SET_ITEM(h, i, items[i]);
    }
    if (failed) {
        Py_DECREF(h);
        return NULL;
    }
    return h;
}

/* Checks the CRC of the batch at p (size bytes). Returns 1 if it matches, 0 if not (stored and
   computed set), -1 on a Python error. */
static int crc_matches(const unsigned char *p, Py_ssize_t size, uint32_t *stored, uint32_t *computed) {
    PyObject *span = PyMemoryView_FromMemory((char *)(p + CRC_START), size - CRC_START, PyBUF_READ);
    if (span == NULL) return -1;
    PyObject *result = PyObject_CallOneArg(crc32c_fn, span);
    Py_DECREF(span);
    if (result == NULL) return -1;
    *computed = (uint32_t)PyLong_AsUnsignedLong(result);
    Py_DECREF(result);
    if (PyErr_Occurred()) return -1;
    *stored = (uint32_t)be32(p + 17);
    return *stored == *computed;
}

PyDoc_STRVAR(walk_batches_doc,
             "walk_batches(buffer, start, limit, verify_crc, expected_offset, stop_at_partial, header_type,\n"
             "             position, stamp_epoch) -> (headers, next_start, error)\n\n"
             "Walks at most `limit` batches from `start` without decoding records, checking each as\n"
             "batch.iter_batches documents. Headers are `header_type` tuples with absolute positions\n"
             "(`position` + offset in buffer). `error` is None or (incomplete, absolute position, reason)\n"
             "for the first bad batch; the headers before it are returned. With `stamp_epoch` not None\n"
             "the buffer must be writable: each batch gets the next offset from `expected_offset`\n"
             "and that epoch written into its header instead of being checked.");

static PyObject *walk_batches(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj, *expected_obj, *stamp_obj;
    Py_ssize_t start, limit, position;
    int verify_crc, stop_at_partial;
    PyTypeObject *header_type;
    if (!PyArg_ParseTuple(args, "OnnpOpO!nO", &obj, &start, &limit, &verify_crc, &expected_obj, &stop_at_partial,
                          &PyType_Type, &header_type, &position, &stamp_obj))
        return NULL;
    int stamping = stamp_obj != Py_None, checking = expected_obj != Py_None;
    long long expected = 0;
    long stamp_epoch = 0;
    if (checking && (expected = PyLong_AsLongLong(expected_obj)) == -1 && PyErr_Occurred()) return NULL;
    if (stamping && (stamp_epoch = PyLong_AsLong(stamp_obj)) == -1 && PyErr_Occurred()) return NULL;
    if (stamping && !checking) {
        PyErr_SetString(PyExc_ValueError, "stamping needs the offset to assign from");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, stamping ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return NULL;
    unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, pos = start < 0 ? 0 : start;
    PyObject *headers = PyList_New(0), *error = NULL;
    char reason[160] = "";
    int incomplete = 0;
    if (headers == NULL) goto fail;
    for (Py_ssize_t n = 0; n < limit && pos < end; n++) {
        unsigned char *p = buf + pos;
        reason[0] = 0;
        if (end - pos < HEADER_SIZE) {
            if (stop_at_partial) break;
            incomplete = 1;
            snprintf(reason, sizeof reason, "%zd bytes left, fewer than a batch header", end - pos);
            break;
        }
        int32_t batch_length = be32(p + 8);
        if (p[16] != 2) {
            snprintf(reason, sizeof reason, "magic byte is %d, expected 2", (signed char)p[16]);
            break;
        }
        if (batch_length < HEADER_SIZE - LOG_OVERHEAD) {
            snprintf(reason, sizeof reason, "batch length %d is below the header size", batch_length);
            break;
        }
        Py_ssize_t size = (Py_ssize_t)batch_length + LOG_OVERHEAD;
        if (size > end - pos) {
            if (stop_at_partial) break;
            incomplete = 1;
            snprintf(reason, sizeof reason, "batch of %zd bytes but only %zd bytes left", size, end - pos);
            break;
        }
        if (verify_crc) {
            uint32_t stored, computed;
            int ok = crc_matches(p, size, &stored, &computed);
            if (ok < 0) goto fail;
            if (!ok) {
                snprintf(reason, sizeof reason, "CRC mismatch: stored 0x%08x, computed 0x%08x", stored, computed);
                break;
            }
        }
        int32_t last_offset_delta = be32(p + 23), records_count = be32(p + 57);
        if (last_offset_delta < 0 || records_count < 0) {
            snprintf(reason, sizeof reason, "last offset delta %d / record count %d out of range", last_offset_delta,
                     records_count);
            break;
        }
        int64_t base = stamping ? (int64_t)expected : be64(p);
        if (base > INT64_MAX - 1 - last_offset_delta) {
            snprintf(reason, sizeof reason, "base offset %lld + last offset delta %d passes the largest offset",
                     (long long)base, last_offset_delta);
            break;
        }
        if ((be16(p + 21) & 7) > 4) {
            snprintf(reason, sizeof reason, "unknown compression codec %d", be16(p + 21) & 7);
            break;
        }
        if (stamping) {
            put_be64(p, expected);
            put_be32(p + 12, (int32_t)stamp_epoch);
        } else if (checking && be64(p) != expected) {
            snprintf(reason, sizeof reason, "base offset %lld, expected %lld", (long long)be64(p), expected);
            break;
        }
        if (checking) expected = base + last_offset_delta + 1; /* fits: checked above */
        PyObject *h = make_header(header_type, position + pos, p);
        if (h == NULL || PyList_Append(headers, h) < 0) {
            Py_XDECREF(h);
            goto fail;
        }
        Py_DECREF(h);
        pos += size;
    }
    PyBuffer_Release(&view);
    if (reason[0] && pos < end)
        error = Py_BuildValue("(Nns)", PyBool_FromLong(incomplete), position + pos, reason);
    else
        error = Py_NewRef(Py_None);
    if (error == NULL) {
        Py_DECREF(headers);
        return NULL;
    }
    return Py_BuildValue("(NnN)", headers, pos, error);
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(headers);
    return NULL;
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"walk_batches", walk_batches, METH_VARARGS, walk_batches_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_codec", "RecordBatch v2 records section codec.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__codec(void) {
    RecordType.tp_base = &PyTuple_Type;
    if (PyType_Ready(&RecordType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Record", (PyObject *)&RecordType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *crc_module = PyImport_ImportModule("crc32c");
    if (crc_module == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    crc32c_fn = PyObject_GetAttrString(crc_module, "crc32c");
    Py_DECREF(crc_module);
    if (crc32c_fn == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
