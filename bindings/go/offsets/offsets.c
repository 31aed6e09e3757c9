/* SPDX-License-Identifier: MIT */
/*
 * Prints the layout of the shared segment and of the handshake's messages
 * as the C compiler sees it, one "name offset" a line: the Go client's
 * tests compare its own structures with these (segment_test.go).
 */
#include <stddef.h>
#include <stdio.h>

#include "handshake.h"
#include "segment.h"

#define F(type, field) printf("%s.%s %zu\n", #type, #field, offsetof(struct type, field))
#define S(type) printf("%s.sizeof %zu\n", #type, sizeof(struct type))

int main(void)
{
        S(shm_ctl);
        F(shm_ctl, magic);
        F(shm_ctl, version);
        F(shm_ctl, size);
        F(shm_ctl, pid);
        F(shm_ctl, state);
        F(shm_ctl, nonce);
        F(shm_ctl, gen);
        F(shm_ctl, deadline);
        F(shm_ctl, offset_ns);
        F(shm_ctl, epoch_ms);
        F(shm_ctl, worker);
        F(shm_ctl, time_bits);
        F(shm_ctl, worker_bits);
        F(shm_ctl, seq_bits);
        F(shm_ctl, lead_ms);
        F(shm_ctl, heartbeat_ms);
        F(shm_ctl, range_from);
        F(shm_ctl, range_end);
        F(shm_ctl, tsc.span);
        S(shm_line);
        F(shm_line, state);
        S(shm_stats);
        F(shm_stats, waits_ceiling);
        F(shm_stats, waits_deadline);
        F(shm_stats, waits_switch);
        F(shm_stats, eagain);
        F(shm_stats, dropped);
        F(shm_stats, issued);
        S(shm_ctr);
        F(shm_ctr, line);
        F(shm_ctr, stats);
        F(shm_ctr, magic);
        F(shm_ctr, version);
        F(shm_ctr, size);
        F(shm_ctr, nonce);
        S(shm_hello);
        S(shm_welcome);
        F(shm_welcome, status);
        F(shm_welcome, version);
        F(shm_welcome, ctl_size);
        F(shm_welcome, ctr_size);
        F(shm_welcome, nonce);
        F(shm_welcome, mono_ns);
        F(shm_welcome, uid);
        printf("SHM_MAGIC_CTL %llu\n", (unsigned long long)SHM_MAGIC_CTL);
        printf("SHM_MAGIC_CTR %llu\n", (unsigned long long)SHM_MAGIC_CTR);
        printf("SHM_VERSION %u\n", SHM_VERSION);
        printf("SHM_LINES %u\n", SHM_LINES);
        printf("SHM_HEARTBEAT_STALE_MS %u\n", SHM_HEARTBEAT_STALE_MS);
        printf("SHM_STATE_RETIRED %u\n", SHM_STATE_RETIRED);
        printf("SHM_HS_TIMEOUT_MS %u\n", SHM_HS_TIMEOUT_MS);
        printf("SHM_SOCK_PATH_MAX %u\n", SHM_SOCK_PATH_MAX);
        printf("SHM_INSTANCE_MAX %u\n", SHM_INSTANCE_MAX);
        return 0;
}
