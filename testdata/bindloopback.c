/* Preloaded into the debuginfod server the tests start: every bind to a
 * wildcard address binds to the loopback address instead, so the server
 * (which has no option for its listening address) is reachable from this
 * machine only. An IPv6 wildcard becomes ::ffff:127.0.0.1, which a
 * dual-stack socket accepts IPv4 loopback connections on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	int (*real)(int, const struct sockaddr *, socklen_t) =
		(int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "bind");
	if (real == NULL) {
		errno = ENOSYS;
		return -1;
	}
	if (addr != NULL && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in a;
		memcpy(&a, addr, sizeof a);
		if (a.sin_addr.s_addr == htonl(INADDR_ANY))
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return real(fd, (const struct sockaddr *)&a, sizeof a);
	}
	if (addr != NULL && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 a;
		memcpy(&a, addr, sizeof a);
		if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
			memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
			a.sin6_addr.s6_addr[10] = 0xff;
			a.sin6_addr.s6_addr[11] = 0xff;
			a.sin6_addr.s6_addr[12] = 127;
			a.sin6_addr.s6_addr[15] = 1;
		}
		return real(fd, (const struct sockaddr *)&a, sizeof a);
	}
	return real(fd, addr, len);
}
