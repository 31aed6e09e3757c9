/* SPDX-License-Identifier: MIT */
/*
 * etcd refusing snowidd for a reason that retrying cannot mend: a wrong
 * password, a user without a role on the cluster's keys, a certificate that
 * fails either way (docs/etcd.md, "When etcd refuses snowidd").  Said once,
 * in etcd's or TLS's own words with the setting to check; fatal before the
 * first READY (nothing was ever served, and systemd does not restart into
 * exit 78); after it, reported on STATUS=, /healthz, /v1/status and in
 * <runtime-dir>/<instance>.etcd-error for `snowid status`, while the etcd
 * client tries again after 1 s, doubling up to 30 s.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "holder.h"
#include "log.h"

static void hint(const struct holder *h, enum etcd_err err, char *buf, size_t size)
{
        const struct settings *c = h->cfg;
        const char *user = c->user ? c->user : "(none: etcd-user is not set)";

        switch (err) {
        case ETCD_ERR_AUTH:
                if (!c->user)
                        snprintf(buf, size,
                                 "etcd has authentication on: set etcd-user and "
                                 "etcd-password-file");
                else
                        snprintf(buf, size,
                                 "check etcd-user '%s' and the password in "
                                 "etcd-password-file %s; the user must exist in etcd, "
                                 "and etcd's authentication be on",
                                 c->user, c->password_file);
                break;
        case ETCD_ERR_PERMISSION:
                snprintf(buf, size,
                         "etcd user %s needs a role with readwrite on the prefix %s "
                         "(etcdctl role grant-permission ROLE readwrite %s --prefix; "
                         "etcdctl user grant-role USER ROLE)",
                         user, h->prefix, h->prefix);
                break;
        case ETCD_ERR_TLS:
                snprintf(buf, size,
                         "check etcd-cacert (%s): it must hold the CA that signed "
                         "etcd's certificate, and that certificate must name the "
                         "host of the etcd URL",
                         c->cacert ? c->cacert : "not set: the system's CAs");
                break;
        default:
                if (!c->cert) {
                        snprintf(buf, size,
                                 "etcd wants a client certificate (its "
                                 "--client-cert-auth): set etcd-cert and etcd-key to "
                                 "one signed by a CA it trusts");
                        break;
                }
                snprintf(buf, size,
                         "check etcd-cert (%s) and etcd-key (%s): etcd must trust "
                         "the CA that signed them (its --trusted-ca-file); with "
                         "etcd's authentication on, its HTTP gateway refuses a client "
                         "certificate that has a CommonName: use one without a CN, "
                         "and etcd-user",
                         c->cert, c->key ? c->key : "not set");
                break;
        }
}

/* <runtime-dir>/<instance>.etcd-error: "class<TAB>message", for `snowid
 * status`; absent when etcd takes snowidd's requests. */
void holder_refusal_file(const struct holder *h)
{
        char path[4096], tmp[4096];
        snprintf(path, sizeof(path), "%s/%s.etcd-error", h->cfg->runtime_dir, h->cfg->instance);
        if (h->etcd_err == ETCD_ERR_NONE) {
                unlink(path);
                return;
        }
        snprintf(tmp, sizeof(tmp), "%s/.%s.etcd-error.new", h->cfg->runtime_dir, h->cfg->instance);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return;
        int ok = dprintf(fd, "%s\t%s\n", etcd_err_name(h->etcd_err), h->etcd_err_message) > 0;
        if (close(fd) < 0 || !ok || rename(tmp, path) < 0)
                unlink(tmp);
}

void holder_etcd_refused(void *userdata, const struct etcd_problem *p)
{
        struct holder *h = userdata;
        char why[768];

        if (p->err == ETCD_ERR_NONE) {
                if (h->etcd_err != ETCD_ERR_NONE)
                        log_notice("etcd takes snowidd's requests again (%s is over)",
                                   etcd_err_name(h->etcd_err));
                h->etcd_err = ETCD_ERR_NONE;
                h->etcd_err_message[0] = 0;
                holder_refusal_file(h);
                holder_update_status(h);
                return;
        }
        /* auth and roles are the cluster's (every member says the same);
         * a certificate may be wrong on one member only, or etcd may be in
         * the middle of rotating its own: every member, three times in a
         * row (about 3 s with the hold doubling from 1 s) */
        bool fatal = !h->ready_sent && !h->stopping &&
                     (p->err == ETCD_ERR_AUTH || p->err == ETCD_ERR_PERMISSION ||
                      (p->members >= h->cfg->n_etcd && p->in_row >= 3));
        bool news = p->err != h->etcd_err;
        if (news) {
                hint(h, p->err, why, sizeof(why));
                log_error("etcd at %s refuses snowidd (%s): %s. To fix: %s. %s", p->endpoint,
                          etcd_err_name(p->err), p->message, why,
                          fatal           ? "Exiting: retrying cannot help"
                          : h->ready_sent ? "IDs go on until the deadline; trying again, up to "
                                            "30 s apart"
                                          : "Trying every member again before giving up");
                h->stats.etcd_refusals++;
        } else if (fatal) {
                log_error("etcd keeps refusing (%s), every member, %u times in a row: exiting",
                          etcd_err_name(p->err), p->in_row);
        }
        /* one line for STATUS=, the status file and JSON */
        char msg[sizeof(h->etcd_err_message)];
        size_t i = 0;
        for (; p->message[i] && i < sizeof(msg) - 1; i++) {
                unsigned char ch = (unsigned char)p->message[i];
                msg[i] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
        }
        msg[i] = 0;
        bool changed = news || strcmp(msg, h->etcd_err_message);
        h->etcd_err = p->err;
        memcpy(h->etcd_err_message, msg, sizeof(msg));
        if (changed && !fatal) { /* for `snowid status`: nothing to show once exited */
                holder_refusal_file(h);
                holder_update_status(h);
        }
        if (fatal)
                holder_fatal(h, EX_CONFIG_);
}
