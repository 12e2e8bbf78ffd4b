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
