/* SPDX-License-Identifier: MIT */
/*
 * The store refusing snowidd for a reason that retrying cannot mend: a
 * wrong password, a user without rights on the cluster's keys, a
 * certificate that fails either way (docs/etcd.md, "When etcd refuses
 * snowidd"; docs/postgres.md).  Said once, in the store's or TLS's own
 * words with the setting to check (the backend's hint); fatal before the
 * first READY (nothing was ever served, and systemd does not restart into
 * exit 78); after it, reported on STATUS=, /healthz, /v1/status and in
 * <runtime-dir>/<instance>.store-error for `snowid status`, while the
 * store's client tries again after 1 s, doubling up to 30 s.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "refused.h"

/* <runtime-dir>/<instance>.store-error: "class<TAB>message", for `snowid
 * status`; absent when the store takes snowidd's requests. */
void refused_file(const struct holder *h)
{
        char path[4096], tmp[4096];
        snprintf(path, sizeof(path), "%s/%s.store-error", h->cfg->runtime_dir, h->cfg->instance);
        if (h->store_err == STORE_ERR_NONE) {
                unlink(path);
                return;
        }
        snprintf(tmp, sizeof(tmp), "%s/.%s.store-error.new", h->cfg->runtime_dir, h->cfg->instance);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return;
        int ok = dprintf(fd, "%s\t%s\n", store_err_name(h->store, h->store_err),
                         h->store_err_message) > 0;
        if (close(fd) < 0 || !ok || rename(tmp, path) < 0)
                unlink(tmp);
}

void refused_problem(void *userdata, const struct store_problem *p)
{
        struct holder *h = userdata;
        char why[768];

        if (p->err == STORE_ERR_NONE) {
                if (h->store_err != STORE_ERR_NONE)
                        log_notice("%s takes snowidd's requests again (%s is over)",
                                   store_title(h->store), store_err_name(h->store, h->store_err));
                h->store_err = STORE_ERR_NONE;
                h->store_err_message[0] = 0;
                refused_file(h);
                holder_update_status(h);
                return;
        }
        /* auth and roles are the cluster's (every member says the same);
         * a certificate may be wrong on one member only, or the store may be
         * in the middle of rotating its own: every member, three times in a
         * row (about 3 s with the hold doubling from 1 s) */
        bool fatal = !h->ready_sent && !h->stopping &&
                     (p->err == STORE_ERR_AUTH || p->err == STORE_ERR_PERMISSION ||
                      (p->members >= store_members(h->store, h->cfg) && p->in_row >= 3));
        bool news = p->err != h->store_err;
        if (news) {
                store_refusal_hint(h->store, h->cfg, p->err, h->prefix, why, sizeof(why));
                log_error("%s at %s refuses snowidd (%s): %s. To fix: %s. %s",
                          store_title(h->store), p->endpoint, store_err_name(h->store, p->err),
                          p->message, why,
                          fatal           ? "Exiting: retrying cannot help"
                          : h->ready_sent ? "IDs go on until the deadline; trying again, up to "
                                            "30 s apart"
                                          : "Trying every member again before giving up");
                h->stats.store_refusals++;
        } else if (fatal) {
                log_error("%s keeps refusing (%s), every member, %u times in a row: exiting",
                          store_title(h->store), store_err_name(h->store, p->err), p->in_row);
        }
        /* one line for STATUS=, the status file and JSON */
        char msg[sizeof(h->store_err_message)];
        size_t i = 0;
        for (; p->message[i] && i < sizeof(msg) - 1; i++) {
                unsigned char ch = (unsigned char)p->message[i];
                msg[i] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
        }
        msg[i] = 0;
        bool changed = news || strcmp(msg, h->store_err_message);
        h->store_err = p->err;
        memcpy(h->store_err_message, msg, sizeof(msg));
        if (changed && !fatal) { /* for `snowid status`: nothing to show once exited */
                refused_file(h);
                holder_update_status(h);
        }
        if (fatal)
                holder_fatal(h, EX_CONFIG_);
}
