/* SPDX-License-Identifier: MIT */
/*
 * snowid._snowid: the CPython extension over libsnowid.
 *
 * The GIL.  A call that takes an ID costs about 30 ns; releasing and taking
 * back the GIL around it would cost more than the call, and with two threads
 * would hand the GIL over at every ID.  So a call first runs with the GIL
 * held and the handle's own budget (snowid_set_max_wait) at rest_us: the
 * object's budget, but at most FAST_WAIT_US.  That covers the waits of a
 * host at its ID ceiling (the counter a ms ahead of the clock: a spin of
 * under a ms) and is too short for libsnowid to ask the socket for a newer
 * segment (it does so only with a ms or more left).  Only when that gives
 * -EAGAIN and the object's budget is longer does the call set the handle's
 * budget to the rest of it, release the GIL and call again, waiting as
 * libsnowid waits (for the deadline, a switch, a newer segment).  While any
 * call of an object waits without the GIL (waiters > 0), the handle's budget
 * is that rest, and the object's other calls go the same way; the last one
 * back sets rest_us again.  waiters is only read and written with the GIL
 * held, so a call that runs with the GIL held always finds rest_us.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "snowid.h"

#if defined(__GNUC__)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#else
#define likely(x) (x)
#define unlikely(x) (x)
#endif

/* the longest wait with the GIL held: under a ms (see above) */
#define FAST_WAIT_US 999

/* IDs a batch keeps on the stack before it allocates */
#define STACK_IDS 256

typedef struct {
        PyObject_HEAD
        snowid *s;            /* NULL once closed */
        uint64_t max_wait_us; /* the budget the caller set */
        uint64_t rest_us;     /* the handle's budget with the GIL held */
        unsigned waiters;     /* calls waiting without the GIL */
        int closing;          /* close() came while calls were waiting */
        unsigned long fork_gen;
        PyObject *instance; /* str or None */
} SnowIdObject;

/* bumped in a child after fork(): waiters of the parent's threads are gone */
static unsigned long fork_gen;

static PyTypeObject SnowIdType;
static PyTypeObject PartsType, LayoutType, StatusType, HostStatsType;

static PyObject *errorcode;    /* errno.errorcode */
static PyObject *uuid_type;    /* uuid.UUID */
static PyObject *safe_unknown; /* uuid.SafeUUID.unknown */
static PyObject *array_type;   /* array.array */
static PyObject *str_int, *str_is_safe;

/* Raises OSError(errno, "what: ENAME (strerror)"): OSError picks the
 * subclass of the errno (BlockingIOError for EAGAIN, FileNotFoundError for
 * ENOENT, ...). */
static PyObject *raise_errno(int r, const char *what)
{
        int e = r < 0 ? -r : r;
        PyObject *code = PyLong_FromLong(e);
        if (!code)
                return NULL;
        PyObject *name = PyDict_GetItemWithError(errorcode, code);
        if (!name && PyErr_Occurred()) {
                Py_DECREF(code);
                return NULL;
        }
        PyObject *msg;
        if (name)
                msg = PyUnicode_FromFormat("%s: %U (%s)", what, name, strerror(e));
        else
                msg = PyUnicode_FromFormat("%s: errno %d (%s)", what, e, strerror(e));
        if (!msg) {
                Py_DECREF(code);
                return NULL;
        }
        PyObject *args = PyTuple_Pack(2, code, msg);
        Py_DECREF(code);
        Py_DECREF(msg);
        if (!args)
                return NULL;
        PyObject *exc = PyObject_Call(PyExc_OSError, args, NULL);
        Py_DECREF(args);
        if (!exc)
                return NULL;
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
        return NULL;
}

static PyObject *raise_closed(void)
{
        return raise_errno(EINVAL, "the handle is closed");
}

/* ---- the wait path ---- */

typedef int (*op_fn)(snowid *s, void *arg);

/*
 * Runs op without the GIL, with the handle's budget set to the object's.
 * Called with the GIL held; op's arguments must stay valid without it.
 */
