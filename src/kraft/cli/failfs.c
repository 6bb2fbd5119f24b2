/*
 * failfs: a file layer that fails on demand, for fault-injection tests of real processes.
 *
 * Loaded with LD_PRELOAD into a node started by a test, it sits in front of libc's
 * write, pwrite, fsync, fdatasync, rename and renameat. The rules are in the file named
 * by FAILFS_RULES (re-read whenever it changes), one per line:
 *
 *     <call> <errno name> <path substring> <count>
 *     fsync EIO __cluster_metadata-0/000 1
 *
 * The next <count> calls of <call> on a file whose path contains the substring fail with
 * that errno (count -1: every call). Each injected failure is appended to the file named
 * by FAILFS_LOG ("<call> <errno> <path>"), so a test knows the fault happened.
 *
 * A failed fsync or fdatasync also drops what the file gained since its last successful
 * one (it is cut back to that size), as a kernel may drop dirty pages it could not write
 * (PostgreSQL's fsyncgate): a node that carried on after the error, retried the sync and
 * acknowledged, would have acknowledged data that is gone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_RULES 16
#define MAX_SYNCED 256

struct rule {
    char call[16];
    int error;
    char path[256];
    long count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[MAX_RULES];
static int nrules;
static struct timespec rules_mtime;
static off_t rules_size = -1;
static struct { char path[512]; off_t size; } synced[MAX_SYNCED];
static int nsynced;

static int errno_named(const char *name) {
    static const struct { const char *name; int value; } names[] = {
        {"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS}, {"EFBIG", EFBIG},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i].name) == 0) return names[i].value;
    return EIO;
}

/* Re-reads the rules if their file changed since the last look. Called with `lock` held. */
static void load_rules(void) {
    const char *file = getenv("FAILFS_RULES");
    struct stat st;
    if (file == NULL || stat(file, &st) != 0) {
        nrules = 0;
        return;
    }
    if (st.st_mtim.tv_sec == rules_mtime.tv_sec && st.st_mtim.tv_nsec == rules_mtime.tv_nsec && st.st_size == rules_size)
        return;
    rules_mtime = st.st_mtim;
    rules_size = st.st_size;
    nrules = 0;
    FILE *f = fopen(file, "r");
    if (f == NULL) return;
    char call[16], error[16], path[256];
    long count;
    while (nrules < MAX_RULES && fscanf(f, "%15s %15s %255s %ld", call, error, path, &count) == 4) {
        struct rule *r = &rules[nrules++];
        snprintf(r->call, sizeof r->call, "%s", call);
        r->error = errno_named(error);
        snprintf(r->path, sizeof r->path, "%s", path);
        r->count = count;
    }
    fclose(f);
}

static void fd_path(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    out[n > 0 ? n : 0] = '\0';
}

static void note(const char *call, int error, const char *path) {
    const char *file = getenv("FAILFS_LOG");
    if (file == NULL) return;
    int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    dprintf(fd, "%s %s %s\n", call, strerrorname_np(error), path);
    close(fd);
}

/* The errno to fail `call` on `path` with, or 0 to let it through. */
static int should_fail(const char *call, const char *path) {
    int error = 0;
    pthread_mutex_lock(&lock);
    load_rules();
    for (int i = 0; i < nrules && error == 0; i++) {
        struct rule *r = &rules[i];
        if (r->count != 0 && strcmp(r->call, call) == 0 && strstr(path, r->path) != NULL) {
            error = r->error;
            if (r->count > 0) r->count--;
        }
    }
    pthread_mutex_unlock(&lock);
    if (error != 0) note(call, error, path);
    return error;
}

static int fd_should_fail(const char *call, int fd) {
    char path[512];
    fd_path(fd, path, sizeof path);
    return should_fail(call, path);
}

/* Size at the last successful sync of `path`; -1 if none was seen. */
static off_t synced_size(const char *path, off_t update) {
    off_t found = -1;
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < nsynced && strcmp(synced[i].path, path) != 0) i++;
    if (i < nsynced) found = synced[i].size;
    if (update >= 0) {
        if (i == nsynced && nsynced < MAX_SYNCED) snprintf(synced[nsynced++].path, sizeof synced[0].path, "%s", path);
        if (i < nsynced) synced[i].size = update;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

static int sync_call(const char *call, int (*real)(int), int fd) {
    char path[512];
    fd_path(fd, path, sizeof path);
    int error = should_fail(call, path);
    if (error != 0) {
        off_t size = synced_size(path, -1);
        if (size >= 0) ftruncate(fd, size);  /* the dirty pages are gone */
        errno = error;
        return -1;
    }
    int result = real(fd);
    struct stat st;
    if (result == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) synced_size(path, st.st_size);
    return result;
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = dlsym(RTLD_NEXT, "fsync");
    return sync_call("fsync", real, fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = dlsym(RTLD_NEXT, "fdatasync");
    return sync_call("fdatasync", real, fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL) real = dlsym(RTLD_NEXT, "write");
    if (fd > 2) {
        int error = fd_should_fail("write", fd);
        if (error != 0) {
            errno = error;
            return -1;
        }
    }
    return real(fd, buf, count);
}

static ssize_t failing_pwrite(ssize_t (*real)(int, const void *, size_t, off_t), int fd, const void *buf,
                              size_t count, off_t offset) {
    int error = fd_should_fail("pwrite", fd);
    if (error == 0) return real(fd, buf, count, offset);
    if (error == ENOSPC && count > 1) real(fd, buf, count / 2, offset);  /* a full disk takes part of it */
    errno = error;
    return -1;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = dlsym(RTLD_NEXT, "pwrite");
    return failing_pwrite(real, fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (real == NULL) real = dlsym(RTLD_NEXT, "pwrite64");
    return failing_pwrite(real, fd, buf, count, offset);
}

int rename(const char *source, const char *target) {
    static int (*real)(const char *, const char *);
    if (real == NULL) real = dlsym(RTLD_NEXT, "rename");
    int error = should_fail("rename", target);
    if (error != 0) {
        errno = error;
        return -1;
    }
    return real(source, target);
}

int renameat(int source_dir, const char *source, int target_dir, const char *target) {
    static int (*real)(int, const char *, int, const char *);
    if (real == NULL) real = dlsym(RTLD_NEXT, "renameat");
    int error = should_fail("rename", target);
    if (error != 0) {
        errno = error;
        return -1;
    }
    return real(source_dir, source, target_dir, target);
}
