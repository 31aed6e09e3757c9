/* SPDX-License-Identifier: MIT */
/*
 * The daemon's HTTP server, fed raw requests over a real socket: method,
 * path, query, headers and body all come from the input, parsed by
 * libmicrohttpd and handled by daemon/serve/http*.c exactly as in snowidd.  The
 * server runs once, over a segment published here with a day's deadline
 * (and a heartbeat before every input, as snowidd's clock tick keeps it).
 *
 * Input: byte 0 chooses whether /v1/ needs a bearer token ("fuzz-token");
 * the rest is written to the socket as it is, followed by one last request
 * that asks the server to close (libmicrohttpd keeps a connection that the
 * client half-closed open until its idle timeout).  Every answer must be an
 * HTTP response, and never a 500: the handlers answer 500 only when out of
 * memory, and libmicrohttpd when a handler fails.  (It answers some bad
 * requests with other codes itself: 505 for an unknown HTTP version.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "fuzz-dir.h"
#include "http.h"
#include "publish.h"

static struct settings cfg;
static struct http_server *srv;
static struct shm_pub *pub;
static unsigned port;
static struct token token; /* rates: a limit reached now and then */

static void cleanup(void)
{
        cfg.http_tokens = NULL; /* the fuzz token is not the settings' to free */
        cfg.n_http_tokens = 0;
        http_stop(srv);
        shm_pub_close(pub);
        free(token.secret);
        settings_free(&cfg);
}

/* A port that was free a moment ago (snowidd does not take port 0). */
static unsigned free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            getsockname(fd, (struct sockaddr *)&a, &len) < 0)
                abort();
        close(fd);
        return ntohs(a.sin_port);
}

static void setup(void)
{
        char inst[64], listen[32];
        snprintf(inst, sizeof(inst), "fuzz-http-%d", (int)getpid());
        snprintf(listen, sizeof(listen), "127.0.0.1:%u", free_port());
        char *argv[] = {"snowidd", "--config",      "/dev/null",        "--instance", inst,
                        "--http",  listen,          "--http-threads",   "1",          "--log-level",
                        "err",     "--runtime-dir", (char *)fuzz_dir(), NULL};
        if (settings_load(&cfg, NULL, (int)(sizeof(argv) / sizeof(*argv)) - 1, argv) != 0)
                abort();
        /* no handshake server: http_start() maps the publisher's descriptors
         * itself, and the heartbeat (below) keeps it from asking the socket */
        if (shm_pub_open(cfg.runtime_dir, cfg.instance, -1, -1, &pub) < 0)
                abort();
        struct shm_publication p = {.layout = cfg.layout, .worker = 5, .lead_ms = 1, .follow = 1};
        p.offset_ns = shm_offset_for_wall(p.layout.epoch_ms);
        p.start_ms = (uint64_t)((shm_monotonic_ns() + p.offset_ns) / 1000000);
        p.deadline = p.start_ms + 86400 * 1000;
        if (shm_pub_switch(pub, &p) < 0 || http_start(&cfg, pub, &srv) < 0)
                abort();
        struct http_snapshot *snap = http_snapshot_new();
        *snap = (struct http_snapshot){.layout = cfg.layout,
                                       .layout_ready = true,
                                       .worker = 5,
                                       .lease = "held",
                                       .store_reachable = true,
                                       .offset_ns = p.offset_ns};
        http_publish(srv, snap);
        port = http_port(srv);
        token.secret = strdup("fuzz-token");
        snprintf(token.name, sizeof(token.name), "fuzz");
        token.requests = (struct rate){20000};
        atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!srv)
                setup();
        if (size < 1)
                return 0;
        shm_pub_heartbeat(pub); /* snowidd's tick: the daemon is alive */
        /* read by the server's thread only while a request of ours is in it */
        cfg.http_tokens = data[0] & 1 ? &token : NULL;
        cfg.n_http_tokens = data[0] & 1;

        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        /* closed with a reset: no TIME_WAIT piling up over many thousand runs,
         * and the server drops a connection still waiting for a body at once */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
                abort();
        /* a full accept queue refuses for a moment; a server that stopped
         * accepting for good fails the run after a second */
        int tries = 0;
        while (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                /* interrupted (libFuzzer's timer): the connection goes on */
                if (errno == EISCONN)
                        break;
                if ((errno != ECONNREFUSED && errno != EAGAIN && errno != EINTR &&
                     errno != EALREADY) ||
                    ++tries > 100) {
                        perror("fuzz-http: connect");
                        abort();
                }
                usleep(10000);
        }
        static const char last[] = "\r\n\r\nGET /healthz HTTP/1.1\r\nHost: f\r\n"
                                   "Connection: close\r\n\r\n";
        /* one write: two would wait on each other (Nagle, delayed ACK) */
        size_t len = size - 1 + sizeof(last) - 1;
        char *req = malloc(len);
        memcpy(req, data + 1, size - 1);
        memcpy(req + size - 1, last, sizeof(last) - 1);
        for (size_t off = 0; off < len;) {
                ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
                if (n <= 0)
                        break; /* the server closed: it may, on a bad request */
                off += (size_t)n;
        }
        free(req);
        char buf[65536];
        size_t got = 0;
        /* until the server closes, or 50 ms of silence (a body it still
         * waits for has swallowed the last request) */
        for (struct pollfd pfd = {.fd = fd, .events = POLLIN}; poll(&pfd, 1, 50) > 0;) {
                ssize_t n = recv(fd, got < sizeof(buf) ? buf + got : buf,
                                 got < sizeof(buf) ? sizeof(buf) - got : sizeof(buf), 0);
                if (n <= 0)
                        break;
                if (got < sizeof(buf))
                        got += (size_t)n;
        }
        close(fd);
        /* every response of a connection: "HTTP/1.x NNN" */
        for (char *p = buf; got >= 12 && (p = memmem(p, got - (size_t)(p - buf), "HTTP/1.", 7));
             p += 7) {
                if ((size_t)(p - buf) + 12 > got)
                        break;
                int code = atoi(p + 9);
                if (code == 500) {
                        fprintf(stderr, "fuzz-http: answer %d\n", code);
                        abort();
                }
        }
        cfg.http_tokens = NULL;
        cfg.n_http_tokens = 0;
        return 0;
}
