/* tests/rendezvous/test_rdzv_server.c: the launcher's rendezvous server against real TCP clients
 * in child processes: every rank joins -> "go" for all; a client with another attempt's token is
 * refused and told why; a rank that joins twice is refused; fail() tells a waiting rank the
 * reason (naming the missing ranks), and describe_missing names ranks and hosts. Wire version 4's
 * proof: a hello that sends the token instead (an older peer), a proof replayed from another
 * connection, and an agent's second hello are refused, each refusal naming its peer. A relay (wire
 * version 3) speaks for a host's agents and ranks over one connection: their hellos, the one "go"
 * it fans out, a batch of steps and alives, a lost agent, a relay for another attempt, a local
 * connection the relay refused, and the relay's own loss losing everything behind it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/net.h"
#include "ftl/core.h"
#include "ftl_test.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "rendezvous/wire.h"

typedef struct counts {
  int hello, joined, go, rejected, lost, step, alive, exits;
  int with_flops;         /* rank 1's steps that carried flops and flops_ms (the last ones kept) */
  double flops, flops_ms;
  int samples;            /* rank 1's compute samples, over all its steps, and the last one */
  double last_sample;
  int lost_ranks[8];
  char last_reject[256];
  char last_peer[128];
} counts;

static void on_event(void *user, const rz_rdzv_event *ev) {
  counts *c = user;
  switch (ev->kind) {
    case FTL_RDZV_AGENT_HELLO: c->hello++; break;
    case FTL_RDZV_RANK_JOINED: c->joined++; break;
    case FTL_RDZV_GANG_GO: c->go++; break;
    case FTL_RDZV_REJECTED:
      c->rejected++;
      snprintf(c->last_reject, sizeof c->last_reject, "%s", ev->detail ? ev->detail : "");
      snprintf(c->last_peer, sizeof c->last_peer, "%s", ev->peer ? ev->peer : "(none)");
      break;
    case FTL_RDZV_CONN_LOST:
      if (c->lost < 8) c->lost_ranks[c->lost] = ev->rank;
      c->lost++;
      break;
    case FTL_RDZV_STEP:
      /* A batch's entries come as figures alone (no message: rendezvous/server.h). */
      c->step += ev->rank == 1 && ev->hb->step == 7;
      if (ev->rank == 1 && ev->hb->has_flops) {
        c->with_flops++;
        c->flops = ev->hb->flops;
        c->flops_ms = ev->hb->flops_ms;
      }
      if (ev->rank == 1 && ev->hb->nsamples > 0) {
        c->samples += ev->hb->nsamples;
        c->last_sample = ev->hb->samples[ev->hb->nsamples - 1];
        CHECK(ev->hb->compute_ms == c->last_sample);
      }
      break;
    case FTL_RDZV_AGENT_ALIVE: c->alive += ev->rank == 0 && !strcmp(ev->hb->state, "S"); break;
    case FTL_RDZV_AGENT_EXIT: c->exits++; break;
    default: break;
  }
}

