/*
 * Who may drive a server through its control socket: its own user, or
 * root.  The socket file is 0600 already; the peer's credentials are
 * checked too, so that a socket opened wider (by hand, or a folder
 * shared) still lets no other user stop the server, change its limits
 * or read its statistics.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/serve.h"

bool serve_peer_allowed(int fd, char *why, size_t n)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || len != sizeof(cr)) {
		snprintf(why, n, "error: refused: the peer's credentials cannot be read\n");
		return false;
	}
	if (cr.uid == geteuid() || cr.uid == 0)
		return true;
	snprintf(why, n, "error: refused: uid %u is neither the server's user (uid %u) "
		 "nor root\n", (unsigned)cr.uid, (unsigned)geteuid());
	return false;
}
