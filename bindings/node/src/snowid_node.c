/* SPDX-License-Identifier: MIT */
/*
 * The Node.js addon behind index.js, in plain N-API (no C++), context-aware
 * so that it loads in worker_threads; it keeps no global state.  open()
 * opens one libsnowid handle and defines its methods on a SnowId object,
 * each a function made for that handle (the handle is the function's data:
 * a call reaches libsnowid without unwrapping `this`).  A handle belongs to
 * the thread (isolate) that opened it.
 *
 * IDs are BigInts, batches BigUint64Arrays, errors Error objects carrying
 * code ('EAGAIN'), errno (negative, as Node's own) and syscall
 * ('snowid_next').  nextAsync() and nextBatchAsync() try once on the calling
 * thread and, only on EAGAIN, go on trying on the libuv threadpool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define NAPI_VERSION 8
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <node_api.h>

#include "snowid.h"

/* How long a synchronous call may block the event loop by default: a few
 * times what the clock takes to reach the next ms when the host takes more
 * IDs than a ms holds, not a daemon's outage (libsnowid's default, 100 ms,
 * is nextAsync()'s, on the threadpool). */
#define NODE_MAX_WAIT_DEFAULT_US 10000
/* How long nextAsync() goes on trying on the threadpool by default. */
#define NODE_ASYNC_WAIT_DEFAULT_US 100000

/* Referenced by each of the handle's functions, by the object they are
 * defined on, and by its async jobs while they run; freed with the last. */
struct handle {
        snowid *s;
        unsigned refs;
        unsigned pending; /* async jobs in flight */
        int closing;      /* close() called: no new calls */
        uint64_t max_wait_us;
        uint64_t async_wait_us;
};

/* ---- errors ---- */

static napi_value make_error(napi_env env, int err, const char *syscall, const char *detail)
{
        const char *name = strerrorname_np(err);
        const char *desc = strerrordesc_np(err);
        char code[32], msg[256];
        napi_value m, c, e, v;

        if (name)
                snprintf(code, sizeof(code), "%s", name);
        else
                snprintf(code, sizeof(code), "E%d", err);
        snprintf(msg, sizeof(msg), "%s: %s, %s", code,
                 detail ? detail
                 : desc ? desc
                        : "unknown error",
                 syscall);
        napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c);
        napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
        napi_create_error(env, c, m, &e);
        napi_create_int32(env, -err, &v);
        napi_set_named_property(env, e, "errno", v);
        napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &v);
        napi_set_named_property(env, e, "syscall", v);
        return e;
}

static napi_value throw_errno(napi_env env, int r, const char *syscall, const char *detail)
{
        napi_throw(env, make_error(env, r < 0 ? -r : r, syscall, detail));
        return NULL;
}

static napi_value throw_type(napi_env env, const char *code, const char *msg)
{
        napi_throw_type_error(env, code, msg);
        return NULL;
}

static napi_value throw_range(napi_env env, const char *msg)
{
        napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
        return NULL;
}

/* ---- values ---- */

static napi_value num(napi_env env, double d)
{
        napi_value v;
        napi_create_double(env, d, &v);
        return v;
}

static napi_value big(napi_env env, uint64_t x)
{
        napi_value v;
        napi_create_bigint_uint64(env, x, &v);
        return v;
}

static void set(napi_env env, napi_value obj, const char *name, napi_value v)
{
        napi_set_named_property(env, obj, name, v);
}

/* An unsigned integer from a Number (a safe integer) or a BigInt, or an ID
 * from a decimal string too.  0: ok; -1: an exception is pending. */