/* A child process that joins as `role` and exits 0 on "go", 1 on fail (reason printed), 2 other. */
static pid_t spawn_client(int port, const char *token, const char *role, int rank, int world) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  core_launch_env env = {.present = 1, .rank = rank, .world_size = world};
  snprintf(env.addr, sizeof env.addr, "127.0.0.1:%d", port);
  snprintf(env.token, sizeof env.token, "%s", token);
  rz_rdzv_client c;
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
static void pump(rz_rdzv_server *s, counts *c, int64_t deadline, int (*done)(const counts *)) {
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
static int batch_flops(const counts *c) { return c->step >= 5; }
static int batch_samples(const counts *c) { return c->step >= 7; }
static int relay_done(const counts *c) { return c->lost >= 1 && c->exits >= 1; }

/* Plays a relay: a TCP connection that sends raw lines and reads what the launcher sends back. */
static void relay_say(int fd, const char *line) {
  ftl_diag d = {{0}};
  CHECK_OK(rz_wire_send_line(fd, line, strlen(line), ftl_deadline_after_ms(2000), false, &d), d.msg);
}

/* Connects to the server as a raw peer (pumping the server, which sends the challenge when it
 * accepts) and answers the challenge: *nonce_out is the connection's nonce, proof_out the proof of
 * token for (role, rank) with it. */
static int raw_open(rz_rdzv_server *s, counts *c, rz_linebuf *lb, const char *token, const char *role, int rank,
                    char nonce_out[FTL_WIRE_NONCE_HEX + 1], char proof_out[FTL_WIRE_PROOF_HEX + 1]) {
  ftl_diag d = {{0}};
  char addr[64];
  int fd = -1;
  snprintf(addr, sizeof addr, "127.0.0.1:%d", rz_rdzv_server_port(s));
  CHECK_OK(core_net_connect(addr, ftl_deadline_after_ms(2000), &fd, &d), d.msg);
  int64_t until = ftl_deadline_after_ms(5000);
  ftl_err rc;
  do {
    pump(s, c, ftl_deadline_after_ms(20), never);
    rc = rz_wire_read_challenge(fd, lb, "the test's server", ftl_deadline_after_ms(20), nonce_out, &d);
  } while (rc == FTL_ERR_TIMEOUT && ftl_deadline_left_ms(until) > 0);
  CHECK_OK(rc, d.msg);
  CHECK_OK(rz_wire_proof(token, nonce_out, role, rank, proof_out, &d), d.msg);
  return fd;
}

/* A relay's connection: its hello proves token. */
static int relay_open(rz_rdzv_server *s, counts *c, rz_linebuf *lb, const char *token) {
  char nonce[FTL_WIRE_NONCE_HEX + 1], proof[FTL_WIRE_PROOF_HEX + 1], line[256];
  int fd = raw_open(s, c, lb, token, "relay", -1, nonce, proof);
  snprintf(line, sizeof line, "{\"type\":\"relay\",\"version\":4,\"proof\":\"%s\",\"host\":\"h1\",\"pid\":1}\n", proof);
  relay_say(fd, line);
  return fd;
}

/* The relay passes on a local agent's or rank's hello, proven to it (no proof in the envelope); it
 * names the local peer. */
static void relay_hello(int fd, const char *role, int rank, int world) {
  char line[512];
  snprintf(line, sizeof line,
           "{\"type\":\"fwd\",\"role\":\"%s\",\"rank\":%d,\"peer_pid\":5,\"peer_uid\":0,\"msg\":{\"type\":"
           "\"%s\",\"version\":4,\"rank\":%d,\"world_size\":%d,\"host\":\"h1\",\"pid\":5}}\n",
           role, rank, role, rank, world);
  relay_say(fd, line);
}

/* Reads what the relay was sent (pumping the server meanwhile) until `needle` is among it. */
static void relay_expect(rz_rdzv_server *s, counts *c, int fd, rz_linebuf *lb, const char *needle) {
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
  rz_rdzv_server *s = NULL;
  counts c = {0};
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 3, "tok-r0", &s, &d), d.msg);
  /* A relay of another attempt is refused and told why. */
  rz_linebuf slb = {0};
  int stale = relay_open(s, &c, &slb, "tok-old");
  relay_expect(s, &c, stale, &slb, "no valid proof");
  rz_linebuf_free(&slb);
  close(stale);
  CHECK_INT_EQ(c.rejected, 1);

  /* Host h1's relay carries ranks 0 and 1 (agents and ranks); rank 2 connects directly. */
  rz_linebuf lb = {0};
  int fd = relay_open(s, &c, &lb, "tok-r0");
  for (int r = 0; r < 2; r++) {
    relay_hello(fd, "agent", r, 3);
    relay_hello(fd, "rank", r, 3);
  }
  /* A hello whose rank is not its envelope's is refused; the relay stays. */
  relay_say(fd, "{\"type\":\"fwd\",\"role\":\"agent\",\"rank\":2,\"msg\":{\"type\":\"agent\",\"version\":4,"
                "\"rank\":1}}\n");
  pid_t r2 = spawn_client(rz_rdzv_server_port(s), "tok-r0", "rank", 2, 3);
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
  /* A step's FLOPs (ftl_step_done_flops) ride in its entry, on the fast path and jansson's alike;
   * an entry without them passes on none (the server's one step message must not keep them). */
  relay_say(fd, "{\"type\":\"batch\",\"step\":[[1,7,2.5,4e+12,1500.5]]}\n{\"type\":\"batch\",\"step\":[[1,7,2.5]]}\n");
  relay_say(fd, "{\"type\": \"batch\", \"step\": [[1, 7, 2.5, 6e12, 2500.25], [1, 7, 2.5, 1e12]]}\n");
  pump(s, &c, ftl_deadline_after_ms(5000), batch_flops);
  CHECK_INT_EQ(c.step, 5);
  CHECK_INT_EQ(c.with_flops, 2);
  CHECK(c.flops == 6e12 && c.flops_ms == 2500.25);
  /* The gang's cadence reaches the relays now connected (and each later one at its hello); a
   * relay told it brings every compute sample of its period, oldest first, on either path, each
   * number as strtod reads it. */
  rz_rdzv_server_set_cadence(s, 2000, 10, 0);
  relay_expect(s, &c, fd, &lb, "{\"type\":\"cadence\",\"batch_ms\":2000,\"samples\":10}");
  int before_samples = c.samples;
  relay_say(fd, "{\"type\":\"batch\",\"step\":[[1,7,[1.5,2.25,12.345]]]}\n"
                "{\"type\": \"batch\", \"step\": [[1, 7, [0.1, 3e2], 5e12, 4000.5], [1, 7, []]]}\n");
  pump(s, &c, ftl_deadline_after_ms(5000), batch_samples);
  CHECK_INT_EQ(c.step, 7);
  CHECK_INT_EQ(c.samples - before_samples, 5);
  CHECK(c.last_sample == 3e2);
  CHECK(c.flops == 5e12 && c.flops_ms == 4000.5);
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
  /* A local connection the relay refused itself is shown with who it was. */
  int before = c.rejected;
  relay_say(fd, "{\"type\":\"refused\",\"reason\":\"a local connection of uid 1234, not the job's uid 0\","
                "\"pid\":4321,\"uid\":1234}\n");
  int64_t until = ftl_deadline_after_ms(5000);
  while (c.rejected == before && ftl_deadline_left_ms(until) > 0) pump(s, &c, ftl_deadline_after_ms(50), never);
  CHECK_STR_CONTAINS(c.last_reject, "uid 1234");
  CHECK_STR_CONTAINS(c.last_peer, "pid 4321 uid 1234 via relay 127.0.0.1:");
  /* The relay itself goes: ranks 0 and 1 (no bye) are lost with it. */
  close(fd);
  pump(s, &c, ftl_deadline_after_ms(5000), three_lost);
  pump(s, &c, ftl_deadline_after_ms(300), never);
  CHECK_INT_EQ(c.lost, 3);
  CHECK_INT_EQ((int)rz_rdzv_server_relays(s), 0);
  rz_linebuf_free(&lb);
  rz_rdzv_server_destroy(s);
}

