/* SPDX-License-Identifier: MIT */
/*
 * POST /v1/ids (IDs or UUIDv7s, as JSON, text or bytes, charged to the
 * client's rates first) and GET /v1/ids/{id} (an ID or a UUIDv7 decoded).
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-internal.h"
#include "uuid-text.h"

/* ---- helpers ---- */

static int parse_u64_strict(const char *s, size_t len, uint64_t *ret)
{
        uint64_t v = 0;
        if (len == 0 || len > 20)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                unsigned d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static char *u64_to(char *p, uint64_t v)
{
        char tmp[24];
        int n = 0;
        do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        while (n)
                *p++ = tmp[--n];
        return p;
}

static bool accepts(const char *accept, const char *type)
{
        return accept && strstr(accept, type);
}

/* ---- POST /v1/ids ---- */

enum format { F_JSON, F_TEXT, F_BINARY };

/* Which form a request asks for: ?format=int64|uuid7, else a format
 * parameter on the Accept media type ("Accept: text/plain; format=uuid7");
 * the 64-bit ID by default. */
static int id_form(const char *qformat, const char *accept, bool *ret_uuid)
{
        if (qformat) {
                if (strcmp(qformat, "uuid7") && strcmp(qformat, "int64"))
                        return -EINVAL;
                *ret_uuid = !strcmp(qformat, "uuid7");
                return 0;
        }
        /* media type parameter names are case-insensitive (RFC 9110 8.3.1) */
        *ret_uuid = accept && strcasestr(accept, "format=uuid7");
        return 0;
}

static enum MHD_Result none_issued(struct http_server *srv, struct MHD_Connection *c, int r)
{
        return http_fail(srv, c, r == -EAGAIN ? 503 : 500,
                         r == -EAGAIN ? "no ID can be issued now (no lease, or past the deadline)"
                                      : "the segment is damaged");
}

/* Out of memory after the IDs were charged: none reach the client, so the
 * charge is given back. */
static enum MHD_Result oom_refund(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, uint64_t count)
{
        http_refund_ids(srv, q, count);
        return http_fail(srv, c, 500, "out of memory");
}

/* count values as JSON strings in {"ids": [...]} or one a line, put(p,
 * items, i) writing the i-th (at most max_len characters) and returning the
 * end; on out of memory the IDs charged are given back */
static enum MHD_Result reply_list(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, enum format fmt, uint64_t count,
                                  size_t max_len, char *(*put)(char *, const void *, uint64_t),
                                  const void *items)
{
        char *out = malloc(count * (max_len + 3) + 16), *p = out;
        if (!out)
                return oom_refund(srv, c, q, count);
        if (fmt == F_JSON)
                p = stpcpy(p, "{\"ids\":[");
        for (uint64_t i = 0; i < count; i++) {
                if (fmt == F_JSON) {
                        if (i)
                                *p++ = ',';
                        *p++ = '"';
                        p = put(p, items, i);
                        *p++ = '"';
                } else {
                        p = put(p, items, i);
                        *p++ = '\n';
                }
        }
        if (fmt == F_JSON)
                p = stpcpy(p, "]}");
        return http_reply(srv, c, 200,
                          fmt == F_JSON ? "application/json" : "text/plain; charset=utf-8", out,
                          (size_t)(p - out), NULL, NULL);
}

static char *put_uuid(char *p, const void *items, uint64_t i)
{
        return uuid_to_text(((const uint8_t(*)[16])items)[i], p);
}

static char *put_id(char *p, const void *items, uint64_t i)
{
        return u64_to(p, ((const uint64_t *)items)[i]);
}

/* count UUIDv7s, in chunks of at most 2^seq_bits (one atomic operation each),
 * as 36-character strings or 16 bytes each */
static enum MHD_Result take_uuids(struct http_server *srv, struct MHD_Connection *c,
                                  struct request *q, uint64_t count, enum format fmt,
                                  uint64_t chunk)
{
        uint8_t(*u)[16] = malloc(count * 16);
        if (!u)
                return oom_refund(srv, c, q, count);
        for (uint64_t done = 0; done < count;) {
                size_t k = (size_t)(count - done < chunk ? count - done : chunk);
                int r = snowid_next_uuid7_batch(srv->ids, u + done, k);
                if (r < 0) {
                        free(u);
                        http_refund_ids(srv, q, count);
                        return none_issued(srv, c, r);
                }
                done += k;
        }
        fetch_add_relaxed(srv->ids_served, count);
        fetch_add_relaxed(q->token->n_ids, count);
        if (fmt == F_BINARY)
                return http_reply(srv, c, 200, "application/octet-stream", (char *)u, count * 16,
                                  NULL, NULL);
        enum MHD_Result ret = reply_list(srv, c, q, fmt, count, UUID_TEXT_LEN, put_uuid, u);
        free(u);
        return ret;
}

enum MHD_Result http_take_ids(struct http_server *srv, struct MHD_Connection *c, struct request *q)
{
        const char *qcount = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "count");
        const char *qformat = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format");
        const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        uint64_t count = 1;
        bool uuid;

        if (q->too_large)
                return http_fail(srv, c, 413, "the body is larger than 4096 bytes");
        if (id_form(qformat, accept, &uuid) < 0)
                return http_fail(srv, c, 400, "format must be int64 or uuid7");
        if (qcount) {
                if (parse_u64_strict(qcount, strlen(qcount), &count) < 0)
                        return http_fail(srv, c, 400, "count must be a positive integer");
        } else if (q->len > 0) {
                if (!ctype || strncasecmp(ctype, "application/json", 16))
                        return http_fail(srv, c, 415, "the body must be application/json");
                json_error_t err;
                json_t *j = json_loadb(q->body, q->len, 0, &err), *v;
                if (!j)
                        return http_fail(srv, c, 400, "the body is not valid JSON");
                v = json_is_object(j) ? json_object_get(j, "count") : NULL;
                if (!json_is_object(j) || (v && !json_is_integer(v)) ||
                    (v && json_integer_value(v) < 0)) {
                        json_decref(j);
                        return http_fail(srv, c, 400, "count must be a positive integer");
                }
                count = v ? (uint64_t)json_integer_value(v) : 1;
                json_decref(j);
        }
        if (count == 0 || count > srv->cfg->http_max_count) {
                char msg[96];
                snprintf(msg, sizeof(msg), "count must be 1 to %u", srv->cfg->http_max_count);
                return http_fail(srv, c, 400, msg);
        }
        enum format fmt = F_JSON;
        if (accepts(accept, "application/octet-stream"))
                fmt = F_BINARY;
        else if (accepts(accept, "text/plain"))
                fmt = F_TEXT;
        else if (accept && *accept && !accepts(accept, "application/json") &&
                 !accepts(accept, "*/*") && !accepts(accept, "application/*"))
                return http_fail(srv, c, 406,
                                 "IDs come as application/json, text/plain or "
                                 "application/octet-stream");

        const char *by;
        int64_t wait;
        if (http_charge_ids(srv, q, count, &by, &wait) < 0)
                return http_too_many(srv, c, by, "ids", wait);
        snowid_layout l;
        int r = snowid_get_layout(srv->ids, &l);
        uint64_t chunk = r < 0 ? 1 : UINT64_C(1) << l.seq_bits;
        if (uuid && r < 0)
                http_refund_ids(srv, q, count);
        if (uuid)
                return r < 0 ? none_issued(srv, c, r) : take_uuids(srv, c, q, count, fmt, chunk);
        uint64_t *ids = malloc(count * sizeof(uint64_t));
        if (!ids)
                return oom_refund(srv, c, q, count);
        for (uint64_t done = 0; r >= 0 && done < count;) {
                size_t k = (size_t)(count - done < chunk ? count - done : chunk);
                r = snowid_next_batch(srv->ids, ids + done, k);
                done += k;
        }
        if (r < 0) {
                free(ids);
                http_refund_ids(srv, q, count);
                return none_issued(srv, c, r);
        }
        fetch_add_relaxed(srv->ids_served, count);
        fetch_add_relaxed(q->token->n_ids, count);

        if (fmt == F_BINARY) {
                for (uint64_t i = 0; i < count; i++)
                        ids[i] = htobe64(ids[i]);
                return http_reply(srv, c, 200, "application/octet-stream", (char *)ids,
                                  count * sizeof(uint64_t), NULL, NULL);
        }
        enum MHD_Result ret = reply_list(srv, c, q, fmt, count, 20, put_id, ids);
        free(ids);
        return ret;
}

