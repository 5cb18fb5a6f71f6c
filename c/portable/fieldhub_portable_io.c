/*
 * fieldhub_portable_io.c - ready fhp_stream adapters for hosted systems:
 * a plain file descriptor (a UART, a virtio-serial port, a pipe, a unix
 * socket), BSD sockets and Winsock (TCP). Firmware without these APIs does
 * not need this file: it writes its own two callbacks (README.md).
 *
 * Every adapter is non-blocking friendly: "nothing now" (EAGAIN /
 * WSAEWOULDBLOCK) is 0, the end of the stream FHP_ERR_CLOSED, any other
 * failure FHP_ERR_IO; a blocking descriptor works as well.
 */
#include "fieldhub_portable_io.h"

#include <string.h>

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>

static long sock_read(void *ctx, uint8_t *buf, size_t len) {
    SOCKET s = *(SOCKET *)ctx;
    int n = recv(s, (char *)buf, len > 65536 ? 65536 : (int)len, 0);
    if (n > 0) return n;
    if (n == 0) return FHP_ERR_CLOSED;
    return WSAGetLastError() == WSAEWOULDBLOCK ? 0 : FHP_ERR_IO;
}

static long sock_write(void *ctx, const uint8_t *buf, size_t len) {
    SOCKET s = *(SOCKET *)ctx;
    int n = send(s, (const char *)buf, len > 65536 ? 65536 : (int)len, 0);
    if (n >= 0) return n;
    return WSAGetLastError() == WSAEWOULDBLOCK ? 0 : FHP_ERR_IO;
}

int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock) {
    struct addrinfo hints, *res, *ai;
    u_long nonblocking = 1;
    BOOL nodelay = TRUE;
    WSADATA wsa;
    if (WSAStartup(MAKEWORD(2, 2), &wsa) != 0) return FHP_ERR_IO;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return FHP_ERR_INVALID_ARGUMENT;
    *sock = INVALID_SOCKET;
    for (ai = res; ai; ai = ai->ai_next) {
        SOCKET s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (s == INVALID_SOCKET) continue;
        if (connect(s, ai->ai_addr, (int)ai->ai_addrlen) == 0) {
            *sock = s;
            break;
        }
        closesocket(s);
    }
    freeaddrinfo(res);
    if (*sock == INVALID_SOCKET) return FHP_ERR_IO;
    setsockopt(*sock, IPPROTO_TCP, TCP_NODELAY, (const char *)&nodelay, sizeof nodelay);
    ioctlsocket(*sock, FIONBIO, &nonblocking);
    return FHP_OK;
}

void fhp_tcp_close(fhp_socket *sock) {
    closesocket(*sock);
    *sock = INVALID_SOCKET;
    WSACleanup();
}

#else /* POSIX */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

static long fd_read(void *ctx, uint8_t *buf, size_t len) {
    ssize_t n = read(*(int *)ctx, buf, len);
    if (n > 0) return (long)n;
    if (n == 0) return FHP_ERR_CLOSED;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : FHP_ERR_IO;
}

static long fd_write(void *ctx, const uint8_t *buf, size_t len) {
    ssize_t n = write(*(int *)ctx, buf, len);
    if (n >= 0) return (long)n;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : FHP_ERR_IO;
}

fhp_stream fhp_fd_stream(int *fd) {
    fhp_stream s;
    s.ctx = fd;
    s.read = fd_read;
    s.write = fd_write;
    return s;
}

/* Sockets are descriptors: send() only to keep SIGPIPE away from the program. */
static long sock_read(void *ctx, uint8_t *buf, size_t len) { return fd_read(ctx, buf, len); }

static long sock_write(void *ctx, const uint8_t *buf, size_t len) {
#ifdef MSG_NOSIGNAL
    ssize_t n = send(*(int *)ctx, buf, len, MSG_NOSIGNAL);
#else
    ssize_t n = send(*(int *)ctx, buf, len, 0);
#endif
    if (n >= 0) return (long)n;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : FHP_ERR_IO;
}

int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock) {
    struct addrinfo hints, *res, *ai;
    int one = 1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return FHP_ERR_INVALID_ARGUMENT;
    *sock = -1;
    for (ai = res; ai; ai = ai->ai_next) {
        int s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (s < 0) continue;
        if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
            *sock = s;
            break;
        }
        close(s);
    }
    freeaddrinfo(res);
    if (*sock < 0) return FHP_ERR_IO;
    setsockopt(*sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(*sock, F_SETFL, fcntl(*sock, F_GETFL) | O_NONBLOCK);
    return FHP_OK;
}

void fhp_tcp_close(fhp_socket *sock) {
    close(*sock);
    *sock = -1;
}
#endif

fhp_stream fhp_socket_stream(fhp_socket *sock) {
    fhp_stream s;
    s.ctx = sock;
    s.read = sock_read;
    s.write = sock_write;
    return s;
}
