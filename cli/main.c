/* SPDX-License-Identifier: MIT */
/* snowid: take IDs, decode an ID, show the daemon's state. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "fence.h"
#include "handshake.h"
#include "publish.h"
#include "snowid.h"
#include "uuid-text.h"

#define N_MAX 1000000

static const char *program = "snowid";

static int fail(int r, const char *what)
{
        fprintf(stderr, "%s: %s: %s\n", program, what, strerror(-r));
        return 1;
}

static int usage_error(const char *fmt, const char *arg)
{
        fprintf(stderr, "%s: ", program);
        fprintf(stderr, fmt, arg);
        fprintf(stderr, " (see '%s --help')\n", program);
        return 2;
}

/* decimal, leading zeros and all (etcd's keys and values pad IDs with
 * them), or hexadecimal after 0x */
static int parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
        char *end;
        /* digits only: strtoull would also take spaces and a sign */
        if (!s || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        int base = s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
        if (base == 16 && !isxdigit((unsigned char)s[2]))
                return -EINVAL;
        errno = 0;
        unsigned long long v = strtoull(s, &end, base);
        if (errno || *end || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

static void format_rfc3339(uint64_t unix_ms, char *buf, size_t size)
{
        time_t sec = (time_t)(unix_ms / 1000);
        struct tm tm;
        if (!gmtime_r(&sec, &tm) || tm.tm_year > 9999 - 1900) {
                snprintf(buf, size, "(out of range)");
                return;
        }
        size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, size - n, ".%03uZ", (unsigned)(unix_ms % 1000));
}

static const char *open_error(int r)
{
        switch (r) {
        case -ENOENT:
        case -ECONNREFUSED:
                return "no snowidd listening on $SNOWID_RUNTIME_DIR (default /run/snowid)"
                       "/<instance>.sock: is snowidd running for this instance?";
        case -EACCES:
                return "permission denied: snowidd does not let this user take IDs (its "
                       "allow-users and allow-groups settings)";
        case -EPERM:
                return "the socket is not safe: its directory is writable by others, or it is "
                       "owned by a user other than root or the daemon's";
        case -EXDEV:
                return "this process does not share snowidd's CLOCK_MONOTONIC (another time "
                       "namespace): its ID times would be wrong";
        case -EPROTO:
                return "not a snowidd this snowid understands (version), or a damaged answer";
        case -ETIMEDOUT:
                return "snowidd did not answer within a second";
        case -EAGAIN:
                return "snowidd holds too many answers this user has not closed yet; try again";
        case -ENAMETOOLONG:
                return "the socket path is longer than a Unix socket path may be (108 bytes)";
        case -EINVAL:
                return "bad instance name (1 to 64 of A-Z a-z 0-9 _ -)";
        default:
                return strerror(-r);
        }
}

struct buffer {
        char *data;
        size_t len;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct buffer *b = userdata;
        size_t n = size * nmemb;
        if (b->len + n > (64u << 20))
                return 0;
        char *d = realloc(b->data, b->len + n + 1);
        if (!d)
                return 0;
        memcpy(d + b->len, ptr, n);
        b->data = d;
        b->len += n;
        d[b->len] = 0;
        return n;
}

/* snowid next --url: the daemon's HTTP API, for hosts without a daemon. */
static int next_remote(const char *url, uint64_t n, const char *token_file, uint64_t wait_ms,
                       int uuid)
{
        char full[4096], auth[1100];
        struct buffer b = {0};
        struct curl_slist *h = curl_slist_append(NULL, "Accept: text/plain");
        long code = 0;
        size_t ul = strlen(url);
        while (ul && url[ul - 1] == '/')
                ul--;
        snprintf(full, sizeof(full), "%.*s/v1/ids?count=%" PRIu64 "%s", (int)ul, url, n,
                 uuid ? "&format=uuid7" : "");
        if (token_file) {
                FILE *f = fopen(token_file, "re");
                char tok[1024] = "";
                if (!f || !fgets(tok, sizeof(tok), f)) {
                        fprintf(stderr, "%s: cannot read %s\n", program, token_file);
                        if (f)
                                fclose(f);
                        curl_slist_free_all(h);
                        return 1;
                }
                fclose(f);
                tok[strcspn(tok, "\r\n")] = 0;
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
                h = curl_slist_append(h, auth);
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        CURL *c = curl_easy_init();
        curl_easy_setopt(c, CURLOPT_URL, full);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(wait_ms + 10000));
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        CURLcode cr = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        curl_global_cleanup();
        int status = 0;
        if (cr != CURLE_OK) {
                fprintf(stderr, "%s: %s: %s\n", program, full, curl_easy_strerror(cr));
                status = 1;
        } else if (code != 200) {
                fprintf(stderr, "%s: %s answered %ld: %s\n", program, url, code,
                        b.data ? b.data : "");
                status = 1;
        } else if (b.data) {
                fputs(b.data, stdout);
        }
        free(b.data);
        return status;
}

static volatile sig_atomic_t stop;
static void on_stop(int sig)
{
        (void)sig;
        stop = 1;
}

static int next_error(int r)
{
        return fail(r, r == -EAGAIN ? "no ID could be issued (no lease, or the deadline passed)"
                                    : "cannot take IDs");
}

/* sleeps until the next multiple of every_ms after *next, or until SIGTERM
 * or SIGINT: they are blocked but here (ppoll() unblocks them atomically, so
 * one sent just before the wait ends it at once); a tick missed (a stall, a
 * wait for a lease) is skipped, not made up in a burst */
static void next_tick(struct timespec *next, uint64_t every_ms, const sigset_t *waking)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t at = (uint64_t)next->tv_sec * 1000000000 + (uint64_t)next->tv_nsec,
                 t = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec,
                 step = every_ms * 1000000;
        at += step;
        if (at < t)
                at = t + step - (t - at) % step;
        next->tv_sec = (time_t)(at / 1000000000);
        next->tv_nsec = (long)(at % 1000000000);
        while (!stop && t < at) {
                struct timespec left = {(time_t)((at - t) / 1000000000),
                                        (long)((at - t) % 1000000000)};
                ppoll(NULL, 0, &left, waking);
                clock_gettime(CLOCK_MONOTONIC, &now);
                t = (uint64_t)now.tv_sec * 1000000000 + (uint64_t)now.tv_nsec;
        }
}

