/*
sharedfs.h: runs on hosts without a shared filesystem (train_gpt.c, split out by topic; collective functions over
the world group, called at start-up).

Rank 0 writes every checkpoint and log into --out; every rank reads --resume and the data shards itself. On several
hosts with a shared filesystem that is all the same directory. Without one:
  - --out: at start rank 0 leaves a marker file in it and every rank looks for it; the ranks that do not see it are
    named with their hosts in a note (checkpoints land on rank 0's host only: nothing is wrong with the run).
  - --resume: the ranks that do not see the checkpoint receive its two files from rank 0 (a broadcast in chunks)
    into a local scratch directory and load from there, so a run resumes on hosts that never saw the checkpoint;
    the scratch copy is removed once loaded.
  - the data: every rank checks that its training shards are rank 0's (the loader's fingerprint of shard count and
    sizes); a host with other data or a partial copy stops the job naming the host.
*/
#ifndef SHAREDFS_H
#define SHAREDFS_H

#include <sys/stat.h>

// Lists the ranks whose flag is 0 as "2,3 (host1)", grouped by host, into buf; returns how many there are.
static int sharedfs__missing(const ParallelContext* pc, const double* has, char* buf, size_t cap) {
    size_t pos = 0;
    int count = 0;
    buf[0] = '\0';
    for (int r = 0; r < pc->world_size; r++) {
        if (has[r] != 0.0) { continue; }
        count++;
        const char* host = pc->peers ? pc->peers[r].host : "?";
        int first_of_host = 1;
        for (int q = 0; q < r && pc->peers; q++) { if (has[q] == 0.0 && strcmp(pc->peers[q].host, host) == 0) { first_of_host = 0; } }
        if (!first_of_host || pos >= cap) { continue; }
        int w = snprintf(buf + pos, cap - pos, "%s", pos ? "; " : "");
        if (w > 0) { pos += (size_t)w; }
        for (int q = r; q < pc->world_size && pos < cap; q++) {
            if (has[q] != 0.0 || (pc->peers && strcmp(pc->peers[q].host, host) != 0)) { continue; }
            w = snprintf(buf + pos, cap - pos, "%s%d", q == r ? "" : ",", q);
            if (w > 0) { pos += (size_t)w; }
        }
        w = pos < cap ? snprintf(buf + pos, cap - pos, " (on %s)", host) : 0;
        if (w > 0) { pos += (size_t)w; }
    }
    if (pos >= cap && cap > 0) { buf[cap - 1] = '\0'; }
    return count;
}

// Whether each rank sees what rank 0 sees at `path` (flag per world rank, summed over the world).
static double* sharedfs__who_sees(ParallelContext* pc, const char* path) {
    double* has = (double*)callocCheck((size_t)pc->world_size, sizeof(double));
    has[pc->world_rank] = access(path, F_OK) == 0 ? 1.0 : 0.0;
    comm_allreduce_sum_f64(&pc->world, has, (size_t)pc->world_size);
    return has;
}

// --out: a note naming the ranks that do not see rank 0's files in dir (call after rank 0 created it).
static void sharedfs_check_out(ParallelContext* pc, const char* dir) {
    if (pc->world_size == 1) { return; }
    char marker[2200];
    uint64_t nonce = ((uint64_t)getpid() << 20) ^ (uint64_t)comm__now_ns();
    comm_broadcast(&pc->world, &nonce, sizeof(nonce), 0);
    snprintf(marker, sizeof(marker), "%s/.shared_check.%016llx", dir, (unsigned long long)nonce);
    if (pc->world_rank == 0) {
        FILE* fp = fopen(marker, "wb");
        if (fp) { fclose(fp); }
    }
    comm_barrier(&pc->world);
    double* has = sharedfs__who_sees(pc, marker);
    if (pc->world_rank == 0) {
        unlink(marker);
        char who[1024];
        if (sharedfs__missing(pc, has, who, sizeof(who)) > 0) {
            printf("note: --out %s: rank(s) %s do not see rank 0's files there (no filesystem shared with rank 0's host). "
                   "Checkpoints and logs are written on rank 0's host only; --resume there works on any hosts (the others "
                   "receive the checkpoint from rank 0)\n", dir, who);
        }
    }
    free(has);
}