static int wait_call(SnowIdObject *self, op_fn op, void *arg)
{
        if (unlikely(self->fork_gen != fork_gen)) {
                /* a child: the threads that were waiting stayed in the parent */
                self->fork_gen = fork_gen;
                self->waiters = 0;
                if (self->closing) {
                        self->s = snowid_close(self->s);
                        self->closing = 0;
                } else if (self->s) {
                        snowid_set_max_wait(self->s, self->rest_us);
                }
        }
        if (!self->s || self->closing)
                return -EBADF; /* reported as a closed handle */
        if (self->waiters++ == 0)
                snowid_set_max_wait(self->s, self->max_wait_us - self->rest_us);
        snowid *s = self->s;
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = op(s, arg);
        Py_END_ALLOW_THREADS
        if (--self->waiters == 0) {
                if (self->closing) {
                        self->s = snowid_close(self->s);
                        self->closing = 0;
                } else {
                        snowid_set_max_wait(self->s, self->rest_us);
                }
        }
        return r;
}

/* r from a call that ran with the GIL: whether to go the wait path */
static inline int must_wait(SnowIdObject *self, int r)
{
        return r == -EAGAIN && self->max_wait_us > self->rest_us;
}

static PyObject *call_error(SnowIdObject *self, int r, const char *what)
{
        if (r == -EBADF || (!self->s && r == -EINVAL))
                return raise_closed();
        return raise_errno(r, what);
}

/* ---- structs as Python values ---- */

static PyStructSequence_Field parts_fields[] = {
        {"time_ms", "ms since the layout's epoch"},
        {"unix_ms", "epoch_ms + time_ms"},
        {"worker", "the worker number"},
        {"sequence", "the sequence within the ms"},
        {NULL, NULL},
};
static PyStructSequence_Desc parts_desc = {
        "snowid.Parts", "The parts of an ID: (time_ms, unix_ms, worker, sequence).", parts_fields,
        4};

static PyStructSequence_Field layout_fields[] = {
        {"epoch_ms", "unix ms of ID time 0"},
        {"time_bits", "bits of time"},
        {"worker_bits", "bits of worker number"},
        {"seq_bits", "bits of sequence"},
        {NULL, NULL},
};
static PyStructSequence_Desc layout_desc = {
        "snowid.Layout", "How an ID is cut: (epoch_ms, time_bits, worker_bits, seq_bits).",
        layout_fields, 4};

static PyStructSequence_Field status_fields[] = {
        {"worker", "the worker number"},
        {"state", "a snowid.State value"},
        {"generation", "odd while snowidd is switching"},
        {"deadline_ms", "last ID time (ms since epoch) that may be used"},
        {"deadline_unix_ms", "the deadline in unix ms"},
        {"headroom_ms", "deadline minus ID time now; negative once passed"},
        {"offset_ns", "ID time minus CLOCK_MONOTONIC"},
        {"daemon_pid", "snowidd's pid"},
        {"tsc_clock", "True while snowidd publishes the TSC clock"},
        {NULL, NULL},
};
static PyStructSequence_Desc status_desc = {"snowid.Status", "The segment's state.", status_fields,
                                            9};

static PyStructSequence_Field host_stats_fields[] = {
        {"issued", "counter values taken"},
        {"waits_ceiling", "calls that waited for the clock"},
        {"waits_deadline", "calls that waited for the deadline"},
        {"waits_switch", "calls that waited for a switch to finish"},
        {"eagain", "calls that gave up"},
        {"dropped", "values dropped because the generation changed"},
        {NULL, NULL},
};
static PyStructSequence_Desc host_stats_desc = {
        "snowid.HostStats", "Host-wide counts, kept by libsnowid on its slow paths.",
        host_stats_fields, 6};

/* steals the references in v; NULL (with the error set) if one is NULL */
static PyObject *make_struct(PyTypeObject *type, PyObject **v, int n)
{
        PyObject *o = NULL;
        for (int i = 0; i < n; i++)
                if (!v[i])
                        goto fail;
        o = PyStructSequence_New(type);
        if (!o)
                goto fail;
        for (int i = 0; i < n; i++)
                PyStructSequence_SET_ITEM(o, i, v[i]);
        return o;
fail:
        for (int i = 0; i < n; i++)
                Py_XDECREF(v[i]);
        return NULL;
}

static PyObject *parts_value(const snowid_parts *p)
{
        PyObject *v[4] = {
                PyLong_FromUnsignedLongLong(p->time_ms),
                PyLong_FromUnsignedLongLong(p->unix_ms),
                PyLong_FromUnsignedLong(p->worker),
                PyLong_FromUnsignedLong(p->sequence),
        };
        return make_struct(&PartsType, v, 4);
}

