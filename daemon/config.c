/* SPDX-License-Identifier: MIT */
/*
 * Settings: defaults, then /etc/snowid/snowidd.conf (key = value lines), then
 * flags.  Each setting is a row of config-table.c, which parses it; here are
 * the file, the flags, --help, and the checks across settings.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "config-table.h"
#include "log.h"
#include "range.h"

#define SLEW_TICK_MS 100 /* the daemon applies slew in ticks of CLOCK_TICK_MS (holder.c) */
#define SECRET_MAX 1023  /* the line of a password or token file */
#define WHY_MAX 512
#define HELP_WIDTH 80
#define HELP_INDENT 28
/* A layout must give IDs for this long after the daemon starts */
#define LAYOUT_LIFE_MIN_MS (UINT64_C(365) * 24 * 3600 * 1000)

/* Words of text from column col, wrapped at HELP_WIDTH, indented by
 * HELP_INDENT after the first line. */
static void help_wrap(FILE *f, const char *text, size_t col)
{
        while (*text) {
                size_t word = strcspn(text, " ");
                if (col > HELP_INDENT && col + 1 + word > HELP_WIDTH) {
                        fprintf(f, "\n%*s", HELP_INDENT, "");
                        col = HELP_INDENT;
                } else if (col > HELP_INDENT) {
                        fputc(' ', f);
                        col++;
                }
                fwrite(text, 1, word, f);
                col += word;
                text += word;
                text += strspn(text, " ");
        }
        fputc('\n', f);
}

static void help(FILE *f)
{
        fputs("Usage: snowidd [OPTIONS]\n\n"
              "Leases a worker number from its store (etcd or PostgreSQL) and publishes it to the\n"
              "host's snowid segment.  Each option is also a key of the settings file.\n\n",
              f);
        for (size_t i = 0; i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                char text[1024];
                int col = fprintf(f, "  --%s%s%s", row->name, row->arg ? " " : "",
                                  row->arg ? row->arg : "");
                /* the default, and an older name, in brackets */
                snprintf(text, sizeof(text), "%s%s%s%s%s%s%s", row->help,
                         row->def || row->alias ? " (" : "", row->def ? "default " : "",
                         row->def ? row->def : "", row->def && row->alias ? "; " : "",
                         row->alias ? row->alias : "",
                         row->alias ? " is its older name)"
                         : row->def ? ")"
                                    : "");
                col += fprintf(f, "%*s", col + 2 <= HELP_INDENT ? HELP_INDENT - col : 2, "");
                help_wrap(f, text, (size_t)col);
        }
}

/* --help on stdout in one write(), so that a reader that stops at its first
 * match (grep -q) has it all before it stops, never a SIGPIPE. */
static void help_print(void)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return;
        help(f);
        if (fclose(f) == 0) {
                fflush(stdout);
                for (size_t done = 0; done < len;) {
                        ssize_t n = write(STDOUT_FILENO, text + done, len - done);
                        if (n <= 0)
                                break;
                        done += (size_t)n;
                }
        }
        free(text);
}

static int bad(const char *origin, const struct setting *row, const char *key, const char *v,
               const char *why)
{
        char words[WHY_MAX];
        if (!why || !*why) {
                setting_why(row, words, sizeof(words));
                why = words;
        }
        if (row && row->flags & SETTING_SECRET) /* never echoed: it may hold a password */
                return log_error_errno(EINVAL, "%s: bad setting %s: %s", origin, key, why);
        return log_error_errno(EINVAL, "%s: bad setting %s = '%.200s'%s: %s", origin, key, v,
                               strlen(v) > 200 ? "..." : "", why);
}

static int apply(struct settings *s, const char *origin, const struct setting *row, const char *key,
                 const char *v)
{
        char why[WHY_MAX] = "";
        if (!row || !row->parse)
                return bad(origin, NULL, key, v, "not a setting of snowidd");
        int r = row->parse(row, s, v, why, sizeof(why));
        if (r == -ENOMEM)
                return log_error_errno(r, "%s: %s: %m", origin, key);
        if (r < 0)
                return bad(origin, row, key, v, why);
        if (row->flags & SETTING_LAYOUT)
                s->layout_given = true;
        return 0;
}

