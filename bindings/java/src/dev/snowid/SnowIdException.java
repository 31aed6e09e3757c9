// SPDX-License-Identifier: MIT
package dev.snowid;

import java.io.IOException;

/**
 * A libsnowid call failed: {@link #errno()} is the errno value it returned
 * (negated), {@link #errnoName()} its name, e.g. "EAGAIN", which the message
 * names too: "snowid: next: EAGAIN (Resource temporarily unavailable)".
 *
 * <p>An IOException, checked: every failure comes from outside the process
 * (no snowidd, a lease lost, the store unreachable), as a socket's do, and EAGAIN
 * is the one a caller must plan for.  A closed handle gives EINVAL, as
 * libsnowid does for the NULL handle snowid_close() returns, and as the other
 * bindings do.  Bad arguments that Java can tell
 * without the library (a negative budget, an array range outside the array)
 * are IllegalArgumentException or IndexOutOfBoundsException.
 */
public class SnowIdException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int errno;
    private final String errnoName;

    public SnowIdException(int errno, String what) {
        this(errno, what, SnowId.errnoName0(errno));
    }

    private SnowIdException(int errno, String what, String name) {
        super("snowid: " + what + ": " + (name.isEmpty() ? "errno " + errno : name) + " ("
                + SnowId.strerror0(errno) + ")");
        this.errno = errno;
        this.errnoName = name.isEmpty() ? "errno " + errno : name;
    }

    /** The errno value, positive (e.g. 11 for EAGAIN on Linux). */
    public int errno() {
        return errno;
    }

    /** The errno's name, e.g. "EAGAIN", "ENOENT", "EINVAL". */
    public String errnoName() {
        return errnoName;
    }
}
