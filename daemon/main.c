/* SPDX-License-Identifier: MIT */
/* snowidd: leases a worker number from etcd and publishes it to the segment. */
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "holder.h"
#include "http.h"
#include "log.h"
#include "trace.h"
#include "handshake.h"
#include "macro.h"
#include "publish.h"
#include "serve.h"
#include "tsc-clock.h"

struct app {
        struct holder *holder;
        struct shm_pub *pub;
        struct http_server *http;
        struct serve *serve;
        struct tsc_clock *tsc;
        uint64_t started_ms;
};

/* Publishes what the loop knows to the HTTP threads (RCU). */
static void on_holder_change(struct holder *h, void *userdata)
{
        struct app *app = userdata;
        if (!app->http)
                return;
        struct http_snapshot *snap = http_snapshot_new();
        if (!snap)
                return;
        struct holder_status st;
        holder_status(h, &st);
        *snap = (struct http_snapshot){
                .layout = st.layout,
                .layout_ready = st.layout_ready,
                .store_name = st.store_name,
                .store_title = st.store_title,
                .worker = st.worker,
                .lease = st.lease,
                .store_reachable = st.store_reachable,
                .halted = st.halted,
                .store_full = st.store_full,
                .store_error = st.store_error,
                .offset_ns = st.offset_ns,
                .mono_started_ms = app->started_ms,
                .holder = st.stats,
                .store = st.store,
                .handshakes = app->serve ? *serve_stats(app->serve) : (struct serve_stats){0},
        };
        memcpy(snap->store_error_message, st.store_error_message, sizeof(st.store_error_message));
        tsc_clock_stats(app->tsc, &snap->tsc);
        http_publish(app->http, snap);
}

/* The segment was replaced: systemd keeps the new one across a restart. */
static void on_segment_replaced(struct holder *h, void *userdata)
{
        struct app *app = userdata;
        (void)h;
        serve_store_segment(app->pub);
}

static void on_tsc_change(void *userdata)
{
        struct app *app = userdata;
        on_holder_change(app->holder, app);
}

/* The segment and the listening socket that systemd kept for us. */
static void take_stored_fds(int *ctl_fd, int *ctr_fd, int *listen_fd)
{
        char **names = NULL;
        int n = sd_listen_fds_with_names(1, &names);
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                const char *name = names && names[i] ? names[i] : "";
                int *slot = !strcmp(name, "snowid-ctl")      ? ctl_fd
                            : !strcmp(name, "snowid-ctr")    ? ctr_fd
                            : !strcmp(name, "snowid-listen") ? listen_fd
                                                             : NULL;
                if (slot && *slot < 0)
                        *slot = fd;
                else
                        close(fd);
        }
        if (names)
                for (int i = 0; i < n; i++)
                        free(names[i]);
        free(names);
}

/* The stored listening socket if its file is still in place, else a new one. */
static int listen_socket(const struct settings *cfg, int *fd)
{
        char path[SHM_SOCK_PATH_MAX];
        struct stat st;
        int r = shm_socket_path(path, sizeof(path), cfg->runtime_dir, cfg->instance);
        if (r < 0)
                return r;
        if (*fd >= 0) {
                int listening = 0;
                socklen_t len = sizeof(listening);
                /* bound under a temporary name and renamed (shm_listen): its
                 * own address is that name, and path must still be there */
                char tmp[SHM_SOCK_PATH_MAX];
                snprintf(tmp, sizeof(tmp), "%s/.%s.new", cfg->runtime_dir, cfg->instance);
                if (sd_is_socket_unix(*fd, SOCK_STREAM, 1, tmp, 0) > 0 &&
                    getsockopt(*fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 &&
                    listening && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
                        log_info("Listening on %s (kept across the restart)", path);
                        return 0;
                }
                close(*fd);
                *fd = -1;
        }
        r = shm_listen(cfg->runtime_dir, cfg->instance, fd);
        if (r >= 0)
                log_info("Listening on %s", path);
        return r;
}

/* Descriptors: each HTTP connection that libmicrohttpd may hold (two: its
 * read deadline keeps a duplicate), the handshakes (a held answer is one
 * descriptor here and two in flight, which the kernel counts against this
 * limit too), and a few dozen more (etcd, the segment, the journal).  The
 * soft limit is raised to what full load needs; under a lower hard limit the
 * HTTP connections are fitted into it, so that a flood is refused by the
 * limits, never by EMFILE. */
static void check_nofile(struct settings *cfg)
{
        struct rlimit rl;
        /* libmicrohttpd: an epoll and a wake-up descriptor per thread, the listener */
        uint64_t other = SERVE_CONN_MAX + SERVE_HELD_MAX * 3 + 64 +
                         (cfg->http ? 2 * (uint64_t)cfg->http_threads + 1 : 0),
                 need = (cfg->http ? 2 * http_connections_max(cfg->http_connections) : 0) + other;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
                return;
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur >= need)
                return;
        /* the most n whose http_connections_max(n) fits: n + n / 16 + 16 */
        uint64_t fit = cfg->http && rl.rlim_cur > other ? (rl.rlim_cur - other) / 2 : 0,
                 n = fit > 16 ? (fit - 16) * 16 / 17 : 0;
        if (n >= 8) {
                cfg->http_connections = (unsigned)n;
                if (cfg->http_connections_per_address > cfg->http_connections)
                        cfg->http_connections_per_address = cfg->http_connections;
                log_warning("RLIMIT_NOFILE is %llu: http-connections lowered to %u to fit it "
                            "(raise LimitNOFILE= for more)",
                            (unsigned long long)rl.rlim_cur, cfg->http_connections);
        } else
                log_warning("RLIMIT_NOFILE is %llu, below the %llu descriptors that full "
                            "load needs: raise LimitNOFILE=",
                            (unsigned long long)rl.rlim_cur, (unsigned long long)need);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        (void)s;
        log_info("Got %s", strsignal((int)si->ssi_signo));
        holder_stop(userdata);
        return 0;
}

