/* The peers of the probe benchmark in C: the applications in other containers that probes
 * reach, made cheap so that they do not take the prober's CPU on a small machine. One thread,
 * epoll, on 127.0.0.1:
 *   - HTTP/1.1: every request is answered 200 "ok" with Content-Length (keep-alive);
 *   - TCP: connections are accepted and held until the client closes (it resets them);
 *   - gRPC (h2c): grpc.health.v1.Health/Check answered SERVING (NOT_SERVING with
 *     --not-serving) on every request stream: an empty SETTINGS first, the client's SETTINGS
 *     acknowledged, PINGs answered; on the request's END_STREAM: HEADERS (:status 200,
 *     content-type application/grpc; HPACK without Huffman), one DATA frame (the 5-byte gRPC
 *     prefix and HealthCheckResponse{status}) and trailers (grpc-status 0, END_STREAM).
 * Prints {"http":port,"tcp":port,"grpc":port} on one line, then serves until killed.
 * Every peer waits for the client to close first: probes reset their sockets, so neither side
 * is left in TIME_WAIT.
 * Build: cc -O2 -o probe-peers probe-peers.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum kind { HTTP, TCP, GRPC };
enum { MAX_FDS = 65536, BUF = 16384 };

struct conn {
  unsigned char kind;
  unsigned char open;
  unsigned char preface; /* gRPC: the client's preface has been read */
  int len;
  unsigned char buf[BUF];
};

static struct conn *conns[MAX_FDS];
static int listeners[3];
static int serving_status = 1; /* SERVING; 2 NOT_SERVING */
static int ep;

static int listen_on(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { perror("socket"); exit(1); }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0) { perror("bind/listen"); exit(1); }
  return fd;
}

static int port_of(int fd) {
  struct sockaddr_in a;
  socklen_t n = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &n);
  return ntohs(a.sin_port);
}

static void drop(int fd) {
  epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
  close(fd);
  if (conns[fd]) conns[fd]->open = 0;
}

/* Small answers go out in one write; a full socket buffer here means a stuck client: drop it. */
static int send_all(int fd, const void *p, size_t n) {
  ssize_t w = write(fd, p, n);
  if (w == (ssize_t)n) return 0;
  drop(fd);
  return -1;
}

