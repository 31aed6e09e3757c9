/* SPDX-License-Identifier: MIT */
/* Both ends of the handshake that share code: see handshake.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "handshake.h"
#include "segment.h"

int shm_socket_path(char *buf, size_t size, const char *dir, const char *instance)
{
        if (!shm_instance_valid(instance))
                return -EINVAL;
        if (!dir) {
                dir = secure_getenv("SNOWID_RUNTIME_DIR");
                if (!dir || !*dir)
                        dir = SHM_RUNTIME_DIR_DEFAULT;
                else if (dir[0] != '/')
                        return -EINVAL; /* checked before anything is asked of it */
        }
        if (size > SHM_SOCK_PATH_MAX)
                size = SHM_SOCK_PATH_MAX;
        int n = snprintf(buf, size, "%s/%s.sock", dir, instance);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

void shm_hello_make(struct shm_hello *h)
{
        memset(h, 0, sizeof(*h));
        memcpy(h->magic, SHM_HS_HELLO_MAGIC, sizeof(h->magic));
        h->min_version = SHM_VERSION;
        h->max_version = SHM_VERSION;
}

int shm_hello_check(const void *buf, size_t len, uint32_t *ret_version)
{
        struct shm_hello h;
        if (len != sizeof(h))
                return -EPROTO;
        memcpy(&h, buf, sizeof(h));
        if (memcmp(h.magic, SHM_HS_HELLO_MAGIC, sizeof(h.magic)) != 0)
                return -EPROTO;
        /* one version is served: the client must accept it */
        if (h.min_version > SHM_VERSION || h.max_version < SHM_VERSION)
                return -EPROTO;
        *ret_version = SHM_VERSION;
        return 0;
}

int shm_welcome_send(int fd, const struct shm_welcome *w, int ctl_ro_fd, int ctr_fd)
{
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } u;
        struct iovec iov = {.iov_base = (void *)w, .iov_len = sizeof(*w)};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

        if (w->status == 0) {
                memset(&u, 0, sizeof(u));
                m.msg_control = u.buf;
                m.msg_controllen = sizeof(u.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(2 * sizeof(int));
                int fds[2] = {ctl_ro_fd, ctr_fd};
                memcpy(CMSG_DATA(c), fds, sizeof(fds));
        }
        /* 64 bytes into a fresh connection's empty buffer: never partial */
        ssize_t n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
                return -errno;
        return (size_t)n == sizeof(*w) ? 0 : -EIO;
}

int shm_runtime_dir_prepare(const char *dir)
{
        struct stat st;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        if (lstat(dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        /* whoever else could write here could plant a socket for clients */
        if (st.st_uid != geteuid() || (st.st_mode & 0022))
                return -EPERM;
        return 0;
}

int shm_listen(const char *dir, const char *instance, int *ret_fd)
{
        struct sockaddr_un tmp = {.sun_family = AF_UNIX}, to = {.sun_family = AF_UNIX};
        int r;

        r = shm_socket_path(to.sun_path, sizeof(to.sun_path), dir, instance);
        if (r < 0)
                return r;
        /* one publisher per instance holds the lock: the name is its own */
        int n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s/.%s.new", dir, instance);
        if (n < 0 || (size_t)n >= sizeof(tmp.sun_path))
                return -ENAMETOOLONG;

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        unlink(tmp.sun_path);
        /* made under a temporary name and renamed: a client connecting
         * meanwhile finds the old socket or the new one, never none */
        if (bind(fd, (struct sockaddr *)&tmp, sizeof(tmp)) < 0 || chmod(tmp.sun_path, 0666) < 0 ||
            listen(fd, SHM_LISTEN_BACKLOG) < 0 || rename(tmp.sun_path, to.sun_path) < 0) {
                r = -errno;
                unlink(tmp.sun_path);
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}