static int load_defaults(struct settings *s)
{
        for (size_t i = 0; i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                char why[WHY_MAX] = "";
                if (!row->def || !row->parse)
                        continue;
                int r = row->parse(row, s, row->def, why, sizeof(why));
                if (r < 0)
                        return log_error_errno(r, "The default of %s, '%s', is not valid: %m",
                                               row->name, row->def);
        }
        return 0;
}

/* "key = value": the key and the value with the spaces around them cut, or
 * NULL for a blank line or a comment. */
static int split_line(char *line, char **ret_key, char **ret_value)
{
        char *p = line + strspn(line, " \t");
        p[strcspn(p, "\r\n")] = 0;
        if (!*p || *p == '#') {
                *ret_key = NULL;
                return 0;
        }
        char *eq = strchr(p, '=');
        if (!eq)
                return -EINVAL;
        char *key = p, *v = eq + 1;
        *eq = 0;
        for (char *e = eq - 1; e >= key && (*e == ' ' || *e == '\t'); e--)
                *e = 0;
        v += strspn(v, " \t");
        for (char *e = v + strlen(v) - 1; e >= v && (*e == ' ' || *e == '\t'); e--)
                *e = 0;
        *ret_key = key;
        *ret_value = v;
        return 0;
}

static int load_file(struct settings *s, const char *path, bool must_exist)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                if (errno == ENOENT && !must_exist)
                        return 0;
                return log_error_errno(errno, "Cannot read %s: %m", path);
        }
        char line[4096], origin[4200];
        int r = 0;
        struct stat st;
        /* a directory reads as empty: every default, silently */
        if (fstat(fileno(f), &st) < 0 ||
            !(S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))) {
                fclose(f);
                return log_error_errno(EINVAL, "The config file %s is not a regular file", path);
        }
        for (unsigned n = 1; r == 0 && fgets(line, sizeof(line), f); n++) {
                char *key, *v;
                snprintf(origin, sizeof(origin), "%s:%u", path, n);
                if (!strchr(line, '\n') && !feof(f))
                        r = log_error_errno(EINVAL, "%s: line too long", origin);
                else if (split_line(line, &key, &v) < 0)
                        r = log_error_errno(EINVAL, "%s: expected 'key = value'", origin);
                else if (key) {
                        const struct setting *row = setting_find(key);
                        /* --config, --check-config, --help: flags alone */
                        r = apply(s, origin, row && !(row->flags & SETTING_FLAG_ONLY) ? row : NULL,
                                  key, v);
                }
        }
        fclose(f);
        return r;
}

/* The flags, by getopt_long(): each row's name and older name, its index
 * + 256 as the value. */
static struct option *options_new(void)
{
        struct option *o = calloc(2 * settings_table_size + 1, sizeof(*o));
        size_t n = 0;
        for (size_t i = 0; o && i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                int has_arg = row->flags & SETTING_NO_VALUE ? no_argument : required_argument;
                o[n++] = (struct option){row->name, has_arg, NULL, 256 + (int)i};
                if (row->alias)
                        o[n++] = (struct option){row->alias, has_arg, NULL, 256 + (int)i};
        }
        return o;
}

static int load_flags(struct settings *s, int argc, char **argv)
{
        struct option *options = options_new();
        int c, i, r = 0;
        if (!options)
                return log_error_errno(ENOMEM, "Cannot read the flags: %m");
        opterr = 0;
        optind = 0; /* glibc: start afresh, even after an earlier parse */
        while (r == 0 && (c = getopt_long(argc, argv, "", options, &i)) >= 0) {
                if (c == '?' || c == ':') {
                        r = log_error_errno(EINVAL, "Bad flag '%s' (see snowidd --help)",
                                            argv[optind - 1]);
                        break;
                }
                const struct setting *row = &settings_table[c - 256];
                /* --help abbreviated: find_config() looked for it whole */
                if (!strcmp(row->name, "help")) {
                        help_print();
                        r = 1;
                } else if (strcmp(row->name, "config")) /* read first, by find_config() */
                        r = apply(s, "command line", row, options[i].name, optarg);
        }
        if (r == 0 && optind < argc)
                r = log_error_errno(EINVAL, "Unexpected argument '%s'", argv[optind]);
        free(options);
        return r;
}

