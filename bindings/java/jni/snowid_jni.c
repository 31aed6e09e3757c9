/* SPDX-License-Identifier: MIT */
/*
 * The JNI glue of dev.snowid.SnowId: one native call per Java call, no
 * allocation on the ID paths.  It also hands the Java fast path
 * (FastPath.java) the segment's mappings and the structs' offsets; a handle
 * whose mappings Java has keeps them past close(), until jh_free().
 *
 * A Java SnowId holds a pointer to a struct jh, which holds the snowid
 * handle.  close() may race calls on other threads, so each call marks its
 * thread's slot with the jh it is using (enter()) and clears it after
 * (leave()); close() sets jh->closed, makes the marks visible with
 * membarrier() (or each call pays a full fence where membarrier is missing),
 * waits until no slot holds the jh, and only then frees the snowid.  A call
 * that sees jh->closed fails with -EINVAL (libsnowid's answer to a closed,
 * NULL handle).  The jh itself lives until the
 * Java object is unreachable (freed by its Cleaner, jh_free()), so a late
 * call still reads a valid jh->closed.
 */
#include <errno.h>
#include <jni.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h" /* snowid_get_segment(): libsnowid's, private */
#include "segment.h"
#include "snowid.h"

struct jh {
        snowid *s;
        atomic_int closed;
        /* the Java fast path (FastPath.java) has this handle's mappings: they
         * go only with the Java object (jh_free()), never at close() */
        atomic_int java_maps;
};

/* One per thread that ever made a call; on the registry while it lives. */
struct slot {
        _Atomic(struct jh *) in; /* the jh this thread is using, or NULL */
        struct slot *next, **prev;
} __attribute__((aligned(64)));

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *registry;
static pthread_key_t slot_key;
static int fast_barrier; /* membarrier(PRIVATE_EXPEDITED) is registered */
static __thread struct slot *self __attribute__((tls_model("initial-exec")));

static void slot_release(void *p)
{
        struct slot *sl = p;
        self = NULL;
        pthread_mutex_lock(&registry_lock);
        *sl->prev = sl->next;
        if (sl->next)
                sl->next->prev = sl->prev;
        pthread_mutex_unlock(&registry_lock);
        free(sl);
}

static struct slot *slot_new(void)
{
        struct slot *sl = aligned_alloc(64, sizeof(*sl));
        if (!sl)
                return NULL;
        atomic_init(&sl->in, NULL);
        pthread_mutex_lock(&registry_lock);
        sl->next = registry;
        sl->prev = &registry;
        if (registry)
                registry->prev = &sl->next;
        registry = sl;
        pthread_mutex_unlock(&registry_lock);
        if (pthread_setspecific(slot_key, sl) != 0) {
                slot_release(sl);
                return NULL;
        }
        self = sl;
        return sl;
}

/* In the child of fork() only the forking thread runs, and it is in no call. */
static void after_fork_child(void)
{
        for (struct slot *sl = registry; sl; sl = sl->next)
                atomic_store_explicit(&sl->in, NULL, memory_order_relaxed);
}

/* Returns the snowid of h marked as in use by this thread, or NULL with
 * *err set (-EINVAL: closed). */
static inline snowid *enter(struct jh *h, struct slot **ret, int *err)
{
        struct slot *sl = self;
        if (__builtin_expect(!sl, 0)) {
                sl = slot_new();
                if (!sl) {
                        *err = -ENOMEM;
                        return NULL;
                }
        }
        atomic_store_explicit(&sl->in, h, memory_order_relaxed);
        /* the store above before the load of closed below: close()'s
         * membarrier() orders it on this CPU, or this fence does */
        if (fast_barrier)
                atomic_signal_fence(memory_order_seq_cst);
        else
                atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&h->closed, memory_order_relaxed)) {
                atomic_store_explicit(&sl->in, NULL, memory_order_release);
                *err = -EINVAL;
                return NULL;
        }
        *ret = sl;
        return h->s;
}

static inline void leave(struct slot *sl)
{
        atomic_store_explicit(&sl->in, NULL, memory_order_release);
}

/* Marks h closed and waits for the calls in progress; unmap: then frees
 * the snowid (its mappings with it).  Only the first close does either: a
 * second one, even at the same time, returns at once. */
