// failover: pipelined setData load that outlives a member's death, for the ensemble
// benchmark's failover section (issue 16). It speaks the client protocol directly
// (PROTOCOL.md: ConnectRequest, SetData op 5, Create op 1, the reply header), so the
// same bytes go to ZooKeeper and to keel.
//
//   failover -s HOST:PORT[,HOST:PORT...] [-c SESSIONS] [-d DEPTH] [-k KEYS] [-z BYTES]
//            -t DURATION_MS -o TIMELINE
//
// First it creates /failover and KEYS znodes /failover/k<i> of BYTES bytes (NODEEXISTS
// is fine) through the first server. Then for DURATION_MS it keeps SESSIONS sessions
// (default 4), each with DEPTH sets in flight (default 64), on the servers in turn
// (session i starts on server i mod n). When a connection breaks or stays silent for 3 s
// with requests in flight, that session reconnects at once (5 ms between attempts) to
// the next server with a new session: sets are idempotent here, nothing is lost that
// the timeline counts.
// TIMELINE gets "start_ms <epoch ms at the timed part's start>", then one line
// "<ms since start> <acks>" for every millisecond in which a set was acknowledged
// (error 0). stdout: "start_ms <ms>" as the timed part starts, then one summary line. Exit 0, or 2 on bad usage or a failed set-up.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERVERS 16
#define MAX_SESSIONS 64
#define RBUF (1 << 20)
#define WBUF (1 << 20)

static struct sockaddr_in servers[MAX_SERVERS];
static int nservers;
static int depth = 64, nkeys = 10000, size = 100;
static char *payload;

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void die(const char *m) {
  fprintf(stderr, "failover: %s\n", m);
  exit(2);
}

static void put32(char **p, int32_t v) {
  uint32_t n = htonl((uint32_t)v);
  memcpy(*p, &n, 4);
  *p += 4;
}
static void put64(char **p, int64_t v) {
  put32(p, (int32_t)(v >> 32));
  put32(p, (int32_t)(v & 0xffffffff));
}
static void putbuf(char **p, const char *b, int n) {
  put32(p, n);
  memcpy(*p, b, n);
  *p += n;
}
static int32_t get32(const char *p) {
  uint32_t n;
  memcpy(&n, p, 4);
  return (int32_t)ntohl(n);
}

// A frame with its length prefix filled in: begin with p = start + 4, end with frame().
static int frame(char *start, char *end) {
  uint32_t n = htonl((uint32_t)(end - start - 4));
  memcpy(start, &n, 4);
  return (int)(end - start);
}

static int connect_request(char *out) {
  char *p = out + 4;
  static const char passwd[16];
  put32(&p, 0);       // protocolVersion
  put64(&p, 0);       // lastZxidSeen
  put32(&p, 10000);   // timeOut, ms
  put64(&p, 0);       // sessionId: a new session
  putbuf(&p, passwd, 16);
  *p++ = 0;           // readOnly: false
  return frame(out, p);
}

static int key_path(char *out, int k) { return sprintf(out, "/failover/k%d", k); }

static int set_request(char *out, int32_t xid, int k) {
  char path[64], *p = out + 4;
  int n = key_path(path, k);
  put32(&p, xid);
  put32(&p, 5);  // setData
  putbuf(&p, path, n);
  putbuf(&p, payload, size);
  put32(&p, -1);  // any version
  return frame(out, p);
}

static int create_request(char *out, int32_t xid, const char *path, int len) {
  char *p = out + 4;
  put32(&p, xid);
  put32(&p, 1);  // create
  putbuf(&p, path, (int)strlen(path));
  putbuf(&p, payload, len);
  put32(&p, 1);   // one ACL: world:anyone, all permissions
  put32(&p, 31);
  putbuf(&p, "world", 5);
  putbuf(&p, "anyone", 6);
  put32(&p, 0);  // persistent
  return frame(out, p);
}

