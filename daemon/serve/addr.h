/* SPDX-License-Identifier: MIT */
/*
 * Listen addresses, "ADDR:PORT": parsed where the settings are read
 * (config.c, which rejects a bad one) and again where the HTTP server binds
 * (http.c).  Pure: no I/O.
 */
#pragma once

/* Parses "ADDR:PORT" ("127.0.0.1:7723", "[::1]:7723", "0.0.0.0:80"): an
 * IPv4 address, or an IPv6 one in brackets, and a port from 1 to 65535.
 * Fills ret_sockaddr_storage (at least sizeof(struct sockaddr_in6) bytes)
 * with a struct sockaddr_in or sockaddr_in6 and *ret_len with its size;
 * 0, or -EINVAL for anything else. */
int addr_parse_listen(const char *spec, void *ret_sockaddr_storage, unsigned *ret_len);