static const char HTTP_OK[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";

/* Answers each complete request head in the buffer; keeps a partial one. */
static void on_http(int fd, struct conn *c) {
  int start = 0;
  for (;;) {
    unsigned char *end = memmem(c->buf + start, c->len - start, "\r\n\r\n", 4);
    if (!end) break;
    if (send_all(fd, HTTP_OK, sizeof HTTP_OK - 1) < 0) return;
    start = (int)(end - c->buf) + 4;
  }
  if (start == 0 && c->len == BUF) { drop(fd); return; } /* a head larger than the buffer */
  memmove(c->buf, c->buf + start, c->len - start);
  c->len -= start;
}

static void frame_header(unsigned char *p, int len, int type, int flags, unsigned stream) {
  p[0] = len >> 16; p[1] = len >> 8; p[2] = len;
  p[3] = type; p[4] = flags;
  p[5] = (stream >> 24) & 0x7f; p[6] = stream >> 16; p[7] = stream >> 8; p[8] = stream;
}

static const unsigned char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* HEADERS + DATA + trailers of one Health/Check answer on `stream`, in one write. */
static int grpc_answer(int fd, unsigned stream) {
  unsigned char out[128];
  int n = 0;
  /* :status 200 (static index 8); content-type (static name 31, literal without indexing) */
  static const unsigned char head[] = { 0x88, 0x0f, 0x10, 16, 'a','p','p','l','i','c','a','t','i','o','n','/','g','r','p','c' };
  frame_header(out + n, sizeof head, 1, 0x4, stream); n += 9;
  memcpy(out + n, head, sizeof head); n += sizeof head;
  frame_header(out + n, 7, 0, 0, stream); n += 9;
  const unsigned char data[] = { 0, 0, 0, 0, 2, 0x08, (unsigned char)serving_status };
  memcpy(out + n, data, 7); n += 7;
  /* grpc-status: 0, literal without indexing, new name */
  static const unsigned char trail[] = { 0x00, 11, 'g','r','p','c','-','s','t','a','t','u','s', 1, '0' };
  frame_header(out + n, sizeof trail, 1, 0x5, stream); n += 9;
  memcpy(out + n, trail, sizeof trail); n += sizeof trail;
  return send_all(fd, out, n);
}

static void on_grpc(int fd, struct conn *c) {
  int p = 0;
  if (!c->preface) {
    if (c->len < 24) return;
    if (memcmp(c->buf, PREFACE, 24) != 0) { drop(fd); return; }
    c->preface = 1;
    p = 24;
  }
  while (c->len - p >= 9) {
    unsigned char *h = c->buf + p;
    int len = (h[0] << 16) | (h[1] << 8) | h[2];
    int type = h[3], flags = h[4];
    unsigned stream = ((unsigned)(h[5] & 0x7f) << 24) | (h[6] << 16) | (h[7] << 8) | h[8];
    if (len > BUF - 9) { drop(fd); return; }
    if (c->len - p < 9 + len) break;
    if (type == 4 && !(flags & 1)) { /* SETTINGS: acknowledge */
      unsigned char ack[9];
      frame_header(ack, 0, 4, 1, 0);
      if (send_all(fd, ack, 9) < 0) return;
    } else if (type == 6 && !(flags & 1) && len == 8) { /* PING: answer */
      unsigned char pong[17];
      frame_header(pong, 8, 6, 1, 0);
      memcpy(pong + 9, h + 9, 8);
      if (send_all(fd, pong, 17) < 0) return;
    } else if ((type == 0 || type == 1) && (flags & 1) && stream) { /* DATA / HEADERS with END_STREAM */
      if (grpc_answer(fd, stream) < 0) return;
    } else if (type == 7) { /* GOAWAY */
      drop(fd);
      return;
    }
    p += 9 + len;
  }
  memmove(c->buf, c->buf + p, c->len - p);
  c->len -= p;
}

static void on_accept(int lfd, enum kind k) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (fd >= MAX_FDS) { close(fd); continue; }
    if (!conns[fd] && !(conns[fd] = malloc(sizeof(struct conn)))) { close(fd); continue; }
    struct conn *c = conns[fd];
    c->kind = k; c->open = 1; c->preface = 0; c->len = 0;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    if (k == GRPC) {
      unsigned char settings[9];
      frame_header(settings, 0, 4, 0, 0);
      send_all(fd, settings, 9);
    }
  }
}

static void on_readable(int fd) {
  struct conn *c = conns[fd];
  if (!c || !c->open) return;
  for (;;) {
    if (c->len == BUF) { drop(fd); return; }
    ssize_t n = read(fd, c->buf + c->len, BUF - c->len);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) { drop(fd); return; }
    if (n < 0) return;
    if (c->kind == TCP) { c->len = 0; continue; }
    c->len += n;
    if (c->kind == HTTP) on_http(fd, c);
    else on_grpc(fd, c);
    if (!c->open) return;
  }
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--not-serving") == 0) serving_status = 2;
    else { fprintf(stderr, "usage: %s [--not-serving]\n", argv[0]); return 2; }
  }
  signal(SIGPIPE, SIG_IGN);
  ep = epoll_create1(EPOLL_CLOEXEC);
  for (int k = 0; k < 3; k++) {
    listeners[k] = listen_on();
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = listeners[k] };
    epoll_ctl(ep, EPOLL_CTL_ADD, listeners[k], &ev);
  }
  printf("{\"http\":%d,\"tcp\":%d,\"grpc\":%d}\n", port_of(listeners[HTTP]), port_of(listeners[TCP]), port_of(listeners[GRPC]));
  fflush(stdout);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0 && errno != EINTR) { perror("epoll_wait"); return 1; }
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == listeners[HTTP]) on_accept(fd, HTTP);
      else if (fd == listeners[TCP]) on_accept(fd, TCP);
      else if (fd == listeners[GRPC]) on_accept(fd, GRPC);
      else on_readable(fd);
    }
  }
}
