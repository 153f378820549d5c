/* core/net.h: ftl's sockets, below every protocol: a TCP (or a host relay's abstract Unix socket)
 * connection made with a deadline and retried while the listener is a moment behind, a listener
 * at an ephemeral port, this host's IPv4 addresses, and who is at the other end of a Unix socket.
 * Used by the launcher-rank wire (rendezvous/), the relays (launcher/relay.c) and the L2 transfers
 * (checkpoint/ckpt_l2_tcp.c); what travels over them is theirs. */
#ifndef FTL_CORE_NET_H
#define FTL_CORE_NET_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "ftl/error.h"

/* Connects to "host:port" with a deadline; the returned fd is blocking, close-on-exec. "@NAME" is
 * a host's relay instead: the abstract Unix socket NAME (launcher/relay.c). */
ftl_err core_net_connect(const char *host_port, int64_t deadline_ms, int *fd_out, ftl_diag *d);

/* A TCP connection the kernel gives up on after ms without an acknowledgement from its peer (what
 * it sent unanswered: TCP_USER_TIMEOUT; and, while it sends nothing, keepalive probes): a dead or
 * cut-off peer host is then noticed without a word from the peer's program. Nothing for a Unix
 * socket or ms <= 0. */
void core_net_set_peer_timeout(int fd, int64_t ms);

/* The address of the abstract Unix socket "@NAME"; FTL_ERR_INVAL when name is not one. */
struct sockaddr_un;
ftl_err core_net_unix_address(const char *name, struct sockaddr_un *sa, socklen_t *len_out, ftl_diag *d);

/* Listens on addr (NULL or "" = all addresses) at an ephemeral port; returns fd and port. */
ftl_err core_net_listen(const char *addr, int *fd_out, int *port_out, ftl_diag *d);

/* This host's IPv4 addresses on interfaces that are up (network byte order), the loopback ones
 * last: at most max in out; returns how many (0 when there are none or getifaddrs fails). */
int core_net_host_ipv4(uint32_t *out, int max);

/* The process and user at the other end of a Unix socket (SO_PEERCRED: as of its connect or
 * listen, which the kernel recorded; a peer cannot claim another). */
ftl_err core_net_unix_peer(int fd, pid_t *pid_out, uid_t *uid_out, ftl_diag *d);

#endif