/* SIGHUP: the settings are read once, at start; a reload would have to
 * re-check them against the lease and segment in force, and a restart
 * (which clients do not notice) does that already */
static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        (void)s;
        (void)si;
        (void)userdata;
        log_notice("Got SIGHUP: settings are read only at start; going on unchanged (restart "
                   "snowidd to apply new settings: clients do not notice)");
        return 0;
}

DEFINE_POINTER_CLEANUP(struct shm_pub, shm_pub_close)

/* A directory opened with no symbolic link anywhere on its path (relative
 * to at): root must not be steered to another directory by whoever may
 * write to a parent.  Fails with ELOOP on a link. */
static int open_dir_no_symlinks(int at, const char *path)
{
        struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                               .resolve = RESOLVE_NO_SYMLINKS};
        int fd = (int)syscall(SYS_openat2, at, path, &how, sizeof(how));
        if (fd < 0 && errno == ENOSYS) /* before Linux 5.6: the last component at least */
                fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd;
}

/* --prepare-runtime-dir UID:GID, run as root (with CAP_CHOWN and
 * CAP_FOWNER) before snowidd starts as UID:GID: a container runtime makes
 * a hostPath directory root's, and snowidd refuses a directory that is not
 * its own.  A directory of another uid, or root's with something in it, is
 * another snowidd's (the systemd unit's, or one run as root): left alone.
 * The parent is opened first, with no link on its path, and everything
 * after works on descriptors: nothing is made before the whole path is
 * checked. */
static int prepare_runtime_dir(const char *dir, uid_t uid, gid_t gid)
{
        char path[PATH_MAX];
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (n == 0 || n >= sizeof(path))
                return log_error("The runtime directory \"%s\" is not a path snowidd can use", dir),
                       EXIT_FAILURE;
        memcpy(path, dir, n);
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        const char *parent = ".", *name = path;
        if (slash == path)
                parent = "/", name = path + 1;
        else if (slash)
                *slash = '\0', parent = path, name = slash + 1;
        if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
                return log_error("The runtime directory %s names no directory of its own", dir),
                       EXIT_FAILURE;

        struct stat st;
        int fd = -1, pfd = open_dir_no_symlinks(AT_FDCWD, parent);
        if (pfd < 0) {
                if (errno == ELOOP)
                        log_error("Cannot open %s, the runtime directory's parent: a symbolic "
                                  "link on its path (not followed as root)",
                                  parent);
                else
                        log_error_errno(errno, "Cannot open %s, the runtime directory's parent: %m",
                                        parent);
                return EXIT_FAILURE;
        }
        if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST) {
                log_error_errno(errno, "Cannot make the runtime directory %s: %m", dir);
                goto fail;
        }
        fd = open_dir_no_symlinks(pfd, name);
        if (fd < 0 && errno == ELOOP) {
                log_error("The runtime directory %s is a symbolic link (not followed as root)",
                          dir);
                goto fail;
        }
        if (fd < 0 || fstat(fd, &st) < 0) {
                log_error_errno(errno, "Cannot open the runtime directory %s: %m", dir);
                goto fail;
        }
        const char *why = NULL;
        if (st.st_uid != 0 && st.st_uid != uid)
                why = "belongs to another uid";
        else if (st.st_uid == 0) {
                int dup_fd = dup(fd);
                DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
                if (!d) {
                        if (dup_fd >= 0)
                                close(dup_fd);
                        log_error_errno(errno, "Cannot read the runtime directory %s: %m", dir);
                        goto fail;
                }
                for (struct dirent *e; !why && (e = readdir(d));)
                        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                                why = "belongs to root and is not empty";
                closedir(d);
        }
        if (why) {
                log_error("The runtime directory %s %s (uid %u): another snowidd uses it on this "
                          "host; not taking it over",
                          dir, why, (unsigned)st.st_uid);
                goto fail;
        }
        if (fchown(fd, uid, gid) < 0 || fchmod(fd, 0755) < 0) {
                log_error_errno(errno, "Cannot give the runtime directory %s to %u:%u: %m", dir,
                                (unsigned)uid, (unsigned)gid);
                goto fail;
        }
        close(fd);
        close(pfd);
        log_info("The runtime directory %s is uid %u's, gid %u, mode 0755", dir, (unsigned)uid,
                 (unsigned)gid);
        return EXIT_SUCCESS;