// Broadcasts file `name` from rank 0 (which reads src_dir/name) to the ranks with need set, which write it to
// dst_dir/name. Chunks of 64 MB.
static void sharedfs__send_file(ParallelContext* pc, const char* src_dir, const char* dst_dir, const char* name, int need) {
    char path[2300];
    FILE* fp = NULL;
    uint64_t size = 0;
    if (pc->world_rank == 0) {
        snprintf(path, sizeof(path), "%s/%s", src_dir, name);
        fp = fopenCheck(path, "rb");
        struct stat st;
        if (fstat(fileno(fp), &st) != 0) { fatal("--resume: cannot stat '%s': %s", path, strerror(errno)); }
        size = (uint64_t)st.st_size;
    } else if (need) {
        snprintf(path, sizeof(path), "%s/%s", dst_dir, name);
        fp = fopenCheck(path, "wb");
    }
    comm_broadcast(&pc->world, &size, sizeof(size), 0);
    const size_t CHUNK = (size_t)64 << 20;
    char* buf = (char*)mallocCheck(CHUNK);
    for (uint64_t off = 0; off < size; off += CHUNK) {
        size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
        if (pc->world_rank == 0) { freadCheck(buf, 1, n, fp, path); }
        comm_broadcast(&pc->world, buf, n, 0);
        if (pc->world_rank != 0 && need) { fwriteCheck(buf, 1, n, fp, path); }
    }
    free(buf);
    if (fp) { fcloseCheck(fp, path); }
}

// --resume dir: the ranks that do not see its checkpoint get a local copy of it from rank 0; returns the directory
// this rank should resume from (dir, or its copy in scratch, which the caller removes with sharedfs_drop_copy once
// the checkpoint is loaded).
static const char* sharedfs_fetch_resume(ParallelContext* pc, const char* dir, char* scratch, size_t cap) {
    scratch[0] = '\0';
    if (pc->world_size == 1) { return dir; }
    char lp[2100];
    snprintf(lp, sizeof(lp), "%s/latest", dir);
    double* has = sharedfs__who_sees(pc, lp);
    char who[1024];
    int missing = sharedfs__missing(pc, has, who, sizeof(who));
    int need = has[pc->world_rank] == 0.0;
    int root_sees = has[0] != 0.0;
    free(has);
    if (missing == 0) { return dir; }
    if (!root_sees) { fatal("--resume %s: rank 0 does not see a checkpoint there ('%s' is missing)", dir, lp); }
    int step = pc->world_rank == 0 ? checkpoint_latest_step(dir) : 0;
    comm_broadcast(&pc->world, &step, sizeof(step), 0);
    if (pc->world_rank == 0) {
        printf("resume: rank(s) %s do not see '%s': they receive its checkpoint of step %d from rank 0\n", who, dir, step);
        fflush(stdout);
    }
    if (need) {
        snprintf(scratch, cap, "%s/train_gpt_resume.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(scratch)) { fatal("--resume %s: cannot create a scratch directory for the checkpoint from rank 0 (%s): %s", dir, scratch, strerror(errno)); }
    }
    char mname[64], sname[64];
    snprintf(mname, sizeof(mname), "model_%08d.bin", step);
    snprintf(sname, sizeof(sname), "state_%08d.bin", step);
    sharedfs__send_file(pc, dir, scratch, mname, need);
    sharedfs__send_file(pc, dir, scratch, sname, need);
    if (!need) { return dir; }
    char latest[2200];
    snprintf(latest, sizeof(latest), "%s/latest", scratch);
    FILE* fp = fopenCheck(latest, "wb");
    fprintf(fp, "%d\n", step);
    fcloseCheck(fp, latest);
    return scratch;
}

// Removes the local copy sharedfs_fetch_resume made (nothing when scratch is empty).
static void sharedfs_drop_copy(const char* scratch) {
    if (!scratch[0]) { return; }
    DIR* d = opendir(scratch);
    if (d) {
        struct dirent* e;
        char path[2400];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') { continue; }
            snprintf(path, sizeof(path), "%s/%s", scratch, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(scratch);
}

// The training shards: every rank's must be rank 0's (same shard count and sizes: the loader's fingerprint).
static void sharedfs_check_data(ParallelContext* pc, uint64_t fingerprint, const char* pattern) {
    if (pc->world_size == 1) { return; }
    uint64_t root = fingerprint;
    comm_broadcast(&pc->world, &root, sizeof(root), 0);
    double bad = root != fingerprint ? 1.0 : 0.0;
    if (bad != 0.0) {
        fprintf(stderr, "error: --train %s: rank %d (on %s) sees other training data than rank 0 (shard count or sizes differ: "
                "fingerprint %016llx, rank 0 %016llx); without a shared filesystem every host needs the same copy\n", pattern,
                pc->world_rank, pc->peers ? pc->peers[pc->world_rank].host : "?", (unsigned long long)fingerprint, (unsigned long long)root);
        fflush(stderr);
    }
    comm_allreduce_max_f64(&pc->world, &bad, 1);
    if (bad != 0.0) {
        if (pc->world_rank == 0) { fprintf(stderr, "error: ranks see different training data (see above)\n"); }
        parallel_finalize(pc);
        exit(1);
    }
}

#endif // SHAREDFS_H
