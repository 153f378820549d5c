/* tests/ckpt/test_ckpt_l2_tcp.c: the set-up of the L2 fetch's direct TCP transport
 * (checkpoint/ckpt_l2_tcp.c) in one process, a world of 1 over a fake MPI whose rank serves a shard
 * to itself. Before the fetcher connects (inside the first allgather, where the listener's port
 * and token are known), strangers connect: one whose proof is made with a wrong token, one with the
 * right token but for another nonce than its connection's (a replayed hello), one that answers its
 * challenge with the right token for a transfer that does not exist (from a thread), one that says
 * nothing. Each must get its challenge and nothing more (no ack) and be closed while
 * the real connection is made and carries bytes, and a server whose fetcher is gone gets an error
 * (not a SIGPIPE). Then FTL_CKPT_L2_TRANSPORT=mpi and the injected
 * listen and connect faults must each leave the transfer to MPI (no socket, *tcp = 0). The
 * transfers themselves, and the agreement across hosts, are tested by tests/fault/ft_l2.sh. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "checkpoint/ckpt_l2_tcp.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "rendezvous/mpi_seam.h"

#define STRANGERS 4
static int stranger[STRANGERS] = {-1, -1, -1, -1};
static int allgathers;
static pthread_t answerer;
static int answering;
static unsigned char real_token[CK_L2_TCP_TOKEN];

/* A blocking connection to the loopback at port that sends h (NULL: nothing). */
static int connect_stranger(uint16_t port, const ck_l2_tcp_hello *h) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(fd >= 0);
  CHECK(connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0);
  if (h) CHECK(send(fd, h, sizeof *h, MSG_NOSIGNAL) == (ssize_t)sizeof *h);
  return fd;
}

/* A hello of (from 0, to 0, shard) proven with token for nonce. */
static ck_l2_tcp_hello forged(const unsigned char *token, const unsigned char *nonce, int32_t shard) {
  const char magic[8] = CK_L2_TCP_HELLO_MAGIC;
  ck_l2_tcp_hello h = {.from = 0, .to = 0, .shard = shard};
  ftl_diag d = {{0}};
  memcpy(h.magic, magic, sizeof magic);
  CHECK_OK(ck_l2_tcp_mac(token, nonce, h.from, h.to, h.shard, h.mac, &d), d.msg);
  return h;
}

/* The stranger that reads its challenge and answers it with the right token, for shard 4, which
 * no link serves (in a thread: the server sends the challenge when it accepts). */