/* The first line of a secret file, without its newline. */
static int read_secret(const char *key, const char *path, char **ret)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return log_error_errno(errno, "Cannot read %s %s: %m", key, path);
        char buf[SECRET_MAX + 2];
        errno = 0;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        int err = ferror(f) ? errno : 0;
        bool cut = !strchr(buf, '\n') && fgetc(f) != EOF;
        fclose(f);
        buf[strcspn(buf, "\r\n")] = 0;
        int r = 0;
        if (err)
                r = log_error_errno(err, "Cannot read %s %s: %m", key, path);
        else if (cut || !*buf)
                r = log_error_errno(EINVAL, "%s %s %s", key, path,
                                    cut ? "has a first line longer than 1023 bytes" : "is empty");
        else if (!(*ret = strdup(buf)))
                r = log_error_errno(ENOMEM, "Cannot read %s %s: %m", key, path);
        explicit_bzero(buf, sizeof(buf));
        return r;
}

/* A file that libcurl opens later: read now, so that a wrong path is said
 * at start (and by --check-config), not as a TLS failure. */
static int check_readable(const char *key, const char *path)
{
        char byte;
        struct stat st = {0};
        if (!path)
                return 0;
        /* non-blocking: a FIFO or a terminal named here must not hang the start */
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return log_error_errno(errno, "Cannot read %s %s: %m", key, path);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                if (S_ISDIR(st.st_mode))
                        return log_error_errno(EISDIR, "Cannot read %s %s: %m", key, path);
                return log_error_errno(EINVAL, "Cannot read %s %s: not a regular file", key, path);
        }
        ssize_t n = read(fd, &byte, 1);
        int err = errno;
        close(fd);
        if (n > 0)
                return 0;
        if (n == 0)
                return log_error_errno(EINVAL, "Cannot read %s %s: it is empty", key, path);
        return log_error_errno(err, "Cannot read %s %s: %m", key, path);
}

/* A file the PostgreSQL connection string names, read now as the etcd
 * ones are: libpq would skip a missing passfile or client certificate
 * silently, and the server's refusal would not name the file. */
static int check_pg_file(const char *keyword, const char *path)
{
        char key[64];
        snprintf(key, sizeof(key), "postgres %s", keyword);
        return check_readable(key, path);
}

/* One id of an allow list: a number, or a name that must exist. */
static int resolve_id(const char *list, const char *tok, bool user, unsigned *ret)
{
        uint64_t x;
        if (setting_number(tok, 0, UINT32_MAX - 1, &x) == 0) {
                *ret = (unsigned)x;
                return 0;
        }
        if (user) {
                struct passwd *pw = getpwnam(tok);
                if (pw) {
                        *ret = pw->pw_uid;
                        return 0;
                }
        } else {
                struct group *g = getgrnam(tok);
                if (g) {
                        *ret = g->gr_gid;
                        return 0;
                }
        }
        return log_error_errno(EINVAL,
                               "allow-%s = '%s': no %s '%s' (names must exist; numbers need not)",
                               user ? "users" : "groups", list, user ? "user" : "group", tok);
}

static int resolve_list(struct settings *s, const char *list, bool user)
{
        if (!list)
                return 0;
        char *copy = strdup(list), *save = NULL;
        int r = 0;
        if (!copy)
                return log_error_errno(ENOMEM, "Cannot read allow-%s: %m",
                                       user ? "users" : "groups");
        for (char *tok = strtok_r(copy, ", ", &save); tok && !r;
             tok = strtok_r(NULL, ", ", &save)) {
                unsigned id = 0;
                if (user && !strcmp(tok, "*")) {
                        s->allow_all = true;
                        continue;
                }
                if ((user ? s->n_allow_uid : s->n_allow_gid) == ALLOW_MAX) {
                        r = log_error_errno(EINVAL, "allow-%s: at most %d entries",
                                            user ? "users" : "groups", ALLOW_MAX);
                        break;
                }
                r = resolve_id(list, tok, user, &id);
                if (r == 0 && user)
                        s->allow_uid[s->n_allow_uid++] = (uid_t)id;
                else if (r == 0)
                        s->allow_gid[s->n_allow_gid++] = (gid_t)id;
        }
        free(copy);
        return r;
}

static int resolve_allow(struct settings *s)
{
        int r = resolve_list(s, s->allow_users, true);
        return r ? r : resolve_list(s, s->allow_groups, false);
}

