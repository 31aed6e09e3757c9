// SPDX-License-Identifier: MIT
package dev.snowid;

import java.time.Instant;

/**
 * The parts of an ID: its time in ms since the layout's epoch, the same as
 * unix ms, the worker number and the sequence within the ms.
 */
public record Parts(long timeMs, long unixMs, int worker, int sequence) {
    /** unixMs as an Instant. */
    public Instant instant() {
        return Instant.ofEpochMilli(unixMs);
    }
}
