// SPDX-License-Identifier: MIT

package snowid

import (
	"strconv"
	"syscall"
)

// Error is what every function of this package returns on failure: the
// operation and the errno that libsnowid returns in the same case
// (libclient/include/snowid.h).  It unwraps to the syscall.Errno, so
// errors.Is(err, syscall.EAGAIN) works (and errors.Is(err, os.ErrNotExist)
// for ENOENT, as for any Errno).
type Error struct {
	Op    string // "open", "next", "next batch", "decode", ...
	Errno syscall.Errno
}

// Error reads like "snowid: next: EAGAIN (resource temporarily unavailable)".
func (e *Error) Error() string {
	return "snowid: " + e.Op + ": " + ErrnoName(e.Errno) + " (" + e.Errno.Error() + ")"
}

// Unwrap gives the syscall.Errno.
func (e *Error) Unwrap() error { return e.Errno }

func fail(op string, e syscall.Errno) error { return &Error{Op: op, Errno: e} }

var errnoNames = map[syscall.Errno]string{
	syscall.EPERM:        "EPERM",
	syscall.ENOENT:       "ENOENT",
	syscall.EINTR:        "EINTR",
	syscall.EIO:          "EIO",
	syscall.EBADF:        "EBADF",
	syscall.EAGAIN:       "EAGAIN",
	syscall.ENOMEM:       "ENOMEM",
	syscall.EACCES:       "EACCES",
	syscall.EFAULT:       "EFAULT",
	syscall.ENOTDIR:      "ENOTDIR",
	syscall.EINVAL:       "EINVAL",
	syscall.ENFILE:       "ENFILE",
	syscall.EMFILE:       "EMFILE",
	syscall.EXDEV:        "EXDEV",
	syscall.EPIPE:        "EPIPE",
	syscall.ERANGE:       "ERANGE",
	syscall.ENAMETOOLONG: "ENAMETOOLONG",
	syscall.ELOOP:        "ELOOP",
	syscall.ENODATA:      "ENODATA",
	syscall.EPROTO:       "EPROTO",
	syscall.ENOTSOCK:     "ENOTSOCK",
	syscall.EPROTOTYPE:   "EPROTOTYPE",
	syscall.EADDRINUSE:   "EADDRINUSE",
	syscall.ECONNRESET:   "ECONNRESET",
	syscall.ENOBUFS:      "ENOBUFS",
	syscall.EISCONN:      "EISCONN",
	syscall.ENOTCONN:     "ENOTCONN",
	syscall.ETIMEDOUT:    "ETIMEDOUT",
	syscall.ECONNREFUSED: "ECONNREFUSED",
	syscall.EALREADY:     "EALREADY",
	syscall.EINPROGRESS:  "EINPROGRESS",
}

// ErrnoName is the symbolic name of an errno ("EAGAIN"); "errno N" for one
// this package has no name for.
func ErrnoName(e syscall.Errno) string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return "errno " + strconv.Itoa(int(e))
}

// errnoOf is the errno in err (a syscall's error), EIO if it holds none.
func errnoOf(err error) syscall.Errno {
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
