/*
 * fieldhub_portable_io.h - optional ready-made fhp_stream adapters
 * (fieldhub_portable_io.c): a file descriptor on POSIX systems, and TCP over
 * BSD sockets or Winsock. Firmware writes its own two callbacks instead.
 */
#ifndef FIELDHUB_PORTABLE_IO_H
#define FIELDHUB_PORTABLE_IO_H

#include "fieldhub_portable.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef _WIN32
#include <winsock2.h>
typedef SOCKET fhp_socket;
#else
typedef int fhp_socket;
/**
 * A stream over the descriptor `*fd` (a UART, a virtio-serial port such as
 * /dev/vport0p1, a unix socket). Set O_NONBLOCK on it for a poll loop that
 * never waits. `fd` must stay valid while the stream is used.
 */
fhp_stream fhp_fd_stream(int *fd);
#endif

/**
 * Connect a TCP socket to `host`:`port` (a name or address; IPv4 or IPv6),
 * with TCP_NODELAY, then make it non-blocking. Winsock: starts Winsock
 * (WSAStartup) too. FHP_ERR_INVALID_ARGUMENT when the name does not
 * resolve, FHP_ERR_IO when nothing accepts.
 */
int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock);
/** A stream over a connected socket; `sock` must stay valid while it is used. */
fhp_stream fhp_socket_stream(fhp_socket *sock);
void fhp_tcp_close(fhp_socket *sock);

#ifdef __cplusplus
}
#endif

#endif /* FIELDHUB_PORTABLE_IO_H */
