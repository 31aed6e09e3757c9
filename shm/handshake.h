/* SPDX-License-Identifier: MIT */
/*
 * The handshake: how a client gets the segment from snowidd.
 *
 * snowidd listens on a Unix stream socket, <runtime-dir>/<instance>.sock
 * (runtime-dir: /run/snowid unless set; clients read $SNOWID_RUNTIME_DIR).
 * The directory is writable by its owner only, and that owner is root or the
 * daemon's user; the socket is mode 0666 (the daemon decides who may take IDs
 * from the peer's credentials, not from the file's mode).
 *
 *   client                                   snowidd
 *   connect()                                accept(): SO_PEERCRED +
 *                                            SO_PEERGROUPS checked against
 *                                            the allow lists (a refusal is
 *                                            answered here, and closed)
 *   hello, 16 bytes  ------------------->
 *              <-------------------  welcome, 64 bytes; when status is 0,
 *                                    SCM_RIGHTS with two descriptors:
 *                                    [0] control memfd, opened read-only
 *                                    [1] counter memfd, read-write
 *   the client closes the connection after the welcome (the daemon
 *   closes it at once after a refusal, which may come before the hello: a
 *   hello that finds the connection closed, EPIPE, may find the welcome
 *   waiting)
 *
 * All integers are in the host's byte order (both ends are on one host).
 *
 * hello:   0  magic    8 bytes "SNOWIDh1"
 *          8  min      u32, lowest segment version the client maps
 *         12  max      u32, highest
 * welcome: 0  magic    8 bytes "SNOWIDw1"
 *          8  status   i32, 0 or a negative errno:
 *                        -EACCES  this peer may not take IDs
 *                        -EPROTO  no version in [min, max], or a bad hello
 *                        -EAGAIN  this peer's user holds too many answers
 *                                 it has not closed (serve.h)
 *         12  version  u32, the segment version of the descriptors
 *         16  ctl_size u32, bytes of the control memfd
 *         20  ctr_size u32, bytes of the counter memfd
 *         24  nonce    u64, equal to the nonce in both objects
 *         32  mono_ns  i64, the daemon's CLOCK_MONOTONIC when it answered
 *         40  uid      u32, the daemon's effective uid
 *         44  reserved 20 bytes, zero
 *
 * The client checks, before it uses anything:
 *   - the directory: a directory, not writable by group or others, owned by
 *     root or by the peer's uid (SO_PEERCRED on the client's end); the
 *     socket: a socket owned by root or the peer's uid;
 *   - exactly two descriptors came, each a memfd of the size announced,
 *     sealed against shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW) and
 *     against further seals (F_SEAL_SEAL), the first opened read-only;
 *   - magic, version, size and nonce inside both objects;
 *   - mono_ns lies between its own CLOCK_MONOTONIC before the hello and after
 *     the welcome: otherwise the two do not share CLOCK_MONOTONIC (another
 *     time namespace) and ID times would be wrong.
 * The daemon answers within one event-loop turn of a complete hello and
 * closes connections that do not send one within SHM_HS_TIMEOUT_MS.  A
 * client closes its end once it has the welcome: descriptors in flight count
 * against the daemon's user until then.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snowid.h"

#define SHM_HS_HELLO_MAGIC "SNOWIDh1"
#define SHM_HS_WELCOME_MAGIC "SNOWIDw1"
#define SHM_HS_TIMEOUT_MS 1000
/* Connections queued on the socket, not yet accepted.  A client waits for
 * those ahead of it, so not thousands (SOMAXCONN): past this many, connect()
 * waits (libsnowid: up to SHM_HS_TIMEOUT_MS) and is woken as one is
 * accepted. */
#define SHM_LISTEN_BACKLOG 128
#define SHM_RUNTIME_DIR_DEFAULT "/run/snowid"
/* sun_path is 108 bytes: the directory gets what the name leaves */
#define SHM_SOCK_PATH_MAX 108

struct shm_hello {
        char magic[8];
        uint32_t min_version;
        uint32_t max_version;
};

struct shm_welcome {
        char magic[8];
        int32_t status;
        uint32_t version;
        uint32_t ctl_size;
        uint32_t ctr_size;
        uint64_t nonce;
        int64_t mono_ns;
        uint32_t uid;
        uint8_t reserved[20];
};

_Static_assert(sizeof(struct shm_hello) == 16, "the hello is a protocol");
_Static_assert(sizeof(struct shm_welcome) == 64, "the welcome is a protocol");

/* $SNOWID_RUNTIME_DIR or the default; "<dir>/<instance>.sock" into buf.
 * -ENAMETOOLONG if it does not fit a sun_path, -EINVAL for a bad instance. */
int shm_socket_path(char *buf, size_t size, const char *dir, const char *instance);

/* A hello of exactly sizeof(struct shm_hello) bytes: 0 and *ret_version the
 * version to hand out, or -EPROTO. */
int shm_hello_check(const void *buf, size_t len, uint32_t *ret_version);
void shm_hello_make(struct shm_hello *h);

/* Sends a welcome with status and, when status is 0, the two descriptors.
 * Never blocks (MSG_DONTWAIT); -errno on failure. */
int shm_welcome_send(int fd, const struct shm_welcome *w, int ctl_ro_fd, int ctr_fd);

/* Makes the directory if missing (0755) and checks that it is the caller's
 * and writable by nobody else; 0 or -errno (-EPERM: unsafe). */
int shm_runtime_dir_prepare(const char *dir);
/* Binds and listens on <dir>/<instance>.sock, made under a temporary name and
 * renamed into place; non-blocking, close-on-exec. */
int shm_listen(const char *dir, const char *instance, int *ret_fd);

/* For snowidd's own HTTP threads (libsnowid, not exported): a handle on two
 * descriptors it already holds (taken over), following through path. */
int snowid_open_fds(int ctl_fd, int ctr_fd, const char *path, snowid **ret);
/* For `snowid status` (libsnowid, private): the worker numbers the daemon
 * claims in; -ENODATA from a daemon that does not say. */
int snowid_get_worker_range(snowid *s, uint32_t *ret_from, uint32_t *ret_to);

/* The Java binding's (its JNI glue's), not an API: the newest segment's two
 * mappings (the control object read-only).  libsnowid keeps every segment a
 * handle mapped until snowid_close(), so both stay valid until then. */
int snowid_get_segment(snowid *s, const void **ret_ctl, void **ret_ctr);
