/* SPDX-License-Identifier: MIT */
/*
 * The store's answers, apart from how they travel: base64 and the integers
 * sent as strings, an answer (status, body) turned into a store_reply, and
 * the revisions and cluster ID of its header, as etcd's gateway answers;
 * and the revisions seen, which PostgreSQL's backend notes from its rows
 * too (store_history_seen()).  The fuzz targets feed these the same way the
 * backend does.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "store.h"

/* ---- base64 ---- */

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const void *data, size_t len)
{
        const unsigned char *p = data;
        char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < len)
                        v |= p[i + 2];
                *o++ = b64_alphabet[(v >> 18) & 63];
                *o++ = b64_alphabet[(v >> 12) & 63];
                *o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
                *o++ = i + 2 < len ? b64_alphabet[v & 63] : '=';
        }
        *o = 0;
        return out;
}

char *b64_decode(const char *s, size_t *ret_len)
{
        size_t n = strlen(s);
        if (n % 4)
                return NULL;
        char *out = malloc(n / 4 * 3 + 1);
        size_t o = 0;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 4) {
                uint32_t v = 0;
                int pad = 0;
                for (int k = 0; k < 4; k++) {
                        const char *c = s[i + k] ? strchr(b64_alphabet, s[i + k]) : NULL;
                        if (s[i + k] == '=' && i + 4 == n && k >= 2 &&
                            (k == 3 || s[i + 3] == '=')) {
                                pad++;
                                v <<= 6;
                        } else if (c && !pad) {
                                v = (v << 6) | (uint32_t)(c - b64_alphabet);
                        } else {
                                free(out);
                                return NULL;
                        }
                }
                out[o++] = (char)(v >> 16);
                if (pad < 2)
                        out[o++] = (char)(v >> 8);
                if (pad < 1)
                        out[o++] = (char)v;
        }
        out[o] = 0;
        *ret_len = o;
        return out;
}

json_t *store_b64(const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= sizeof(buf))
                return NULL;
        char *b = b64_encode(buf, (size_t)n);
        json_t *j = b ? json_string(b) : NULL;
        free(b);
        return j;
}

int store_int64(const json_t *obj, const char *field, int64_t *ret)
{
        json_t *v = json_object_get(obj, field);
        if (!v) {
                *ret = 0;
                return 0;
        }
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v))
                return -EBADMSG;
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (!*s || *end || errno)
                return -EBADMSG;
        *ret = x;
        return 0;
}

/* The first line of a body that is not JSON (the gateway's own refusals are
 * plain text), printable, into r->text. */
static const char *plain_text(struct store_reply *r, const char *body, size_t len)
{
        size_t n = 0;
        while (n < len && n < sizeof(r->text) - 1 && body[n] != '\n' && body[n] != '\r') {
                unsigned char c = (unsigned char)body[n];
                r->text[n++] = c < 0x20 || c > 0x7e ? '?' : (char)c;
        }
        r->text[n] = 0;
        return n ? r->text : NULL;
}

/* etcd says why in its message: the gateway turns gRPC's codes into HTTP
 * statuses (InvalidArgument 400 for a refused password or a missing user,
 * PermissionDenied 403), and refuses a client certificate with a CommonName
 * while auth is on in plain text, before etcd itself sees the request. */
static enum store_err http_err(long http, const char *msg, bool json)
{
        if (http == 403)
                return STORE_ERR_PERMISSION;
        if (http == 200 || !msg)
                return STORE_ERR_NONE;
        if (strstr(msg, "permission denied"))
                return STORE_ERR_PERMISSION;
        if (strstr(msg, "authentication failed") || strstr(msg, "user name is empty") ||
            strstr(msg, "authentication is not enabled") || strstr(msg, "user name not found"))
                return STORE_ERR_AUTH;
        if (!json && http >= 400 && http < 500 &&
            (strstr(msg, "CommonName") || strstr(msg, "certificate")))
                return STORE_ERR_CERT;
        return STORE_ERR_NONE;
}

void store_reply_parse(struct store_reply *r, long http, const char *body, size_t len)
{
        r->answered = true;
        r->http = http;
        r->json = body ? json_loadb(body, len, 0, NULL) : NULL;
        if (http != 200) {
                json_t *m = json_object_get(r->json, "message");
                const char *text = !r->json && body ? plain_text(r, body, len) : NULL;
                r->error = json_is_string(m) ? json_string_value(m)
                           : text            ? text
                                             : "the store answered an error";
                /* gRPC's RESOURCE_EXHAUSTED through the gateway: HTTP 429 */
                r->nospace = json_is_string(m) && strstr(json_string_value(m), "space exceeded");
                r->err = http_err(http, json_is_string(m) ? json_string_value(m) : text, !text);
        } else if (!r->json || !json_is_object(r->json)) {
                r->error = "the store's answer is not a JSON object";
        }
}

void store_history_note(struct store_history *hist, int64_t rev_at_send, unsigned gen_at_send,
                        bool linearizable, struct store_reply *r)
{
        json_t *hdr = json_object_get(r->json, "header");
        if (!hdr) /* a keepalive's answer is a stream's message: {"result": {"header"...}} */
                hdr = json_object_get(json_object_get(r->json, "result"), "header");
        const char *cid = json_string_value(json_object_get(hdr, "cluster_id"));
        char *end;
        if (store_int64(hdr, "revision", &r->revision) < 0 || r->revision <= 0 || !cid)
                return; /* no header to go by */
        errno = 0;
        r->cluster_id = strtoull(cid, &end, 10);
        if (errno || end == cid || *end)
                r->cluster_id = 0;
        store_history_seen(hist, rev_at_send, gen_at_send, linearizable, r);
}

void store_history_seen(struct store_history *hist, int64_t rev_at_send, unsigned gen_at_send,
                        bool linearizable, struct store_reply *r)
{
        if (gen_at_send != hist->gen)
                return; /* sent before a reset: of the history that was left behind */
        switch (rule5_answer(hist->cluster_id, r->cluster_id, rev_at_send, r->revision,
                             linearizable)) {
        case RULE5_WENT_BACK:
                hist->went_back = true;
                break;
        case RULE5_BEHIND:
                r->behind = true;
                break;
        case RULE5_AS_SEEN:
                break;
        }
        if (!hist->cluster_id)
                hist->cluster_id = r->cluster_id;
        if (linearizable && !hist->went_back && r->revision > hist->max_rev)
                hist->max_rev = r->revision;
        r->went_back = hist->went_back;
}

struct store_answer store_answer_of(const struct store_reply *r)
{
        return (struct store_answer){
                .answered = r->answered,
                .status = r->http,
                .error = r->error,
                .tag = r->tag,
                .revision = r->revision,
                .cluster_id = r->cluster_id,
                .went_back = r->went_back,
                .behind = r->behind,
                .nospace = r->nospace,
                .err = r->err,
                .kv = r->kv,
        };
}

void store_history_forget(struct store_history *hist)
{
        *hist = (struct store_history){.gen = hist->gen + 1};
}

void store_stats_count(struct store_stats *st, uint64_t usec, bool ok)
{
        static const uint64_t bounds_ms[] = {1, 2, 5, 10, 50, 100, 1000};
        st->requests++;
        st->failures += !ok;
        st->latency_sum_s += (double)usec / 1e6;
        for (size_t i = 0; i < 7; i++)
                if (usec <= bounds_ms[i] * 1000)
                        st->latency_le[i]++;
        st->latency_le[7]++;
}
