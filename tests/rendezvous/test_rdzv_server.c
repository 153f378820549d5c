/* tests/rendezvous/test_rdzv_server.c: the launcher's rendezvous server against real TCP clients
 * in child processes: every rank joins -> "go" for all; a client with another attempt's token is
 * refused and told why; a rank that joins twice is refused; fail() tells a waiting rank the
 * reason (naming the missing ranks), and describe_missing names ranks and hosts. A relay (wire
 * version 3) speaks for a host's agents and ranks over one connection: their hellos, the one "go"
 * it fans out, a batch of steps and alives, a lost agent, a relay for another attempt, and the
 * relay's own loss losing everything behind it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftl/core.h"
#include "ftl_test.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

typedef struct counts {
  int hello, joined, go, rejected, lost, step, alive, exits;
  int lost_ranks[8];
  char last_reject[256];
} counts;

static void on_event(void *user, const ftl_rdzv_event *ev) {
  counts *c = user;
  switch (ev->kind) {
    case FTL_RDZV_AGENT_HELLO: c->hello++; break;
    case FTL_RDZV_RANK_JOINED: c->joined++; break;
    case FTL_RDZV_GANG_GO: c->go++; break;
    case FTL_RDZV_REJECTED:
      c->rejected++;
      snprintf(c->last_reject, sizeof c->last_reject, "%s", ev->detail ? ev->detail : "");
      break;
    case FTL_RDZV_CONN_LOST:
      if (c->lost < 8) c->lost_ranks[c->lost] = ev->rank;
      c->lost++;
      break;
    case FTL_RDZV_STEP: c->step += ev->rank == 1 && rz_wire_int(ev->msg, "step", -1) == 7; break;
    case FTL_RDZV_AGENT_ALIVE: c->alive += ev->rank == 0 && !strcmp(rz_wire_str(ev->msg, "state", ""), "S"); break;
    case FTL_RDZV_AGENT_EXIT: c->exits++; break;
    default: break;
  }
}

/* A child process that joins as `role` and exits 0 on "go", 1 on fail (reason printed), 2 other. */
static pid_t spawn_client(int port, const char *token, const char *role, int rank, int world) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  ftl_launch_env env = {.present = 1, .rank = rank, .world_size = world};
  snprintf(env.addr, sizeof env.addr, "127.0.0.1:%d", port);
  snprintf(env.token, sizeof env.token, "%s", token);
  ftl_rdzv_client c;
  ftl_diag d = {{0}};
  ftl_err rc = rz_rdzv_client_open(&c, &env, role, rank, ftl_deadline_after_ms(5000), &d);
  if (rc == FTL_OK && !strcmp(role, "agent")) {
    sleep(1); /* stay connected while the test runs */
    _exit(0);
  }
  if (rc == FTL_ERR_RDZV) printf("client rank %d: %s\n", rank, d.msg);
  fflush(stdout);
  _exit(rc == FTL_OK ? 0 : rc == FTL_ERR_RDZV ? 1 : 2);
}

/* Runs the server loop until `done` says stop or the deadline passes. */
static void pump(ftl_rdzv_server *s, counts *c, int64_t deadline, int (*done)(const counts *)) {
  struct pollfd fds[64];
  while (!done(c) && ftl_deadline_left_ms(deadline) > 0) {
    size_t n = rz_rdzv_server_pollfds(s, fds, 64);
    if (poll(fds, (nfds_t)n, 50) > 0) rz_rdzv_server_handle(s, fds, n, on_event, c);
  }
}

static int exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int two_joined_one_go(const counts *c) { return c->go == 1; }
static int one_rejected(const counts *c) { return c->rejected >= 1; }
static int one_joined(const counts *c) { return c->joined >= 1; }
static int never(const counts *c) { (void)c; return 0; }
static int one_lost(const counts *c) { return c->lost >= 1; }
static int three_lost(const counts *c) { return c->lost >= 3; }
static int batch_seen(const counts *c) { return c->step >= 1 && c->alive >= 1; }
static int batch_twice(const counts *c) { return c->step >= 2 && c->alive >= 2; }
static int relay_done(const counts *c) { return c->lost >= 1 && c->exits >= 1; }

/* Plays a relay: a TCP connection that sends raw lines and reads what the launcher sends back. */
static void relay_say(int fd, const char *line) {
  ftl_diag d = {{0}};
  CHECK_OK(rz_wire_send_line(fd, line, strlen(line), ftl_deadline_after_ms(2000), false, &d), d.msg);
}

/* Reads what the relay was sent (pumping the server meanwhile) until `needle` is among it. */
static void relay_expect(ftl_rdzv_server *s, counts *c, int fd, ftl_linebuf *lb, const char *needle) {
  int64_t until = ftl_deadline_after_ms(5000);
  while (ftl_deadline_left_ms(until) > 0) {
    pump(s, c, ftl_deadline_after_ms(20), never);
    bool eof = false;
    rz_linebuf_fill(lb, fd, &eof);
    if (lb->len && memmem(lb->data, lb->len, needle, strlen(needle))) return;
    if (eof) break;
  }
  fprintf(stderr, "FAIL: the relay was not sent %s (it got: %.*s)\n", needle, (int)lb->len, lb->data ? lb->data : "");
  exit(1);
}

