#ifndef VAULT_SHIMS_H
#define VAULT_SHIMS_H
/// prctl(2) is variadic and cannot be called from Swift; this wraps the one call we need.
/// Returns 0 on success, -1 with errno set on failure.
int sv_set_not_dumpable(void);

/// explicit_bzero: zeroes `length` bytes at `bytes`, never optimized away.
void sv_wipe(void *bytes, unsigned long length);
/// The connecting process of a Unix socket (SO_PEERCRED).
int sv_peer_credentials(int fd, int *pid, unsigned int *uid);
/// A pidfd for the peer of a Unix socket: SO_PEERPIDFD where the kernel has it
/// (taken at connect, immune to pid reuse), else pidfd_open(pid). -1 if neither.
int sv_peer_pidfd(int fd, int pid);
/// 1 while the process behind `pidfd` runs, 0 once it has exited, -1 on error.
int sv_pidfd_alive(int pidfd);
/* Catches each of `signals` from now on: the handler writes the signal's
   number, as one byte, to a pipe whose read end is returned (-1 if none could
   be made; then nothing was changed). Installed synchronously, so no signal
   sent after this returns is lost or takes its default action. */
int sv_catch_signals(const int *signals, int count);
/// Pins the calling thread to CPU `cpu`, or frees it to every CPU when `cpu`
/// is negative (sched_setaffinity needs _GNU_SOURCE). For vault-bench's floor.
int sv_pin_thread(int cpu);
/* The user owning the TCP socket whose own end is local_addr:local_port and
   whose other end is remote_addr:remote_port (IPv4; addresses in network byte
   order, ports in host order), asked of the kernel's socket table (sock_diag,
   as ss(8) does): for a connection accepted on a loopback port, pass the
   accepted connection's remote end as local_* to learn who connected. -1 when
   no such socket has an owner (none, or only its TIME_WAIT remains), -2 when
   the kernel could not be asked. */
long sv_tcp4_owner(unsigned int local_addr, unsigned short local_port,
                   unsigned int remote_addr, unsigned short remote_port);
/* The user owning the TCP socket that listens on 127.0.0.1:port, or on every
   address at port (IPv4, or IPv6 taking IPv4 too), and so keeps anyone else
   from listening there; -1 when none does, -2 when the kernel could not be
   asked. */
long sv_tcp4_loopback_listener_owner(unsigned short port);

#endif
