/* launcher/hostprobe.c: a bounded, parallel TCP probe of the hostfile's hosts (hostprobe.h). It
 * only connects and closes: nothing is sent, and nothing here decides what to do about a host that
 * does not answer (run.c leaves it out). */
#include "launcher/hostprobe.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ftl/core.h"

int ln_hostprobe_unreachable(int err) { return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH; }

/* Whether addr is one of this host's own: binding a socket to it works only then. The launcher's
 * host is never probed (it is here, whatever its firewall says of its ssh port). */
static int is_local(const struct addrinfo *ai) {
  int local = 0;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) goto out;
  struct sockaddr_storage ss;
  memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
  if (ss.ss_family == AF_INET)
    ((struct sockaddr_in *)&ss)->sin_port = 0;
  else if (ss.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
  local = bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) == 0;
  close(fd);
out:
  return local;
}

/* Starts the connection to host: its fd in *fd when the answer is still to come, else -1 with
 * *err already the verdict (hostprobe.h). */
static void start_probe(const char *host, const char *port, int *fd, int *err) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  *fd = -1;
  *err = 0;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) goto out;
  if (strcmp(host, ftl_hostname()) == 0 || is_local(ai)) goto out;
  int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (s < 0) goto out;
  int r = connect(s, ai->ai_addr, ai->ai_addrlen);
  if (r != 0 && errno == EINPROGRESS) {
    *fd = s;
    goto out;
  }
  if (r != 0 && ln_hostprobe_unreachable(errno)) *err = errno; /* a route known down at once */
  close(s);
out:
  if (ai) freeaddrinfo(ai);
}

void ln_hostprobe_run(const char *const *hosts, size_t n, int port, int timeout_ms, int *err) {
  char port_str[16];
  snprintf(port_str, sizeof port_str, "%d", port);
  struct pollfd *pfd = ftl_calloc(n ? n : 1, sizeof *pfd);
  size_t *who = ftl_calloc(n ? n : 1, sizeof *who);
  size_t pending = 0;
  int64_t deadline = ftl_deadline_after_ms(timeout_ms);
  for (size_t i = 0; i < n; i++) err[i] = 0;
  if (!pfd || !who) goto out; /* nothing is known: no host is left out */
  for (size_t i = 0; i < n; i++) {
    int fd;
    start_probe(hosts[i], port_str, &fd, &err[i]);
    if (fd < 0) continue;
    pfd[pending] = (struct pollfd){.fd = fd, .events = POLLOUT};
    who[pending++] = i;
  }
  while (pending > 0) {
    int left = ftl_deadline_left_ms(deadline);
    int pr = left > 0 ? poll(pfd, pending, left) : 0;
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) { /* nothing is known of the rest: none is left out */
      for (size_t k = 0; k < pending; k++) close(pfd[k].fd);
      pending = 0;
    }
    if (pr <= 0) break; /* the deadline: the rest did not answer in time */
    for (size_t k = 0; k < pending;) {
      if (!pfd[k].revents) {
        k++;
        continue;
      }
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      if (getsockopt(pfd[k].fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = 0;
      err[who[k]] = ln_hostprobe_unreachable(soerr) ? soerr : 0;
      close(pfd[k].fd);
      pfd[k] = pfd[--pending];
      who[k] = who[pending];
    }
  }
  for (size_t k = 0; k < pending; k++) {
    err[who[k]] = ETIMEDOUT;
    close(pfd[k].fd);
  }
out:
  ftl_free(pfd);
  ftl_free(who);
}