static PyObject *layout_value(const snowid_layout *l)
{
        PyObject *v[4] = {
                PyLong_FromUnsignedLongLong(l->epoch_ms),
                PyLong_FromUnsignedLong(l->time_bits),
                PyLong_FromUnsignedLong(l->worker_bits),
                PyLong_FromUnsignedLong(l->seq_bits),
        };
        return make_struct(&LayoutType, v, 4);
}

/* A layout from any sequence of four ints (a Layout), checked; None: the
 * default one.  0 or -1 with the error set. */
static int layout_arg(PyObject *o, snowid_layout *l)
{
        if (o == NULL || o == Py_None) {
                snowid_layout_default(l);
                return 0;
        }
        PyObject *seq = PySequence_Fast(o, "layout: a snowid.Layout or 4 ints");
        if (!seq)
                return -1;
        if (PySequence_Fast_GET_SIZE(seq) != 4) {
                Py_DECREF(seq);
                raise_errno(EINVAL, "layout: not 4 values");
                return -1;
        }
        unsigned long long v[4];
        for (int i = 0; i < 4; i++) {
                v[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
                if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) {
                        Py_DECREF(seq);
                        return -1;
                }
        }
        Py_DECREF(seq);
        if (v[1] > 64 || v[2] > 64 || v[3] > 64) {
                raise_errno(EINVAL, "layout");
                return -1;
        }
        *l = (snowid_layout){.epoch_ms = v[0],
                             .time_bits = (unsigned)v[1],
                             .worker_bits = (unsigned)v[2],
                             .seq_bits = (unsigned)v[3]};
        int r = snowid_layout_check(l);
        if (r < 0) {
                raise_errno(r, "layout");
                return -1;
        }
        return 0;
}

/* An ID: an int in [0, 2^64).  0 or -1 with the error set. */
static int id_arg(PyObject *o, uint64_t *id)
{
        if (!PyLong_Check(o)) {
                PyErr_Format(PyExc_TypeError, "an ID is an int, not %.100s", Py_TYPE(o)->tp_name);
                return -1;
        }
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                raise_errno(ERANGE, "decode: not a 64-bit unsigned ID");
                return -1;
        }
        *id = v;
        return 0;
}

/* 16 bytes of a uuid.UUID, bytes or bytearray */
static int uuid_arg(PyObject *o, uint8_t out[16])
{
        PyObject *b;
        if (PyBytes_Check(o) || PyByteArray_Check(o)) {
                b = PyBytes_FromObject(o);
        } else {
                b = PyObject_GetAttrString(o, "bytes");
                if (b && !PyBytes_Check(b)) {
                        Py_DECREF(b);
                        PyErr_SetString(PyExc_TypeError, "a UUID, or its 16 bytes");
                        return -1;
                }
        }
        if (!b)
                return -1;
        if (PyBytes_GET_SIZE(b) != 16) {
                Py_DECREF(b);
                raise_errno(EINVAL, "decode_uuid7: not 16 bytes");
                return -1;
        }
        memcpy(out, PyBytes_AS_STRING(b), 16);
        Py_DECREF(b);
        return 0;
}

/* a uuid.UUID from 16 big-endian bytes, without UUID.__init__'s parsing:
 * the two slots it sets, set the way it sets them */
static PyObject *uuid_value(const uint8_t u[16])
{
#if PY_VERSION_HEX >= 0x030D0000
        PyObject *i = PyLong_FromUnsignedNativeBytes(u, 16, Py_ASNATIVEBYTES_BIG_ENDIAN);
#else
        PyObject *i = _PyLong_FromByteArray(u, 16, 0, 0);
#endif
        if (!i)
                return NULL;
        PyTypeObject *t = (PyTypeObject *)uuid_type;
        PyObject *o = t->tp_alloc(t, 0);
        if (!o) {
                Py_DECREF(i);
                return NULL;
        }
        int r = PyObject_GenericSetAttr(o, str_int, i);
        Py_DECREF(i);
        if (r < 0 || PyObject_GenericSetAttr(o, str_is_safe, safe_unknown) < 0) {
                Py_DECREF(o);
                return NULL;
        }
        return o;
}

/* ---- SnowId ---- */

struct open_args {
        const char *instance;
        snowid *s;
};

