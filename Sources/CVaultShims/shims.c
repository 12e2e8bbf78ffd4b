#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/socket.h>
#include <string.h>
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