static int get_u64(napi_env env, napi_value v, const char *what, int strings, uint64_t *ret)
{
        napi_valuetype t;
        char msg[128];

        napi_typeof(env, v, &t);
        if (t == napi_bigint) {
                bool lossless;
                napi_get_value_bigint_uint64(env, v, ret, &lossless);
                if (lossless)
                        return 0;
                snprintf(msg, sizeof(msg), "%s must be between 0 and 2^64-1", what);
                throw_range(env, msg);
                return -1;
        }
        if (t == napi_number) {
                double d;
                napi_get_value_double(env, v, &d);
                if (d >= 0 && d <= 9007199254740991.0 && d == floor(d)) {
                        *ret = (uint64_t)d;
                        return 0;
                }
                snprintf(msg, sizeof(msg), "%s must be a non-negative safe integer", what);
                throw_range(env, msg);
                return -1;
        }
        if (t == napi_string && strings) {
                char buf[32];
                size_t len;
                uint64_t x = 0;
                napi_get_value_string_latin1(env, v, buf, sizeof(buf), &len);
                int ok = len > 0 && len <= 20;
                for (size_t i = 0; ok && i < len; i++) {
                        unsigned d = (unsigned)(buf[i] - '0');
                        if (d > 9 || __builtin_mul_overflow(x, 10, &x) ||
                            __builtin_add_overflow(x, d, &x))
                                ok = 0;
                }
                if (ok) {
                        *ret = x;
                        return 0;
                }
                snprintf(msg, sizeof(msg),
                         "%s must be a decimal string of an unsigned 64-bit integer", what);
                napi_throw_type_error(env, "ERR_INVALID_ARG_VALUE", msg);
                return -1;
        }
        snprintf(msg, sizeof(msg), "%s must be a %s", what,
                 strings ? "BigInt, a decimal string or a Number" : "Number or a BigInt");
        throw_type(env, "ERR_INVALID_ARG_TYPE", msg);
        return -1;
}

static napi_value layout_object(napi_env env, const snowid_layout *l)
{
        napi_value o;
        napi_create_object(env, &o);
        set(env, o, "epochMs", num(env, (double)l->epoch_ms));
        set(env, o, "timeBits", num(env, l->time_bits));
        set(env, o, "workerBits", num(env, l->worker_bits));
        set(env, o, "seqBits", num(env, l->seq_bits));
        return o;
}

/* A layout from an object, its missing fields the default's. */
static int get_layout_arg(napi_env env, napi_value v, snowid_layout *l)
{
        static const char *names[] = {"epochMs", "timeBits", "workerBits", "seqBits"};
        napi_valuetype t;

        snowid_layout_default(l);
        if (!v)
                return 0;
        napi_typeof(env, v, &t);
        if (t == napi_undefined || t == napi_null)
                return 0;
        if (t != napi_object) {
                throw_type(env, "ERR_INVALID_ARG_TYPE", "layout must be an object");
                return -1;
        }
        for (int i = 0; i < 4; i++) {
                napi_value f;
                napi_valuetype ft;
                uint64_t x;
                napi_get_named_property(env, v, names[i], &f);
                napi_typeof(env, f, &ft);
                if (ft == napi_undefined)
                        continue;
                if (get_u64(env, f, names[i], 0, &x) < 0)
                        return -1;
                if (i == 0) {
                        l->epoch_ms = x;
                } else {
                        unsigned u = x > 64 ? 64 : (unsigned)x;
                        if (i == 1)
                                l->time_bits = u;
                        else if (i == 2)
                                l->worker_bits = u;
                        else
                                l->seq_bits = u;
                }
        }
        int r = snowid_layout_check(l);
        if (r < 0) {
                throw_errno(env, r, "snowid_layout_check", NULL);
                return -1;
        }
        return 0;
}

static napi_value decode_with(napi_env env, const snowid_layout *l, napi_value idv)
{
        snowid_parts p;
        uint64_t id;
        napi_value o;

        if (get_u64(env, idv, "id", 1, &id) < 0)
                return NULL;
        int r = snowid_decode(l, id, &p);
        if (r < 0)
                return throw_errno(env, r, "snowid_decode", NULL);
        napi_create_object(env, &o);
        set(env, o, "timeMs", num(env, (double)p.time_ms));
        set(env, o, "unixMs", num(env, (double)p.unix_ms));
        set(env, o, "worker", num(env, p.worker));
        set(env, o, "sequence", num(env, p.sequence));
        return o;
}

/* ---- the handle ---- */

static void handle_release(struct handle *h)
{
        if (--h->refs == 0) {
                snowid_close(h->s);
                free(h);
        }
}

static void function_finalize(napi_env env, void *data, void *hint)
{
        (void)env;
        (void)hint;
        handle_release(data);
}