/* seconds (float or int; None: no end) to microseconds */
static int wait_arg(PyObject *o, uint64_t *usec)
{
        if (o == Py_None) {
                *usec = UINT64_MAX;
                return 0;
        }
        double d = PyFloat_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred())
                return -1;
        if (isnan(d) || d < 0) {
                PyErr_SetString(PyExc_ValueError, "max_wait: seconds >= 0, or None");
                return -1;
        }
        double us = d * 1e6;
        *usec = us >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)llround(us);
        return 0;
}

static PyObject *SnowId_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = {"instance", "max_wait", NULL};
        PyObject *inst = Py_None, *wait = NULL;
        if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$O:SnowId", kwlist, &inst, &wait))
                return NULL;
        const char *name = NULL;
        if (inst != Py_None) {
                if (!PyUnicode_Check(inst)) {
                        PyErr_SetString(PyExc_TypeError, "instance: a str or None");
                        return NULL;
                }
                Py_ssize_t len;
                name = PyUnicode_AsUTF8AndSize(inst, &len);
                if (!name)
                        return NULL;
                if (strlen(name) != (size_t)len)
                        return raise_errno(EINVAL, "snowid_open: a NUL in the instance name");
        }
        uint64_t usec = SNOWID_MAX_WAIT_DEFAULT_USEC;
        if (wait && wait_arg(wait, &usec) < 0)
                return NULL;
        snowid *s = NULL;
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = snowid_open(name, &s);
        Py_END_ALLOW_THREADS
        if (r < 0)
                return raise_errno(r, "snowid_open");
        uint64_t rest = usec < FAST_WAIT_US ? usec : FAST_WAIT_US;
        snowid_set_max_wait(s, rest);
        SnowIdObject *self = (SnowIdObject *)type->tp_alloc(type, 0);
        if (!self) {
                snowid_close(s);
                return NULL;
        }
        self->s = s;
        self->max_wait_us = usec;
        self->rest_us = rest;
        self->fork_gen = fork_gen;
        Py_INCREF(inst);
        self->instance = inst;
        return (PyObject *)self;
}