bool settings_allowed(const struct settings *s, uid_t uid, const gid_t *gids, unsigned n_gids)
{
        if (s->allow_all || uid == 0 || uid == geteuid())
                return true;
        for (unsigned i = 0; i < s->n_allow_uid; i++)
                if (s->allow_uid[i] == uid)
                        return true;
        for (unsigned i = 0; i < s->n_allow_gid; i++)
                for (unsigned k = 0; k < n_gids; k++)
                        if (s->allow_gid[i] == gids[k])
                                return true;
        return false;
}

/* A layout whose time bits run out within a year is refused here, before
 * it reaches the store: stored, it is the whole cluster's, and every daemon
 * of the cluster would exit 78 when its claim's mark (ID time + window +
 * mark-step, in ms since the epoch) reached 2^time-bits (claim.c). */
static int check_layout_life(const struct settings *s)
{
        const snowid_layout *l = &s->layout;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000,
                 id_ms = now_ms > l->epoch_ms ? now_ms - l->epoch_ms : 0,
                 mark_ms = id_ms + ((uint64_t)s->window_s + s->mark_step_s) * 1000;
        if ((mark_ms + LAYOUT_LIFE_MIN_MS) >> l->time_bits == 0)
                return 0;
        /* epoch < 2^42 and time_bits < 64: no wrap */
        uint64_t end_ms = l->epoch_ms + (UINT64_C(1) << l->time_bits);
        time_t end_s = (time_t)(end_ms / 1000);
        char end[32] = "?";
        struct tm tm;
        if (gmtime_r(&end_s, &tm))
                strftime(end, sizeof(end), "%Y-%m-%d %H:%M UTC", &tm);
        return log_error_errno(EINVAL,
                               "The layout's %u time bits from epoch %" PRIu64 " %s on %s: "
                               "a layout must last a year more (more time-bits or a later "
                               "epoch)",
                               l->time_bits, l->epoch_ms,
                               mark_ms >> l->time_bits ? "ran out" : "run out", end);
}

/* Settings that are fine alone but not together. */
static int check(struct settings *s)
{
        if (s->store == STORE_POSTGRES && !s->postgres)
                return log_error_errno(EINVAL, "store = postgres needs postgres = CONNINFO (a "
                                               "libpq connection string or URI)");
        if (s->layout_given && snowid_layout_check(&s->layout) < 0)
                return log_error_errno(EINVAL,
                                       "Bad layout %u/%u/%u: time-bits >= 32 and time + worker "
                                       "+ seq bits = 63",
                                       s->layout.time_bits, s->layout.worker_bits,
                                       s->layout.seq_bits);
        /* without layout settings, the layout stored in the store decides (holder) */
        if (s->layout_given) {
                int r = check_layout_life(s);
                if (r < 0)
                        return r;
        }
        if (s->range_given && s->layout_given &&
            !worker_range_fits(s->range_from, s->range_to, s->layout.worker_bits))
                return log_error_errno(EINVAL,
                                       "worker-range %u-%u does not fit %u worker bits "
                                       "(numbers 0 to %" PRIu64 ")",
                                       s->range_from, s->range_to, s->layout.worker_bits,
                                       (UINT64_C(1) << s->layout.worker_bits) - 1);
        if (s->renew_ms * 2 > s->lease_ttl_s * 1000)
                return log_error_errno(EINVAL,
                                       "renew-interval %u ms must be at most half of lease-ttl "
                                       "%u s",
                                       s->renew_ms, s->lease_ttl_s);
        if (s->renew_ms * 2 > s->window_s * 1000)
                return log_error_errno(EINVAL,
                                       "renew-interval %u ms must be at most half of window %u s",
                                       s->renew_ms, s->window_s);
        if (s->store_timeout_ms > s->window_s * 1000)
                return log_error_errno(EINVAL, "store-timeout %u ms must not exceed window %u s",
                                       s->store_timeout_ms, s->window_s);
        /* a tick of slew steps ID time back by slew * tick: a counter a ms
         * ahead of the clock is then up to a + ceil(step) ms ahead, and
         * clients wait past lead.  A step of at most half the lead keeps
         * counters up to lead / 2 ms ahead (rounded down: load, bursts)
         * from waiting on every tick */
        uint64_t max_slew = (uint64_t)s->lead_ms * 1000 / 2 * 1000 / SLEW_TICK_MS;
        if (s->slew_us_per_s > max_slew)
                return log_error_errno(EINVAL,
                                       "slew %u us/s is too fast for lead %u ms: its step back "
                                       "every %u ms must be at most half the lead, so slew at "
                                       "most %" PRIu64 " us/s",
                                       s->slew_us_per_s, s->lead_ms, SLEW_TICK_MS, max_slew);
        /* an error inside half the lead costs at most a short wait at the
         * lead bound when the clock goes back to the vDSO */
        if ((uint64_t)s->tsc_max_error_us * 2 > (uint64_t)s->lead_ms * 1000)
                return log_error_errno(EINVAL,
                                       "tsc-max-error %u us must be at most half of lead %u ms",
                                       s->tsc_max_error_us, s->lead_ms);
        if ((s->cert == NULL) != (s->key == NULL))
                return log_error_errno(EINVAL, "etcd-cert and etcd-key go together");
        if ((s->user == NULL) != (s->password_file == NULL))
                return log_error_errno(EINVAL, "etcd-user and etcd-password-file go together");
        int r = check_readable("etcd-cacert", s->cacert);
        if (r == 0)
                r = check_readable("etcd-cert", s->cert);
        if (r == 0)
                r = check_readable("etcd-key", s->key);
        /* s->postgres was set through s->checks->postgres (config-table.c) */
        if (r == 0 && s->store == STORE_POSTGRES && s->checks->postgres_files)
                r = s->checks->postgres_files(s->postgres, check_pg_file);
        if (r == 0 && s->password_file)
                r = read_secret("etcd-password-file", s->password_file, &s->password);
        if (r < 0)
                return r;
        /* read as the other files are, so that a FIFO does not hang the start */
        if (s->http_token_file && (r = check_readable("http-token-file", s->http_token_file)) < 0)
                return r;
        if (s->http_token_file) {
                char err[512];
                if (tokens_load(s->http_token_file, (struct rate){s->http_token_ids},
                                (struct rate){s->http_token_requests}, &s->http_tokens,
                                &s->n_http_tokens, err, sizeof(err)) < 0)
                        return log_error_errno(EINVAL, "%s", err);
        }
        if (s->http_token_file && !s->http)
                return log_error_errno(EINVAL, "http-token-file is set but http is not");
        /* <dir>/.<instance>.new is the longest name made there: a sun_path
         * holds 107 bytes and a NUL */
        if (strlen(s->runtime_dir) + strlen(s->instance) + 7 > 107)
                return log_error_errno(EINVAL,
                                       "runtime-dir '%s' and instance '%s' make a socket path "
                                       "longer than 107 bytes",
                                       s->runtime_dir, s->instance);
        return resolve_allow(s);
}

