/*
comm_remote.h: the monitor across hosts (part of comm.h, split out by topic; included by it, MPI builds only).

The shared-memory monitor (comm.h) lets a rank that timed out read the records of the ranks on its own node. For
ranks on other nodes every rank also runs a small TCP server, in a thread of its own that never calls MPI: a client
that connects gets a snapshot of the node's records (each rank's collectives started and finished per group, what
it waits on, when it last called into comm.h), whether each rank's process still exists, and the node's clock, then
the connection closes (only in jobs that span several nodes). At start-up every rank publishes where its server listens (its IPv4 addresses, the port) and
its host name (an all-gather over the world). On a timeout the waiting rank asks each other node for a snapshot,
trying that node's ranks in turn, so a stopped or hung rank is answered for by any live rank of its node (SIGSTOP
stops every thread of a process, its server included). A node where no rank answers within a few seconds is
reported as such: all of its ranks dead or stopped, or the network between the hosts down.

Wire format (host byte order: the hosts of one job share an architecture): a request is 4 bytes, COMM_REMOTE_MAGIC;
the answer is COMM_REMOTE_MAGIC (uint32), the number of records n (int32), the node's CLOCK_MONOTONIC time in ns
(int64), then n times: world rank (int32), 1 if its process is gone (int32), its CommSlot.
*/
#ifndef COMM_REMOTE_H
#define COMM_REMOTE_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#define COMM_REMOTE_MAGIC 0x4d4f4e31u   // "MON1"
#define COMM_REMOTE_WAIT_MS 3000        // connect and answer, per rank asked

// The server: answers every connection with the node's snapshot. Runs until the listening socket is shut down.
static void* comm__remote_serve(void* arg) {
    ParallelContext* pc = (ParallelContext*)arg;
    for (;;) {
        int fd = accept(pc->remote_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) { continue; }
            return NULL; // shut down (parallel_finalize), or the socket failed: the monitor just stops answering
        }
        uint32_t magic = 0;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, COMM_REMOTE_WAIT_MS) == 1 && recv(fd, &magic, sizeof(magic), MSG_WAITALL) == (ssize_t)sizeof(magic) &&
            magic == COMM_REMOTE_MAGIC) {
            int n = pc->node_size;
            size_t rec = 2 * sizeof(int32_t) + sizeof(CommSlot);
            size_t bytes = sizeof(uint32_t) + sizeof(int32_t) + sizeof(int64_t) + (size_t)n * rec;
            char* buf = (char*)malloc(bytes);
            if (buf) {
                char* q = buf;
                int32_t n32 = n;
                int64_t now = comm__now_ns();
                memcpy(q, &magic, sizeof(magic)); q += sizeof(magic);
                memcpy(q, &n32, sizeof(n32)); q += sizeof(n32);
                memcpy(q, &now, sizeof(now)); q += sizeof(now);
                for (int i = 0; i < n; i++) {
                    const CommSlot* s = (const CommSlot*)(const void*)(pc->monitor_base + (size_t)i * pc->monitor_stride);
                    CommSlot c;
                    c.pid = comm__read(&s->pid);
                    for (int k = 0; k < COMM_MAX_GROUPS; k++) { c.entered[k] = comm__read(&s->entered[k]); c.completed[k] = comm__read(&s->completed[k]); }
                    c.wait_op = comm__read(&s->wait_op);
                    c.wait_slot = comm__read(&s->wait_slot);
                    c.wait_seq = comm__read(&s->wait_seq);
                    c.last_seen_ns = comm__read(&s->last_seen_ns);
                    int32_t wr = pc->node_world[i], gone = comm__pid_dead(c.pid);
                    memcpy(q, &wr, sizeof(wr)); q += sizeof(wr);
                    memcpy(q, &gone, sizeof(gone)); q += sizeof(gone);
                    memcpy(q, &c, sizeof(c)); q += sizeof(c);
                }
                size_t off = 0;
                while (off < bytes) {
                    ssize_t w = send(fd, buf + off, bytes - off, MSG_NOSIGNAL);
                    if (w <= 0) { break; }
                    off += (size_t)w;
                }
                free(buf);
            }
        }
        close(fd);
    }
}

