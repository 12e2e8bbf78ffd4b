#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/socket.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <sys/syscall.h>
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
