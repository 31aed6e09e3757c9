// SPDX-License-Identifier: MIT
package dev.snowid;

/**
 * Host-wide counts kept by libsnowid on its slow paths (all processes):
 * counter values taken, calls that waited for the clock, for the deadline,
 * for a switch, calls that gave up (EAGAIN), values dropped at a switch.
 */
public record HostStats(long issued, long waitsCeiling, long waitsDeadline, long waitsSwitch,
        long eagain, long dropped) {
}
