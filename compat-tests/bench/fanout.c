/* fanout: watch fan-out time of a ZooKeeper-protocol server.
 * usage: fanout -s host:port [-n sessions] [-P path] [-z bytes] [-b connects_in_flight] [-t timeout_s]
 *
 * Speaks the client protocol itself over nonblocking sockets and one epoll loop:
 *  1. a control session creates PATH (data of -z bytes; NODEEXISTS is fine);
 *  2. N watcher sessions are opened (at most -b handshakes in flight, so a small accept
 *     backlog does not turn into SYN retransmits) and each sends getData(PATH, watch=1);
 *  3. once every watcher has its getData reply, the control session sends one setData;
 *  4. the clock runs from just before that write until the N-th WatchedEvent
 *     (xid -1, type NodeDataChanged) has been read.
 * Then every session is closed with closeSession and the control session deletes PATH.
 * One line on stdout:
 *   sessions=N connect_s=C watch_s=W set_reply_ms=R first_ms=F p50_ms=M last_ms=L notified=K close_s=X
 * (connect_s: all sessions open; watch_s: all watches set, from the start; *_ms: from the
 * setData write). Exit 0 when all N notifications arrived, 1 otherwise.
 * Sessions idle for 10 s get a ping, so a slow phase does not expire them (timeout 30 s).
 * Needs `ulimit -n` above N + 16.
 * build: gcc -O2 -o fanout fanout.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { S_IDLE, S_CONNECTING, S_HANDSHAKE, S_WATCHING, S_WATCHED, S_NOTIFIED, S_CLOSING, S_DONE };
enum { INBUF = 2048 };
#define XID_NOTIFICATION (-1)
#define XID_PING (-2)
#define OP_CREATE 1
#define OP_DELETE 2
#define OP_GETDATA 4
#define OP_SETDATA 5
#define OP_PING 11
#define OP_CLOSE (-11)
#define EVENT_DATA_CHANGED 3

typedef struct sess {
  int fd, state, tries, xid;
  double last_send;
  size_t in_len;
  char in[INBUF];
} sess_t;

static struct sockaddr_in addr;
static const char *path = "/fanout";
static int nsess = 10000, size = 100, batch = 64;
static double timeout_s = 300;
static sess_t *ss;
static int ep;
static double *notified_at;
static long nnotified;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void die(const char *m) { fprintf(stderr, "fanout: %s\n", m); exit(1); }

typedef struct { char b[512]; int len; } msg_t;
static void p32(msg_t *m, int32_t v) { uint32_t x = htonl((uint32_t)v); memcpy(m->b + m->len, &x, 4); m->len += 4; }
static void p64(msg_t *m, int64_t v) { p32(m, (int32_t)((uint64_t)v >> 32)); p32(m, (int32_t)(v & 0xffffffff)); }
static void pbytes(msg_t *m, const void *p, int n) {
  if (m->len + 4 + (n > 0 ? n : 0) > (int)sizeof m->b) die("request too large");
  p32(m, n); if (n > 0) { memcpy(m->b + m->len, p, n); m->len += n; }
}
static int32_t g32(const char *p) { uint32_t x; memcpy(&x, p, 4); return (int32_t)ntohl(x); }
static void begin(msg_t *m) { m->len = 4; }
static void end(msg_t *m) { uint32_t x = htonl((uint32_t)(m->len - 4)); memcpy(m->b, &x, 4); }

static void connect_req(msg_t *m) {
  char pw[16] = {0};
  begin(m); p32(m, 0); p64(m, 0); p32(m, 30000); p64(m, 0); pbytes(m, pw, 16); m->b[m->len++] = 0; end(m);
}
static void path_req(msg_t *m, int xid, int op) { begin(m); p32(m, xid); p32(m, op); pbytes(m, path, strlen(path)); }

/* Small requests on an idle socket: a short write means something is badly wrong. */
static void send_msg(sess_t *s, msg_t *m) {
  ssize_t n = write(s->fd, m->b, m->len);
  if (n != m->len) { perror("fanout: write"); die("short write"); }
  s->last_send = now();
}

/* Waits (polling) on the control session for the reply to `xid`; returns its err code.
 * Notifications and ping replies met on the way are skipped. */