/* The handle a method was made for, open.  NULL: an exception is pending. */
static struct handle *self_handle(napi_env env, napi_callback_info info, size_t *argc,
                                  napi_value *argv, const char *syscall)
{
        struct handle *h;

        napi_get_cb_info(env, info, argc, argv, NULL, (void **)&h);
        if (!h->s || h->closing) {
                throw_errno(env, EINVAL, syscall, "the handle is closed");
                return NULL;
        }
        return h;
}

static napi_value m_next(napi_env env, napi_callback_info info)
{
        uint64_t id;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_next");
        if (!h)
                return NULL;
        int r = snowid_next(h->s, &id);
        if (r < 0)
                return throw_errno(env, r, "snowid_next", NULL);
        return big(env, id);
}

static napi_value m_next_string(napi_env env, napi_callback_info info)
{
        uint64_t id;
        char buf[24], *p = buf + sizeof(buf);
        napi_value v;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_next");
        if (!h)
                return NULL;
        int r = snowid_next(h->s, &id);
        if (r < 0)
                return throw_errno(env, r, "snowid_next", NULL);
        do {
                *--p = (char)('0' + id % 10);
                id /= 10;
        } while (id);
        napi_create_string_latin1(env, p, (size_t)(buf + sizeof(buf) - p), &v);
        return v;
}

/* Checks a batch size before anything is allocated for it. */
static int check_batch(napi_env env, struct handle *h, size_t n, const char *syscall)
{
        snowid_layout l;
        if (n == 0) {
                throw_errno(env, EINVAL, syscall, "a batch of 0");
                return -1;
        }
        if (n <= 4096)
                return 0; /* small enough to allocate: libsnowid checks it */
        int r = snowid_get_layout(h->s, &l);
        if (r < 0) {
                throw_errno(env, r, "snowid_get_layout", NULL);
                return -1;
        }
        if (l.seq_bits < 63 && n > (UINT64_C(1) << l.seq_bits)) {
                throw_errno(env, EINVAL, syscall, "a batch larger than a sequence");
                return -1;
        }
        return 0;
}

static napi_value m_next_batch(napi_env env, napi_callback_info info)
{
        size_t argc = 1;
        napi_value argv[1] = {NULL}, arr, ab;
        bool is_ta = false;
        void *data;
        size_t n;
        struct handle *h = self_handle(env, info, &argc, argv, "snowid_next_batch");
        if (!h)
                return NULL;
        if (argc < 1)
                return throw_type(env, "ERR_INVALID_ARG_TYPE",
                                  "nextBatch needs a count or a BigUint64Array");
        napi_is_typedarray(env, argv[0], &is_ta);
        if (is_ta) {
                napi_typedarray_type tt;
                size_t off;
                napi_get_typedarray_info(env, argv[0], &tt, &n, &data, &ab, &off);
                if (tt != napi_biguint64_array)
                        return throw_type(env, "ERR_INVALID_ARG_TYPE",
                                          "the array must be a BigUint64Array");
                if (check_batch(env, h, n, "snowid_next_batch") < 0)
                        return NULL;
                arr = argv[0];
        } else {
                uint64_t x;
                if (get_u64(env, argv[0], "count", 0, &x) < 0)
                        return NULL;
                n = (size_t)x;
                if (check_batch(env, h, n, "snowid_next_batch") < 0)
                        return NULL;
                if (napi_create_arraybuffer(env, n * 8, &data, &ab) != napi_ok)
                        return NULL;
                napi_create_typedarray(env, napi_biguint64_array, n, ab, 0, &arr);
        }
        int r = snowid_next_batch(h->s, data, n);
        if (r < 0)
                return throw_errno(env, r, "snowid_next_batch", NULL);
        return arr;
}

static void format_uuid(const uint8_t u[16], char out[36])
{
        static const char hex[] = "0123456789abcdef";
        int j = 0;
        for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        out[j++] = '-';
                out[j++] = hex[u[i] >> 4];
                out[j++] = hex[u[i] & 15];
        }
}

