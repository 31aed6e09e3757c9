/* SPDX-License-Identifier: MIT */
/*
 * etcd's own words for a refusal: libcurl's error classes (a TLS failure is
 * a setting, a reset is an outage), the classes' names, and what to set to
 * mend each.  Pure: the unit tests feed them etcd's and curl's answers.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "etcd.h"

enum store_err etcd_curl_err(int curl_code, const char *errbuf)
{
        switch (curl_code) {
        case CURLE_PEER_FAILED_VERIFICATION: /* not signed by etcd-cacert, or the wrong name */
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
                return STORE_ERR_TLS;
        case CURLE_SSL_CERTPROBLEM: /* etcd-cert or etcd-key unusable */
                return STORE_ERR_CERT;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
                /* etcd's TLS alert about our certificate (missing, or not
                 * signed by a CA it trusts): with TLS 1.3 it comes after the
                 * handshake, on the first read.  Other handshake failures may
                 * be a member going away: an outage. */
                if (errbuf && strstr(errbuf, "alert") &&
                    (strstr(errbuf, "certificate") || strstr(errbuf, "unknown ca")))
                        return STORE_ERR_CERT;
                return STORE_ERR_NONE;
        default:
                return STORE_ERR_NONE;
        }
}

const char *etcd_err_name(enum store_err err)
{
        static const char *const names[STORE_ERR_MAX_] = {
                [STORE_ERR_AUTH] = "etcd-auth",
                [STORE_ERR_PERMISSION] = "etcd-permission",
                [STORE_ERR_TLS] = "etcd-tls",
                [STORE_ERR_CERT] = "etcd-cert",
        };
        return err > STORE_ERR_NONE && err < STORE_ERR_MAX_ ? names[err] : NULL;
}

void etcd_refusal_hint(const struct settings *c, enum store_err err, const char *prefix, char *buf,
                       size_t size)
{
        const char *user = c->user ? c->user : "(none: etcd-user is not set)";

        switch (err) {
        case STORE_ERR_AUTH:
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
        case STORE_ERR_PERMISSION:
                snprintf(buf, size,
                         "etcd user %s needs a role with readwrite on the prefix %s "
                         "(etcdctl role grant-permission ROLE readwrite %s --prefix; "
                         "etcdctl user grant-role USER ROLE)",
                         user, prefix, prefix);
                break;
        case STORE_ERR_TLS:
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

void etcd_full_text(const char *member, const char *endpoint, int64_t left_ms, char *buf,
                    size_t size)
{
        (void)endpoint;
        snprintf(buf, size,
                 "etcd is full: its NOSPACE alarm is raised%s%s and it refuses every write, so "
                 "no mark is extended and no number claimed; IDs stop at the deadline, %" PRId64
                 " ms from now, on every host. Compact etcd's history (etcdctl compact "
                 "<revision>), defragment each member (etcdctl defrag), then disarm the alarm "
                 "(etcdctl alarm disarm); snowidd goes on by itself. Keep auto-compaction on "
                 "(docs/etcd.md)",
                 member ? " on member " : "", member ? member : "", left_ms);
}
