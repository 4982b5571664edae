// The kernel's floor for the paced regime: what one streamed chunk costs the sending thread
// when the chunk is a TCP write on loopback to a client that sleeps between engine steps.
//
// Any gateway pays this for every token it streams in workloads c8 / c64 (one chunk per stream
// per step); the loopback receive path (TCP input, waking the reader) runs in the sender's
// syscall and is charged to it. The writer has no parsing, no JSON, no engine link: each step
// it writes one SSE-sized chunk to each of N sockets, then sleeps until the next step, like a
// gateway would with perfect batching and zero user-space cost.
//
// Usage: write_floor N_STREAMS STEP_MS STEPS WRITER_CPU READER_CPU
// Prints the writer thread's CPU per chunk (from getrusage RUSAGE_THREAD) with the reader on
// its own CPU, reading with epoll as a client would.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int n_streams, step_ms, steps, reader_cpu;
static int client_fds[4096];

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static double thread_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void *reader(void *arg) {
    (void)arg;
    pin(reader_cpu);
    int ep = epoll_create1(0);
    for (int i = 0; i < n_streams; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = client_fds[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, client_fds[i], &ev);
    }
    char buf[65536];
    long want = (long)n_streams * steps, got = 0;
    struct epoll_event evs[256];
    while (got < want) {
        int n = epoll_wait(ep, evs, 256, 1000);
        for (int i = 0; i < n; i++) {
            ssize_t r = read(evs[i].data.fd, buf, sizeof buf);
            if (r > 0) got += r / 256;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s N_STREAMS STEP_MS STEPS WRITER_CPU READER_CPU\n", argv[0]);
        return 2;
    }
    n_streams = atoi(argv[1]);
    step_ms = atoi(argv[2]);
    steps = atoi(argv[3]);
    int writer_cpu = atoi(argv[4]);
    reader_cpu = atoi(argv[5]);
    if (n_streams < 1 || n_streams > 4096 || step_ms < 1 || steps < 1) return 2;
    pin(writer_cpu);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, len) || listen(lfd, 4096) || getsockname(lfd, (struct sockaddr *)&addr, &len)) {
        perror("listen");
        return 1;
    }
    int server_fds[4096];
    int one = 1;
    for (int i = 0; i < n_streams; i++) {
        client_fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(client_fds[i], (struct sockaddr *)&addr, sizeof addr)) {
            perror("connect");
            return 1;
        }
        server_fds[i] = accept(lfd, NULL, NULL);
        setsockopt(server_fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    // One SSE chunk of a streamed completion token is about 250 bytes.
    char chunk[256];
    memset(chunk, 'x', sizeof chunk);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    double cpu0 = thread_cpu_s();
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < n_streams; i++) {
            if (write(server_fds[i], chunk, sizeof chunk) != sizeof chunk) {
                perror("write");
                return 1;
            }
        }
        next.tv_nsec += step_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
    double cpu = thread_cpu_s() - cpu0;
    pthread_join(t, NULL);
    printf("streams %d step %d ms steps %d: writer CPU %.1f us per chunk (%.1f us per step)\n", n_streams, step_ms,
           steps, cpu * 1e6 / ((double)n_streams * steps), cpu * 1e6 / steps);
    return 0;
}
