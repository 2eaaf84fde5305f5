// Many clients holding `?wait=` on one token, for Scripts/bench-waiting: what a waiting request
// costs the server in memory, and how soon one write answers all of them.
//
//   waiters PORT CONNECTIONS ROUNDS SERVER_PID METHOD TARGET WRITE_TARGET SECRET
//
// 1. Opens CONNECTIONS keep-alive connections to 127.0.0.1:PORT and sends one plain conditional
//    `GET /api/...` (no wait) on each, to learn the current entity tag and to have every
//    connection accepted and served once: the server's resident memory then is "idle".
// 2. Each round: every connection sends `METHOD TARGET` (which carries `?wait=`) with that tag;
//    once `GET /metrics` says CONNECTIONS requests wait, the server's memory is "waiting". Then one
//    `PUT WRITE_TARGET` (bearer SECRET) changes the collection, and the time from just before it is
//    sent to each waiter's complete answer is measured. The new tag is the next round's.
//
// Prints one line per measure, `name value`, for the script to read:
//   rest_kb, idle_kb, waiting_kb (per round), wake_p50_ms, wake_p99_ms, wake_max_ms (per round),
//   answered_200, answered_other (per round).
// A server without the `deltasnap_waiting_requests` gauge gets 5 s instead of that check.
// Exits non-zero, saying why on standard error, when a connection fails or a round does not end.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    char buf[4096];
    int len;
    int done;
    double at;  // seconds, when the answer was complete
    int status;
} conn_t;

static int port;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "waiters: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(fd, text, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("write");
        text += n;
        left -= (size_t)n;
    }
}

// Whether buf holds one whole answer; its length in *length. Bodies: Content-Length or chunked.
static int complete(const char *buf, int len, int head_only, int *length) {
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (!end) return 0;
    int header = (int)(end - buf) + 4;
    int status = atoi(buf + 9);
    if (head_only || status == 304 || status == 204) {
        *length = header;
        return 1;
    }
    const char *cl = memmem(buf, header, "\r\nContent-Length: ", 18);
    if (!cl) cl = memmem(buf, header, "\r\ncontent-length: ", 18);
    if (cl) {
        int body = atoi(cl + 18);
        if (len < header + body) return 0;
        *length = header + body;
        return 1;
    }
    const char *last = memmem(buf + header, len - header, "0\r\n\r\n", 5);
    if (!last) return 0;
    *length = (int)(last - buf) + 5;
    return 1;
}

// The value of a header in an answer (nul-terminated into out), or 0.
static int header_value(const char *buf, int len, const char *name, char *out, int size) {
    char key[64];
    snprintf(key, sizeof key, "\r\n%s: ", name);
    const char *at = memmem(buf, len, key, strlen(key));
    if (!at) return 0;
    at += strlen(key);
    const char *eol = memmem(at, len - (at - buf), "\r\n", 2);
    if (!eol || eol - at >= size) return 0;
    memcpy(out, at, eol - at);
    out[eol - at] = 0;
    return 1;
}

// One request, one answer, on a fresh connection (for /metrics and the write).
static int roundtrip(const char *request, char *answer, int size) {
    int fd = dial();
    send_all(fd, request);
    int len = 0, length = 0;
    while (len < size - 1) {
        ssize_t n = read(fd, answer + len, size - 1 - len);
        if (n <= 0) break;
        len += (int)n;
        if (complete(answer, len, 0, &length)) break;
    }
    close(fd);
    answer[len] = 0;
    return len;
}

static long rss_kb(const char *pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%s/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) die("read the server's /proc status");
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

