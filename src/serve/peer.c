/*
 * Who may drive a server through its control socket: its own user, or
 * root.  The socket file is 0600 already; the peer's credentials are
 * checked too, so that a socket opened wider (by hand, or a folder
 * shared) still lets no other user stop the server, change its limits
 * or read its statistics.
 */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/serve.h"

bool serve_peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct timeval tv = { 0, 200000 };
	char msg[160], junk[256];
	int n;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || len != sizeof(cr))
		return false;
	if (cr.uid == geteuid() || cr.uid == 0)
		return true;
	n = snprintf(msg, sizeof(msg), "error: refused: uid %u is neither the server's user "
		     "(uid %u) nor root\n", (unsigned)cr.uid, (unsigned)geteuid());
	if (n > 0)
		(void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* take in the line the client sends (at most 4 KiB, 200 ms a read),
	 * so that its send does not fail before it reads why */
	shutdown(fd, SHUT_WR);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (int i = 0; i < 16; i++) {
		ssize_t r = recv(fd, junk, sizeof(junk), 0);

		if (r <= 0 || memchr(junk, '\n', (size_t)r))
			break;
	}
	return false;
}
