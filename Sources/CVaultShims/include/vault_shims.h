#ifndef VAULT_SHIMS_H
#define VAULT_SHIMS_H
/// prctl(2) is variadic and cannot be called from Swift; this wraps the one call we need.
/// Returns 0 on success, -1 with errno set on failure.
int sv_set_not_dumpable(void);

/// The release lane's poll set (vaultd's VaultServer/ReleaseLane.swift).
/// Glibc's Swift module leaves out <sys/epoll.h> and <sys/eventfd.h>, and
/// `struct epoll_event` is packed, so these few calls are wrapped here.
/// Each returns what the system call returns, -1 with errno set on failure.

/// epoll_create1(EPOLL_CLOEXEC).
int sv_poll_create(void);
/// Watches `fd` for input (and hang-up); level-triggered.
int sv_poll_add(int poll, int fd);
int sv_poll_remove(int poll, int fd);
/// Waits up to `timeout_ms` (-1: no limit) and writes the ready descriptors to `fds`.
int sv_poll_wait(int poll, int *fds, int max, int timeout_ms);
/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK): how another thread wakes the lane.
int sv_wake_create(void);
/// accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK).
int sv_accept(int listener);
/// Names the calling thread (as ps and gdb show it).
void sv_name_thread(const char *name);
/// explicit_bzero: zeroes `length` bytes at `bytes`, never optimized away.
void sv_wipe(void *bytes, unsigned long length);
/// The connecting process of a Unix socket (SO_PEERCRED).
int sv_peer_credentials(int fd, int *pid, unsigned int *uid);
#endif