static int wait_reply(sess_t *c, int want, double deadline) {
  for (;;) {
    if (now() > deadline) die("control session: no reply");
    char *p = c->in;
    if (c->in_len >= 4) {
      int32_t fl = g32(p);
      if (fl < 0 || fl + 4 > INBUF) die("control session: bad frame");
      if (c->in_len >= (size_t)fl + 4) {
        int32_t xid = g32(p + 4), err = fl >= 16 ? g32(p + 16) : 0;
        memmove(c->in, c->in + 4 + fl, c->in_len - 4 - fl); c->in_len -= 4 + fl;
        if (xid == want) return err;
        continue; /* a notification or ping reply */
      }
    }
    ssize_t r = read(c->fd, c->in + c->in_len, INBUF - c->in_len);
    if (r == 0) die("control session: server closed the connection");
    if (r < 0) { if (errno == EAGAIN || errno == EINTR) { usleep(200); continue; } perror("read"); die("control session"); }
    c->in_len += r;
  }
}
/* One blocking round trip on the control session; returns the reply's err code. */
static int control_call(sess_t *c, msg_t *m, double deadline) {
  send_msg(c, m);
  return wait_reply(c, c->xid, deadline);
}

static int open_socket(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) { perror("fanout: socket"); die("cannot open a socket (ulimit -n?)"); }
  int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) && errno != EINPROGRESS) { close(fd); return -1; }
  return fd;
}

static void start_connect(sess_t *s) {
  s->fd = open_socket(); s->tries++; s->in_len = 0;
  if (s->fd < 0) die("connect failed");
  struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = s};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev)) die("epoll_ctl add");
  s->state = S_CONNECTING;
}

/* A watcher session failed before its watch was set: retry a few times. */
static void retry(sess_t *s, const char *why) { /* stays counted in in_handshake */
  epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL); close(s->fd); s->fd = -1;
  if (s->tries >= 5) { fprintf(stderr, "fanout: session %ld: %s, giving up\n", (long)(s - ss), why); die("session failed"); }
  start_connect(s);
}

/* in_handshake: sessions connecting or awaiting their ConnectResponse (at most -b). */
static long n_open, n_watched, n_closed, in_handshake;
static double t_all_open;
static int set_xid = -100;

/* Handles one complete frame of a watcher session. */
static void on_frame(sess_t *s, const char *f, int32_t fl, double t) {
  if (fl < 4) die("short frame");
  if (s->state == S_HANDSHAKE) {
    if (fl < 16 || g32(f + 4) <= 0) { retry(s, "session refused"); return; }
    in_handshake--;
    if (++n_open == nsess) t_all_open = now();
    msg_t m; path_req(&m, ++s->xid, OP_GETDATA); m.b[m.len++] = 1; end(&m); send_msg(s, &m);
    s->state = S_WATCHING;
    return;
  }
  int32_t xid = g32(f);
  if (xid == XID_PING) return;
  if (xid == XID_NOTIFICATION) {
    if (fl < 20 || g32(f + 16) != EVENT_DATA_CHANGED) { fprintf(stderr, "fanout: unexpected event type %d\n", fl >= 20 ? g32(f + 16) : -1); return; }
    if (s->state == S_WATCHED) { s->state = S_NOTIFIED; notified_at[nnotified++] = t; }
    return;
  }
  if (fl < 16) die("short reply");
  int32_t err = g32(f + 12);
  if (s->state == S_WATCHING && xid == s->xid) {
    if (err != 0) { fprintf(stderr, "fanout: getData error %d\n", err); die("getData failed"); }
    s->state = S_WATCHED; n_watched++;
  } else if (s->state == S_CLOSING && xid == s->xid) {
    s->state = S_DONE; n_closed++;
  }
}

/* Reads what is available on a watcher session and handles complete frames. */
static void on_readable(sess_t *s) {
  for (;;) {
    ssize_t r = read(s->fd, s->in + s->in_len, INBUF - s->in_len);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      if (s->state == S_HANDSHAKE) { retry(s, "closed during handshake"); return; }
      if (s->state == S_CLOSING) { s->state = S_DONE; n_closed++; }
      else if (s->state != S_DONE) { fprintf(stderr, "fanout: server closed session %ld in state %d\n", (long)(s - ss), s->state); die("session lost"); }
      epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL); close(s->fd); s->fd = -1;
      return;
    }
    if (r < 0) return;
    s->in_len += r;
    double t = now();
    size_t off = 0;
    while (s->in_len - off >= 4) {
      int32_t fl = g32(s->in + off);
      if (fl < 0 || fl + 4 > INBUF) die("frame too large");
      if (s->in_len - off - 4 < (size_t)fl) break;
      int st = s->state;
      on_frame(s, s->in + off + 4, fl, t);
      if (st == S_HANDSHAKE && s->state == S_CONNECTING) return; /* retried: buffer reset */
      off += 4 + fl;
    }
    memmove(s->in, s->in + off, s->in_len - off); s->in_len -= off;
  }
}

