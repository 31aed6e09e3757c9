/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "values.h"
#include "verbs.h"

int parse_mark(const char *v, size_t len, uint64_t *ret)
{
        if (len != 20)
                return -EBADMSG;
        uint64_t x = 0;
        for (size_t i = 0; i < 20; i++) {
                if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10)
                        return -EBADMSG;
                x = x * 10 + (uint64_t)(v[i] - '0');
        }
        *ret = x;
        return 0;
}

int fence_parse(const char *v, size_t len, struct cluster_ident *c)
{
        json_error_t err;
        const char *token = NULL, *cid = NULL;
        json_int_t above = -1, era = -1;
        int made = 0;
        uint64_t cluster_id = 0;
        if (len >= FENCE_MAX)
                return -EBADMSG;
        json_t *j = json_loadb(v, len, 0, &err);
        int bad = !j ||
                  json_unpack(j, "{s:s, s:I, s:I, s?b, s?s}", "token", &token, "era", &era,
                              "claims_above", &above, "made", &made, "cluster_id", &cid) < 0 ||
                  above < 0 || era < 0 || strlen(token) != 32 ||
                  strspn(token, "0123456789abcdef") != 32;
        if (!bad && cid) {
                char *end;
                errno = 0;
                cluster_id = strtoull(cid, &end, 10);
                bad = !*cid || *end || errno || strspn(cid, "0123456789") != strlen(cid) ||
                      !cluster_id;
        }
        if (!bad) {
                c->cluster_id = cluster_id;
                c->made = made;
                memcpy(c->fence, v, len);
                c->fence_len = len;
                memcpy(c->token, token, 33);
                c->claims_above = (uint64_t)above;
                c->era = (uint64_t)era;
        }
        json_decref(j);
        return bad ? -EBADMSG : 0;
}

int fence_make(uint64_t claims_above, uint64_t after, uint64_t cluster_id, bool made,
               struct cluster_ident *c)
{
        uint64_t t[2];
        struct timespec ts;
        if (getrandom(t, sizeof(t), 0) != sizeof(t))
                return -errno;
        /* eras only grow, as long as the clocks of the hosts that fence
         * roughly agree; a daemon that sees an older era halts (safe) */
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t era = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        if (era <= after)
                era = after + 1;
        int n = snprintf(c->fence, sizeof(c->fence),
                         "{\"token\":\"%016" PRIx64 "%016" PRIx64 "\",\"era\":%" PRIu64
                         ",\"claims_above\":%" PRIu64 "%s%s",
                         t[0], t[1], era, claims_above, made ? ",\"made\":true" : "",
                         cluster_id ? ",\"cluster_id\":\"" : "}");
        if (cluster_id)
                n += snprintf(c->fence + n, sizeof(c->fence) - (size_t)n, "%" PRIu64 "\"}",
                              cluster_id);
        c->fence_len = (size_t)n;
        return fence_parse(c->fence, c->fence_len, c);
}

char *witness_text(const struct store_witness *w)
{
        json_t *v = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "host", w->host, "instance",
                              w->instance, "era", (json_int_t)w->era, "claims_above",
                              (json_int_t)w->claims_above, "deadline", (json_int_t)w->deadline,
                              "wall_ms", (json_int_t)w->wall_ms);
        char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
        json_decref(v);
        return text;
}