/* takes n IDs (or UUIDs) in chunks of at most chunk_max and prints them in
 * the format; 0, or the error that stopped it (what was taken is printed) */
static int take_print(snowid *s, uint64_t n, int uuid, const char *format, void *buf,
                      uint64_t chunk_max)
{
        uint64_t *ids = buf;
        uint8_t(*uuids)[16] = buf;
        int json = !strcmp(format, "json"), r = 0;
        if (json)
                fputs("{\"ids\":[", stdout);
        /* a SIGTERM ends a long run between chunks */
        for (uint64_t done = 0; done < n && !stop;) {
                size_t k = (size_t)(n - done < chunk_max ? n - done : chunk_max);
                r = uuid ? snowid_next_uuid7_batch(s, uuids, k) : snowid_next_batch(s, ids, k);
                if (r < 0)
                        break;
                for (size_t i = 0; i < k; i++) {
                        char text[UUID_TEXT_LEN + 1];
                        if (uuid) {
                                uuid_to_text(uuids[i], text);
                                if (json)
                                        printf("%s\"%s\"", done + i ? "," : "", text);
                                else
                                        puts(text);
                        } else if (json)
                                printf("%s\"%" PRIu64 "\"", done + i ? "," : "", ids[i]);
                        else if (!strcmp(format, "hex"))
                                printf("0x%016" PRIx64 "\n", ids[i]);
                        else
                                printf("%" PRIu64 "\n", ids[i]);
                }
                done += k;
        }
        /* closed even after a failure: what was taken is valid JSON, and
         * with --every the next tick's object starts a line of its own */
        if (json)
                puts("]}");
        return r < 0 ? r : 0;
}