// ---- blocking helpers for the set-up --------------------------------------------------
static void write_all(int fd, const char *b, int n) {
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w <= 0) die("set-up: write failed");
    b += w;
    n -= (int)w;
  }
}
static void read_all(int fd, char *b, int n) {
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r <= 0) die("set-up: connection closed");
    b += r;
    n -= (int)r;
  }
}
// Reads one frame's body into b (at most cap bytes); returns its length.
static int read_frame(int fd, char *b, int cap) {
  char h[4];
  read_all(fd, h, 4);
  int n = get32(h);
  if (n < 0 || n > cap) die("set-up: bad frame length");
  read_all(fd, b, n);
  return n;
}

static void setup(void) {
  static char buf[RBUF];
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, (struct sockaddr *)&servers[0], sizeof servers[0]) != 0) die("set-up: cannot connect");
  int n = connect_request(buf);
  write_all(fd, buf, n);
  read_frame(fd, buf, RBUF);
  if (get32(buf + 4) <= 0) die("set-up: session refused");
  n = create_request(buf, 1, "/failover", 0);
  write_all(fd, buf, n);
  read_frame(fd, buf, RBUF);
  int err = get32(buf + 12);
  if (err != 0 && err != -110) die("set-up: create /failover failed");
  // The keys, 64 in flight.
  int sent = 0, got = 0;
  char path[64];
  while (got < nkeys) {
    while (sent < nkeys && sent - got < 64) {
      key_path(path, sent);
      n = create_request(buf, 2 + sent, path, size);
      write_all(fd, buf, n);
      sent++;
    }
    read_frame(fd, buf, RBUF);
    err = get32(buf + 12);
    if (err != 0 && err != -110) die("set-up: creating a key failed");
    got++;
  }
  close(fd);
}

// ---- the timed part ------------------------------------------------------------------
enum state { IDLE, CONNECTING, HANDSHAKE, READY };
struct session {
  int fd, server, inflight, next_key;
  enum state st;
  int32_t xid;
  int64_t retry_at, last_reply;
  int rlen, wlen, woff;
  char *rbuf, *wbuf;
};

static struct session ss[MAX_SESSIONS];
static int nsessions = 4;
static long reconnects, failed_sets;

static void drop(struct session *s, int64_t t) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->st = IDLE;
  s->inflight = 0;
  s->rlen = s->wlen = s->woff = 0;
  s->server = (s->server + 1) % nservers;
  s->retry_at = t + 5;
  reconnects++;
}

static void start_connect(struct session *s, int64_t t) {
  s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int r = connect(s->fd, (struct sockaddr *)&servers[s->server], sizeof servers[0]);
  if (r != 0 && errno != EINPROGRESS) {
    drop(s, t);
    return;
  }
  s->st = CONNECTING;
  s->last_reply = t;
  s->wlen = connect_request(s->wbuf);
  s->woff = 0;
}

