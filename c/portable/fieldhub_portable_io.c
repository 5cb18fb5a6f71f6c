/*
 * fieldhub_portable_io.c - ready fhp_stream adapters for hosted systems:
 * a plain file descriptor (a UART, a virtio-serial port, a pipe, a unix
 * socket), BSD sockets and Winsock (TCP). Firmware without these APIs does
 * not need this file: it writes its own two callbacks (README.md).
 *
 * Every adapter is non-blocking friendly: "nothing now" (EAGAIN /
 * WSAEWOULDBLOCK) is 0, the end of the stream FHP_ERR_CLOSED, any other
 * failure FHP_ERR_IO; a blocking descriptor works as well.
 *
 * The connecting adapters check whose hub they reached before the client
 * sends a byte (fhp_check_hub, the Rust client's hub_owner.rs rule): another
 * local user listening where the client looks learns nothing. The core
 * (fieldhub_portable.c) knows nothing of users or sockets.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* struct ucred, for SO_PEERCRED */
#endif
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

int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock, char *why, size_t why_size) {
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
    /* Winsock does not tell a socket's user: nothing is checked (README.md). */
    if (why && why_size) why[0] = '\0';
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
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* ---- Whose hub: the rule of the Rust client's hub_owner.rs ---------- */

#define HUB_USER_VAR "FIELDHUB_HUB_USER"

static void say(char *why, size_t size, const char *format, ...) {
    va_list args;
    if (!why || !size) return;
    va_start(args, format);
    vsnprintf(why, size, format, args);
    va_end(args);
}

/* /etc/passwd's entry for user `name` (or, with name NULL, for `uid`): its
 * name into `found` and its uid into `*found_uid`. Read by hand, as the Rust
 * client does: only for messages and for FIELDHUB_HUB_USER's name, the
 * decision compares the kernel's numbers (and a static build needs no NSS). */
static int passwd_entry(const char *name, unsigned long uid, char *found, size_t found_size,
                        unsigned long *found_uid) {
    char line[512];
    int hit = 0;
    FILE *passwd = fopen("/etc/passwd", "r");
    if (!passwd) return 0;
    while (!hit && fgets(line, sizeof line, passwd)) {
        char *end, *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        unsigned long id;
        if (!second || !isdigit((unsigned char)second[1])) continue;
        id = strtoul(second + 1, &end, 10);
        if (*end != ':') continue;
        *first = '\0';
        hit = name ? strcmp(line, name) == 0 : id == uid;
        if (hit && found && found_size) {
            size_t n = strlen(line) < found_size ? strlen(line) : found_size - 1;
            memcpy(found, line, n);
            found[n] = '\0';
        }
        if (hit && found_uid) *found_uid = id;
    }
    fclose(passwd);
    return hit;
}

/* "user nobody (uid 65534)", or "uid 1234" for a user without a name. */
static void user_label(unsigned long uid, char *label, size_t size) {
    char name[64];
    if (passwd_entry(NULL, uid, name, sizeof name, NULL)) snprintf(label, size, "user %s (uid %lu)", name, uid);
    else snprintf(label, size, "uid %lu", uid);
}

/* Whether a hub of user `owner` (`known`: the kernel told it) may hear from
 * this process: its own user's and root's, FIELDHUB_HUB_USER's (a name or a
 * uid), any with FIELDHUB_HUB_USER=any; `what` names the listener. */
static int decide(int known, unsigned long owner, const char *what, char *why, size_t size) {
    const char *trusted = getenv(HUB_USER_VAR);
    unsigned long me = (unsigned long)geteuid(), allowed;
    char owner_label[96], me_label[96], owner_name[64];
    if (trusted && !*trusted) trusted = NULL;
    if (trusted && strcmp(trusted, "any") == 0) return FHP_OK;
    if (!known) {
        say(why, size,
            "the kernel does not tell which user runs %s, so it may be another user's impostor; nothing was sent. "
            "Set " HUB_USER_VAR "=any to talk to it anyway",
            what);
        return FHP_ERR_REFUSED;
    }
    if (owner == me || owner == 0) return FHP_OK;
    if (trusted) {
        char *end;
        allowed = strtoul(trusted, &end, 10);
        if (!isdigit((unsigned char)*trusted) || *end) {
            if (!passwd_entry(trusted, 0, NULL, 0, &allowed)) {
                say(why, size, HUB_USER_VAR "=%s names no user of this machine", trusted);
                return FHP_ERR_REFUSED;
            }
        }
        if (allowed == owner) return FHP_OK;
    }
    user_label(owner, owner_label, sizeof owner_label);
    user_label(me, me_label, sizeof me_label);
    if (!passwd_entry(NULL, owner, owner_name, sizeof owner_name, NULL))
        snprintf(owner_name, sizeof owner_name, "%lu", owner);
    say(why, size,
        "%s runs as %s, not as you (%s), root%s%s: another user may be listening there to catch your token, so "
        "nothing was sent. If that user's hub is the one you mean, set " HUB_USER_VAR "=%s",
        what, owner_label, me_label, trusted ? " or " HUB_USER_VAR "'s " : "", trusted ? trusted : "", owner_name);
    return FHP_ERR_REFUSED;
}

/* An address as /proc/net/tcp* compares it: four 32-bit words (one for
 * IPv4) as they lie in memory, and the port. */
typedef struct table_addr {
    uint32_t words[4];
    unsigned port;
} table_addr;

#ifdef __linux__
/* One "HEX:PORT" field of /proc/net/tcp*: the kernel prints each address
 * word as a number in its own byte order. */
static int parse_field(const char *text, size_t words, table_addr *out) {
    size_t i;
    char word[9];
    for (i = 0; i < words; i++) {
        memcpy(word, text + 8 * i, 8);
        word[8] = '\0';
        out->words[i] = (uint32_t)strtoul(word, NULL, 16);
    }
    if (text[8 * words] != ':') return 0;
    out->port = (unsigned)strtoul(text + 8 * words + 1, NULL, 16);
    return 1;
}

static uint32_t swap32(uint32_t w) {
    return (w >> 24) | ((w >> 8) & 0xff00u) | ((w << 8) & 0xff0000u) | (w << 24);
}

/* Whether `table` (a table entry) is `addr` (`wildcard`: or the unspecified
 * address). A word matches in either byte order: under qemu-user a program
 * of the other byte order reads the host kernel's table, and a loopback
 * address with its bytes swapped is no address a hub here listens on. */
static int same(const table_addr *table, const table_addr *addr, size_t words, int wildcard) {
    size_t i;
    int exact = 1, unspecified = 1;
    for (i = 0; i < words; i++) {
        exact &= table->words[i] == addr->words[i] || table->words[i] == swap32(addr->words[i]);
        unspecified &= table->words[i] == 0;
    }
    return table->port == addr->port && (exact || (wildcard && unspecified));
}

/* The uid owning the hub's end of this connection (local, hub) in the
 * kernel's table `path`, else the listening socket's at the hub's address. */
static int table_owner(const char *path, size_t words, const table_addr *local, const table_addr *hub,
                       unsigned long *uid) {
    char line[512], local_field[40], remote_field[40];
    int listener = 0;
    unsigned long listener_uid = 0;
    FILE *table = fopen(path, "r");
    if (!table) return 0;
    while (fgets(line, sizeof line, table)) {
        table_addr at, to;
        unsigned state;
        unsigned long owner;
        if (sscanf(line, " %*u: %39s %39s %x %*s %*s %*s %lu", local_field, remote_field, &state, &owner) != 4 ||
            strlen(local_field) != 8 * words + 5 || !parse_field(local_field, words, &at) ||
            !parse_field(remote_field, words, &to))
            continue;
        if (same(&at, hub, words, 0) && same(&to, local, words, 0)) {
            fclose(table);
            *uid = owner;
            return 1;
        }
        if (state == 0x0A /* TCP_LISTEN */ && !listener && same(&at, hub, words, 1)) {
            listener = 1;
            listener_uid = owner;
        }
    }
    fclose(table);
    *uid = listener_uid;
    return listener;
}
#endif

/* `sa` as the table holds it; 1 word for IPv4 (an IPv4-mapped IPv6
 * address too, `mapped` set), 4 for IPv6; 0 for another family. */
static size_t to_table(const struct sockaddr_storage *sa, table_addr *out, int *mapped, int *loopback) {
    memset(out, 0, sizeof *out);
    *mapped = 0;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        memcpy(out->words, &in->sin_addr, 4);
        out->port = ntohs(in->sin_port);
        *loopback = ((const uint8_t *)&in->sin_addr)[0] == 127;
        return 1;
    }
    if (sa->ss_family == AF_INET6) {
        static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        const uint8_t *b = in6->sin6_addr.s6_addr;
        out->port = ntohs(in6->sin6_port);
        if (memcmp(b, prefix, 12) == 0) {
            memcpy(out->words, b + 12, 4);
            *mapped = 1;
            *loopback = b[12] == 127;
            return 1;
        }
        memcpy(out->words, b, 16);
        *loopback = memcmp(b, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0;
        return 4;
    }
    return 0;
}

int fhp_check_hub(int fd, char *why, size_t why_size) {
    struct sockaddr_storage local, hub;
    socklen_t local_len = sizeof local, hub_len = sizeof hub;
    char what[160];
    if (why && why_size) why[0] = '\0';
    if (getsockname(fd, (struct sockaddr *)&local, &local_len) != 0 ||
        getpeername(fd, (struct sockaddr *)&hub, &hub_len) != 0) {
        say(why, why_size, "the connection's addresses cannot be read: %s", strerror(errno));
        return FHP_ERR_IO;
    }
    if (local.ss_family == AF_UNIX) {
        snprintf(what, sizeof what, "the process listening on this socket");
#if defined(__linux__) && defined(SO_PEERCRED)
        {
            struct ucred cred;
            socklen_t len = sizeof cred;
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
                return decide(1, (unsigned long)cred.uid, what, why, why_size);
        }
#endif
        return decide(0, 0, what, why, why_size);
    } else {
        table_addr at, to;
        int mapped, hub_mapped, loopback = 0, ignored, known = 0;
        unsigned long owner = 0;
        size_t words = to_table(&hub, &to, &hub_mapped, &loopback);
        char host[INET6_ADDRSTRLEN] = "?";
        if (!words || !loopback) return FHP_OK; /* another machine's hub: use TLS there */
        to_table(&local, &at, &mapped, &ignored);
        if (hub.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&hub)->sin_addr, host, sizeof host);
        else inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&hub)->sin6_addr, host, sizeof host);
        snprintf(what, sizeof what, hub.ss_family == AF_INET6 ? "the socket listening at [%s]:%u"
                                                               : "the socket listening at %s:%u",
                 host, to.port);
