/* SPDX-License-Identifier: MIT */
/* The segment: its offsets, the publisher, and every way opening it fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "barrier.h"
#include "helpers.h"
#include "snowid.h"

static const char *inst;

static int setup(void **state)
{
        (void)state;
        inst = test_instance("segment");
        shm_pub_unlink(inst);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        shm_pub_unlink(inst);
        return 0;
}

static void test_offsets(void **state)
{
        (void)state;
        /* the hot fields share one line, apart from the identity fields */
        assert_int_equal(offsetof(struct shm_ctl, gen) % 64, 0);
        assert_true(offsetof(struct shm_ctl, lead_ms) < 128);
        for (unsigned i = 0; i < SHM_LINES; i++)
                assert_int_equal(offsetof(struct shm_ctr, line[i]), i * 64);
        /* each generation starts on a fresh line; 64 switches go round */
        assert_int_not_equal(shm_line_index(2), shm_line_index(4));
        assert_int_equal(shm_line_index(2), shm_line_index(2 + 2 * SHM_LINES));
}

static void test_instance_names(void **state)
{
        (void)state;
        char longname[66];
        memset(longname, 'a', 65);
        longname[65] = 0;
        assert_true(shm_instance_valid("default"));
        assert_true(shm_instance_valid("A-z_09"));
        assert_false(shm_instance_valid(""));
        assert_false(shm_instance_valid("a/b"));
        assert_false(shm_instance_valid("a.b"));
        assert_false(shm_instance_valid(longname));
        longname[64] = 0;
        assert_true(shm_instance_valid(longname));
        snowid *s = (snowid *)0x1;
        assert_int_equal(snowid_open("../etc", &s), -EINVAL);
        assert_ptr_equal(s, (snowid *)0x1);
        setenv("SNOWID_INSTANCE", "bad name", 1);
        assert_int_equal(snowid_open(NULL, &s), -EINVAL);
        setenv("SNOWID_INSTANCE", inst, 1);
        assert_int_equal(snowid_open(NULL, &s), -ENOENT);
        unsetenv("SNOWID_INSTANCE");
}

static void test_absent(void **state)
{
        (void)state;
        snowid *s = NULL;
        assert_int_equal(snowid_open(inst, &s), -ENOENT);
        assert_null(s);
        assert_null(snowid_close(NULL));
}

static void test_publisher_lock_and_reuse(void **state)
{
        (void)state;
        struct shm_pub *a, *b;
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &a), 0);
        assert_false(a->reused);
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &b), -EBUSY);
        struct shm_publication p = test_publication(3, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(a, &p), 0);
        uint64_t nonce = a->ctl->nonce;
        a = shm_pub_close(a);
        /* a restart finds the segment valid and keeps it, generation and all */
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &b), 0);
        assert_true(b->reused);
        assert_int_equal(b->ctl->nonce, nonce);
        assert_int_equal(READ_ONCE(b->ctl->gen), 2);
        assert_int_equal(READ_ONCE(b->ctl->worker), 3);
        /* bad publications change nothing */
        p = test_publication(1024, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(b, &p), -EINVAL);
        p = test_publication(1, 3000, 2000, 0);
        assert_int_equal(shm_pub_switch(b, &p), -ERANGE);
        p = test_publication(1, 1, UINT64_C(1) << 41, 0);
        assert_int_equal(shm_pub_switch(b, &p), -ERANGE);
        assert_int_equal(READ_ONCE(b->ctl->gen), 2);
        /* the deadline only rises */
        assert_int_equal(shm_pub_extend(b, 1500), 0);
        assert_int_equal(READ_ONCE(b->ctl->deadline), 2000);
        assert_int_equal(shm_pub_extend(b, 2500), 0);
        assert_int_equal(READ_ONCE(b->ctl->deadline), 2500);
        shm_pub_close(b);
}