static void *answer_challenge(void *arg) {
  int fd = *(int *)arg;
  ck_l2_tcp_challenge ch;
  size_t got = 0;
  while (got < sizeof ch) {
    ssize_t k = recv(fd, (char *)&ch + got, sizeof ch - got, 0);
    if (k <= 0) return NULL;
    got += (size_t)k;
  }
  ck_l2_tcp_hello h = forged(real_token, ch.nonce, 4);
  if (send(fd, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h) return NULL;
  return NULL;
}

/* The first allgather carries the listener's record: the strangers come now, before the fetcher. */
static int f_iallgather(const void *send, int send_count, MPI_Datatype send_type, void *recv, int recv_count,
                        MPI_Datatype recv_type, MPI_Comm comm, MPI_Request *req) {
  (void)send_type, (void)recv_type, (void)comm, (void)recv_count;
  memcpy(recv, send, (size_t)send_count);
  *req = (MPI_Request)(uintptr_t)1;
  if (allgathers++ == 0 && send_count == (int)sizeof(ck_l2_tcp_rec)) {
    const ck_l2_tcp_rec *r = send;
    if (r->port) {
      unsigned char wrong[CK_L2_TCP_TOKEN], some_nonce[CK_L2_TCP_NONCE] = {0};
      memcpy(real_token, r->token, sizeof real_token);
      memcpy(wrong, r->token, sizeof wrong);
      wrong[5] ^= 1;
      ck_l2_tcp_hello wrong_token = forged(wrong, some_nonce, 3), replayed = forged(real_token, some_nonce, 3);
      stranger[0] = connect_stranger(r->port, &wrong_token);
      stranger[1] = connect_stranger(r->port, &replayed);
      stranger[2] = connect_stranger(r->port, NULL);
      stranger[3] = connect_stranger(r->port, NULL);
      answering = pthread_create(&answerer, NULL, answer_challenge, &stranger[3]) == 0;
      CHECK(answering);
    }
  }
  return MPI_SUCCESS;
}
static int f_test(MPI_Request *req, int *flag, MPI_Status *status) {
  (void)status;
  *flag = 1;
  *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}
static int f_error_string(int code, char *text, int *len) {
  (void)code;
  snprintf(text, MPI_MAX_ERROR_STRING, "fake MPI failure");
  *len = (int)strlen(text);
  return MPI_SUCCESS;
}
static const rz_mpi_ops fake = {.iallgather = f_iallgather, .test = f_test, .error_string = f_error_string};

/* Rank 0 of 1, serving shard 3 to itself. */
static ftl_err connect_self(ftl_ckpt *ck, ck_l2_link *links, int *tcp) {
  links[0] = (ck_l2_link){.out = 1, .peer = 0, .shard = 3, .fd = -1};
  links[1] = (ck_l2_link){.out = 0, .peer = 0, .shard = 3, .fd = -1};
  allgathers = 0;
  ftl_diag d = {{0}};
  ftl_err rc = ck_l2_tcp_connect(ck, links, 2, "the test's transfer", 1, tcp, ftl_deadline_after_ms(10000), &d);
  if (rc) fprintf(stderr, "ck_l2_tcp_connect: %s\n", d.msg);
  return rc;
}

/* The stranger's connection ends with nothing said to it but its challenge: closed, or reset
 * (never accepted before the listener closed), but not left open (a timeout), and never an ack. */
static void check_refused(int fd) {
  if (answering) {
    pthread_join(answerer, NULL);
    answering = 0;
  }
  struct timeval tv = {5, 0};
  char buf[64];
  size_t got = 0;
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  for (;;) {
    ssize_t k = recv(fd, buf + got, sizeof buf - got, 0);
    if (k > 0 && got + (size_t)k <= sizeof(ck_l2_tcp_challenge)) {
      got += (size_t)k;
      continue;
    }
    CHECK(k == 0 || (k < 0 && errno == ECONNRESET)); /* more than a challenge would be an answer */
    break;
  }
  close(fd);
}

static void test_strangers_refused(ftl_ckpt *ck) {
  ck_l2_link links[2];
  int tcp = 0;
  CHECK_INT_EQ(connect_self(ck, links, &tcp), FTL_OK);
  CHECK_INT_EQ(tcp, 1);
  CHECK_INT_EQ(allgathers, 2);
  CHECK(links[0].fd >= 0 && links[1].fd >= 0);
  for (int i = 0; i < STRANGERS; i++) {
    CHECK(stranger[i] >= 0);
    check_refused(stranger[i]);
    stranger[i] = -1;
  }
  /* The real connection carries bytes, server to fetcher, through the transport's calls. */
  const char msg[] = "shard 3";
  char got[sizeof msg] = "";
  size_t moved = 0, have = 0;
  ftl_diag d = {{0}};
  CHECK_INT_EQ(ck_l2_tcp_send(links[0].fd, msg, sizeof msg, &moved, &d), FTL_OK);
  CHECK_INT_EQ((int)moved, (int)sizeof msg);
  for (int tries = 0; have < sizeof got && tries < 100; tries++) {
    int out = 0;
    ck_l2_tcp_wait(&links[1].fd, &out, 1, 50);
    CHECK_INT_EQ(ck_l2_tcp_recv(links[1].fd, got + have, sizeof got - have, &moved, &d), FTL_OK);
    have += moved;
  }
  CHECK(have == sizeof got && memcmp(got, msg, sizeof msg) == 0);
  /* The server's end closed: the fetcher's next recv says the connection ended. */
  ck_l2_tcp_close(links[0].fd);
  int out = 0;
  ck_l2_tcp_wait(&links[1].fd, &out, 1, 1000);
  CHECK_INT_EQ(ck_l2_tcp_recv(links[1].fd, got, sizeof got, &moved, &d), FTL_ERR_IO);
  CHECK(strstr(d.msg, "ended early") != NULL);
  ck_l2_tcp_close(links[1].fd);
}

/* A fetcher gone mid-transfer: the server's sendfile fails with FTL_ERR_IO, and the SIGPIPE it
 * raises (sendfile has no MSG_NOSIGNAL; the program keeps SIGPIPE's default) does not kill it. */
static void test_fetcher_gone(ftl_ckpt *ck) {
  ck_l2_link links[2];
  int tcp = 0;
  CHECK_INT_EQ(connect_self(ck, links, &tcp), FTL_OK);
  CHECK_INT_EQ(tcp, 1);
  for (int i = 0; i < STRANGERS; i++) {
    check_refused(stranger[i]);
    stranger[i] = -1;
  }
  char path[] = "/tmp/ftl-l2-tcp-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  unlink(path);
  CHECK(ftruncate(fd, 1 << 20) == 0);
  ck_l2_tcp_close(links[1].fd);
  ftl_err rc = FTL_OK;
  ftl_diag d = {{0}};
  ck_l2_tcp_pipe guard;
  ck_l2_tcp_quiet_pipe(&guard);
  for (int tries = 0; rc == FTL_OK && tries < 1000; tries++) {
    size_t moved = 0;
    int failed = 0;
    int out = 1;
    rc = ck_l2_tcp_sendfile(links[0].fd, fd, 0, 1 << 20, &moved, &failed, &d);
    CHECK_INT_EQ(failed, 0);
    if (rc == FTL_OK) ck_l2_tcp_wait(&links[0].fd, &out, 1, 10);
  }
  ck_l2_tcp_restore_pipe(&guard); /* the SIGPIPE raised is taken back, not delivered */
  CHECK_INT_EQ(rc, FTL_ERR_IO);
  CHECK(strstr(d.msg, "sendfile") != NULL);
  close(fd);
  ck_l2_tcp_close(links[0].fd);
}

/* Forced to MPI, or a fault on this (the only) rank: no socket, *tcp = 0, and no error; the
 * agreement is the first allgather, or (a failed connection) the second. */
/* var=value set as a rank would have it: FTL_CKPT_L2_TRANSPORT through the handle's launch
 * record (ck->l2_mpi, as ftl_ckpt_create sets it), a test hook through the environment. */
static void test_mpi(ftl_ckpt *ck, const char *var, const char *value, int allgathers_made) {
  ck_l2_link links[2];
  int tcp = 1;
  int transport = strcmp(var, "FTL_CKPT_L2_TRANSPORT") == 0;
  if (transport) ck->l2_mpi = strcmp(value, "mpi") == 0;
  else setenv(var, value, 1);
  CHECK_INT_EQ(connect_self(ck, links, &tcp), FTL_OK);
  if (transport) ck->l2_mpi = 0;
  else unsetenv(var);
  CHECK_INT_EQ(tcp, 0);
  CHECK_INT_EQ(allgathers, allgathers_made);
  CHECK(fcntl(0, F_GETFD) >= 0); /* no descriptor but its own was closed (one was: 0) */
  CHECK(links[0].fd < 0 && links[1].fd < 0);
  for (int i = 0; i < STRANGERS; i++)
    if (stranger[i] >= 0) {
      check_refused(stranger[i]);
      stranger[i] = -1;
    }
}

int main(void) {
  rz_mpi_set_ops(&fake);
  /* Descriptor 0 open (/dev/null), for test_mpi's check that nothing else is closed. */
  close(0);
  CHECK(open("/dev/null", O_RDONLY) == 0);
  ftl_ckpt *ck = calloc(1, sizeof *ck);
  CHECK(ck != NULL);
  ck->sync = calloc(1, sizeof *ck->sync);
  CHECK(ck->sync != NULL);
  ck->rank = 0;
  ck->world = 1;
  ck->timeout_ms = 10000;
  unsetenv("FTL_CKPT_L2_TCP_FAULT");
  test_strangers_refused(ck);
  test_fetcher_gone(ck);
  test_mpi(ck, "FTL_CKPT_L2_TRANSPORT", "mpi", 1);
  test_mpi(ck, "FTL_CKPT_L2_TCP_FAULT", "listen:0", 1);
  test_mpi(ck, "FTL_CKPT_L2_TCP_FAULT", "connect:0", 2);
  CHECK(!atomic_load(&ck->sync->broken));
  free(ck->sync);
  free(ck);
  return 0;
}