#ifdef __linux__
        /* A mapped address is an IPv4 listener's connection (tcp) or a dual-stack one's (tcp6, mapped). */
        known = table_owner(words == 1 ? "/proc/net/tcp" : "/proc/net/tcp6", words, &at, &to, &owner);
        if (!known && hub_mapped) {
            table_addr at6 = at, to6 = to;
            memcpy(at6.words, ((struct sockaddr_in6 *)&local)->sin6_addr.s6_addr, 16);
            memcpy(to6.words, ((struct sockaddr_in6 *)&hub)->sin6_addr.s6_addr, 16);
            known = table_owner("/proc/net/tcp6", 4, &at6, &to6, &owner);
        }
#endif
        return decide(known, owner, what, why, why_size);
    }
}

int fhp_tcp_connect(const char *host, const char *port, fhp_socket *sock, char *why, size_t why_size) {
    struct addrinfo hints, *res, *ai;
    int one = 1, rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) {
        say(why, why_size, "%s does not resolve", host);
        return FHP_ERR_INVALID_ARGUMENT;
    }
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
    if (*sock < 0) {
        say(why, why_size, "nothing accepts connections at %s port %s", host, port);
        return FHP_ERR_IO;
    }
    if ((rc = fhp_check_hub(*sock, why, why_size)) != FHP_OK) {
        fhp_tcp_close(sock);
        return rc;
    }
    setsockopt(*sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(*sock, F_SETFL, fcntl(*sock, F_GETFL) | O_NONBLOCK);
    return FHP_OK;
}

int fhp_unix_connect(const char *path, int *fd, char *why, size_t why_size) {
    struct sockaddr_un addr;
    int rc;
    *fd = -1;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path) {
        say(why, why_size, "the socket path %s is longer than %u bytes", path, (unsigned)sizeof addr.sun_path - 1);
        return FHP_ERR_INVALID_ARGUMENT;
    }
    memcpy(addr.sun_path, path, strlen(path));
    if ((*fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 || connect(*fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        say(why, why_size, "cannot connect to %s: %s", path, strerror(errno));
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return FHP_ERR_IO;
    }
    if ((rc = fhp_check_hub(*fd, why, why_size)) != FHP_OK) {
        close(*fd);
        *fd = -1;
        return rc;
    }
    fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
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