static void jh_close(struct jh *h, int unmap)
{
        if (atomic_exchange(&h->closed, 1))
                return;
        /* calls that have not started waiting give up at once */
        snowid_set_max_wait(h->s, 0);
        if (!fast_barrier || syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) < 0)
                atomic_thread_fence(memory_order_seq_cst);
        pthread_mutex_lock(&registry_lock);
        for (struct slot *sl = registry; sl; sl = sl->next) {
                /* a call in progress ends within its wait budget */
                while (atomic_load_explicit(&sl->in, memory_order_acquire) == h) {
                        struct timespec ts = {.tv_nsec = 50000};
                        nanosleep(&ts, NULL);
                }
        }
        pthread_mutex_unlock(&registry_lock);
        if (unmap)
                h->s = snowid_close(h->s);
}

static jint JNICALL j_open(JNIEnv *env, jclass cls, jstring instance, jlongArray ret)
{
        (void)cls;
        const char *name = NULL;
        if (instance) {
                name = (*env)->GetStringUTFChars(env, instance, NULL);
                if (!name)
                        return -ENOMEM;
        }
        struct jh *h = malloc(sizeof(*h));
        int r = h ? 0 : -ENOMEM;
        snowid *s = NULL;
        if (h)
                r = snowid_open(name, &s);
        if (name)
                (*env)->ReleaseStringUTFChars(env, instance, name);
        if (r < 0) {
                free(h);
                return r;
        }
        h->s = s;
        atomic_init(&h->closed, 0);
        atomic_init(&h->java_maps, 0);
        jlong p = (jlong)(uintptr_t)h;
        (*env)->SetLongArrayRegion(env, ret, 0, 1, &p);
        return 0;
}

static void JNICALL j_close(JNIEnv *env, jobject self_obj, jlong p)
{
        (void)env;
        (void)self_obj;
        struct jh *h = (struct jh *)(uintptr_t)p;
        jh_close(h, !atomic_load(&h->java_maps));
}

/* From the Cleaner: the Java object is unreachable, no call can be running. */
static void JNICALL j_free(JNIEnv *env, jclass cls, jlong p)
{
        (void)env;
        (void)cls;
        struct jh *h = (struct jh *)(uintptr_t)p;
        jh_close(h, 0);
        /* what close() left mapped for the Java fast path (no call can run) */
        if (h->s)
                h->s = snowid_close(h->s);
        free(h);
}

/* An ID (< 2^63), or a negative errno value. */
static jlong JNICALL j_next(JNIEnv *env, jobject self_obj, jlong p)
{
        (void)env;
        (void)self_obj;
        struct slot *sl;
        int r = 0;
        uint64_t id;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_next(s, &id);
        leave(sl);
        return r < 0 ? r : (jlong)id;
}

/* The newest segment's two mappings and its version, for the Java fast path:
 * out = {ctl address, ctr address, ctl->version}.  From here on the handle's
 * mappings stay until the Java object is unreachable (jh_free()), so that no
 * thread can be inside the fast path when they go. */
static jint JNICALL j_segment(JNIEnv *env, jobject self_obj, jlong p, jlongArray out)
{
        (void)self_obj;
        struct jh *h = (struct jh *)(uintptr_t)p;
        struct slot *sl;
        int r = 0;
        const void *ctl;
        void *ctr;
        snowid *s = enter(h, &sl, &r);
        if (!s)
                return r;
        atomic_store(&h->java_maps, 1);
        r = snowid_get_segment(s, &ctl, &ctr);
        leave(sl);
        if (r == 0) {
                const struct shm_ctl *c = ctl;
                jlong v[3] = {(jlong)(uintptr_t)ctl, (jlong)(uintptr_t)ctr, (jlong)c->version};
                (*env)->SetLongArrayRegion(env, out, 0, 3, v);
        }
        return r;
}

/* What the Java fast path needs of the segment's structs (shm/segment.h),
 * from the structs themselves: FastPath.java names each index. */
static jint JNICALL j_shm_layout(JNIEnv *env, jclass cls, jlongArray out)
{
        (void)cls;
        const jlong v[] = {
                SHM_VERSION,
                offsetof(struct shm_ctl, gen),
                offsetof(struct shm_ctl, deadline),
                offsetof(struct shm_ctl, offset_ns),
                offsetof(struct shm_ctl, worker),
                offsetof(struct shm_ctl, worker_bits),
                offsetof(struct shm_ctl, seq_bits),
                offsetof(struct shm_ctl, lead_ms),
                offsetof(struct shm_ctr, line),
                sizeof(struct shm_line),
                SHM_LINES,
                offsetof(struct shm_ctr, stats.issued),
                offsetof(struct shm_ctr, stats.dropped),
                SNOWID_MAX_WAIT_DEFAULT_USEC,
                offsetof(struct shm_ctl, tsc.span),
                offsetof(struct shm_ctr, stats.waits_ceiling),
                offsetof(struct shm_ctr, stats.eagain),
                EAGAIN,
        };
        jsize n = (jsize)(sizeof(v) / sizeof(v[0]));
        if ((*env)->GetArrayLength(env, out) != n)
                return -EINVAL;
        (*env)->SetLongArrayRegion(env, out, 0, n, v);
        return 0;
}