static napi_value m_next_uuid7(napi_env env, napi_callback_info info)
{
        uint8_t u[16];
        char s[36];
        napi_value v;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_next_uuid7");
        if (!h)
                return NULL;
        int r = snowid_next_uuid7(h->s, u);
        if (r < 0)
                return throw_errno(env, r, "snowid_next_uuid7", NULL);
        format_uuid(u, s);
        napi_create_string_latin1(env, s, 36, &v);
        return v;
}

static napi_value m_decode(napi_env env, napi_callback_info info)
{
        size_t argc = 1;
        napi_value argv[1] = {NULL};
        snowid_layout l;
        struct handle *h = self_handle(env, info, &argc, argv, "snowid_get_layout");
        if (!h)
                return NULL;
        if (argc < 1)
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "decode needs an id");
        int r = snowid_get_layout(h->s, &l);
        if (r < 0)
                return throw_errno(env, r, "snowid_get_layout", NULL);
        return decode_with(env, &l, argv[0]);
}

static napi_value m_layout(napi_env env, napi_callback_info info)
{
        snowid_layout l;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_get_layout");
        if (!h)
                return NULL;
        int r = snowid_get_layout(h->s, &l);
        if (r < 0)
                return throw_errno(env, r, "snowid_get_layout", NULL);
        return layout_object(env, &l);
}

static const char *state_name(int state)
{
        static const char *names[] = {"starting",    "leased",  "no_lease",  "restored",
                                      "layout_lost", "retired", "store_full"};
        return state >= 0 && state < 7 ? names[state] : "unknown";
}

static napi_value m_status(napi_env env, napi_callback_info info)
{
        snowid_status st = SNOWID_STATUS_INIT;
        napi_value o, v;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_get_status");
        if (!h)
                return NULL;
        int r = snowid_get_status(h->s, &st);
        if (r < 0)
                return throw_errno(env, r, "snowid_get_status", NULL);
        napi_create_object(env, &o);
        set(env, o, "worker", num(env, st.worker));
        napi_create_string_utf8(env, state_name(st.state), NAPI_AUTO_LENGTH, &v);
        set(env, o, "state", v);
        set(env, o, "stateCode", num(env, st.state));
        set(env, o, "generation", num(env, (double)st.generation));
        set(env, o, "deadlineMs", num(env, (double)st.deadline_ms));
        set(env, o, "deadlineUnixMs", num(env, (double)st.deadline_unix_ms));
        set(env, o, "headroomMs", num(env, (double)st.headroom_ms));
        napi_create_bigint_int64(env, st.offset_ns, &v);
        set(env, o, "offsetNs", v);
        set(env, o, "daemonPid", num(env, st.daemon_pid));
        napi_get_boolean(env, st.tsc_clock != 0, &v);
        set(env, o, "tscClock", v);
        return o;
}

static napi_value m_host_stats(napi_env env, napi_callback_info info)
{
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        napi_value o;
        struct handle *h = self_handle(env, info, NULL, NULL, "snowid_get_host_stats");
        if (!h)
                return NULL;
        int r = snowid_get_host_stats(h->s, &hs);
        if (r < 0)
                return throw_errno(env, r, "snowid_get_host_stats", NULL);
        napi_create_object(env, &o);
        set(env, o, "issued", big(env, hs.issued));
        set(env, o, "waitsCeiling", big(env, hs.waits_ceiling));
        set(env, o, "waitsDeadline", big(env, hs.waits_deadline));
        set(env, o, "waitsSwitch", big(env, hs.waits_switch));
        set(env, o, "eagain", big(env, hs.eagain));
        set(env, o, "dropped", big(env, hs.dropped));
        return o;
}

/* A wait in us: a Number, a BigInt, or Infinity (as long as it takes). */
static int get_wait(napi_env env, napi_value v, uint64_t *ret)
{
        napi_valuetype t;
        napi_typeof(env, v, &t);
        if (t == napi_number) {
                double d;
                napi_get_value_double(env, v, &d);
                if (d == INFINITY) {
                        *ret = UINT64_MAX;
                        return 0;
                }
        }
        return get_u64(env, v, "the wait (us)", 0, ret);
}