static void SnowId_dealloc(SnowIdObject *self)
{
        /* no call can be waiting: each holds a reference */
        snowid_close(self->s);
        Py_XDECREF(self->instance);
        Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *SnowId_close(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        if (self->waiters && self->fork_gen == fork_gen)
                self->closing = 1; /* the last waiter closes it */
        else
                self->s = snowid_close(self->s);
        Py_RETURN_NONE;
}

static PyObject *SnowId_enter(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        if (!self->s || self->closing)
                return raise_closed();
        Py_INCREF(self);
        return (PyObject *)self;
}

static PyObject *SnowId_exit(SnowIdObject *self, PyObject *const *args, Py_ssize_t n)
{
        (void)args;
        (void)n;
        return SnowId_close(self, NULL);
}

static int op_next(snowid *s, void *arg)
{
        return snowid_next(s, arg);
}

static PyObject *SnowId_next(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        uint64_t id;
        int r;
        if (likely(self->waiters == 0)) {
                r = snowid_next(self->s, &id);
                if (likely(r == 0))
                        return PyLong_FromUnsignedLongLong(id);
                if (!must_wait(self, r))
                        return call_error(self, r, "snowid_next");
        }
        r = wait_call(self, op_next, &id);
        if (r < 0)
                return call_error(self, r, "snowid_next");
        return PyLong_FromUnsignedLongLong(id);
}

struct batch_args {
        uint64_t *ids;
        size_t n;
};

static int op_batch(snowid *s, void *arg)
{
        struct batch_args *b = arg;
        return snowid_next_batch(s, b->ids, b->n);
}

/* n IDs into ids; 0 or -1 with the error set */
static int take_batch(SnowIdObject *self, uint64_t *ids, size_t n)
{
        struct batch_args b = {ids, n};
        int r = self->waiters ? -EAGAIN : snowid_next_batch(self->s, ids, n);
        if (r == -EAGAIN && (self->waiters || self->max_wait_us > self->rest_us))
                r = wait_call(self, op_batch, &b);
        if (r < 0) {
                call_error(self, r, "snowid_next_batch");
                return -1;
        }
        return 0;
}

static PyObject *SnowId_next_batch(SnowIdObject *self, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
        PyObject *n_obj = NULL, *as_array = NULL;
        Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        if (nargs > 2) {
                PyErr_SetString(PyExc_TypeError, "next_batch(n, as_array=False)");
                return NULL;
        }
        if (nargs >= 1)
                n_obj = args[0];
        if (nargs == 2)
                as_array = args[1];
        for (Py_ssize_t i = 0; i < nkw; i++) {
                PyObject *k = PyTuple_GET_ITEM(kwnames, i);
                if (PyUnicode_CompareWithASCIIString(k, "n") == 0 && !n_obj)
                        n_obj = args[nargs + i];
                else if (PyUnicode_CompareWithASCIIString(k, "as_array") == 0 && !as_array)
                        as_array = args[nargs + i];
                else {
                        PyErr_Format(PyExc_TypeError, "next_batch: unexpected argument %R", k);
                        return NULL;
                }
        }
        if (!n_obj) {
                PyErr_SetString(PyExc_TypeError, "next_batch(n, as_array=False): n missing");
                return NULL;
        }
        if (!PyLong_Check(n_obj)) {
                PyErr_Format(PyExc_TypeError, "n is an int, not %.100s", Py_TYPE(n_obj)->tp_name);
                return NULL;
        }
        int arr = as_array ? PyObject_IsTrue(as_array) : 0;
        if (arr < 0)
                return NULL;
        int overflow;
        long long n = PyLong_AsLongLongAndOverflow(n_obj, &overflow);
        if (n == -1 && PyErr_Occurred())
                return NULL;
        /* 0, negative or too many: libsnowid's answer for a bad count */
        if (overflow || n <= 0 || (unsigned long long)n > (UINT64_C(1) << 31))
                return raise_errno(EINVAL, "snowid_next_batch: n out of range");
        if (!self->s)
                return raise_closed();

        if (arr) {
                /* an array('Q') of n, filled in place */
                PyObject *zeros = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n * 8);
                if (!zeros)
                        return NULL;
                memset(PyBytes_AS_STRING(zeros), 0, (size_t)n * 8);
                PyObject *a = PyObject_CallFunction(array_type, "sO", "Q", zeros);
                Py_DECREF(zeros);
                if (!a)
                        return NULL;
                Py_buffer view;
                if (PyObject_GetBuffer(a, &view, PyBUF_WRITABLE) < 0) {
                        Py_DECREF(a);
                        return NULL;
                }
                int r = take_batch(self, view.buf, (size_t)n);
                PyBuffer_Release(&view);
                if (r < 0) {
                        Py_DECREF(a);
                        return NULL;
                }
                return a;
        }

        uint64_t stack[STACK_IDS], *ids = stack;
        if (n > STACK_IDS) {
                ids = PyMem_Malloc(sizeof(*ids) * (size_t)n);
                if (!ids)
                        return PyErr_NoMemory();
        }
        PyObject *list = NULL;
        if (take_batch(self, ids, (size_t)n) < 0)
                goto out;
        list = PyList_New((Py_ssize_t)n);
        if (!list)
                goto out;
        for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *v = PyLong_FromUnsignedLongLong(ids[i]);
                if (!v) {
                        Py_CLEAR(list);
                        goto out;
                }
                PyList_SET_ITEM(list, i, v);
        }
out:
        if (ids != stack)
                PyMem_Free(ids);
        return list;
}

static int op_uuid7(snowid *s, void *arg)
{
        return snowid_next_uuid7(s, arg);
}

static PyObject *SnowId_next_uuid7(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        uint8_t u[16];
        int r = self->waiters ? -EAGAIN : snowid_next_uuid7(self->s, u);
        if (r == -EAGAIN && (self->waiters || self->max_wait_us > self->rest_us))
                r = wait_call(self, op_uuid7, u);
        if (r < 0)
                return call_error(self, r, "snowid_next_uuid7");
        return uuid_value(u);
}

static int op_layout(snowid *s, void *arg)
{
        return snowid_get_layout(s, arg);
}

/* the handle's layout; following a newer segment within the budget */
static int get_layout(SnowIdObject *self, snowid_layout *l)
{
        int r = self->waiters ? -EAGAIN : snowid_get_layout(self->s, l);
        if (r == -EAGAIN && (self->waiters || self->max_wait_us > self->rest_us))
                r = wait_call(self, op_layout, l);
        if (r < 0) {
                call_error(self, r, "snowid_get_layout");
                return -1;
        }
        return 0;
}