static void on_writable(sess_t *s) {
  int e = 0; socklen_t l = sizeof e; getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &l);
  if (e) { retry(s, strerror(e)); return; }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
  epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev);
  msg_t m; connect_req(&m); send_msg(s, &m);
  s->state = S_HANDSHAKE;
}

static void pings(double t) {
  static double last;
  if (t - last < 2) return;
  last = t;
  msg_t m; begin(&m); p32(&m, XID_PING); p32(&m, OP_PING); end(&m);
  for (int i = 0; i <= nsess; i++) {
    sess_t *s = &ss[i];
    if (s->fd >= 0 && s->state >= S_WATCHING && s->state <= S_NOTIFIED && t - s->last_send > 10) send_msg(s, &m);
  }
}

/* Runs the event loop until done() or the deadline. */
static void loop(int (*done)(void), double deadline, const char *what) {
  struct epoll_event evs[256];
  while (!done()) {
    double t = now();
    if (t > deadline) { fprintf(stderr, "fanout: timeout while %s (open %ld, watched %ld, notified %ld, closed %ld of %d)\n", what, n_open, n_watched, nnotified, n_closed, nsess); exit(1); }
    pings(t);
    int n = epoll_wait(ep, evs, 256, 100);
    for (int i = 0; i < n; i++) {
      sess_t *s = evs[i].data.ptr;
      if (s->fd < 0) continue;
      if (s->state == S_CONNECTING) on_writable(s);
      else on_readable(s);
    }
  }
}