static napi_value m_set_max_wait(napi_env env, napi_callback_info info)
{
        size_t argc = 2;
        napi_value argv[2] = {NULL, NULL};
        uint64_t us, async_us;
        struct handle *h = self_handle(env, info, &argc, argv, "snowid_set_max_wait");
        if (!h)
                return NULL;
        if (argc < 1)
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "setMaxWait needs a wait in us");
        if (get_wait(env, argv[0], &us) < 0)
                return NULL;
        if (argc > 1 && get_wait(env, argv[1], &async_us) < 0)
                return NULL;
        int r = snowid_set_max_wait(h->s, us);
        if (r < 0)
                return throw_errno(env, r, "snowid_set_max_wait", NULL);
        __atomic_store_n(&h->max_wait_us, us, __ATOMIC_RELAXED);
        if (argc > 1)
                __atomic_store_n(&h->async_wait_us, async_us, __ATOMIC_RELAXED);
        return NULL;
}

static napi_value m_close(napi_env env, napi_callback_info info)
{
        struct handle *h;

        napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&h);
        h->closing = 1;
        if (!h->pending)
                h->s = snowid_close(h->s);
        return NULL;
}

static napi_value m_closed(napi_env env, napi_callback_info info)
{
        struct handle *h;
        napi_value v;

        napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&h);
        napi_get_boolean(env, h->closing || !h->s, &v);
        return v;
}

/* ---- async: the threadpool goes on trying after an EAGAIN ---- */

struct job {
        napi_async_work work;
        napi_deferred deferred;
        struct handle *h;
        size_t n; /* 0: one ID */
        uint64_t one;
        uint64_t *ids;
        int r;
};

static int64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int take(struct job *j)
{
        return j->n ? snowid_next_batch(j->h->s, j->ids, j->n) : snowid_next(j->h->s, &j->one);
}

static void job_execute(napi_env env, void *data)
{
        struct job *j = data;
        uint64_t budget_us = __atomic_load_n(&j->h->async_wait_us, __ATOMIC_RELAXED);
        int64_t until = budget_us > (uint64_t)INT64_MAX / 1000
                                ? INT64_MAX
                                : mono_ns() + (int64_t)budget_us * 1000;
        (void)env;
        /* each call waits up to the handle's budget; with none, pause between */
        while ((j->r = take(j)) == -EAGAIN && mono_ns() < until) {
                if (__atomic_load_n(&j->h->max_wait_us, __ATOMIC_RELAXED) < 100) {
                        struct timespec ts = {.tv_nsec = 100000};
                        nanosleep(&ts, NULL);
                }
        }
}

static void job_complete(napi_env env, napi_status status, void *data)
{
        struct job *j = data;
        struct handle *h = j->h;
        napi_value v;

        if (status != napi_ok) {
                napi_value m;
                napi_create_string_utf8(env, "the request was cancelled", NAPI_AUTO_LENGTH, &m);
                napi_create_error(env, NULL, m, &v);
                napi_reject_deferred(env, j->deferred, v);
        } else if (j->r < 0) {
                napi_reject_deferred(
                        env, j->deferred,
                        make_error(env, -j->r, j->n ? "snowid_next_batch" : "snowid_next", NULL));
        } else if (j->n) {
                void *data2;
                napi_value ab;
                napi_create_arraybuffer(env, j->n * 8, &data2, &ab);
                memcpy(data2, j->ids, j->n * 8);
                napi_create_typedarray(env, napi_biguint64_array, j->n, ab, 0, &v);
                napi_resolve_deferred(env, j->deferred, v);
        } else {
                napi_resolve_deferred(env, j->deferred, big(env, j->one));
        }
        if (--h->pending == 0 && h->closing)
                h->s = snowid_close(h->s);
        napi_delete_async_work(env, j->work);
        free(j->ids);
        free(j);
        handle_release(h);
}

