/* SPDX-License-Identifier: MIT */
/*
 * etcd's v3 HTTP/JSON gateway, driven by libcurl's multi interface inside
 * the daemon's sd-event loop: nothing here blocks.  Every request has a
 * timeout; a transport failure or a 5xx moves on to the next endpoint.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "config.h"

struct etcd;

/* A failure that retrying cannot mend: a setting (or etcd's users and roles)
 * is wrong.  Anything else (no answer, a 5xx, a timeout) is an outage, and
 * is retried quietly.  docs/etcd.md says what each means. */
enum etcd_err {
        ETCD_ERR_NONE,
        ETCD_ERR_AUTH,       /* etcd refused the user or password, or wants a user */
        ETCD_ERR_PERMISSION, /* the user has no role on the cluster's keys */
        ETCD_ERR_TLS,        /* etcd's certificate failed verification */
        ETCD_ERR_CERT,       /* etcd (or its gateway) refused our client certificate */
        ETCD_ERR_MAX_,
};

struct etcd_reply {
        bool answered;     /* an HTTP answer came (any status) */
        long http;         /* its status, 0 if none */
        json_t *json;      /* the parsed body, NULL if none or not JSON */
        const char *error; /* a short description for logs when !ok */
        uint64_t tag;      /* what the caller passed to etcd_call() */
        uint64_t usec;     /* how long it took */
        /* header.revision and header.cluster_id of a kv answer (0 if none) */
        int64_t revision;
        uint64_t cluster_id;
        /* a kv answer whose revision is lower than one seen before this
         * request was sent, or any answer from a cluster other than the one
         * expected: etcd was restored or replaced.  Stays set on every later
         * answer until etcd_history_reset(). */
        bool went_back;
        /* a lease answer (not linearizable: a member that lags may give it)
         * whose revision is lower than the highest seen before it was sent:
         * worth a check */
        bool behind;
        /* etcd refused a write because its store is full (NOSPACE alarm) */
        bool nospace;
        enum etcd_err err;
        bool kv;        /* a /v3/kv/ request: the only ones etcd checks roles on */
        char text[160]; /* a plain-text error body, as etcd said it (r->error) */
};

static inline bool etcd_ok(const struct etcd_reply *r)
{
        return r->answered && r->http == 200 && r->json && json_is_object(r->json);
}

typedef void (*etcd_cb)(void *userdata, const struct etcd_reply *reply);

int etcd_new(sd_event *event, const struct settings *cfg, struct etcd **ret);
struct etcd *etcd_free(struct etcd *e);
/* POSTs body (taken over, freed here) to path; cb runs exactly once, from
 * the loop, unless the client is freed first. */
int etcd_call(struct etcd *e, const char *path, json_t *body, etcd_cb cb, void *userdata,
              uint64_t tag);
unsigned etcd_in_flight(const struct etcd *e);
/* Forgets the revisions and cluster seen: the next answer starts the
 * history again (after a new fence has been adopted). */
void etcd_history_reset(struct etcd *e);
/* The cluster every answer must come from (a fence names it); 0: the first
 * answer's. */
void etcd_expect_cluster(struct etcd *e, uint64_t cluster_id);
/* The revisions and cluster seen on kv and lease answers. */
struct etcd_history {
        int64_t max_rev;     /* the highest header.revision of a linearizable answer */
        uint64_t cluster_id; /* 0: none yet */
        bool went_back;      /* sticky until reset */
        unsigned gen;        /* resets so far: answers to requests sent before one are not noted */
};
/* Reads an answer's header (a keepalive's: result.header) into r->revision
 * and r->cluster_id.  Sets r->went_back if it is from another cluster, or
 * (linearizable: a kv answer) lower than rev_at_send (the history's max_rev
 * when the request was sent), or was already; sets r->behind for a lease
 * answer lower than rev_at_send. */
void etcd_history_note(struct etcd_history *hist, int64_t rev_at_send, unsigned gen_at_send,
                       bool linearizable, struct etcd_reply *r);
const char *etcd_endpoint(const struct etcd *e);

/* Counters for STATUS= and /metrics. */
struct etcd_stats {
        uint64_t requests, failures;
        uint64_t latency_le[8]; /* cumulative: <= 1, 2, 5, 10, 50, 100, 1000 ms, +Inf */
        double latency_sum_s;
};
const struct etcd_stats *etcd_stats(const struct etcd *e);

/* An HTTP answer (status, body) as a reply: the body parsed as JSON, and a
 * short error unless it is a 200 with a JSON object.  r->tag and r->usec are
 * left as they are; the caller frees r->json. */
void etcd_reply_parse(struct etcd_reply *r, long http, const char *body, size_t len);
/* The class of a transfer that got no answer: libcurl's code and the text
 * of its CURLOPT_ERRORBUFFER. */
enum etcd_err etcd_curl_err(int curl_code, const char *errbuf);
/* "etcd-auth", "etcd-permission", "etcd-tls", "etcd-cert"; NULL for none. */
const char *etcd_err_name(enum etcd_err err);

/* The last failure of a class above, kept until a request of its kind goes
 * through (for the permission class, a kv request: lease calls are not
 * checked against roles). */
struct etcd_problem {
        enum etcd_err err; /* ETCD_ERR_NONE: cleared */
        char message[256]; /* etcd's or TLS's own words */
        const char *endpoint;
        unsigned in_row;  /* failures of this class in a row */
        unsigned members; /* how many endpoints refused this way */
        unsigned hold_ms; /* requests it concerns wait this long before the next try */
};
/* cb runs after every failure of a class above and once when it clears,
 * before the callback of the request concerned. */
void etcd_on_problem(struct etcd *e, void (*cb)(void *userdata, const struct etcd_problem *p),
                     void *userdata);

/* Base64, as the gateway wants it: standard alphabet with padding. */
char *b64_encode(const void *data, size_t len);
/* NULL if s is not valid base64; *ret_len gets the length (a NUL follows). */
char *b64_decode(const char *s, size_t *ret_len);
/* A JSON string holding base64(printf(fmt, ...)). */
json_t *etcd_b64(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An int64 field that etcd sends as a string (or a number); absent is 0.
 * -EBADMSG if present and not an integer. */
int etcd_int64(const json_t *obj, const char *field, int64_t *ret);
