/*
 * The records section of a Kafka RecordBatch v2: per-record varint encoding and decoding.
 *
 * Why C: a record is seven varint-framed fields, and a Python loop over them runs at
 * 20-80 MB/s while the batch header, CRC and replication paths run at GB/s. This module
 * does only the per-record work; the batch header, CRC, compression and error reporting
 * stay in Python (kraft/records/batch.py), which calls in once per batch.
 *
 * Errors are raised as ValueError(message, relative_position); the Python side turns
 * them into CorruptRecordError with the absolute position in the file or buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structseq.h>
#include <stdint.h>
#include <string.h>

static PyTypeObject *RecordType = NULL;

static PyStructSequence_Field record_fields[] = {
    {"offset", "absolute offset of the record in the log"},
    {"timestamp", "timestamp in milliseconds"},
    {"key", "key bytes, or None"},
    {"value", "value bytes, or None"},
    {"headers", "tuple of (str key, bytes-or-None value)"},
    {NULL, NULL},
};

static PyStructSequence_Desc record_desc = {
    "kraft.records.Record",
    "A decoded record: offset, timestamp, key, value, headers.",
    record_fields,
    5,
};

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

static PyObject *corrupt(const char *what, Py_ssize_t pos) {
    PyObject *args = Py_BuildValue("(sn)", what, pos);
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

static PyObject *decode_one(const unsigned char *buf, Py_ssize_t len, Py_ssize_t *pos, int64_t base_offset,
                            int64_t base_ts, int use_log_append, int64_t log_append_ts, Py_ssize_t index) {
    Py_ssize_t start = *pos;
    const char *err = NULL;
    int64_t body_len, ts_delta, off_delta, nheaders;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *rec = NULL;
    int rc = get_varint(buf, len, pos, 5, &body_len);
    if (rc != 0 || body_len < 6 || body_len > len - *pos) {
        return corrupt(rc ? "record length varint is malformed" : "record length out of range", start);
    }
    Py_ssize_t end = *pos + (Py_ssize_t)body_len;
    (*pos)++; /* attributes */
    if (get_varint(buf, end, pos, 10, &ts_delta) != 0) return corrupt("timestamp delta is malformed", start);
    if (get_varint(buf, end, pos, 5, &off_delta) != 0) return corrupt("offset delta is malformed", start);
    if (off_delta < 0) return corrupt("negative offset delta", start);
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
    rec = PyStructSequence_New(RecordType);
    if (rec == NULL) goto fail;
    PyStructSequence_SET_ITEM(rec, 0, PyLong_FromLongLong(base_offset + off_delta));
    PyStructSequence_SET_ITEM(rec, 1, PyLong_FromLongLong(use_log_append ? log_append_ts : base_ts + ts_delta));
    PyStructSequence_SET_ITEM(rec, 2, key);
    PyStructSequence_SET_ITEM(rec, 3, value);
    PyStructSequence_SET_ITEM(rec, 4, headers);
    if (PyErr_Occurred()) {
        Py_DECREF(rec);
        return NULL;
    }
    return rec;
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    if (err == NULL) return NULL; /* a Python error (memory) is already set */
    PyErr_Clear();
    char msg[128];
    snprintf(msg, sizeof msg, "record %zd: %s", index, err);
    return corrupt(msg, start);
}

PyDoc_STRVAR(decode_records_doc,
             "decode_records(buffer, base_offset, base_timestamp, count, log_append_time) -> list[Record]\n\n"
             "Decodes exactly `count` records that fill `buffer`. log_append_time is None for\n"
             "CreateTime batches, or the batch's max timestamp, which then stamps every record.");

static PyObject *decode_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long base_offset, base_ts;
    Py_ssize_t count;
    PyObject *log_append;
    if (!PyArg_ParseTuple(args, "y*LLnO", &view, &base_offset, &base_ts, &count, &log_append)) return NULL;
    int use_log_append = log_append != Py_None;
    long long log_append_ts = 0;
    PyObject *list = NULL;
    if (use_log_append) {
        log_append_ts = PyLong_AsLongLong(log_append);
        if (log_append_ts == -1 && PyErr_Occurred()) goto done;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t len = view.len;
    /* Every record takes at least 7 bytes, so a count above len/7 is corrupt, not a reason to allocate. */
    if (count < 0 || count > len / 7 + 1) {
        corrupt("record count does not fit the batch", 0);
        goto done;
    }
    list = PyList_New(count);
    if (list == NULL) goto done;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *rec = decode_one(buf, len, &pos, base_offset, base_ts, use_log_append, log_append_ts, i);
        if (rec == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, rec);
    }
    if (pos != len) {
        Py_CLEAR(list);
        corrupt("bytes left over after the last record", pos);
    }
done:
    PyBuffer_Release(&view);
    return list;
}

/* ---------------------------------------------------------------- module */

static PyMethodDef methods[] = {
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_codec", "RecordBatch v2 records section codec.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__codec(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    RecordType = PyStructSequence_NewType(&record_desc);
    if (RecordType == NULL || PyModule_AddObject(m, "Record", (PyObject *)RecordType) < 0) {
        Py_XDECREF(RecordType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(RecordType);
    return m;
}