/* CLOCK_MONOTONIC: the Java fast path checks that System.nanoTime() is it. */
static jlong JNICALL j_monotonic_ns(JNIEnv *env, jclass cls)
{
        (void)env;
        (void)cls;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (jlong)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum { BATCH_ON_STACK = 512 };

/* The caller checked off and len against the array. */
static jint JNICALL j_next_batch(JNIEnv *env, jobject self_obj, jlong p, jlongArray out, jint off,
                                 jint len)
{
        (void)self_obj;
        uint64_t stack[BATCH_ON_STACK], *ids = stack;
        struct slot *sl;
        int r = 0;

        if (len > BATCH_ON_STACK) {
                ids = malloc(sizeof(uint64_t) * (size_t)len);
                if (!ids)
                        return -ENOMEM;
        }
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (s) {
                r = snowid_next_batch(s, ids, len < 0 ? 0 : (size_t)len);
                leave(sl);
        }
        /* copied after the call: no array pinned while it waits */
        if (r == 0)
                (*env)->SetLongArrayRegion(env, out, off, len, (const jlong *)ids);
        if (ids != stack)
                free(ids);
        return r;
}

static jlong be64(const uint8_t *b)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | b[i];
        return (jlong)v;
}

static jint JNICALL j_next_uuid7(JNIEnv *env, jobject self_obj, jlong p, jlongArray out)
{
        (void)self_obj;
        uint8_t u[16];
        struct slot *sl;
        int r = 0;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_next_uuid7(s, u);
        leave(sl);
        if (r == 0) {
                jlong v[2] = {be64(u), be64(u + 8)};
                (*env)->SetLongArrayRegion(env, out, 0, 2, v);
        }
        return r;
}

static jint JNICALL j_set_max_wait(JNIEnv *env, jobject self_obj, jlong p, jlong usec)
{
        (void)env;
        (void)self_obj;
        struct slot *sl;
        int r = 0;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_set_max_wait(s, (uint64_t)usec);
        leave(sl);
        return r;
}

static jint JNICALL j_layout(JNIEnv *env, jobject self_obj, jlong p, jlongArray out)
{
        (void)self_obj;
        snowid_layout l;
        struct slot *sl;
        int r = 0;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_get_layout(s, &l);
        leave(sl);
        if (r == 0) {
                jlong v[4] = {(jlong)l.epoch_ms, l.time_bits, l.worker_bits, l.seq_bits};
                (*env)->SetLongArrayRegion(env, out, 0, 4, v);
        }
        return r;
}

static jint JNICALL j_status(JNIEnv *env, jobject self_obj, jlong p, jlongArray out)
{
        (void)self_obj;
        snowid_status st = SNOWID_STATUS_INIT;
        struct slot *sl;
        int r = 0;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_get_status(s, &st);
        leave(sl);
        if (r == 0) {
                jlong v[9] = {st.worker,
                              st.state,
                              (jlong)st.generation,
                              (jlong)st.deadline_ms,
                              (jlong)st.deadline_unix_ms,
                              st.headroom_ms,
                              st.offset_ns,
                              st.daemon_pid,
                              st.tsc_clock};
                (*env)->SetLongArrayRegion(env, out, 0, 9, v);
        }
        return r;
}

static jint JNICALL j_host_stats(JNIEnv *env, jobject self_obj, jlong p, jlongArray out)
{
        (void)self_obj;
        snowid_host_stats hs = SNOWID_HOST_STATS_INIT;
        struct slot *sl;
        int r = 0;
        snowid *s = enter((struct jh *)(uintptr_t)p, &sl, &r);
        if (!s)
                return r;
        r = snowid_get_host_stats(s, &hs);
        leave(sl);
        if (r == 0) {
                jlong v[6] = {(jlong)hs.issued,         (jlong)hs.waits_ceiling,
                              (jlong)hs.waits_deadline, (jlong)hs.waits_switch,
                              (jlong)hs.eagain,         (jlong)hs.dropped};
                (*env)->SetLongArrayRegion(env, out, 0, 6, v);
        }
        return r;
}