static void relay_case(void) {
  ftl_diag d = {{0}};
  ftl_rdzv_server *s = NULL;
  counts c = {0};
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 3, "tok-r0", &s, &d), d.msg);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", rz_rdzv_server_port(s));
  /* A relay of another attempt is refused and told why. */
  int stale = -1;
  CHECK_OK(rz_tcp_connect(addr, ftl_deadline_after_ms(2000), &stale, &d), d.msg);
  relay_say(stale, "{\"type\":\"relay\",\"version\":3,\"token\":\"tok-old\",\"host\":\"h1\",\"pid\":1}\n");
  ftl_linebuf slb = {0};
  relay_expect(s, &c, stale, &slb, "not this attempt's");
  rz_linebuf_free(&slb);
  close(stale);
  CHECK_INT_EQ(c.rejected, 1);

  /* Host h1's relay carries ranks 0 and 1 (agents and ranks); rank 2 connects directly. */
  int fd = -1;
  CHECK_OK(rz_tcp_connect(addr, ftl_deadline_after_ms(2000), &fd, &d), d.msg);
  relay_say(fd, "{\"type\":\"relay\",\"version\":3,\"token\":\"tok-r0\",\"host\":\"h1\",\"pid\":1}\n");
  for (int r = 0; r < 2; r++) {
    char line[512];
    snprintf(line, sizeof line,
             "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":%d,\"msg\":{\"type\":\"agent\",\"version\":3,"
             "\"token\":\"tok-r0\",\"rank\":%d,\"world_size\":3,\"host\":\"h1\",\"pid\":5}}\n"
             "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":%d,\"msg\":{\"type\":\"rank\",\"version\":3,"
             "\"token\":\"tok-r0\",\"rank\":%d,\"world_size\":3,\"host\":\"h1\",\"pid\":6}}\n",
             r, r, r, r);
    relay_say(fd, line);
  }
  /* A hello whose rank is not its envelope's is refused; the relay stays. */
  relay_say(fd, "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":2,\"msg\":{\"type\":\"agent\",\"token\":\"tok-r0\","
                "\"rank\":1}}\n");
  pid_t r2 = spawn_client(rz_rdzv_server_port(s), "tok-r0", "rank", 2, 3);
  ftl_linebuf lb = {0};
  relay_expect(s, &c, fd, &lb, "\"to\":\"rank\"");
  CHECK_INT_EQ(c.go, 1);
  CHECK_INT_EQ(c.hello, 2);
  CHECK_INT_EQ(c.joined, 3);
  CHECK_INT_EQ(c.rejected, 2);
  CHECK_STR_CONTAINS(c.last_reject, "not its envelope's");
  CHECK_STR_CONTAINS(lb.data, "\"type\":\"go\"");
  CHECK_INT_EQ(exit_code(r2), 0);
  CHECK_INT_EQ((int)rz_rdzv_server_relays(s), 1);
  /* Rank 2's own connection closed without a bye when its client exited: that loss is not the relay's. */
  pump(s, &c, ftl_deadline_after_ms(5000), one_lost);
  CHECK_INT_EQ(c.lost, 1);
  CHECK_INT_EQ(c.lost_ranks[0], 2);
  c.lost = 0;
  /* The steady state in one line; entries for a rank of another host, or malformed, are skipped. */
  relay_say(fd, "{\"type\":\"batch\",\"step\":[[1,7,1.5],[2,7,1.0],[1,\"x\",1.0],{\"rank\":1}],"
                "\"alive\":[[0,\"S\",10],[0,1,10]]}\n");
  pump(s, &c, ftl_deadline_after_ms(5000), batch_seen);
  CHECK_INT_EQ(c.step, 1);
  CHECK_INT_EQ(c.alive, 1);
  /* The compact layout a relay writes takes the fast path (rz_wire_batch_parse): the same events. */
  relay_say(fd, "{\"type\":\"batch\",\"step\":[[1,7,2.5],[2,7,1.0]],\"alive\":[[0,\"S\",11],[1,\"T\",-1]]}\n");
  pump(s, &c, ftl_deadline_after_ms(5000), batch_twice);
  CHECK_INT_EQ(c.step, 2);
  CHECK_INT_EQ(c.alive, 2);
  /* Pings and signals reach the relay once, addressed to its agents. */
  rz_rdzv_server_ping_agents(s);
  relay_expect(s, &c, fd, &lb, "{\"type\":\"ping\",\"to\":\"agent\"}");
  /* Rank 1's agent reports its exit; rank 0's agent goes without a word: lost. */
  relay_say(fd, "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":1,\"msg\":{\"type\":\"exit\",\"exit_code\":0,"
                "\"signal\":0}}\n{\"type\":\"closed\",\"role\":\"agent\",\"rank\":1}\n"
                "{\"type\":\"closed\",\"role\":\"agent\",\"rank\":0}\n");
  pump(s, &c, ftl_deadline_after_ms(5000), relay_done);
  CHECK_INT_EQ(c.exits, 1);
  CHECK_INT_EQ(c.lost, 1);
  CHECK_INT_EQ(c.lost_ranks[0], 0);
  /* The relay itself goes: ranks 0 and 1 (no bye) are lost with it. */
  close(fd);
  pump(s, &c, ftl_deadline_after_ms(5000), three_lost);
  pump(s, &c, ftl_deadline_after_ms(300), never);
  CHECK_INT_EQ(c.lost, 3);
  CHECK_INT_EQ((int)rz_rdzv_server_relays(s), 0);
  rz_linebuf_free(&lb);
  rz_rdzv_server_destroy(s);
}