static int cmd_next(int argc, char **argv)
{
        static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                             {"instance", required_argument, NULL, 'i'},
                                             {"format", required_argument, NULL, 'f'},
                                             {"count", required_argument, NULL, 'n'},
                                             {"wait", required_argument, NULL, 'w'},
                                             {"url", required_argument, NULL, 'u'},
                                             {"token-file", required_argument, NULL, 't'},
                                             {"uuid7", no_argument, NULL, 'U'},
                                             {"every", required_argument, NULL, 'e'},
                                             {}};
        const char *instance = NULL, *format = "dec", *url = NULL, *token_file = NULL;
        uint64_t n = 1, wait_ms = 1000, every_ms = 0;
        int uuid = 0, c;

        while ((c = getopt_long(argc, argv, "hi:f:n:w:u:t:e:", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: snowid next [-n N] [--instance NAME] [--format dec|hex|json]"
                               " [--uuid7] [--wait MS] [--every MS]\n\n"
                               "Takes N IDs (default 1, at most %d) from the host's snowidd and "
                               "prints them, one a line.\n"
                               "  --uuid7     UUIDv7s (8-4-4-4-12 hex) from the same counter "
                               "instead\n"
                               "  --wait MS   how long to wait for a lease or the clock "
                               "(default 1000)\n"
                               "  --every MS  take and print N again every MS ms, one handle "
                               "throughout, until\n"
                               "              SIGTERM or SIGINT; a failure is said and the "
                               "next tick tries again\n"
                               "  --url URL   take them from a daemon's HTTP API instead "
                               "(http://HOST:PORT)\n"
                               "  --token-file FILE  bearer token for --url\n",
                               N_MAX);
                        return 0;
                case 'i':
                        instance = optarg;
                        break;
                case 'f':
                        format = optarg;
                        if (strcmp(format, "dec") && strcmp(format, "hex") &&
                            strcmp(format, "json"))
                                return usage_error("unknown format '%s'", optarg);
                        break;
                case 'n':
                        if (parse_u64(optarg, N_MAX, &n) < 0 || n == 0)
                                return usage_error("bad count '%s' (1 to 1000000)", optarg);
                        break;
                case 'u':
                        url = optarg;
                        if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
                                return usage_error("bad URL '%s' (http://HOST:PORT)", optarg);
                        break;
                case 't':
                        token_file = optarg;
                        break;
                case 'U':
                        uuid = 1;
                        break;
                case 'w':
                        if (parse_u64(optarg, 3600000, &wait_ms) < 0)
                                return usage_error("bad wait '%s' (ms, at most 3600000)", optarg);
                        break;
                case 'e':
                        if (parse_u64(optarg, 86400000, &every_ms) < 0 || every_ms == 0)
                                return usage_error("bad interval '%s' (ms, 1 to 86400000)", optarg);
                        break;
                default:
                        return 2;
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument '%s'", argv[optind]);
        if (uuid && !strcmp(format, "hex"))
                return usage_error("%s", "--uuid7 takes --format dec (UUIDs as written) or json");
        if (url) {
                if (strcmp(format, "dec") || instance || every_ms)
                        return usage_error("%s", "--url takes no --instance, --format or --every");
                return next_remote(url, n, token_file, wait_ms, uuid);
        }

        snowid *s;
        int r = snowid_open(instance, &s);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", program, open_error(r));
                return 1;
        }
        snowid_set_max_wait(s, wait_ms * 1000);
        snowid_layout l;
        r = snowid_get_layout(s, &l);
        if (r < 0) {
                snowid_close(s);
                return fail(r, "cannot read the layout");
        }
        uint64_t chunk_max = UINT64_C(1) << l.seq_bits;
        /* a chunk of either form: 16 bytes a UUID */
        void *buf = malloc(16 * (n < chunk_max ? n : chunk_max));
        if (!buf) {
                snowid_close(s);
                return fail(-ENOMEM, "out of memory");
        }
        if (!every_ms) {
                r = take_print(s, n, uuid, format, buf, chunk_max);
        } else {
                /* until SIGTERM or SIGINT (a container's first process has
                 * no default action for them): blocked, and taken only
                 * while next_tick() waits */
                struct sigaction sa = {.sa_handler = on_stop};
                sigset_t both, waking;
                sigemptyset(&both);
                sigaddset(&both, SIGTERM);
                sigaddset(&both, SIGINT);
                sigprocmask(SIG_BLOCK, &both, &waking);
                sigdelset(&waking, SIGTERM);
                sigdelset(&waking, SIGINT);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGINT, &sa, NULL);
                struct timespec next;
                clock_gettime(CLOCK_MONOTONIC, &next);
                while (!stop) {
                        r = take_print(s, n, uuid, format, buf, chunk_max);
                        /* said, and taken again at the next tick */
                        if (r < 0)
                                next_error(r);
                        if (fflush(stdout) != 0)
                                break;
                        next_tick(&next, every_ms, &waking);
                }
                r = 0;
        }
        free(buf);
        snowid_close(s);
        if (r < 0)
                return next_error(r);
        return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_decode(int argc, char **argv)
{
        static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                             {"instance", required_argument, NULL, 'i'},
                                             {"epoch", required_argument, NULL, 'e'},
                                             {"time-bits", required_argument, NULL, 't'},
                                             {"worker-bits", required_argument, NULL, 'w'},
                                             {"seq-bits", required_argument, NULL, 's'},
                                             {"json", no_argument, NULL, 'j'},
                                             {}};
        const char *instance = NULL;
        snowid_layout l;
        int given = 0, json = 0, c;
        uint64_t v;

        snowid_layout_default(&l);
        while ((c = getopt_long(argc, argv, "hi:j", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: snowid decode [--instance NAME | --epoch MS --time-bits T "
                               "--worker-bits W --seq-bits S] [--json] ID...\n\n"
                               "Prints each ID's time (RFC 3339 UTC and unix ms), worker and "
                               "sequence.  An ID is\na 64-bit decimal number or a UUIDv7 "
                               "(8-4-4-4-12 hex) from snowid.  Without\nlayout flags, the "
                               "layout of the running instance is used, or the default "
                               "41/10/12.\n");
                        return 0;
                case 'i':
                        instance = optarg;
                        break;
                case 'j':
                        json = 1;
                        break;
                case 'e':
                case 't':
                case 'w':
                case 's':
                        if (parse_u64(optarg, c == 'e' ? UINT64_MAX : 63, &v) < 0)
                                return usage_error("bad layout value '%s'", optarg);
                        if (c == 'e')
                                l.epoch_ms = v;
                        else
                                *(c == 't'   ? &l.time_bits
                                  : c == 'w' ? &l.worker_bits
                                             : &l.seq_bits) = (unsigned)v;
                        given = 1;
                        break;
                default:
                        return 2;
                }
        }
        if (optind >= argc)
                return usage_error("%s", "decode needs at least one ID");
        if (given && instance)
                return usage_error("%s", "give --instance or layout flags, not both");
        if (given && snowid_layout_check(&l) < 0)
                return usage_error("%s", "bad layout: time >= 32 bits, time + worker + seq = 63");
        if (!given) {
                snowid *s;
                int r = snowid_open(instance, &s);
                if (r == 0) {
                        r = snowid_get_layout(s, &l);
                        snowid_close(s);
                }
                if (r < 0 && instance) {
                        fprintf(stderr, "%s: %s\n", program, open_error(r));
                        return 1;
                }
        }
        int status = 0;
        for (int i = optind; i < argc; i++) {
                snowid_parts p;
                uint8_t u[16];
                char when[64], id[UUID_TEXT_LEN + 1];
                size_t len = strlen(argv[i]);
                int uuid = uuid_text_like(argv[i], len);
                if (uuid ? uuid_from_text(argv[i], len, u) < 0 || snowid_decode_uuid7(&l, u, &p) < 0
                         : parse_u64(argv[i], UINT64_MAX, &v) < 0 || snowid_decode(&l, v, &p) < 0) {
                        fprintf(stderr, "%s: '%s' is not %s of this layout\n", program, argv[i],
                                uuid ? "a UUIDv7" : "an ID");
                        status = 1;
                        continue;
                }
                if (uuid)
                        uuid_to_text(u, id);
                else
                        snprintf(id, sizeof(id), "%" PRIu64, v);
                format_rfc3339(p.unix_ms, when, sizeof(when));
                if (json)
                        printf("{\"id\":\"%s\",\"time\":\"%s\",\"unix_ms\":%" PRIu64
                               ",\"worker\":%" PRIu32 ",\"sequence\":%" PRIu32 "}\n",
                               id, when, p.unix_ms, p.worker, p.sequence);
                else
                        printf("%s\ttime=%s\tunix_ms=%" PRIu64 "\tworker=%" PRIu32
                               "\tsequence=%" PRIu32 "\n",
                               id, when, p.unix_ms, p.worker, p.sequence);
        }
        return status;
}

