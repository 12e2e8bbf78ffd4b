#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/socket.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <signal.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
#include "vault_shims.h"

int sv_set_not_dumpable(void) {
    /* Not dumpable: no core file, and other processes of the same user cannot ptrace us. */
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

void sv_wipe(void *bytes, unsigned long length) { explicit_bzero(bytes, length); }

int sv_peer_credentials(int fd, int *pid, unsigned int *uid) {
    struct ucred cred;
    socklen_t length = sizeof cred;
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length);
    if (rc == 0) { *pid = cred.pid; *uid = cred.uid; }
    return rc;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int sv_peer_pidfd(int fd, int pid) {
    int pidfd = -1;
    socklen_t length = sizeof pidfd;
    /* Linux 6.5+: the kernel's own reference to the connecting process, taken at connect. */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) == 0 && pidfd >= 0) return pidfd;
    if (pid <= 0) return -1;
    /* Older kernels: a pidfd for the pid now; the caller checks afterwards that it is still alive. */
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int sv_pidfd_alive(int pidfd) {
    /* A pidfd becomes readable when its process has exited (a zombie included). */
    struct pollfd p = { .fd = pidfd, .events = POLLIN, .revents = 0 };
    int rc;
    do { rc = poll(&p, 1, 0); } while (rc < 0 && errno == EINTR);
    if (rc < 0) return -1;
    return (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) ? 0 : 1;
}

static int sv_signal_pipe = -1;

static void sv_on_signal(int sig) {
    int saved = errno;
    unsigned char number = (unsigned char)sig;
    /* Non-blocking: a full pipe (signals nobody reads yet) drops this one, never blocks the handler. */
    ssize_t written = write(sv_signal_pipe, &number, 1);
    (void)written;
    errno = saved;
}

int sv_catch_signals(const int *signals, int count) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    sv_signal_pipe = fds[1];
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = sv_on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < count; i++) sigaction(signals[i], &action, NULL);
    return fds[0];
}

int sv_pin_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    long count = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < count && c < CPU_SETSIZE; c++) {
        if (cpu < 0 || c == cpu) CPU_SET(c, &set);
    }
    return sched_setaffinity(0, sizeof set, &set);
}

/* A sock_diag request for TCP sockets of `family` in `states`, sent on a new
   netlink socket that is returned (-1 if it could not be made or sent). */
struct tcp_diag_request {
    struct nlmsghdr header;
    struct inet_diag_req_v2 request;
};

static int tcp_diag_send(struct tcp_diag_request *message, unsigned char family, unsigned short flags, unsigned int states) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    message->header.nlmsg_len = sizeof *message;
    message->header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message->header.nlmsg_flags = NLM_F_REQUEST | flags;
    message->request.sdiag_family = family;
    message->request.sdiag_protocol = IPPROTO_TCP;
    message->request.idiag_states = states;
    message->request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message->request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    if (sendto(fd, message, sizeof *message, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)sizeof *message) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether a listener's address `src` (family `family`) takes 127.0.0.1: it is
   127.0.0.1 or every address, in IPv4 or as IPv6 (a dual-stack listener on
   :: or on ::ffff:127.0.0.1). */
static int takes_ipv4_loopback(unsigned char family, const unsigned int src[4]) {
    const unsigned int loopback = htonl(INADDR_LOOPBACK);
    if (family == AF_INET) return src[0] == loopback || src[0] == 0;
    if (src[0] != 0 || src[1] != 0) return 0;
    return (src[2] == 0 && src[3] == 0) || (src[2] == htonl(0xffff) && src[3] == loopback);
}

static long tcp_listener_owner(unsigned char family, unsigned short port) {
    enum { tcp_listen = 10 };
    struct tcp_diag_request message;
    memset(&message, 0, sizeof message);
    int fd = tcp_diag_send(&message, family, NLM_F_DUMP, 1U << tcp_listen);
    if (fd < 0) return -2;
    long owner = -1;
    for (;;) {
        union { struct nlmsghdr header; char bytes[16384]; } reply;
        ssize_t got;
        do { got = recv(fd, &reply, sizeof reply, 0); } while (got < 0 && errno == EINTR);
        if (got <= 0) { owner = -2; break; }
        int length = (int)got;
        for (struct nlmsghdr *h = &reply.header; NLMSG_OK(h, length); h = NLMSG_NEXT(h, length)) {
            if (h->nlmsg_type == NLMSG_DONE) { close(fd); return owner; }
            if (h->nlmsg_type == NLMSG_ERROR) { close(fd); return -2; }
            if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) continue;
            const struct inet_diag_msg *found = NLMSG_DATA(h);
            if (found->id.idiag_sport == htons(port) && takes_ipv4_loopback(family, found->id.idiag_src))
                owner = (long)found->idiag_uid;
        }
    }
    close(fd);
    return owner;
}

long sv_tcp4_loopback_listener_owner(unsigned short port) {
    long owner = tcp_listener_owner(AF_INET, port);
    return owner != -1 ? owner : tcp_listener_owner(AF_INET6, port);
}

long sv_tcp4_owner(unsigned int local_addr, unsigned short local_port,
                   unsigned int remote_addr, unsigned short remote_port) {
    struct tcp_diag_request message;
    memset(&message, 0, sizeof message);
    message.request.id.idiag_src[0] = local_addr;
    message.request.id.idiag_sport = htons(local_port);
    message.request.id.idiag_dst[0] = remote_addr;
    message.request.id.idiag_dport = htons(remote_port);
    /* One socket by its address, not a dump. */
    int fd = tcp_diag_send(&message, AF_INET, 0, ~0U);
    if (fd < 0) return -2;
    union { struct nlmsghdr header; char bytes[4096]; } reply;
    ssize_t got;
    do { got = recv(fd, &reply, sizeof reply, 0); } while (got < 0 && errno == EINTR);
    close(fd);
    if (got < 0) return -2;
    int length = (int)got;
    for (struct nlmsghdr *h = &reply.header; NLMSG_OK(h, length); h = NLMSG_NEXT(h, length)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *error = NLMSG_DATA(h);
            return error->error == -ENOENT ? -1 : -2;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) continue;
        const struct inet_diag_msg *found = NLMSG_DATA(h);
        /* The lookup falls back to a listener on the local port: only the very
           connection counts. A TIME_WAIT remnant reports uid 0 but has no owner. */
        enum { tcp_time_wait = 6 };
        if (found->id.idiag_src[0] != local_addr || found->id.idiag_sport != htons(local_port) ||
            found->id.idiag_dst[0] != remote_addr || found->id.idiag_dport != htons(remote_port) ||
            found->idiag_state == tcp_time_wait) return -1;
        return (long)found->idiag_uid;
    }
    return -2;
}