static napi_value start_async(napi_env env, napi_callback_info info, int batch)
{
        size_t argc = 1;
        napi_value argv[1] = {NULL}, promise, name, v;
        const char *syscall = batch ? "snowid_next_batch" : "snowid_next";
        struct handle *h = self_handle(env, info, &argc, argv, syscall);
        size_t n = 0;
        uint64_t one, *ids = NULL;
        napi_deferred d;

        if (!h)
                return NULL;
        if (batch) {
                uint64_t x;
                if (argc < 1)
                        return throw_type(env, "ERR_INVALID_ARG_TYPE",
                                          "nextBatchAsync needs a count");
                if (get_u64(env, argv[0], "count", 0, &x) < 0)
                        return NULL;
                n = (size_t)x;
                if (check_batch(env, h, n, syscall) < 0)
                        return NULL;
                ids = malloc(n * 8);
                if (!ids)
                        return throw_errno(env, ENOMEM, syscall, NULL);
        }
        napi_create_promise(env, &d, &promise);
        /* the fast path first, on this thread */
        int r = batch ? snowid_next_batch(h->s, ids, n) : snowid_next(h->s, &one);
        if (r != -EAGAIN) {
                if (r < 0) {
                        napi_reject_deferred(env, d, make_error(env, -r, syscall, NULL));
                } else if (batch) {
                        void *data;
                        napi_value ab;
                        napi_create_arraybuffer(env, n * 8, &data, &ab);
                        memcpy(data, ids, n * 8);
                        napi_create_typedarray(env, napi_biguint64_array, n, ab, 0, &v);
                        napi_resolve_deferred(env, d, v);
                } else {
                        napi_resolve_deferred(env, d, big(env, one));
                }
                free(ids);
                return promise;
        }
        struct job *j = calloc(1, sizeof(*j));
        if (!j) {
                free(ids);
                napi_reject_deferred(env, d, make_error(env, ENOMEM, syscall, NULL));
                return promise;
        }
        j->deferred = d;
        j->h = h;
        j->n = n;
        j->ids = ids;
        napi_create_string_utf8(env, "snowid", NAPI_AUTO_LENGTH, &name);
        napi_create_async_work(env, NULL, name, job_execute, job_complete, j, &j->work);
        h->pending++;
        h->refs++;
        napi_queue_async_work(env, j->work);
        return promise;
}

/* A promise API rejects rather than throws: a closed handle, a bad count. */
static napi_value promise_of(napi_env env, napi_value v)
{
        bool pending = false;
        napi_value e, promise;
        napi_deferred d;

        napi_is_exception_pending(env, &pending);
        if (!pending)
                return v;
        napi_get_and_clear_last_exception(env, &e);
        napi_create_promise(env, &d, &promise);
        napi_reject_deferred(env, d, e);
        return promise;
}

static napi_value m_next_async(napi_env env, napi_callback_info info)
{
        return promise_of(env, start_async(env, info, 0));
}

static napi_value m_next_batch_async(napi_env env, napi_callback_info info)
{
        return promise_of(env, start_async(env, info, 1));
}

/* ---- module functions ---- */

static napi_value f_decode(napi_env env, napi_callback_info info)
{
        size_t argc = 2;
        napi_value argv[2] = {NULL, NULL};
        snowid_layout l;

        napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
        if (argc < 1)
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "decode needs an id");
        if (get_layout_arg(env, argc > 1 ? argv[1] : NULL, &l) < 0)
                return NULL;
        return decode_with(env, &l, argv[0]);
}

static napi_value f_default_layout(napi_env env, napi_callback_info info)
{
        snowid_layout l;
        (void)info;
        snowid_layout_default(&l);
        return layout_object(env, &l);
}

/* open(target, instance, options): opens a handle and defines its methods
 * on target, each a function made for this handle. */