static int layout_from(jlong epoch_ms, jint time_bits, jint worker_bits, jint seq_bits,
                       snowid_layout *l)
{
        if (epoch_ms < 0 || time_bits < 0 || worker_bits < 0 || seq_bits < 0)
                return -EINVAL;
        *l = (snowid_layout){.epoch_ms = (uint64_t)epoch_ms,
                             .time_bits = (unsigned)time_bits,
                             .worker_bits = (unsigned)worker_bits,
                             .seq_bits = (unsigned)seq_bits};
        return snowid_layout_check(l);
}

static jint JNICALL j_layout_check(JNIEnv *env, jclass cls, jlong epoch_ms, jint time_bits,
                                   jint worker_bits, jint seq_bits)
{
        (void)env;
        (void)cls;
        snowid_layout l;
        return layout_from(epoch_ms, time_bits, worker_bits, seq_bits, &l);
}

static jint JNICALL j_decode_uuid7(JNIEnv *env, jclass cls, jlong epoch_ms, jint time_bits,
                                   jint worker_bits, jint seq_bits, jlong msb, jlong lsb,
                                   jlongArray out)
{
        (void)cls;
        snowid_layout l;
        snowid_parts parts;
        uint8_t u[16];
        int r = layout_from(epoch_ms, time_bits, worker_bits, seq_bits, &l);
        if (r < 0)
                return r;
        for (int i = 0; i < 8; i++) {
                u[i] = (uint8_t)((uint64_t)msb >> (56 - 8 * i));
                u[8 + i] = (uint8_t)((uint64_t)lsb >> (56 - 8 * i));
        }
        r = snowid_decode_uuid7(&l, u, &parts);
        if (r == 0) {
                jlong v[4] = {(jlong)parts.time_ms, (jlong)parts.unix_ms, parts.worker,
                              parts.sequence};
                (*env)->SetLongArrayRegion(env, out, 0, 4, v);
        }
        return r;
}

static jstring JNICALL j_errno_name(JNIEnv *env, jclass cls, jint e)
{
        (void)cls;
        const char *name = strerrorname_np(e);
        return (*env)->NewStringUTF(env, name ? name : "");
}

static jstring JNICALL j_strerror(JNIEnv *env, jclass cls, jint e)
{
        (void)cls;
        char buf[128];
        return (*env)->NewStringUTF(env, strerror_r(e, buf, sizeof(buf)));
}

#define M(name, sig, fn)                                                                           \
        {                                                                                          \
                (char *)(name), (char *)(sig), (void *)(fn)                                        \
        }

static const JNINativeMethod methods[] = {
        M("open0", "(Ljava/lang/String;[J)I", j_open),
        M("close0", "(J)V", j_close),
        M("free0", "(J)V", j_free),
        M("next0", "(J)J", j_next),
        M("nextBatch0", "(J[JII)I", j_next_batch),
        M("nextUuid70", "(J[J)I", j_next_uuid7),
        M("setMaxWait0", "(JJ)I", j_set_max_wait),
        M("layout0", "(J[J)I", j_layout),
        M("status0", "(J[J)I", j_status),
        M("hostStats0", "(J[J)I", j_host_stats),
        M("layoutCheck0", "(JIII)I", j_layout_check),
        M("decodeUuid70", "(JIIIJJ[J)I", j_decode_uuid7),
        M("errnoName0", "(I)Ljava/lang/String;", j_errno_name),
        M("strerror0", "(I)Ljava/lang/String;", j_strerror),
        M("segment0", "(J[J)I", j_segment),
        M("shmLayout0", "([J)I", j_shm_layout),
        M("monotonicNs0", "()J", j_monotonic_ns),
};

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
        (void)reserved;
        JNIEnv *env;
        if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_10) != JNI_OK)
                return JNI_ERR;
        jclass cls = (*env)->FindClass(env, "dev/snowid/SnowId");
        if (!cls)
                return JNI_ERR;
        if ((*env)->RegisterNatives(env, cls, methods, sizeof(methods) / sizeof(methods[0])) != 0)
                return JNI_ERR;
        if (pthread_key_create(&slot_key, slot_release) != 0 ||
            pthread_atfork(NULL, NULL, after_fork_child) != 0)
                return JNI_ERR;
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
                fast_barrier = 1;
        return JNI_VERSION_10;
}