/* --config FILE, or the default; --help before anything is read */
static int find_config(int argc, char **argv, const char **ret_path, bool *ret_explicit)
{
        *ret_path = setting_find("config")->def;
        *ret_explicit = false;
        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--config") && i + 1 < argc)
                        *ret_path = argv[i + 1], *ret_explicit = true;
                else if (!strncmp(argv[i], "--config=", 9))
                        *ret_path = argv[i] + 9, *ret_explicit = true;
                else if (!strcmp(argv[i], "--help")) {
                        help_print();
                        return 1;
                }
        }
        return 0;
}

int settings_load(struct settings *s, const struct settings_checks *checks, int argc, char **argv)
{
        const char *config;
        bool explicit_config;
        *s = (struct settings){.checks = checks};
        int r = load_defaults(s);
        /* the config file first, so that flags override it */
        if (r == 0)
                r = find_config(argc, argv, &config, &explicit_config);
        if (r == 0)
                r = load_file(s, config, explicit_config);
        if (r == 0)
                r = load_flags(s, argc, argv);
        if (r == 0)
                r = check(s);
        if (r == 0 && s->check_config) {
                printf("snowidd: settings are valid\n");
                return 1;
        }
        return r;
}

void settings_free(struct settings *s)
{
        for (unsigned i = 0; i < s->n_etcd; i++)
                free(s->etcd[i]);
        free(s->cluster);
        free(s->instance);
        free(s->region);
        free(s->runtime_dir);
        free(s->allow_users);
        free(s->allow_groups);
        free(s->cacert);
        free(s->cert);
        free(s->key);
        free(s->user);
        free(s->password_file);
        if (s->password)
                explicit_bzero(s->password, strlen(s->password));
        free(s->password);
        free(s->http);
        free(s->http_token_file);
        free(s->postgres);
        tokens_free(s->http_tokens, s->n_http_tokens);
}