static void test_mode_bits(void **state)
{
        (void)state;
        struct shm_pub *p;
        struct stat st;
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &p), 0);
        assert_int_equal(fstat(p->ctl_fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(fstat(p->ctr_fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0660);
        shm_pub_close(p);
}

/* Opens a publisher, publishes, and lets damage() spoil one object. */
static int open_after(void (*damage)(struct shm_pub *p))
{
        struct shm_pub *p;
        snowid *s = NULL;
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &p), 0);
        struct shm_publication pub = test_publication(3, 1000, 2000, 0);
        assert_int_equal(shm_pub_switch(p, &pub), 0);
        damage(p);
        int r = snowid_open(inst, &s);
        if (r == 0)
                snowid_close(s);
        else
                assert_null(s);
        shm_pub_close(p);
        shm_pub_unlink(inst);
        return r;
}

static void nothing(struct shm_pub *p)
{
        (void)p;
}
static void bad_magic(struct shm_pub *p)
{
        p->ctl->magic ^= 1;
}
static void bad_version(struct shm_pub *p)
{
        p->ctl->version = SHM_VERSION + 1;
}
static void bad_size_field(struct shm_pub *p)
{
        p->ctl->size = 4096;
}
static void bad_ctr_magic(struct shm_pub *p)
{
        p->ctr->magic = 0;
}
static void truncated_ctl(struct shm_pub *p)
{
        assert_int_equal(ftruncate(p->ctl_fd, 100), 0);
}
static void truncated_ctr(struct shm_pub *p)
{
        assert_int_equal(ftruncate(p->ctr_fd, 64), 0);
}
static void foreign_ctr(struct shm_pub *p)
{
        p->ctr->nonce ^= 0xdead;
}
static void no_ctr(struct shm_pub *p)
{
        char name[SHM_NAME_MAX];
        shm_object_name(name, sizeof(name), p->instance, "ctr");
        assert_int_equal(shm_unlink(name), 0);
}

static void test_open_errors(void **state)
{
        (void)state;
        assert_int_equal(open_after(nothing), 0);
        assert_int_equal(open_after(bad_magic), -EPROTO);
        assert_int_equal(open_after(bad_version), -EPROTO);
        assert_int_equal(open_after(bad_size_field), -EPROTO);
        assert_int_equal(open_after(bad_ctr_magic), -EPROTO);
        assert_int_equal(open_after(truncated_ctl), -EPROTO);
        assert_int_equal(open_after(truncated_ctr), -EPROTO);
        assert_int_equal(open_after(foreign_ctr), -EPROTO);
        assert_int_equal(open_after(no_ctr), -ENOENT);
}

static void test_publisher_replaces_damaged(void **state)
{
        (void)state;
        struct shm_pub *p;
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &p), 0);
        uint64_t nonce = p->ctl->nonce;
        p->ctl->version = 99;
        shm_pub_close(p);
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &p), 0);
        assert_false(p->reused);
        assert_int_not_equal(p->ctl->nonce, nonce);
        assert_int_equal(p->ctl->version, SHM_VERSION);
        shm_pub_close(p);
}

static void test_no_permission(void **state)
{
        (void)state;
        struct shm_pub *p;
        assert_int_equal(shm_pub_open(inst, (gid_t)-1, &p), 0);
        if (geteuid() != 0) {
                /* not root: take the owner's own permission away */
                assert_int_equal(fchmod(p->ctr_fd, 0), 0);
                snowid *s = NULL;
                assert_int_equal(snowid_open(inst, &s), -EACCES);
                assert_null(s);
                shm_pub_close(p);
                return;
        }
        /* root: a child that becomes nobody may read .ctl but not open .ctr */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                snowid *s = NULL;
                int r = snowid_open(inst, &s);
                _exit(r == -EACCES && s == NULL ? 0 : 11);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        shm_pub_close(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_offsets),
                cmocka_unit_test_setup_teardown(test_instance_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_absent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publisher_lock_and_reuse, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mode_bits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publisher_replaces_damaged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_permission, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
