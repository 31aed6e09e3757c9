/* SPDX-License-Identifier: MIT */
/* snowidd: leases a worker number from etcd and publishes it to the segment. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "holder.h"
#include "http.h"
#include "log.h"
#include "publish.h"

struct app {
        struct holder *holder;
        struct http_server *http;
        uint64_t started_ms;
};

/* Publishes what the loop knows to the HTTP threads (RCU). */
static void on_holder_change(struct holder *h, void *userdata)
{
        struct app *app = userdata;
        struct http_snapshot *snap = http_snapshot_new();
        if (snap) {
                *snap = (struct http_snapshot){
                        .layout = h->layout,
                        .layout_ready = h->layout_ready,
                        .worker = h->cur.state == H_HELD ? h->cur.worker : -1,
                        .lease = h->cur.state == H_HELD   ? "held"
                                 : h->cur.state == H_LOST ? "lost"
                                                          : "claiming",
                        .etcd_reachable = h->etcd_reachable,
                        .halted = holder_halt_name(h->halted),
                        .offset_ns = h->clock.offset_ns,
                        .mono_started_ms = app->started_ms,
                        .holder = h->stats,
                        .etcd = *etcd_stats(h->etcd),
                };
                http_publish(app->http, snap);
        }
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
        (void)s;
        log_info("Got %s", strsignal((int)si->ssi_signo));
        holder_stop(userdata);
        return 0;
}

int main(int argc, char **argv)
{
        struct settings cfg;
        struct holder holder;
        struct shm_pub *pub = NULL;
        sd_event *event = NULL;
        int r;

        log_setup();
        r = settings_load(&cfg, argc, argv);
        if (r) {
                settings_free(&cfg);
                return r == 1 ? EXIT_SUCCESS : r;
        }
        log_max_level = cfg.log_level;

        r = shm_pub_open(cfg.instance, cfg.gid, &pub);
        if (r == -EBUSY) {
                log_error("Another snowidd is running for instance '%s'", cfg.instance);
                settings_free(&cfg);
                return EXIT_FAILURE;
        }
        if (r < 0) {
                log_error_errno(r, "Cannot create the segment of instance '%s': %m", cfg.instance);
                settings_free(&cfg);
                return EXIT_FAILURE;
        }
        log_info("Segment /snowid.%s.* %s", cfg.instance,
                 pub->reused ? "found valid: clients go on with it until the switch" : "created");

        curl_global_init(CURL_GLOBAL_DEFAULT);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = sd_event_default(&event);
        if (r >= 0)
                r = sd_event_set_watchdog(event, 1);
        if (r >= 0)
                r = holder_start(&holder, event, &cfg, pub);
        struct app app = {.holder = &holder, .started_ms = (uint64_t)shm_monotonic_ns() / 1000000};
        if (r >= 0 && cfg.http) {
                r = http_start(&cfg, &app.http);
                if (r < 0)
                        log_error_errno(r, "Cannot serve HTTP on %s: %m", cfg.http);
                else
                        log_info("Serving HTTP on %s", cfg.http);
                if (r >= 0) {
                        holder.on_change = on_holder_change;
                        holder.on_change_userdata = &app;
                        on_holder_change(&holder, &app);
                }
        }
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, on_signal, &holder);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, on_signal, &holder);
        if (r < 0) {
                log_error_errno(r, "Cannot start: %m");
                r = EXIT_FAILURE;
        } else {
                r = sd_event_loop(event);
                if (r < 0) {
                        log_error_errno(r, "Event loop failed: %m");
                        r = EXIT_FAILURE;
                } else
                        r = holder.exit_code;
        }
        http_stop(app.http);
        holder_free(&holder);
        sd_event_unref(event);
        shm_pub_close(pub);
        curl_global_cleanup();
        settings_free(&cfg);
        return r;
}