int main(int argc, char **argv) {
  char *list = NULL, *out = NULL;
  int duration_ms = 0, opt;
  while ((opt = getopt(argc, argv, "s:c:d:k:z:t:o:")) != -1) {
    switch (opt) {
    case 's': list = optarg; break;
    case 'c': nsessions = atoi(optarg); break;
    case 'd': depth = atoi(optarg); break;
    case 'k': nkeys = atoi(optarg); break;
    case 'z': size = atoi(optarg); break;
    case 't': duration_ms = atoi(optarg); break;
    case 'o': out = optarg; break;
    default: die("usage: failover -s HOST:PORT[,...] [-c S] [-d D] [-k K] [-z B] -t MS -o FILE");
    }
  }
  if (!list || !out || duration_ms <= 0 || nsessions < 1 || nsessions > MAX_SESSIONS || depth < 1 ||
      nkeys < 1 || size < 0 || size > 65536)
    die("usage: failover -s HOST:PORT[,...] [-c S] [-d D] [-k K] [-z B] -t MS -o FILE");
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    char *colon = strrchr(tok, ':');
    if (!colon || nservers == MAX_SERVERS) die("bad -s");
    *colon = 0;
    servers[nservers].sin_family = AF_INET;
    servers[nservers].sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, tok, &servers[nservers].sin_addr) != 1) die("-s wants IPv4 addresses");
    nservers++;
  }
  payload = malloc(size + 1);
  memset(payload, 'x', size);
  setup();

  int *timeline = calloc(duration_ms + 1, sizeof(int));
  long acks = 0;
  int64_t start = now_ms(), end = start + duration_ms;
  printf("start_ms %lld\n", (long long)start);  // the caller times its kill from here
  fflush(stdout);
  for (int i = 0; i < nsessions; i++) {
    ss[i] = (struct session){.fd = -1, .server = i % nservers, .st = IDLE, .next_key = i * (nkeys / nsessions)};
    ss[i].rbuf = malloc(RBUF);
    ss[i].wbuf = malloc(WBUF);
  }
  struct pollfd pfd[MAX_SESSIONS];
  int64_t t;
  while ((t = now_ms()) < end) {
    for (int i = 0; i < nsessions; i++) {
      struct session *s = &ss[i];
      if (s->st == IDLE && t >= s->retry_at) start_connect(s, t);
      if (s->st == READY) {
        while (s->inflight < depth && s->wlen + 512 + size < WBUF) {
          s->wlen += set_request(s->wbuf + s->wlen, ++s->xid, s->next_key);
          s->next_key = (s->next_key + 1) % nkeys;
          s->inflight++;
        }
      }
      if (s->st != IDLE && s->inflight > 0 && t - s->last_reply > 3000) drop(s, t);
      pfd[i].fd = s->fd;
      pfd[i].events = s->fd < 0 ? 0 : (POLLIN | (s->wlen > s->woff || s->st == CONNECTING ? POLLOUT : 0));
      pfd[i].revents = 0;
    }
    poll(pfd, nsessions, 2);
    t = now_ms();
    for (int i = 0; i < nsessions; i++) {
      struct session *s = &ss[i];
      if (s->fd < 0 || !pfd[i].revents) continue;
      if (s->st == CONNECTING) {
        int e = 0;
        socklen_t l = sizeof e;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &l);
        if (e != 0 || (pfd[i].revents & (POLLERR | POLLHUP))) {
          drop(s, t);
          continue;
        }
        s->st = HANDSHAKE;
      }
      if ((pfd[i].revents & POLLOUT) && s->wlen > s->woff) {
        ssize_t w = write(s->fd, s->wbuf + s->woff, s->wlen - s->woff);
        if (w < 0 && errno != EAGAIN) {
          drop(s, t);
          continue;
        }
        if (w > 0) s->woff += (int)w;
        if (s->woff == s->wlen) s->woff = s->wlen = 0;
      }
      if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) {
        ssize_t r = read(s->fd, s->rbuf + s->rlen, RBUF - s->rlen);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          drop(s, t);
          continue;
        }
        if (r < 0) continue;
        s->rlen += (int)r;
        int off = 0, broken = 0;
        while (s->rlen - off >= 4) {
          int n = get32(s->rbuf + off);
          if (n < 0 || n > RBUF - 4) { broken = 1; break; }
          if (s->rlen - off - 4 < n) break;
          char *b = s->rbuf + off + 4;
          if (s->st == HANDSHAKE) {
            if (n < 16 || get32(b + 4) <= 0) { broken = 1; break; }  // refused: timeOut 0
            s->st = READY;
          } else if (n >= 16) {
            int32_t xid = get32(b), err = get32(b + 12);
            if (xid > 0) {
              s->inflight--;
              if (err == 0) {
                acks++;
                timeline[t - start < duration_ms ? t - start : duration_ms]++;
              } else {
                failed_sets++;
              }
            }
          }
          s->last_reply = t;
          off += 4 + n;
        }
        if (broken) {
          drop(s, t);
          continue;
        }
        memmove(s->rbuf, s->rbuf + off, s->rlen - off);
        s->rlen -= off;
      }
    }
  }
  FILE *f = fopen(out, "w");
  if (!f) die("cannot write the timeline");
  fprintf(f, "start_ms %lld\n", (long long)start);
  for (int i = 0; i <= duration_ms; i++)
    if (timeline[i]) fprintf(f, "%d %d\n", i, timeline[i]);
  fclose(f);
  printf("failover: %ld sets acknowledged in %d ms by %d sessions x %d, %ld reconnects, %ld failed sets\n",
         acks, duration_ms, nsessions, depth, reconnects, failed_sets);
  return 0;
}
