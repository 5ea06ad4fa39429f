/*
 * passthrough_cache.c - a passthrough FUSE file system whose kernel page cache
 * stays on, for tests/fuse/standby_on_fuse.sh.
 *
 * On this file system a standby's redo was seen reading zeros where its WAL
 * receiver had just written and fsynced WAL (read again later, the WAL was
 * there), and before the fix a standby promoted from there lost commits its
 * primary had acknowledged.
 *
 * What it does: every path is resolved relative to BACKING_DIR; the page cache
 * is kept (kernel_cache, keep_cache on open, attr/entry timeouts > 0, no
 * direct_io).  fsync and fdatasync really fsync/fdatasync the backing file (and
 * fsyncdir the backing directory), so "fsynced" means on the backing disk.
 *
 * Build (needs libfuse3-dev and pkg-config; mounting needs fuse3 and /dev/fuse):
 *   gcc -Wall -Wextra -O2 -o passthrough_cache passthrough_cache.c \
 *       $(pkg-config fuse3 --cflags --libs)
 * Use:
 *   passthrough_cache BACKING_DIR MOUNTPOINT [fuse options, e.g. -f]
 *   fusermount3 -u MOUNTPOINT
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <fuse.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static int base_fd = -1;              /* the backing directory */

/* "/a/b" -> "a/b", "/" -> "." : relative to base_fd for the *at() calls */
static const char *rel(const char *path)
{
    while (*path == '/') path++;
    return *path ? path : ".";
}

static void *pc_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->use_ino = 1;
    cfg->kernel_cache = 1;            /* never invalidate the page cache on open */
    cfg->entry_timeout = 1.0;
    cfg->attr_timeout = 1.0;
    cfg->negative_timeout = 0;
    cfg->direct_io = 0;
    return NULL;
}

static int pc_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    int r = fi ? fstat((int)fi->fh, st)
               : fstatat(base_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);
    return r < 0 ? -errno : 0;
}

static int pc_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)off; (void)fi; (void)flags;
    int fd = openat(base_fd, rel(path), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) { int e = errno; close(fd); return -e; }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = de->d_ino;
        st.st_mode = (mode_t)de->d_type << 12;
        if (fill(buf, de->d_name, &st, 0, 0)) break;
    }
    closedir(d);
    return 0;
}

static int pc_opendir(const char *path, struct fuse_file_info *fi)
{
    int fd = openat(base_fd, rel(path), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int pc_releasedir(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int pc_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
    return r < 0 ? -errno : 0;
}

static int pc_open(const char *path, struct fuse_file_info *fi)
{
    int fd = openat(base_fd, rel(path), fi->flags & ~O_NOFOLLOW);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    fi->keep_cache = 1;               /* keep cached pages across opens */
    fi->direct_io = 0;
    return 0;
}

static int pc_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    int fd = openat(base_fd, rel(path), fi->flags | O_CREAT, mode);
    if (fd < 0) return -errno;
    fi->fh = (uint64_t)fd;
    fi->keep_cache = 1;
    fi->direct_io = 0;
    return 0;
}

static int pc_read(const char *path, char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    (void)path;
    ssize_t n = pread((int)fi->fh, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int pc_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)path;
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int pc_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
    return r < 0 ? -errno : 0;
}

static int pc_flush(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    int fd = dup((int)fi->fh);        /* like close() without losing the fd */
    if (fd < 0) return -errno;
    return close(fd) < 0 ? -errno : 0;
}

static int pc_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int pc_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    if (fi) return ftruncate((int)fi->fh, size) < 0 ? -errno : 0;
    int fd = openat(base_fd, rel(path), O_WRONLY);
    if (fd < 0) return -errno;
    int r = ftruncate(fd, size) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static int pc_unlink(const char *path)
{
    return unlinkat(base_fd, rel(path), 0) < 0 ? -errno : 0;
}

static int pc_rename(const char *from, const char *to, unsigned int flags)
{
    if (flags) return -EINVAL;        /* RENAME_EXCHANGE/NOREPLACE not supported */
    return renameat(base_fd, rel(from), base_fd, rel(to)) < 0 ? -errno : 0;
}

static int pc_mkdir(const char *path, mode_t mode)
{
    return mkdirat(base_fd, rel(path), mode) < 0 ? -errno : 0;
}

static int pc_rmdir(const char *path)
{
    return unlinkat(base_fd, rel(path), AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int pc_statfs(const char *path, struct statvfs *st)
{
    (void)path;
    int fd = openat(base_fd, ".", O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -errno;
    int r = fstatvfs(fd, st) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static int pc_fallocate(const char *path, int mode, off_t off, off_t len,
                        struct fuse_file_info *fi)
{
    (void)path;
    return fallocate((int)fi->fh, mode, off, len) < 0 ? -errno : 0;
}

static int pc_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    int r = fi ? fchmod((int)fi->fh, mode) : fchmodat(base_fd, rel(path), mode, 0);
    return r < 0 ? -errno : 0;
}

static int pc_utimens(const char *path, const struct timespec tv[2],
                      struct fuse_file_info *fi)
{
    int r = fi ? futimens((int)fi->fh, tv)
               : utimensat(base_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW);
    return r < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
    .init = pc_init,         .getattr = pc_getattr,   .readdir = pc_readdir,
    .opendir = pc_opendir,   .releasedir = pc_releasedir, .fsyncdir = pc_fsyncdir,
    .open = pc_open,         .create = pc_create,     .read = pc_read,
    .write = pc_write,       .fsync = pc_fsync,       .flush = pc_flush,
    .release = pc_release,   .truncate = pc_truncate, .unlink = pc_unlink,
    .rename = pc_rename,     .mkdir = pc_mkdir,       .rmdir = pc_rmdir,
    .statfs = pc_statfs,     .fallocate = pc_fallocate, .chmod = pc_chmod,
    .utimens = pc_utimens,
};

int main(int argc, char *argv[])
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s BACKING_DIR MOUNTPOINT [fuse options]\n", argv[0]);
        return 2;
    }
    base_fd = open(argv[1], O_RDONLY | O_DIRECTORY);
    if (base_fd < 0) { perror(argv[1]); return 1; }
    /* drop BACKING_DIR; keep MOUNTPOINT and the options for fuse_main */
    argv[1] = argv[0];
    umask(0);
    return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