static PyObject *SnowId_layout(SnowIdObject *self, void *closure)
{
        (void)closure;
        snowid_layout l;
        if (get_layout(self, &l) < 0)
                return NULL;
        return layout_value(&l);
}

static PyObject *SnowId_decode(SnowIdObject *self, PyObject *o)
{
        uint64_t id;
        snowid_layout l;
        snowid_parts p;
        if (id_arg(o, &id) < 0 || get_layout(self, &l) < 0)
                return NULL;
        int r = snowid_decode(&l, id, &p);
        if (r < 0)
                return raise_errno(r, "snowid_decode");
        return parts_value(&p);
}

static PyObject *SnowId_decode_uuid7(SnowIdObject *self, PyObject *o)
{
        uint8_t u[16];
        snowid_layout l;
        snowid_parts p;
        if (uuid_arg(o, u) < 0 || get_layout(self, &l) < 0)
                return NULL;
        int r = snowid_decode_uuid7(&l, u, &p);
        if (r < 0)
                return raise_errno(r, "snowid_decode_uuid7");
        return parts_value(&p);
}

static PyObject *SnowId_status(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        snowid_status st = SNOWID_STATUS_INIT;
        int r = self->closing ? -EBADF : snowid_get_status(self->s, &st);
        if (r < 0)
                return call_error(self, r, "snowid_get_status");
        PyObject *v[9] = {
                PyLong_FromUnsignedLong(st.worker),
                PyLong_FromLong(st.state),
                PyLong_FromUnsignedLongLong(st.generation),
                PyLong_FromUnsignedLongLong(st.deadline_ms),
                PyLong_FromUnsignedLongLong(st.deadline_unix_ms),
                PyLong_FromLongLong(st.headroom_ms),
                PyLong_FromLongLong(st.offset_ns),
                PyLong_FromLong(st.daemon_pid),
                PyBool_FromLong(st.tsc_clock),
        };
        return make_struct(&StatusType, v, 9);
}

static PyObject *SnowId_host_stats(SnowIdObject *self, PyObject *unused)
{
        (void)unused;
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        int r = self->closing ? -EBADF : snowid_get_host_stats(self->s, &hs);
        if (r < 0)
                return call_error(self, r, "snowid_get_host_stats");
        PyObject *v[6] = {
                PyLong_FromUnsignedLongLong(hs.issued),
                PyLong_FromUnsignedLongLong(hs.waits_ceiling),
                PyLong_FromUnsignedLongLong(hs.waits_deadline),
                PyLong_FromUnsignedLongLong(hs.waits_switch),
                PyLong_FromUnsignedLongLong(hs.eagain),
                PyLong_FromUnsignedLongLong(hs.dropped),
        };
        return make_struct(&HostStatsType, v, 6);
}

static PyObject *SnowId_set_max_wait(SnowIdObject *self, PyObject *o)
{
        uint64_t usec;
        if (wait_arg(o, &usec) < 0)
                return NULL;
        if (!self->s || self->closing)
                return raise_closed();
        self->max_wait_us = usec;
        self->rest_us = usec < FAST_WAIT_US ? usec : FAST_WAIT_US;
        /* calls waiting now see the new rest of it */
        snowid_set_max_wait(self->s, self->waiters && self->fork_gen == fork_gen
                                             ? usec - self->rest_us
                                             : self->rest_us);
        Py_RETURN_NONE;
}

static PyObject *SnowId_get_max_wait(SnowIdObject *self, void *closure)
{
        (void)closure;
        if (self->max_wait_us == UINT64_MAX)
                Py_RETURN_NONE;
        return PyFloat_FromDouble((double)self->max_wait_us / 1e6);
}

static PyObject *SnowId_get_closed(SnowIdObject *self, void *closure)
{
        (void)closure;
        return PyBool_FromLong(!self->s || self->closing);
}

static PyObject *SnowId_repr(SnowIdObject *self)
{
        return PyUnicode_FromFormat("<snowid.SnowId instance=%R%s>", self->instance,
                                    !self->s || self->closing ? " closed" : "");
}

