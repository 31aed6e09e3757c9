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
    /**
     * enum snowid_state: RESTORED, the store was restored (nothing extended
     * until fenced); STORE_FULL, the store is full (nothing extended).
     */
    public enum State {
        STARTING, LEASED, NO_LEASE, RESTORED, LAYOUT_LOST, RETIRED, STORE_FULL, UNKNOWN;

        /**
         * STORE_FULL by its name from when etcd was the only store: the same
         * constant (a field, not an enum constant, so a switch needs
         * {@code case STORE_FULL}).
         *
         * @deprecated use {@link #STORE_FULL}; ETCD_FULL goes in the next release.
         */
        @Deprecated
        public static final State ETCD_FULL = STORE_FULL;

        static State of(int code) {
            State[] all = values();
            return code >= 0 && code < all.length - 1 ? all[code] : UNKNOWN;
        }
    }
}