int main(void) {
  ftl_diag d = {{0}};
  ftl_rdzv_server *s = NULL;

  /* 1. Both ranks join: "go" for both, and the agent hello is counted. */
  counts c = {0};
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 2, "tok-a0", &s, &d), d.msg);
  int port = rz_rdzv_server_port(s);
  pid_t agent = spawn_client(port, "tok-a0", "agent", 0, 2);
  pid_t r0 = spawn_client(port, "tok-a0", "rank", 0, 2);
  pid_t r1 = spawn_client(port, "tok-a0", "rank", 1, 2);
  pump(s, &c, ftl_deadline_after_ms(10000), two_joined_one_go);
  CHECK_INT_EQ(c.go, 1);
  CHECK_INT_EQ(c.joined, 2);
  CHECK(rz_rdzv_server_went(s));
  /* Let the children read "go" before the server goes away. */
  int64_t settle = ftl_deadline_after_ms(1500);
  pump(s, &c, settle, never);
  CHECK_INT_EQ(exit_code(r0), 0);
  CHECK_INT_EQ(exit_code(r1), 0);
  CHECK_INT_EQ(exit_code(agent), 0);
  CHECK_INT_EQ(c.hello, 1);
  rz_rdzv_server_destroy(s);

  /* 2. Another attempt's token is refused, and the client is told why. */
  memset(&c, 0, sizeof c);
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 2, "tok-a1", &s, &d), d.msg);
  port = rz_rdzv_server_port(s);
  pid_t stale = spawn_client(port, "tok-a0", "rank", 0, 2);
  pump(s, &c, ftl_deadline_after_ms(10000), one_rejected);
  CHECK_INT_EQ(c.rejected, 1);
  CHECK_STR_CONTAINS(c.last_reject, "not this attempt's");
  CHECK_INT_EQ(exit_code(stale), 1);
  CHECK_INT_EQ(c.joined, 0);
  pump(s, &c, ftl_deadline_after_ms(200), never); /* let the refused connection close */

  /* 3. A rank joins, the deadline passes: fail() reaches it with the missing rank named. */
  pid_t lonely = spawn_client(port, "tok-a1", "rank", 1, 2);
  pump(s, &c, ftl_deadline_after_ms(10000), one_joined);
  CHECK_INT_EQ(c.joined, 1);
  char missing[256];
  rz_rdzv_server_describe_missing(s, missing, sizeof missing);
  CHECK_STR_EQ(missing, "rank 0 (never started)");
  rz_rdzv_server_fail(s, "deadline passed: rank 0 (never started)");
  CHECK_INT_EQ(exit_code(lonely), 1);

  /* 4. After fail(), a late rank is told the same, never "go"; a duplicate rank is refused. */
  pid_t late = spawn_client(port, "tok-a1", "rank", 0, 2);
  CHECK_INT_EQ(c.go, 0);
  int64_t until = ftl_deadline_after_ms(3000);
  while (ftl_deadline_left_ms(until) > 0 && c.joined < 2) pump(s, &c, ftl_deadline_after_ms(100), never);
  CHECK_INT_EQ(exit_code(late), 1);
  CHECK_INT_EQ(c.go, 0);
  pid_t dup = spawn_client(port, "tok-a1", "rank", 1, 2);
  int rejected_before = c.rejected;
  until = ftl_deadline_after_ms(5000);
  while (ftl_deadline_left_ms(until) > 0 && c.rejected == rejected_before) pump(s, &c, ftl_deadline_after_ms(100), never);
  CHECK_STR_CONTAINS(c.last_reject, "joined twice");
  CHECK_INT_EQ(exit_code(dup), 1);
  rz_rdzv_server_destroy(s);

  /* 5. A relay: one connection for a host's agents and ranks (wire version 3). */
  relay_case();
  printf("ok\n");
  return 0;
}