/* How the store refuses the daemon, if it does: snowidd keeps
 * "class<TAB>message" in <runtime-dir>/<instance>.store-error while it lasts
 * (daemon/holder/refused.c). */
static int read_store_error(const char *instance, char *cls, size_t cls_size, char *msg,
                            size_t msg_size)
{
        char path[SHM_SOCK_PATH_MAX + 16], line[512];
        if (!instance)
                instance = getenv("SNOWID_INSTANCE");
        if (shm_socket_path(path, sizeof(path), NULL, instance ? instance : "default") < 0)
                return 0;
        size_t n = strlen(path);
        if (n < 5 || strcmp(path + n - 5, ".sock"))
                return 0;
        strcpy(path + n - 5, ".store-error");
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        char *got = fgets(line, sizeof(line), f);
        fclose(f);
        char *tab = got ? strchr(line, '\t') : NULL;
        if (!tab)
                return 0;
        *tab = 0;
        tab[1 + strcspn(tab + 1, "\n")] = 0;
        snprintf(cls, cls_size, "%.*s", (int)cls_size - 1, line);
        snprintf(msg, msg_size, "%.*s", (int)msg_size - 1, tab + 1);
        return 1;
}

/* The store a refusal's class is of: each class starts with its store's
 * name ("postgres-auth", "etcd-tls"). */