// Start-up (collective over the world, after the shared-memory monitor): this rank's server, and everyone's address.
static void comm__remote_init(ParallelContext* pc) {
    CommPeer me;
    memset(&me, 0, sizeof(me));
    me.node = pc->node_world[0]; // a node is named by its first rank
    gethostname(me.host, sizeof(me.host) - 1);
    pc->remote_fd = -1;
    // (one node: every record is in shared memory already, and no port is opened)
    int fd = pc->monitor_ok && pc->nodes > 1 ? socket(AF_INET, SOCK_STREAM, 0) : -1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t sl = sizeof(sa);
    if (fd >= 0 && bind(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0 && listen(fd, 16) == 0 &&
        getsockname(fd, (struct sockaddr*)&sa, &sl) == 0) {
        me.port = ntohs(sa.sin_port);
        struct ifaddrs* ifs = NULL;
        if (getifaddrs(&ifs) == 0) {
            // every IPv4 address of this host, loopback last (it only reaches ranks of this network namespace)
            for (int pass = 0; pass < 2; pass++) {
                for (struct ifaddrs* a = ifs; a && me.naddr < COMM_PEER_ADDRS; a = a->ifa_next) {
                    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) { continue; }
                    uint32_t ip = ((struct sockaddr_in*)(void*)a->ifa_addr)->sin_addr.s_addr;
                    int loop = (ntohl(ip) >> 24) == 127;
                    if (loop == pass) { me.addr[me.naddr++] = ip; }
                }
            }
            freeifaddrs(ifs);
        }
        pc->remote_fd = fd;
        if (pthread_create(&pc->remote_thread, NULL, comm__remote_serve, pc) == 0) { pc->remote_on = 1; }
        else { close(fd); pc->remote_fd = -1; me.port = 0; }
    } else if (fd >= 0) {
        close(fd);
    }
    pc->peers = (CommPeer*)callocCheck((size_t)pc->world_size, sizeof(CommPeer));
    mpiCheck(MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, pc->peers, (int)sizeof(me), MPI_BYTE, pc->world.comm));
}

static void comm__remote_stop(ParallelContext* pc) {
    if (pc->remote_on) {
        shutdown(pc->remote_fd, SHUT_RDWR);
        close(pc->remote_fd);
        pthread_join(pc->remote_thread, NULL);
        pc->remote_on = 0;
    }
    free(pc->peers);
    pc->peers = NULL;
}

// Reads exactly n bytes within the deadline (CLOCK_MONOTONIC ns); 0 on failure.
static int comm__remote_read(int fd, void* buf, size_t n, int64_t deadline) {
    size_t got = 0;
    while (got < n) {
        int64_t left = (deadline - comm__now_ns()) / 1000000;
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) != 1) { return 0; }
        ssize_t r = recv(fd, (char*)buf + got, n - got, 0);
        if (r <= 0) { return 0; }
        got += (size_t)r;
    }
    return 1;
}

// Asks world rank r's server for its node's snapshot; 1 on success (v filled; free with comm__remote_free).
static int comm__remote_ask(const ParallelContext* pc, int r, CommRemoteView* v) {
    const CommPeer* p = &pc->peers[r];
    for (int a = 0; a < p->naddr && p->port > 0; a++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) { return 0; }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)p->port);
        sa.sin_addr.s_addr = p->addr[a];
        int64_t deadline = comm__now_ns() + (int64_t)COMM_REMOTE_WAIT_MS * 1000000;
        int ok = connect(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS;
        struct pollfd pw = {fd, POLLOUT, 0};
        int soerr = 0;
        socklen_t el = sizeof(soerr);
        ok = ok && poll(&pw, 1, COMM_REMOTE_WAIT_MS) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) == 0 && soerr == 0;
        uint32_t magic = COMM_REMOTE_MAGIC;
        ok = ok && send(fd, &magic, sizeof(magic), MSG_NOSIGNAL) == (ssize_t)sizeof(magic);
        int32_t n32 = 0;
        ok = ok && comm__remote_read(fd, &magic, sizeof(magic), deadline) && magic == COMM_REMOTE_MAGIC &&
             comm__remote_read(fd, &n32, sizeof(n32), deadline) && n32 > 0 && n32 <= pc->world_size &&
             comm__remote_read(fd, &v->now_ns, sizeof(v->now_ns), deadline);
        if (ok) {
            v->n = n32;
            v->world_rank = (int*)mallocCheck(sizeof(int) * (size_t)n32);
            v->gone = (int*)mallocCheck(sizeof(int) * (size_t)n32);
            v->slot = (CommSlot*)mallocCheck(sizeof(CommSlot) * (size_t)n32);
            for (int i = 0; ok && i < n32; i++) {
                int32_t wr = 0, gone = 0;
                ok = comm__remote_read(fd, &wr, sizeof(wr), deadline) && comm__remote_read(fd, &gone, sizeof(gone), deadline) &&
                     comm__remote_read(fd, &v->slot[i], sizeof(CommSlot), deadline) && wr >= 0 && wr < pc->world_size;
                v->world_rank[i] = wr;
                v->gone[i] = gone;
            }
            if (!ok) { free(v->world_rank); free(v->gone); free(v->slot); }
        }
        close(fd);
        if (ok) { return 1; }
    }
    return 0;
}

static void comm__remote_free(CommRemoteView* v) {
    free(v->world_rank);
    free(v->gone);
    free(v->slot);
    memset(v, 0, sizeof(*v));
}

#endif // COMM_REMOTE_H
