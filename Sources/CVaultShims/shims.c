#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <pthread.h>
#include <string.h>
#include "vault_shims.h"

int sv_set_not_dumpable(void) {
    /* Not dumpable: no core file, and other processes of the same user cannot ptrace us. */
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int sv_poll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int sv_poll_add(int poll, int fd) {
    struct epoll_event event = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
    return epoll_ctl(poll, EPOLL_CTL_ADD, fd, &event);
}

int sv_poll_remove(int poll, int fd) { return epoll_ctl(poll, EPOLL_CTL_DEL, fd, 0); }

int sv_poll_wait(int poll, int *fds, int max, int timeout_ms) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int n = epoll_wait(poll, events, max, timeout_ms);
    for (int i = 0; i < n; i++) fds[i] = events[i].data.fd;
    return n;
}

int sv_wake_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int sv_accept(int listener) { return accept4(listener, 0, 0, SOCK_CLOEXEC | SOCK_NONBLOCK); }

void sv_name_thread(const char *name) { pthread_setname_np(pthread_self(), name); }

void sv_wipe(void *bytes, unsigned long length) { explicit_bzero(bytes, length); }

int sv_peer_credentials(int fd, int *pid, unsigned int *uid) {
    struct ucred cred;
    socklen_t length = sizeof cred;
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length);
    if (rc == 0) { *pid = cred.pid; *uid = cred.uid; }
    return rc;
}