/* Under srun the ranks hold after MPI_Init until all are through it (rdzv_init.c): `mpi_go` once
 * every rank said `mpi_up`, not before, whatever a rank repeats. And the cadence carries the relays'
 * fence when it is told one. */
static void mpi_barrier_case(void) {
  ftl_diag d = {{0}};
  rz_rdzv_server *s = NULL;
  counts c = {0};
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 2, "tok-m0", &s, &d), d.msg);
  rz_linebuf lb = {0};
  int fd = relay_open(s, &c, &lb, "tok-m0");
  for (int r = 0; r < 2; r++) relay_hello(fd, "rank", r, 2);
  relay_expect(s, &c, fd, &lb, "\"type\":\"go\"");
  rz_linebuf_free(&lb);
  lb = (rz_linebuf){0};
  relay_say(fd, "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":0,\"msg\":{\"type\":\"mpi_up\"}}\n"
                "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":0,\"msg\":{\"type\":\"mpi_up\"}}\n");
  rz_rdzv_server_set_cadence(s, 2000, 10, 40000); /* a line after the mpi_ups were read, or not */
  relay_expect(s, &c, fd, &lb, "{\"type\":\"cadence\",\"batch_ms\":2000,\"samples\":10,\"fence_ms\":40000}");
  pump(s, &c, ftl_deadline_after_ms(300), never);
  bool eof = false;
  rz_linebuf_fill(&lb, fd, &eof);
  CHECK(!memmem(lb.data, lb.len, "mpi_go", 6)); /* rank 1 is not through MPI_Init yet */
  relay_say(fd, "{\"type\":\"fwd\",\"role\":\"rank\",\"rank\":1,\"msg\":{\"type\":\"mpi_up\"}}\n");
  relay_expect(s, &c, fd, &lb, "{\"type\":\"mpi_go\",\"to\":\"rank\"}");
  close(fd);
  rz_linebuf_free(&lb);
  rz_rdzv_server_destroy(s);
}

