// SPDX-License-Identifier: MIT
package dev.snowid;

import java.util.UUID;

/** How an ID is cut: timeBits + workerBits + seqBits == 63, timeBits &ge; 32. */
public record Layout(long epochMs, int timeBits, int workerBits, int seqBits) {
    /** unix ms of ID time 0 by default: 2025-01-01Z. */
    public static final long EPOCH_DEFAULT_MS = 1735689600000L;
    /** 41 bits of time, 10 of worker, 12 of sequence, from 2025-01-01Z. */
    public static final Layout DEFAULT = new Layout(EPOCH_DEFAULT_MS, 41, 10, 12);

    /** Whether the layout is one libsnowid accepts (snowid_layout_check). */
    public boolean isValid() {
        return SnowId.layoutCheck0(epochMs, timeBits, workerBits, seqBits) == 0;
    }

    /**
     * The parts of {@code id} under this layout.
     *
     * @throws IllegalArgumentException (ERANGE) for a negative id, which no
     *         layout issues, or (EINVAL) an invalid layout
     */
    public Parts decode(long id) {
        if (id < 0)
            throw new IllegalArgumentException("ERANGE: an ID is never negative: " + id);
        if (timeBits < 32 || timeBits > 63 || workerBits < 0 || workerBits > 31 || seqBits < 0
                || seqBits > 31 || timeBits + workerBits + seqBits != 63 || epochMs < 0
                || epochMs >= 1L << 42)
            throw new IllegalArgumentException("EINVAL: not a valid layout: " + this);
        long timeMs = id >>> (workerBits + seqBits);
        return new Parts(timeMs, epochMs + timeMs, (int) ((id >>> seqBits) & ((1L << workerBits) - 1)),
                (int) (id & ((1L << seqBits) - 1)));
    }

    /**
     * The time, worker and sequence of a UUID that {@link SnowId#nextUuid7()}
     * made under this layout.  EINVAL: not a UUIDv7 (or an invalid layout);
     * ERANGE: its time or sequence does not fit this layout.
     */
    public Parts decodeUuid7(UUID u) throws SnowIdException {
        long[] v = new long[4];
        int r = SnowId.decodeUuid70(epochMs, timeBits, workerBits, seqBits,
                u.getMostSignificantBits(), u.getLeastSignificantBits(), v);
        if (r < 0)
            throw new SnowIdException(-r, "decode UUIDv7");
        return new Parts(v[0], v[1], (int) v[2], (int) v[3]);
    }
}
