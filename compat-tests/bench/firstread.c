/* firstread: spawn a ZooKeeper-protocol server and time how long until it serves a read.
 * usage: firstread -s host:port -P /path [-z expected_len] [-t timeout_s] -l logfile -o pidfile -- cmd args...
 * Forks, the child runs setsid + exec cmd (stdout/stderr to logfile), pid written to pidfile.
 * The parent loops: connect, open a session, getData(path). Prints
 *   first_read_s=S connect_s=C attempts=N prev_attempt_s=P
 * where C is when the port first accepted a TCP connection and P when the last failed
 * attempt began (the server was not yet serving then). Exit 0 on a successful read,
 * 3 when the server answered but the read failed (e.g. NONODE: data not durable),
 * 4 when the child died, 5 on timeout (stuck_at= says which step never succeeded:
 * connect, session (no ConnectResponse within 0.3 s), read (no getData reply within 0.3 s)).
 * build: gcc -O2 -o firstread firstread.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void p32(char **p, int32_t v) { uint32_t x = htonl((uint32_t)v); memcpy(*p, &x, 4); *p += 4; }
static int32_t g32(const char *p) { uint32_t x; memcpy(&x, p, 4); return (int32_t)ntohl(x); }

/* read exactly n bytes with a deadline; 0 ok, -1 error/closed/timeout */
static int readn(int fd, char *b, int n, double deadline) {
  int got = 0;
  while (got < n) {
    int ms = (int)((deadline - now()) * 1000); if (ms <= 0) return -1;
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, ms) <= 0) return -1;
    ssize_t r = read(fd, b + got, n - got);
    if (r <= 0) return -1;
    got += r;
  }
  return 0;
}
static int readframe(int fd, char **out, int *len, double deadline) {
  char h[4]; if (readn(fd, h, 4, deadline)) return -1;
  int n = g32(h); if (n < 0 || n > (64 << 20)) return -1;
  *out = malloc(n + 1); *len = n;
  if (readn(fd, *out, n, deadline)) { free(*out); return -1; }
  return 0;
}

int main(int argc, char **argv) {
  const char *hp = "127.0.0.1:2181", *path = "/", *logf = "/dev/null", *pidf = NULL;
  int expect = -1; double timeout = 600; int opt;
  while ((opt = getopt(argc, argv, "+s:P:z:t:l:o:")) != -1) switch (opt) {
    case 's': hp = optarg; break; case 'P': path = optarg; break; case 'z': expect = atoi(optarg); break;
    case 't': timeout = atof(optarg); break; case 'l': logf = optarg; break; case 'o': pidf = optarg; break;
    default: fprintf(stderr, "usage: firstread -s host:port -P path [-z len] [-t s] -l log -o pidfile -- cmd...\n"); return 2;
  }
  if (optind >= argc) { fprintf(stderr, "firstread: no command\n"); return 2; }
  char host[256]; snprintf(host, sizeof host, "%s", hp); char *colon = strrchr(host, ':');
  int port = colon ? atoi(colon + 1) : 2181; if (colon) *colon = 0;
  struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_port = htons(port); inet_pton(AF_INET, host, &sa.sin_addr);

  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 2; }
  if (pid == 0) {
    setsid();
    int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
    execvp(argv[optind], argv + optind); perror("exec"); _exit(127);
  }
  if (pidf) { FILE *f = fopen(pidf, "w"); if (f) { fprintf(f, "%d\n", pid); fclose(f); } }

  double connect_at = -1; long attempts = 0; int rc = 5; const char *stage = "connect";
  double prev_at = -1, this_at = -1; /* start of the previous / current attempt: the figure's resolution */
  while (now() - t0 < timeout) {
    int st; if (waitpid(pid, &st, WNOHANG) == pid) { fprintf(stderr, "firstread: server exited (status %d), see %s\n", st, logf); rc = 4; break; }
    attempts++; prev_at = this_at; this_at = now() - t0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) { close(fd); usleep(5000); continue; }
    if (connect_at < 0) connect_at = now() - t0;
    int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[512], *p = req + 4; /* ConnectRequest */
    p32(&p, 0); p32(&p, 0); p32(&p, 0); p32(&p, 30000); p32(&p, 0); p32(&p, 0); p32(&p, 16); memset(p, 0, 16); p += 16; *p++ = 0;
    { char *q = req; p32(&q, (int32_t)(p - req - 4)); }
    double dl = now() + 0.3; /* per attempt: a server still loading may hold a connection unanswered */
    stage = "session";
    char *resp; int len;
    if (write(fd, req, p - req) != p - req || readframe(fd, &resp, &len, dl)) { close(fd); usleep(5000); continue; }
    int32_t to = len >= 8 ? g32(resp + 4) : 0; free(resp);
    if (to <= 0) { close(fd); usleep(5000); continue; }
    stage = "read"; dl = now() + 0.3;
    int pl = strlen(path); p = req + 4; /* getData */
    p32(&p, 1); p32(&p, 4); p32(&p, pl); memcpy(p, path, pl); p += pl; *p++ = 0;
    { char *q = req; p32(&q, (int32_t)(p - req - 4)); }
    if (write(fd, req, p - req) != p - req) { close(fd); usleep(5000); continue; }
    int got = -1;
    for (;;) { /* skip notifications/pings (negative xids) */
      if (readframe(fd, &resp, &len, dl)) break;
      if (len >= 16 && g32(resp) == 1) { got = 0; break; }
      free(resp);
    }
    close(fd);
    if (got) { usleep(5000); continue; }
    int32_t err = g32(resp + 12);
    double t = now() - t0;
    if (err != 0) { printf("first_read_s=FAIL err=%d connect_s=%.3f attempts=%ld\n", err, connect_at, attempts); free(resp); rc = 3; break; }
    int32_t dlen = len >= 20 ? g32(resp + 16) : -1; free(resp);
    if (expect >= 0 && dlen != expect) { printf("first_read_s=FAIL datalen=%d connect_s=%.3f attempts=%ld\n", dlen, connect_at, attempts); rc = 3; break; }
    printf("first_read_s=%.3f connect_s=%.3f attempts=%ld prev_attempt_s=%.3f\n", t, connect_at, attempts, prev_at); rc = 0; break;
  }
  if (rc == 5) printf("first_read_s=TIMEOUT connect_s=%.3f attempts=%ld stuck_at=%s\n", connect_at, attempts, stage);
  fflush(stdout);
  return rc;
}