int main(void) {
  ftl_diag d = {{0}};
  rz_rdzv_server *s = NULL;

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
  CHECK_STR_CONTAINS(c.last_reject, "no valid proof");
  CHECK_STR_CONTAINS(c.last_peer, "127.0.0.1:");
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

  /* 5. Wire version 4: nothing but a proof for this connection's nonce joins. */
  memset(&c, 0, sizeof c);
  CHECK_OK(rz_rdzv_server_create("127.0.0.1", 2, "tok-a2", &s, &d), d.msg);
  rz_linebuf lb = {0};
  char nonce[FTL_WIRE_NONCE_HEX + 1], proof[FTL_WIRE_PROOF_HEX + 1], line[512];
  /* An older peer sends the token itself: refused, naming the version. */
  int old = raw_open(s, &c, &lb, "tok-a2", "agent", 0, nonce, proof);
  relay_say(old, "{\"type\":\"agent\",\"version\":3,\"token\":\"tok-a2\",\"rank\":0,\"world_size\":2}\n");
  until = ftl_deadline_after_ms(5000);
  while (c.rejected == 0 && ftl_deadline_left_ms(until) > 0) pump(s, &c, ftl_deadline_after_ms(50), never);
  CHECK_STR_CONTAINS(c.last_reject, "speaks wire version 3");
  close(old);
  rz_linebuf_free(&lb);
  /* A proof made for one connection's nonce, replayed on another: refused. */
  int first = raw_open(s, &c, &lb, "tok-a2", "agent", 0, nonce, proof);
  rz_linebuf_free(&lb);
  char other_nonce[FTL_WIRE_NONCE_HEX + 1], other_proof[FTL_WIRE_PROOF_HEX + 1];
  int second = raw_open(s, &c, &lb, "tok-a2", "agent", 0, other_nonce, other_proof);
  rz_linebuf_free(&lb);
  CHECK(strcmp(nonce, other_nonce) != 0);
  snprintf(line, sizeof line, "{\"type\":\"agent\",\"version\":4,\"proof\":\"%s\",\"rank\":0,\"world_size\":2}\n", proof);
  relay_say(second, line);
  until = ftl_deadline_after_ms(5000);
  while (c.rejected == 1 && ftl_deadline_left_ms(until) > 0) pump(s, &c, ftl_deadline_after_ms(50), never);
  CHECK_INT_EQ(c.rejected, 2);
  CHECK_STR_CONTAINS(c.last_reject, "agent of rank 0 has no valid proof");
  CHECK_INT_EQ(c.hello, 0);
  /* The proof on its own connection joins; the same agent's second hello, proven, is refused. */
  relay_say(first, line);
  until = ftl_deadline_after_ms(5000);
  while (c.hello == 0 && ftl_deadline_left_ms(until) > 0) pump(s, &c, ftl_deadline_after_ms(50), never);
  CHECK_INT_EQ(c.hello, 1);
  int again = raw_open(s, &c, &lb, "tok-a2", "agent", 0, nonce, proof);
  rz_linebuf_free(&lb);
  snprintf(line, sizeof line, "{\"type\":\"agent\",\"version\":4,\"proof\":\"%s\",\"rank\":0,\"world_size\":2}\n", proof);
  relay_say(again, line);
  until = ftl_deadline_after_ms(5000);
  while (c.rejected == 2 && ftl_deadline_left_ms(until) > 0) pump(s, &c, ftl_deadline_after_ms(50), never);
  CHECK_STR_CONTAINS(c.last_reject, "agent of rank 0 said hello twice");
  CHECK_INT_EQ(c.hello, 1);
  close(first);
  close(second);
  close(again);
  rz_rdzv_server_destroy(s);

  /* 6. A relay: one connection for a host's agents and ranks (wire version 3). */
  relay_case();
  /* 7. The ranks' barrier after MPI_Init, and the relays' fence in the cadence. */
  mpi_barrier_case();
  printf("ok\n");
  return 0;
}
