/*
 * fieldhub_portable_io.h - optional ready-made fhp_stream adapters
 * (fieldhub_portable_io.c): a file descriptor on POSIX systems, a unix
 * socket, and TCP over BSD sockets or Winsock. Firmware writes its own two
 * callbacks instead. The connecting functions check whose hub they reached
 * before anything is sent (fhp_check_hub).
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

/**
 * Whether the hub at the other end of the connected socket `fd` may hear
 * from this process, asked of the kernel before anything is sent: on a unix
 * socket the listening process's user (SO_PEERCRED, Linux), on TCP to a
 * loopback address the user owning the hub's end of the connection, else
 * the listening socket (/proc/net/tcp and tcp6, Linux). A hub of this
 * process's user or of root is trusted, another user's only when
 * $FIELDHUB_HUB_USER names it (a name or a uid; `any` turns the check off);
 * a hub whose user the kernel does not tell is refused. TCP to another
 * machine is not checked (use TLS there). FHP_OK, or FHP_ERR_REFUSED with
 * `why` (NUL-terminated, cut to `why_size`; NULL for none) naming who
 * listens and the FIELDHUB_HUB_USER that would trust it.
 */
int fhp_check_hub(int fd, char *why, size_t why_size);

/**
 * Connect to the unix socket `path`, check whose hub it is (fhp_check_hub),
 * then make it non-blocking; use it with fhp_fd_stream. FHP_ERR_IO when
 * nothing listens there, FHP_ERR_REFUSED for another user's socket (the
 * socket is closed, nothing was sent); `why` as for fhp_check_hub.
 */
int fhp_unix_connect(const char *path, int *fd, char *why, size_t why_size);
#endif

/**
 * Connect a TCP socket to `host`:`port` (a name or address; IPv4 or IPv6),
 * check whose hub it is on a loopback address (fhp_check_hub; POSIX only:
 * Winsock does not tell), then set TCP_NODELAY and make it non-blocking.
 * Winsock: starts Winsock (WSAStartup) too. FHP_ERR_INVALID_ARGUMENT when
 * the name does not resolve, FHP_ERR_IO when nothing accepts,
 * FHP_ERR_REFUSED when another user listens there (the socket is closed,
 * nothing was sent); `why` (NULL for none) says which, as fhp_check_hub.
 */
int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock, char *why, size_t why_size);
/** A stream over a connected socket; `sock` must stay valid while it is used. */
fhp_stream fhp_socket_stream(fhp_socket *sock);
void fhp_tcp_close(fhp_socket *sock);

#ifdef __cplusplus
}
#endif

#endif /* FIELDHUB_PORTABLE_IO_H */