static long next_to_open;
static int all_watched(void) {
  while (in_handshake < batch && next_to_open < nsess) { start_connect(&ss[1 + next_to_open++]); in_handshake++; }
  return n_watched == nsess;
}
static int all_closed(void) { return n_closed == nsess; }
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
  const char *hp = "127.0.0.1:2181"; int opt;
  while ((opt = getopt(argc, argv, "s:n:P:z:b:t:")) != -1) switch (opt) {
    case 's': hp = optarg; break; case 'n': nsess = atoi(optarg); break; case 'P': path = optarg; break;
    case 'z': size = atoi(optarg); break; case 'b': batch = atoi(optarg); break; case 't': timeout_s = atof(optarg); break;
    default: fprintf(stderr, "usage: fanout -s host:port [-n sessions] [-P path] [-z bytes] [-b connects_in_flight] [-t timeout_s]\n"); return 2;
  }
  if (nsess < 1 || batch < 1 || size < 0 || size > 400) die("bad -n, -b or -z");
  char host[256]; snprintf(host, sizeof host, "%s", hp); char *colon = strrchr(host, ':');
  addr.sin_family = AF_INET; addr.sin_port = htons(colon ? atoi(colon + 1) : 2181); if (colon) *colon = 0;
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) die("host must be an IPv4 address");
  ss = calloc(nsess + 1, sizeof *ss); notified_at = calloc(nsess, sizeof(double));
  if (!ss || !notified_at) die("out of memory");
  for (int i = 0; i <= nsess; i++) ss[i].fd = -1;
  ep = epoll_create1(0);
  double deadline = now() + timeout_s;

  /* control session (ss[0]), blocking-style round trips */
  sess_t *c = &ss[0];
  c->fd = open_socket(); if (c->fd < 0) die("control session: connect failed");
  { struct epoll_event ev; int w = epoll_create1(0); ev.events = EPOLLOUT; epoll_ctl(w, EPOLL_CTL_ADD, c->fd, &ev);
    if (epoll_wait(w, &ev, 1, 5000) != 1) die("control session: connect timed out");
    close(w);
    int e = 0; socklen_t l = sizeof e; getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &l); if (e) die("control session: connect refused"); }
  msg_t m; connect_req(&m); send_msg(c, &m);
  c->xid = 0; /* the ConnectResponse has no xid: wait for the first frame by hand */
  for (;;) {
    if (now() > deadline) die("control session: no ConnectResponse");
    ssize_t r = read(c->fd, c->in + c->in_len, INBUF - c->in_len);
    if (r == 0) die("control session closed");
    if (r > 0) c->in_len += r; else usleep(200);
    if (c->in_len >= 4 && c->in_len >= (size_t)g32(c->in) + 4) break;
  }
  if (g32(c->in + 8) <= 0) die("control session refused");
  { int32_t fl = g32(c->in); memmove(c->in, c->in + 4 + fl, c->in_len - 4 - fl); c->in_len -= 4 + fl; }
  char *payload = calloc(1, size + 1); memset(payload, 'x', size);
  path_req(&m, ++c->xid, OP_CREATE); pbytes(&m, payload, size);
  p32(&m, 1); p32(&m, 31); pbytes(&m, "world", 5); pbytes(&m, "anyone", 6); p32(&m, 0); end(&m);
  int err = control_call(c, &m, deadline);
  if (err != 0 && err != -110) { fprintf(stderr, "fanout: create %s: error %d\n", path, err); return 1; }
  c->state = S_WATCHED; /* from now on it gets pings like the watchers */

  double t0 = now();
  loop(all_watched, deadline, "setting watches");
  double t_watched = now();
  double connect_s = t_all_open - t0;

  /* the setData; its reply is read by the event loop on the control session too */
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  path_req(&m, ++c->xid, OP_SETDATA); payload[0] = 'y'; pbytes(&m, payload, size); p32(&m, -1); end(&m);
  set_xid = c->xid;
  double t_set = now();
  send_msg(c, &m);
  double set_reply = -1;
  struct epoll_event evs[256];
  while (nnotified < nsess) {
    double t = now();
    if (t > deadline) break;
    pings(t);
    int n = epoll_wait(ep, evs, 256, 100);
    for (int i = 0; i < n; i++) {
      sess_t *s = evs[i].data.ptr;
      if (s == c) {
        ssize_t r = read(c->fd, c->in + c->in_len, INBUF - c->in_len);
        if (r > 0) c->in_len += r;
        while (c->in_len >= 4 && c->in_len >= (size_t)g32(c->in) + 4) {
          int32_t fl = g32(c->in);
          if (g32(c->in + 4) == set_xid) {
            set_reply = now() - t_set;
            if (g32(c->in + 16) != 0) { fprintf(stderr, "fanout: setData error %d\n", g32(c->in + 16)); return 1; }
          }
          memmove(c->in, c->in + 4 + fl, c->in_len - 4 - fl); c->in_len -= 4 + fl;
        }
      } else if (s->fd >= 0) on_readable(s);
    }
  }
  int complete = nnotified == nsess;
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  for (long i = 0; i < nnotified; i++) notified_at[i] -= t_set;
  qsort(notified_at, nnotified, sizeof(double), cmpd);
  double first = nnotified ? notified_at[0] : -1, last = nnotified ? notified_at[nnotified - 1] : -1;
  double p50 = nnotified ? notified_at[(nnotified - 1) / 2] : -1;
  if (set_reply < 0 && complete) { /* not read yet: an upper bound */
    if (wait_reply(c, set_xid, now() + 10) != 0) die("setData failed");
    set_reply = now() - t_set;
  }

  /* close every watcher session; the server answers closeSession, then closes */
  double t_close = now();
  for (int i = 1; i <= nsess; i++) {
    sess_t *s = &ss[i];
    if (s->fd < 0) { s->state = S_DONE; n_closed++; continue; }
    begin(&m); p32(&m, ++s->xid); p32(&m, OP_CLOSE); end(&m);
    send_msg(s, &m); s->state = S_CLOSING;
  }
  loop(all_closed, now() + 60, "closing sessions");
  double close_s = now() - t_close;
  path_req(&m, ++c->xid, OP_DELETE); p32(&m, -1); end(&m);
  control_call(c, &m, now() + 10);
  begin(&m); p32(&m, ++c->xid); p32(&m, OP_CLOSE); end(&m);
  control_call(c, &m, now() + 10);

  printf("sessions=%d connect_s=%.3f watch_s=%.3f set_reply_ms=%.2f first_ms=%.2f p50_ms=%.2f last_ms=%.2f notified=%ld close_s=%.3f\n",
         nsess, connect_s, t_watched - t0, set_reply * 1e3, first * 1e3, p50 * 1e3, last * 1e3, nnotified, close_s);
  return complete ? 0 : 1;
}