static const char *store_title_of(const char *cls)
{
        if (!strncmp(cls, "postgres-", 9))
                return "PostgreSQL";
        if (!strncmp(cls, "etcd-", 5))
                return "etcd";
        return "store";
}

/* A JSON string of s (printable ASCII, as the daemon writes it). */
static void print_json_string(const char *s)
{
        putchar('"');
        for (; *s; s++) {
                if (*s == '"' || *s == '\\')
                        putchar('\\');
                putchar((unsigned char)*s < 0x20 ? ' ' : *s);
        }
        putchar('"');
}

static int cmd_status(int argc, char **argv)
{
        static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                             {"instance", required_argument, NULL, 'i'},
                                             {"json", no_argument, NULL, 'j'},
                                             {}};
        const char *instance = NULL;
        int json = 0, c;

        while ((c = getopt_long(argc, argv, "hi:j", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: snowid status [--instance NAME] [--json]\n\n"
                               "Shows the segment that snowidd publishes: worker, generation, "
                               "lease state,\ndeadline and its headroom, layout, daemon pid, the "
                               "worker range it\nclaims in, and the clock clients read.\n");
                        return 0;
                case 'i':
                        instance = optarg;
                        break;
                case 'j':
                        json = 1;
                        break;
                default:
                        return 2;
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument '%s'", argv[optind]);
        snowid *s;
        snowid_status st = SNOWID_STATUS_INIT;
        snowid_layout l;
        int r = snowid_open(instance, &s);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", program, open_error(r));
                return 1;
        }
        r = snowid_get_status(s, &st);
        int rl = snowid_get_layout(s, &l);
        uint32_t from, to;
        int rr = snowid_get_worker_range(s, &from, &to);
        snowid_close(s);
        if (r < 0)
                return fail(r, "cannot read the status");
        if (rl < 0)
                snowid_layout_default(&l);
        char deadline[64], range[48], cls[64], msg[400];
        int refused = read_store_error(instance, cls, sizeof(cls), msg, sizeof(msg));
        format_rfc3339(st.deadline_unix_ms, deadline, sizeof(deadline));
        /* a daemon before worker ranges, or one still reading the layout */
        if (rr < 0)
                snprintf(range, sizeof(range), json ? "null" : "unknown");
        else
                snprintf(range, sizeof(range),
                         json ? "{\"from\":%" PRIu32 ",\"to\":%" PRIu32 "}"
                              : "%" PRIu32 "-%" PRIu32,
                         from, to);
        if (json) {
                printf("{\"worker\":%" PRIu32 ",\"generation\":%" PRIu64 ",\"state\":\"%s\","
                       "\"segment_state\":\"%s\",\"deadline\":\"%s\",\"headroom_ms\":%" PRId64
                       ",\"daemon_pid\":%" PRId32 ",\"layout\":{\"epoch_ms\":%" PRIu64
                       ",\"time_bits\":%u,\"worker_bits\":%u,\"seq_bits\":%u},"
                       "\"worker_range\":%s,\"tsc_clock\":%s",
                       st.worker, st.generation, shm_state_name(st.state, true),
                       shm_state_name(st.state, false), deadline, st.headroom_ms, st.daemon_pid,
                       l.epoch_ms, l.time_bits, l.worker_bits, l.seq_bits, range,
                       st.tsc_clock ? "true" : "false");
                /* store_error*, and until the next release the same as
                 * etcd_error* */
                static const char *const keys[] = {"store_error", "etcd_error"};
                for (size_t i = 0; i < 2; i++) {
                        printf(",\"%s\":", keys[i]);
                        if (refused)
                                print_json_string(cls);
                        else
                                printf("null");
                        printf(",\"%s_message\":", keys[i]);
                        if (refused)
                                print_json_string(msg);
                        else
                                printf("null");
                }
                printf("}\n");
                return 0;
        }
        printf("worker:      %" PRIu32 "\ngeneration:  %" PRIu64 "%s\nstate:       %s\n"
               "deadline:    %s (headroom %" PRId64 " ms)\ndaemon pid:  %" PRId32 "\n"
               "layout:      epoch %" PRIu64 " ms, %u/%u/%u bits\n"
               "range:       %s\nclock:       %s\n",
               st.worker, st.generation, st.generation & 1 ? " (switching)" : "",
               shm_state_name(st.state, false), deadline, st.headroom_ms, st.daemon_pid, l.epoch_ms,
               l.time_bits, l.worker_bits, l.seq_bits, range,
               st.tsc_clock ? "TSC (published by snowidd)" : "vDSO");
        if (refused) {
                char label[32];
                snprintf(label, sizeof(label), "%s error:", store_title_of(cls));
                printf("%-12s %s: %s\n", label, cls, msg);
        }
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
                printf("Usage: snowid COMMAND [OPTIONS]\n\n"
                       "  next     take IDs from the host's snowidd\n"
                       "  decode   show the time, worker and sequence of IDs\n"
                       "  status   show the daemon's segment\n"
                       "  fence    give a cluster a new history after its store was restored\n\n"
                       "'snowid COMMAND --help' for each.\n");
                return argc < 2 ? 2 : 0;
        }
        const char *cmd = argv[1];
        argv[1] = argv[0];
        argc--;
        argv++;
        if (!strcmp(cmd, "next"))
                return cmd_next(argc, argv);
        if (!strcmp(cmd, "decode"))
                return cmd_decode(argc, argv);
        if (!strcmp(cmd, "status"))
                return cmd_status(argc, argv);
        if (!strcmp(cmd, "fence"))
                return cmd_fence(argc, argv);
        return usage_error("unknown command '%s'", cmd);
}
