/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"
#include "shm-server.h"

struct shm_server {
        pthread_t thread;
        struct shm_pub *pub;
        int listen_fd;
        int stop[2];
        int (*allow)(uid_t, gid_t, void *);
        void *userdata;
};

static void serve_one(struct shm_server *s, int fd)
{
        struct timeval tv = {.tv_sec = SHM_HS_TIMEOUT_MS / 1000};
        struct shm_hello hello;
        struct shm_welcome w = {.version = SHM_VERSION};
        struct ucred cred;
        socklen_t len = sizeof(cred);
        uint32_t version;
        struct timespec ts;

        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        ssize_t n = recv(fd, &hello, sizeof(hello), MSG_WAITALL);
        if (n <= 0)
                return;
        memcpy(w.magic, SHM_HS_WELCOME_MAGIC, sizeof(w.magic));
        if (shm_hello_check(&hello, (size_t)n, &version) < 0)
                w.status = -EPROTO;
        else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
                 (s->allow && !s->allow(cred.uid, cred.gid, s->userdata)))
                w.status = -EACCES;
        else {
                w.ctl_size = sizeof(struct shm_ctl);
                w.ctr_size = sizeof(struct shm_ctr);
                w.nonce = s->pub->ctl->nonce;
                w.uid = (uint32_t)geteuid();
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        w.mono_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        shm_welcome_send(fd, &w, s->pub->ctl_ro_fd, s->pub->ctr_fd);
}

static void *run(void *arg)
{
        struct shm_server *s = arg;
        for (;;) {
                struct pollfd p[2] = {{.fd = s->listen_fd, .events = POLLIN},
                                      {.fd = s->stop[0], .events = POLLIN}};
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        break;
                if (p[1].revents)
                        break;
                int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                serve_one(s, fd);
                close(fd);
        }
        return NULL;
}

int shm_server_start(struct shm_pub *pub, const char *dir, const char *instance,
                     int (*allow)(uid_t uid, gid_t gid, void *userdata), void *userdata,
                     struct shm_server **ret)
{
        struct shm_server *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pub = pub;
        s->allow = allow;
        s->userdata = userdata;
        int r = shm_listen(dir, instance, &s->listen_fd);
        if (r < 0) {
                free(s);
                return r;
        }
        if (pipe2(s->stop, O_CLOEXEC) < 0 || (r = -pthread_create(&s->thread, NULL, run, s)) < 0) {
                r = r < 0 ? r : -errno;
                close(s->listen_fd);
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

struct shm_server *shm_server_stop(struct shm_server *s)
{
        if (!s)
                return NULL;
        char c = 0;
        if (write(s->stop[1], &c, 1) < 0)
                abort();
        pthread_join(s->thread, NULL);
        close(s->stop[0]);
        close(s->stop[1]);
        close(s->listen_fd);
        free(s);
        return NULL;
}
