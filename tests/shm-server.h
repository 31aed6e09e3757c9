/* SPDX-License-Identifier: MIT */
/*
 * A handshake server on a thread of its own, blocking: for the tests and the
 * benchmark, which publish a segment without snowidd.  snowidd serves from
 * its event loop instead (daemon/serve/serve.c).  Not in libshm: only what
 * uses it links it (shm_server_dep, the top meson.build).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "publish.h"

struct shm_server;

/* Listens on <dir>/<instance>.sock and hands out pub's segment to peers
 * that allow() accepts (NULL: everyone). */
int shm_server_start(struct shm_pub *pub, const char *dir, const char *instance,
                     int (*allow)(uid_t uid, gid_t gid, void *userdata), void *userdata,
                     struct shm_server **ret);
/* Stops the thread; the socket file stays (like snowidd's). */
struct shm_server *shm_server_stop(struct shm_server *s);
