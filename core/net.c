/* core/net.c: ftl's sockets (core/net.h): connecting with a deadline and retries, listening,
 * the host's addresses, a Unix peer's credentials. Framing and what the bytes mean are the
 * callers' (rendezvous/wire.c, checkpoint/ckpt_l2_tcp.c). */
#include "core/net.h"

#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ftl/core.h"

ftl_err core_net_unix_address(const char *name, struct sockaddr_un *sa, socklen_t *len_out, ftl_diag *d) {
  size_t n = strlen(name);
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (n < 2 || name[0] != '@' || n > sizeof sa->sun_path)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "'%s' is not an abstract socket name (@NAME, at most %zu bytes)", name,
                         sizeof sa->sun_path - 1);
  memcpy(sa->sun_path + 1, name + 1, n - 1); /* sun_path[0] stays '\0': the abstract namespace */
  *len_out = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  return FTL_OK;
}

/* An abstract Unix socket (a host's relay, launcher/relay.c): the same retries as TCP's below; a full backlog (EAGAIN) is
 * waited out like a refusal, within the deadline. */
static ftl_err unix_connect(const char *name, int64_t deadline_ms, int *fd_out, ftl_diag *d) {
  struct sockaddr_un sa;
  socklen_t sl = 0; /* set by core_net_unix_address; gcc -O3 cannot see that its failures return non-zero */
  ftl_err rc = core_net_unix_address(name, &sa, &sl, d);
  if (rc) return rc;
  int64_t refused_since = -1;
  for (;;) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return ftl_diag_fail(d, FTL_ERR_IO, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sl) == 0) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      *fd_out = fd;
      return FTL_OK;
    }
    int err = errno;
    close(fd);
    ftl_diag_fail(d, FTL_ERR_IO, "cannot connect to %s: %s", name, strerror(err));
    if (err != ECONNREFUSED && err != EAGAIN) return FTL_ERR_IO;
    if (refused_since < 0) refused_since = ftl_clock_ms();
    else if (err == ECONNREFUSED && ftl_clock_ms() - refused_since >= 1000) return FTL_ERR_IO;
    if (ftl_deadline_left_ms(deadline_ms) == 0) return FTL_ERR_TIMEOUT;
    usleep(20000);
  }
}

ftl_err core_net_connect(const char *host_port, int64_t deadline_ms, int *fd_out, ftl_diag *d) {
  if (host_port[0] == '@') return unix_connect(host_port, deadline_ms, fd_out, d);
  char host[256];
  const char *colon = strrchr(host_port, ':');
  if (!colon || colon == host_port || (size_t)(colon - host_port) >= sizeof host)
    return ftl_diag_fail(d, FTL_ERR_INVAL, "address '%s' is not host:port", host_port);
  memcpy(host, host_port, (size_t)(colon - host_port));
  host[colon - host_port] = '\0';
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int gai = getaddrinfo(host, colon + 1, &hints, &res);
  if (gai != 0) return ftl_diag_fail(d, FTL_ERR_INVAL, "cannot resolve %s: %s", host_port, gai_strerror(gai));
  ftl_err rc = FTL_ERR_IO;
  int fd = -1;
  /* Retry until the deadline: the listener may be a moment behind (it never is for ftl's own
   * launcher, which listens before it spawns, but a restarted one might be). Refusals only for a
   * second: nobody listening then means the launcher is gone (killed while it was starting a
   * gang), and a rank or agent waiting the whole deadline for it would outlive it. */
  int64_t refused_since = -1;
  for (;;) {
    int refused = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (fd < 0) continue;
      int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (r != 0 && errno == EINPROGRESS) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr = poll(&pfd, 1, ftl_deadline_left_ms(deadline_ms));
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (pr > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) r = 0;
        else errno = pr == 0 ? ETIMEDOUT : soerr;
      }
      if (r == 0) {
        int flags = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        *fd_out = fd;
        rc = FTL_OK;
        goto out;
      }
      refused |= errno == ECONNREFUSED;
      ftl_diag_fail(d, FTL_ERR_IO, "cannot connect to %s: %s", host_port, strerror(errno));
      close(fd);
      fd = -1;
    }
    if (!refused) refused_since = -1;
    else if (refused_since < 0) refused_since = ftl_clock_ms();
    else if (ftl_clock_ms() - refused_since >= 1000) goto out; /* rc FTL_ERR_IO, d says refused */
    if (ftl_deadline_left_ms(deadline_ms) == 0) {
      rc = FTL_ERR_TIMEOUT;
      goto out;
    }
    usleep(20000);
  }
out:
  freeaddrinfo(res);
  return rc;
}

void core_net_set_peer_timeout(int fd, int64_t ms) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (ms <= 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
    return;
  unsigned timeout = ms > 3600000 ? 3600000u : (unsigned)ms;
  int one = 1, idle = (int)(timeout / 2000), interval = (int)(timeout / 4000);
  if (idle < 1) idle = 1;
  if (interval < 1) interval = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
}

ftl_err core_net_listen(const char *addr, int *fd_out, int *port_out, ftl_diag *d) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
  int gai = getaddrinfo(addr && *addr ? addr : NULL, "0", &hints, &res);
  if (gai != 0) return ftl_diag_fail(d, FTL_ERR_INVAL, "cannot resolve listen address %s: %s", addr, gai_strerror(gai));
  ftl_err rc = FTL_OK;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "socket: %s", strerror(errno));
    goto out;
  }
  /* The backlog as deep as the kernel allows (net.core.somaxconn caps it): thousands of ranks and
   * agents connect within moments of each other, and a connection that finds the queue full waits
   * a second for its SYN's retransmission (docs/scale.md). */
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 65535) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "cannot listen on %s: %s", addr && *addr ? addr : "*", strerror(errno));
    goto out;
  }
  struct sockaddr_in sin;
  socklen_t sl = sizeof sin;
  if (getsockname(fd, (struct sockaddr *)&sin, &sl) != 0) {
    rc = ftl_diag_fail(d, FTL_ERR_IO, "getsockname: %s", strerror(errno));
    goto out;
  }
  *port_out = ntohs(sin.sin_port);
  *fd_out = fd;
  fd = -1;
out:
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return rc;
}

int core_net_host_ipv4(uint32_t *out, int max) {
  struct ifaddrs *all = NULL;
  int n = 0;
  if (getifaddrs(&all) != 0) return 0;
  /* Two passes: the loopback last, as it reaches this host only. */
  for (int loop = 0; loop < 2; loop++)
    for (struct ifaddrs *i = all; i && n < max; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      if (!!(i->ifa_flags & IFF_LOOPBACK) != loop) continue;
      out[n++] = ((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr;
    }
  freeifaddrs(all);
  return n;
}

ftl_err core_net_unix_peer(int fd, pid_t *pid_out, uid_t *uid_out, ftl_diag *d) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred)
    return ftl_diag_fail(d, FTL_ERR_IO, "SO_PEERCRED: %s", strerror(errno));
  *pid_out = cred.pid;
  *uid_out = cred.uid;
  return FTL_OK;
}
