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
#include "log.h"
#include "publish.h"

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
        holder_free(&holder);
        sd_event_unref(event);
        shm_pub_close(pub);
        curl_global_cleanup();
        settings_free(&cfg);
        return r;
}