/* ---- GET /v1/ids/{id} ---- */

/* GET /v1/ids/{id}: a decimal 64-bit ID or a UUIDv7 (8-4-4-4-12 hex) */
enum MHD_Result http_decode_id(struct http_server *srv, struct MHD_Connection *c, const char *s)
{
        uint64_t id = 0;
        uint8_t u[16];
        snowid_layout l;
        snowid_parts p;
        char when[48], idbuf[UUID_TEXT_LEN + 1];
        size_t len = strlen(s);
        bool uuid = uuid_text_like(s, len);
        if (uuid ? uuid_from_text(s, len, u) < 0 : parse_u64_strict(s, len, &id) < 0)
                return http_fail(srv, c, 400,
                                 uuid ? "a UUID is 8-4-4-4-12 hex digits"
                                      : "an ID is a decimal number or a UUID");
        if (snowid_get_layout(srv->ids, &l) < 0)
                return http_fail(srv, c, 503, "no layout published yet");
        if (uuid ? snowid_decode_uuid7(&l, u, &p) < 0 : snowid_decode(&l, id, &p) < 0)
                return http_fail(srv, c, 400,
                                 uuid ? "not a UUIDv7 of this layout" : "not an ID of this layout");
        http_rfc3339(p.unix_ms, when, sizeof(when));
        if (uuid)
                uuid_to_text(u, idbuf); /* lowercase, as snowidd hands them out */
        else
                *u64_to(idbuf, id) = 0;
        return http_reply_json(srv, c, 200,
                               json_pack("{s:s, s:s, s:I, s:I, s:I}", "id", idbuf, "time", when,
                                         "unix_ms", (json_int_t)p.unix_ms, "worker",
                                         (json_int_t)p.worker, "sequence", (json_int_t)p.sequence),
                               NULL, NULL);
}