static long waiting_now(void) {
    static char answer[1 << 20];
    roundtrip("GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n", answer, sizeof answer);
    const char *at = strstr(answer, "\ndeltasnap_waiting_requests ");
    return at ? atol(at + 28) : -1;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Reads every connection's answer (one each) through epoll; fails after `limit` seconds.
static void collect(conn_t *c, int n, int epoll, int head_only, double limit) {
    struct epoll_event events[512];
    int left = n;
    double start = now();
    for (int i = 0; i < n; i++) c[i].len = 0, c[i].done = 0;
    while (left > 0) {
        int k = epoll_wait(epoll, events, 512, 1000);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) die("epoll_wait");
        double t = now();
        for (int e = 0; e < k; e++) {
            conn_t *x = &c[events[e].data.u32];
            if (x->done) continue;
            ssize_t r = read(x->fd, x->buf + x->len, sizeof x->buf - 1 - x->len);
            if (r == 0) { fprintf(stderr, "waiters: a connection closed before its answer\n"); exit(1); }
            if (r < 0) { if (errno == EAGAIN) continue; die("read"); }
            x->len += (int)r;
            int length;
            if (complete(x->buf, x->len, head_only, &length)) {
                x->done = 1, x->at = t, x->status = atoi(x->buf + 9);
                left--;
            } else if (x->len >= (int)sizeof x->buf - 1) {
                fprintf(stderr, "waiters: an answer over %zu bytes\n", sizeof x->buf);
                exit(1);
            }
        }
        if (now() - start > limit) {
            fprintf(stderr, "waiters: %d of %d answers missing after %.0f s\n", left, n, limit);
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: waiters PORT CONNECTIONS ROUNDS SERVER_PID METHOD TARGET WRITE_TARGET SECRET\n");
        return 2;
    }
    port = atoi(argv[1]);
    int n = atoi(argv[2]), rounds = atoi(argv[3]);
    const char *pid = argv[4], *method = argv[5], *target = argv[6], *write_target = argv[7], *secret = argv[8];
    int head_only = strcmp(method, "HEAD") == 0;
    conn_t *c = calloc(n, sizeof *c);
    char request[2048], tag[256] = "", answer[8192];
    printf("rest_kb %ld\n", rss_kb(pid));
    fflush(stdout);

    // The collection's path: the target without its query.
    char path[512];
    snprintf(path, sizeof path, "%s", target);
    char *q = strchr(path, '?');
    if (q) *q = 0;
    snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n", path);
    roundtrip(request, answer, sizeof answer);
    if (!header_value(answer, (int)strlen(answer), "ETag", tag, sizeof tag)) {
        fprintf(stderr, "waiters: no ETag from GET %s\n", path);
        return 1;
    }

    int epoll = epoll_create1(0);
    for (int i = 0; i < n; i++) {
        c[i].fd = dial();
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, c[i].fd, &ev) < 0) die("epoll_ctl");
    }
    snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: bench\r\nIf-None-Match: %s\r\n\r\n", path, tag);
    for (int i = 0; i < n; i++) send_all(c[i].fd, request);
    for (int i = 0; i < n; i++) fcntl(c[i].fd, F_SETFL, O_NONBLOCK);
    collect(c, n, epoll, 0, 60);
    printf("idle_kb %ld\n", rss_kb(pid));
    fflush(stdout);

    double *lat = calloc(n, sizeof *lat);
    for (int round = 0; round < rounds; round++) {
        snprintf(request, sizeof request, "%s %s HTTP/1.1\r\nHost: bench\r\nIf-None-Match: %s\r\n\r\n", method, target, tag);
        for (int i = 0; i < n; i++) send_all(c[i].fd, request);
        double since = now();
        long waiting;
        while ((waiting = waiting_now()) != n) {
            // A build without the gauge (a baseline from before it): every request is in after 5 s.
            if (waiting < 0) {
                sleep(5);
                break;
            }
            if (now() - since > 120) {
                fprintf(stderr, "waiters: the server says %ld requests wait, not %d (is --max-waiting high enough?)\n", waiting, n);
                return 1;
            }
            usleep(100000);
        }
        printf("waiting_kb %ld\n", rss_kb(pid));
        fflush(stdout);
        char body[256], put[1024];
        snprintf(body, sizeof body, "{\"id\":\"waiters\",\"name\":\"round %d\"}", round);
        snprintf(put, sizeof put,
                 "PUT %s HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 write_target, secret, strlen(body), body);
        double t0 = now();
        int len = roundtrip(put, answer, sizeof answer);
        if (len < 12 || (atoi(answer + 9) != 200 && atoi(answer + 9) != 201)) {
            fprintf(stderr, "waiters: the write was refused: %.200s\n", answer);
            return 1;
        }
        collect(c, n, epoll, head_only, 60);
        int ok = 0;
        for (int i = 0; i < n; i++) {
            lat[i] = (c[i].at - t0) * 1000;
            if (c[i].status == 200) ok++;
        }
        header_value(c[0].buf, c[0].len, "ETag", tag, sizeof tag);
        qsort(lat, n, sizeof *lat, by_value);
        printf("wake_p50_ms %.1f\nwake_p99_ms %.1f\nwake_max_ms %.1f\nanswered_200 %d\nanswered_other %d\n", lat[n / 2],
               lat[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1], lat[n - 1], ok, n - ok);
        fflush(stdout);
    }
    return 0;
}
