// The kernel's floor under a streaming front end (docs/performance.md, issue 40): the CPU one
// small TCP send costs on loopback, with nothing of Pagoda in it. One sender thread plays the
// server at --stream-interval 1: every step it sends one SSE-sized message to each of STREAMS
// connections (TCP_NODELAY, as pagoda's), then sleeps until the next step. One reader thread
// plays the bench client: epoll over the other ends, reading whatever arrives. Loopback runs
// the receiver's TCP work inside the sender's call, so the sender's CPU per send is what a
// server pays per write, whatever it does around it.
// Usage: loopback_floor [STREAMS (64)] [STEP_US (2000)] [SECONDS (5)] [BYTES (180)]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

double clock_s(clockid_t id) {
    timespec t{};
    clock_gettime(id, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int arg(int argc, char** argv, int i, int fallback) {
    return argc > i ? std::atoi(argv[i]) : fallback;
}

void die(const char* what) {
    std::perror(what);
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
    const int streams = arg(argc, argv, 1, 64);
    const int step_us = arg(argc, argv, 2, 2000);
    const int seconds = arg(argc, argv, 3, 5);
    const int bytes = arg(argc, argv, 4, 180);
    if (streams < 1 || step_us < 0 || seconds < 1 || bytes < 1 || bytes > 65536) {
        std::fprintf(stderr,
                     "usage: loopback_floor [STREAMS>=1 (64)] [STEP_US>=0 (2000)] [SECONDS>=1 (5)] "
                     "[BYTES 1..65536 (180)]\n");
        return 2;
    }
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        listen(listener, streams) != 0) {
        die("listen");
    }
    std::vector<int> clients;
    std::vector<int> servers;
    const int one = 1;
    for (int i = 0; i < streams; ++i) {
        const int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("connect");
        const int s = accept(listener, nullptr, nullptr);
        if (s < 0) die("accept");
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients.push_back(c);
        servers.push_back(s);
    }
    double reader_cpu = 0;
    long long received = 0;
    std::thread reader([&] {
        const int ep = epoll_create1(0);
        for (const int c : clients) {
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.fd = c;
            epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
        }
        std::vector<epoll_event> events(static_cast<size_t>(streams));
        std::vector<char> buf(65536);
        const double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        // Until every connection has ended: the sender shuts each down after its last send.
        for (int open = streams; open > 0;) {
            const int n = epoll_wait(ep, events.data(), streams, -1);
            for (int i = 0; i < n; ++i) {
                const int fd = events[static_cast<size_t>(i)].data.fd;
                const ssize_t k = read(fd, buf.data(), buf.size());
                if (k > 0) {
                    received += k;
                } else {  // the end (or an error): the descriptor leaves the epoll set
                    close(fd);
                    --open;
                }
            }
        }
        reader_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        close(ep);
    });
    const std::string message(static_cast<size_t>(bytes), 'x');
    long long sends = 0;
    const double wall0 = clock_s(CLOCK_MONOTONIC);
    const double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    double next = wall0;
    while (clock_s(CLOCK_MONOTONIC) - wall0 < seconds) {
        for (const int s : servers) {
            if (send(s, message.data(), message.size(), MSG_NOSIGNAL) != bytes) die("send");
            ++sends;
        }
        next += step_us * 1e-6;
        const double wait = next - clock_s(CLOCK_MONOTONIC);
        if (wait > 0) {
            const timespec ts{0, static_cast<long>(wait * 1e9)};
            nanosleep(&ts, nullptr);
        }
    }
    const double sender_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    const double wall = clock_s(CLOCK_MONOTONIC) - wall0;
    for (const int s : servers) shutdown(s, SHUT_WR);
    reader.join();
    for (const int s : servers) close(s);
    close(listener);
    const double per = 1e6 / static_cast<double>(sends);
    std::printf(
        "streams %d  step %d us  message %d B  sends %lld (%.0f/s)  sender CPU %.2f us/send  "
        "reader CPU %.2f us/send  received %.3f of sent\n",
        streams, step_us, bytes, sends, static_cast<double>(sends) / wall, sender_cpu * per,
        reader_cpu * per,
        static_cast<double>(received) / (static_cast<double>(sends) * static_cast<double>(bytes)));
    return 0;
}