fail:
        if (fd >= 0)
                close(fd);
        close(pfd);
        return EXIT_FAILURE;
}

int main(int argc, char **argv)
{
        /* freed on every way out, the early ones included */
        _cleanup_(settings_free) struct settings cfg = {0};
        _cleanup_(shm_pub_closep) struct shm_pub *pub = NULL;
        sd_event *event = NULL;
        int r;

        log_setup();
        r = settings_load(&cfg, &settings_checks_postgres, argc, argv);
        if (r != 0)
                return settings_exit_status(r);
        log_max_level = cfg.log_level;
        if (cfg.prepare_runtime_dir)
                return prepare_runtime_dir(cfg.runtime_dir, cfg.prepare_uid, cfg.prepare_gid);

        /* under systemd, what an earlier snowidd stored comes back */
        int ctl_fd = -1, ctr_fd = -1, listen_fd = -1;
        take_stored_fds(&ctl_fd, &ctr_fd, &listen_fd);

        r = shm_runtime_dir_prepare(cfg.runtime_dir);
        if (r < 0) {
                if (r == -EPERM)
                        log_error("The runtime directory %s must be snowidd's own and writable by "
                                  "nobody else (anyone who can write there could plant a socket)",
                                  cfg.runtime_dir);
                else
                        log_error_errno(r, "Cannot make the runtime directory %s: %m",
                                        cfg.runtime_dir);
                return r == -EPERM ? EX_CONFIG_ : EXIT_FAILURE;
        }
        r = shm_pub_open(cfg.runtime_dir, cfg.instance, ctl_fd, ctr_fd, &pub);
        if (r == -EBUSY) {
                log_error("Another snowidd is running for instance '%s'", cfg.instance);
                return EXIT_FAILURE;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot make the segment of instance '%s': %m", cfg.instance);
                return EXIT_FAILURE;
        }
        if (ctl_fd >= 0 && !pub->reused)
                log_warning("The segment kept across the restart is damaged or far ahead of ID "
                            "time: a new one; clients move to it at their deadline");
        log_info("Segment %s",
                 pub->reused ? "kept across the restart: clients go on with it" : "created");
        /* after the instance's lock: a second snowidd of the instance, which
         * exits above, writes nothing into the running one's trace */
        if (trace_start("snowidd") < 0)
                return EXIT_FAILURE;
        r = listen_socket(&cfg, &listen_fd);
        if (r < 0) {
                log_error_errno(r, "Cannot listen on %s/%s.sock: %m", cfg.runtime_dir,
                                cfg.instance);
                return EXIT_FAILURE;
        }
        serve_store_fds(pub, listen_fd);
        check_nofile(&cfg);

        curl_global_init(CURL_GLOBAL_DEFAULT);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct app app = {.pub = pub, .started_ms = (uint64_t)shm_monotonic_ns() / 1000000};
        r = sd_event_default(&event);
        if (r >= 0)
                r = sd_event_set_watchdog(event, 1);
        if (r >= 0)
                r = serve_start(event, &cfg, pub, listen_fd, &app.serve);
        else
                close(listen_fd);
        if (r >= 0)
                r = tsc_clock_start(event, &cfg, pub, &app.tsc);
        if (r >= 0)
                r = holder_new(event, &cfg, pub, NULL,
                               &(struct holder_callbacks){.change = on_holder_change,
                                                          .segment_replaced = on_segment_replaced,
                                                          .userdata = &app},
                               &app.holder);
        if (r >= 0 && cfg.http) {
                r = http_start(&cfg, pub, &app.http);
                if (r < 0)
                        log_error_errno(r, "Cannot serve HTTP on %s: %m", cfg.http);
                else
                        log_info("Serving HTTP on %s", cfg.http);
                if (r >= 0) {
                        tsc_clock_on_change(app.tsc, on_tsc_change, &app);
                        on_holder_change(app.holder, &app);
                }
        }
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, on_signal, app.holder);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, on_signal, app.holder);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGHUP, on_sighup, NULL);
        if (r < 0) {
                log_error_errno(r, "Cannot start: %m");
                r = EXIT_FAILURE;
        } else {
                r = sd_event_loop(event);
                if (r < 0) {
                        log_error_errno(r, "Event loop failed: %m");
                        r = EXIT_FAILURE;
                } else
                        r = holder_exit_code(app.holder);
        }
        http_stop(app.http);
        serve_drain(app.serve);
        serve_free(app.serve);
        holder_free(app.holder);
        tsc_clock_free(app.tsc);
        sd_event_unref(event);
        curl_global_cleanup();
        return r;
}
