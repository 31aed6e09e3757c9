// SPDX-License-Identifier: MIT
package dev.snowid;

/**
 * The segment's status (snowid_get_status): the worker number, the daemon's
 * state (and its code, for states newer than this class), the generation
 * (odd while snowidd is switching), the deadline (the last ID time that may
 * be used, in ms since the layout's epoch and in unix ms), the headroom
 * (deadline minus ID time now; negative once passed), the offset of ID time
 * from CLOCK_MONOTONIC, the daemon's pid, and whether the daemon publishes
 * the TSC clock.
 */
public record Status(int worker, State state, int stateCode, long generation, long deadlineMs,
        long deadlineUnixMs, long headroomMs, long offsetNs, int daemonPid, boolean tscClock) {
    /** enum snowid_state. */
    public enum State {
        STARTING, LEASED, NO_LEASE, RESTORED, LAYOUT_LOST, RETIRED, ETCD_FULL, UNKNOWN;

        static State of(int code) {
            State[] all = values();
            return code >= 0 && code < all.length - 1 ? all[code] : UNKNOWN;
        }
    }
}