static napi_value f_open(napi_env env, napi_callback_info info)
{
        static const struct {
                const char *name;
                napi_callback fn;
                int getter;
        } methods[] = {
                {"next", m_next, 0},
                {"nextString", m_next_string, 0},
                {"nextBatch", m_next_batch, 0},
                {"nextUuid7", m_next_uuid7, 0},
                {"nextAsync", m_next_async, 0},
                {"nextBatchAsync", m_next_batch_async, 0},
                {"decode", m_decode, 0},
                {"status", m_status, 0},
                {"hostStats", m_host_stats, 0},
                {"setMaxWait", m_set_max_wait, 0},
                {"close", m_close, 0},
                {"layout", m_layout, 1},
                {"closed", m_closed, 1},
        };
        enum { NM = sizeof(methods) / sizeof(methods[0]) };
        size_t argc = 3;
        napi_value argv[3];
        napi_valuetype t = napi_undefined;
        char instance[256], *name = NULL;
        uint64_t max_wait = NODE_MAX_WAIT_DEFAULT_US, async_wait = NODE_ASYNC_WAIT_DEFAULT_US;
        napi_property_descriptor props[NM];

        napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
        if (argc < 1)
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "open needs a target object");
        if (argc > 1)
                napi_typeof(env, argv[1], &t);
        if (t == napi_string) {
                size_t len;
                napi_get_value_string_utf8(env, argv[1], instance, sizeof(instance), &len);
                if (len >= sizeof(instance) - 1)
                        return throw_errno(env, EINVAL, "snowid_open", "instance name too long");
                name = instance;
        } else if (t != napi_undefined && t != napi_null) {
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "instance must be a string");
        }
        if (argc > 2) {
                napi_typeof(env, argv[2], &t);
                if (t == napi_object) {
                        napi_value f;
                        napi_valuetype ft;
                        napi_get_named_property(env, argv[2], "maxWaitUs", &f);
                        napi_typeof(env, f, &ft);
                        if (ft != napi_undefined && get_wait(env, f, &max_wait) < 0)
                                return NULL;
                        napi_get_named_property(env, argv[2], "asyncMaxWaitUs", &f);
                        napi_typeof(env, f, &ft);
                        if (ft != napi_undefined && get_wait(env, f, &async_wait) < 0)
                                return NULL;
                } else if (t != napi_undefined && t != napi_null) {
                        return throw_type(env, "ERR_INVALID_ARG_TYPE", "options must be an object");
                }
        }

        struct handle *h = calloc(1, sizeof(*h));
        if (!h)
                return throw_errno(env, ENOMEM, "snowid_open", NULL);
        int r = snowid_open(name, &h->s);
        if (r < 0) {
                free(h);
                return throw_errno(env, r, "snowid_open", NULL);
        }
        snowid_set_max_wait(h->s, max_wait);
        h->max_wait_us = max_wait;
        h->async_wait_us = async_wait;
        h->refs = 1; /* this call's, until every function holds one */
        /* the getters live as long as target, the methods as long as each */
        if (napi_add_finalizer(env, argv[0], h, function_finalize, NULL, NULL) != napi_ok) {
                handle_release(h);
                return throw_type(env, "ERR_INVALID_ARG_TYPE", "open needs a target object");
        }
        h->refs++;
        for (size_t i = 0; i < NM; i++) {
                napi_value fn;
                props[i] = (napi_property_descriptor){.utf8name = methods[i].name, .data = h};
                if (methods[i].getter) {
                        props[i].getter = methods[i].fn;
                        props[i].attributes = napi_configurable;
                        continue;
                }
                if (napi_create_function(env, methods[i].name, NAPI_AUTO_LENGTH, methods[i].fn, h,
                                         &fn) != napi_ok ||
                    napi_add_finalizer(env, fn, h, function_finalize, NULL, NULL) != napi_ok) {
                        handle_release(h);
                        return NULL;
                }
                h->refs++;
                props[i].value = fn;
                props[i].attributes = napi_writable | napi_configurable;
        }
        napi_define_properties(env, argv[0], NM, props);
        handle_release(h);
        return NULL;
}

NAPI_MODULE_INIT()
{
        napi_value fn, v;

        napi_create_function(env, "open", NAPI_AUTO_LENGTH, f_open, NULL, &fn);
        napi_set_named_property(env, exports, "open", fn);
        napi_create_function(env, "decode", NAPI_AUTO_LENGTH, f_decode, NULL, &fn);
        napi_set_named_property(env, exports, "decode", fn);
        napi_create_function(env, "defaultLayout", NAPI_AUTO_LENGTH, f_default_layout, NULL, &fn);
        napi_set_named_property(env, exports, "defaultLayout", fn);
        napi_create_double(env, NODE_MAX_WAIT_DEFAULT_US, &v);
        napi_set_named_property(env, exports, "DEFAULT_MAX_WAIT_US", v);
        napi_create_double(env, NODE_ASYNC_WAIT_DEFAULT_US, &v);
        napi_set_named_property(env, exports, "DEFAULT_ASYNC_MAX_WAIT_US", v);
        return exports;
}