static PyMethodDef SnowId_methods[] = {
        {"next", (PyCFunction)SnowId_next, METH_NOARGS,
         "next() -> int: one ID.  BlockingIOError (EAGAIN) if none within max_wait."},
        {"next_batch", (PyCFunction)(void (*)(void))SnowId_next_batch,
         METH_FASTCALL | METH_KEYWORDS,
         "next_batch(n, as_array=False) -> list[int] or array('Q'): n increasing IDs from one "
         "atomic operation; 1 <= n <= 2**seq_bits, else OSError EINVAL."},
        {"next_uuid7", (PyCFunction)SnowId_next_uuid7, METH_NOARGS,
         "next_uuid7() -> uuid.UUID: a UUIDv7 from one counter value."},
        {"decode", (PyCFunction)SnowId_decode, METH_O,
         "decode(id) -> Parts under this handle's layout."},
        {"decode_uuid7", (PyCFunction)SnowId_decode_uuid7, METH_O,
         "decode_uuid7(uuid) -> Parts under this handle's layout."},
        {"status", (PyCFunction)SnowId_status, METH_NOARGS, "status() -> Status"},
        {"host_stats", (PyCFunction)SnowId_host_stats, METH_NOARGS, "host_stats() -> HostStats"},
        {"set_max_wait", (PyCFunction)SnowId_set_max_wait, METH_O,
         "set_max_wait(seconds): how long a call may wait (float seconds; 0: never; None: as "
         "long as it takes).  Default 0.1."},
        {"close", (PyCFunction)SnowId_close, METH_NOARGS,
         "close(): releases the segment; later calls raise OSError EINVAL."},
        {"__enter__", (PyCFunction)SnowId_enter, METH_NOARGS, NULL},
        {"__exit__", (PyCFunction)(void (*)(void))SnowId_exit, METH_FASTCALL, NULL},
        {NULL, NULL, 0, NULL},
};

static PyGetSetDef SnowId_getset[] = {
        {"layout", (getter)SnowId_layout, NULL, "the segment's Layout", NULL},
        {"max_wait", (getter)SnowId_get_max_wait, NULL, "the wait budget in seconds (None: no end)",
         NULL},
        {"closed", (getter)SnowId_get_closed, NULL, "whether close() was called", NULL},
        {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef SnowId_members[] = {
        {"instance", T_OBJECT, offsetof(SnowIdObject, instance), READONLY,
         "the instance name given (None: $SNOWID_INSTANCE or 'default')"},
        {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SnowIdType = {
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = "snowid.SnowId",
        .tp_basicsize = sizeof(SnowIdObject),
        .tp_dealloc = (destructor)SnowId_dealloc,
        .tp_repr = (reprfunc)SnowId_repr,
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .tp_doc = "SnowId(instance=None, *, max_wait=0.1): a handle on the host snowidd's segment.",
        .tp_methods = SnowId_methods,
        .tp_members = SnowId_members,
        .tp_getset = SnowId_getset,
        .tp_new = SnowId_new,
};

/* ---- module functions ---- */

static PyObject *mod_decode(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
        (void)m;
        if (nargs < 1 || nargs > 2) {
                PyErr_SetString(PyExc_TypeError, "decode(id, layout=None)");
                return NULL;
        }
        uint64_t id;
        snowid_layout l;
        snowid_parts p;
        if (id_arg(args[0], &id) < 0 || layout_arg(nargs > 1 ? args[1] : NULL, &l) < 0)
                return NULL;
        int r = snowid_decode(&l, id, &p);
        if (r < 0)
                return raise_errno(r, "snowid_decode");
        return parts_value(&p);
}

static PyObject *mod_decode_uuid7(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
        (void)m;
        if (nargs < 1 || nargs > 2) {
                PyErr_SetString(PyExc_TypeError, "decode_uuid7(uuid, layout=None)");
                return NULL;
        }
        uint8_t u[16];
        snowid_layout l;
        snowid_parts p;
        if (uuid_arg(args[0], u) < 0 || layout_arg(nargs > 1 ? args[1] : NULL, &l) < 0)
                return NULL;
        int r = snowid_decode_uuid7(&l, u, &p);
        if (r < 0)
                return raise_errno(r, "snowid_decode_uuid7");
        return parts_value(&p);
}

static PyObject *mod_encode(PyObject *m, PyObject *args, PyObject *kw)
{
        (void)m;
        static char *kwlist[] = {"time_ms", "worker", "sequence", "layout", NULL};
        unsigned long long t, w, q;
        PyObject *lo = Py_None;
        if (!PyArg_ParseTupleAndKeywords(args, kw, "KKK|O:encode", kwlist, &t, &w, &q, &lo))
                return NULL;
        snowid_layout l;
        if (layout_arg(lo, &l) < 0)
                return NULL;
        if (w > UINT32_MAX || q > UINT32_MAX)
                return raise_errno(ERANGE, "snowid_encode");
        snowid_parts p = {.time_ms = t, .worker = (uint32_t)w, .sequence = (uint32_t)q};
        uint64_t id;
        int r = snowid_encode(&l, &p, &id);
        if (r < 0)
                return raise_errno(r, "snowid_encode");
        return PyLong_FromUnsignedLongLong(id);
}

static PyObject *mod_default_layout(PyObject *m, PyObject *unused)
{
        (void)m;
        (void)unused;
        snowid_layout l;
        snowid_layout_default(&l);
        return layout_value(&l);
}

static PyObject *mod_after_fork_child(PyObject *m, PyObject *unused)
{
        (void)m;
        (void)unused;
        fork_gen++;
        Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
        {"decode", (PyCFunction)(void (*)(void))mod_decode, METH_FASTCALL,
         "decode(id, layout=None) -> Parts (layout None: the default layout)."},
        {"decode_uuid7", (PyCFunction)(void (*)(void))mod_decode_uuid7, METH_FASTCALL,
         "decode_uuid7(uuid, layout=None) -> Parts."},
        {"encode", (PyCFunction)(void (*)(void))mod_encode, METH_VARARGS | METH_KEYWORDS,
         "encode(time_ms, worker, sequence, layout=None) -> int"},
        {"default_layout", mod_default_layout, METH_NOARGS, "default_layout() -> Layout"},
        {"_after_fork_child", mod_after_fork_child, METH_NOARGS, NULL},
        {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
        PyModuleDef_HEAD_INIT,
        .m_name = "snowid._snowid",
        .m_doc = "The C part of snowid: libsnowid's handle and functions.",
        .m_size = -1,
        .m_methods = module_methods,
};

static PyObject *import_attr(const char *module, const char *name)
{
        PyObject *m = PyImport_ImportModule(module);
        if (!m)
                return NULL;
        PyObject *a = PyObject_GetAttrString(m, name);
        Py_DECREF(m);
        return a;
}

PyMODINIT_FUNC PyInit__snowid(void)
{
        if (!errorcode && !(errorcode = import_attr("errno", "errorcode")))
                return NULL;
        if (!uuid_type && !(uuid_type = import_attr("uuid", "UUID")))
                return NULL;
        if (!safe_unknown) {
                PyObject *safe = import_attr("uuid", "SafeUUID");
                if (!safe)
                        return NULL;
                safe_unknown = PyObject_GetAttrString(safe, "unknown");
                Py_DECREF(safe);
                if (!safe_unknown)
                        return NULL;
        }
        if (!array_type && !(array_type = import_attr("array", "array")))
                return NULL;
        if (!str_int && !(str_int = PyUnicode_InternFromString("int")))
                return NULL;
        if (!str_is_safe && !(str_is_safe = PyUnicode_InternFromString("is_safe")))
                return NULL;
        if (PyType_Ready(&SnowIdType) < 0)
                return NULL;
        if (!PartsType.tp_name) {
                if (PyStructSequence_InitType2(&PartsType, &parts_desc) < 0 ||
                    PyStructSequence_InitType2(&LayoutType, &layout_desc) < 0 ||
                    PyStructSequence_InitType2(&StatusType, &status_desc) < 0 ||
                    PyStructSequence_InitType2(&HostStatsType, &host_stats_desc) < 0)
                        return NULL;
        }
        PyObject *m = PyModule_Create(&module_def);
        if (!m)
                return NULL;
        if (PyModule_AddType(m, &SnowIdType) < 0 || PyModule_AddType(m, &PartsType) < 0 ||
            PyModule_AddType(m, &LayoutType) < 0 || PyModule_AddType(m, &StatusType) < 0 ||
            PyModule_AddType(m, &HostStatsType) < 0 ||
            PyModule_AddIntConstant(m, "MAX_WAIT_DEFAULT_USEC",
                                    (long)SNOWID_MAX_WAIT_DEFAULT_USEC) < 0 ||
            PyModule_AddObject(m, "EPOCH_DEFAULT_MS",
                               PyLong_FromUnsignedLongLong(SNOWID_EPOCH_DEFAULT_MS)) < 0) {
                Py_DECREF(m);
                return NULL;
        }
        return m;
}
