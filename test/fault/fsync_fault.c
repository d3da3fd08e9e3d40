/*
 * fsync_fault.so: an LD_PRELOAD shim for scripts/memory-restart-test.sh
 * that makes one fsync fail, to reach a save's failure after its rename.
 *
 * With RATELIMIT_FAULT_FSYNC_DIR_AFTER=<name> in the environment, once the
 * process has renamed a file to a path whose last component is <name>,
 * every fsync() of its current directory fails with EIO (the data
 * directory, for the postmaster: the rename's own durability step). Nothing
 * else is touched: other files, other processes (none renames to <name>),
 * and every call before that rename go to the C library. Without the
 * variable the shim does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int armed = 0;

/* Whether path's last component is the name the variable gives. */
static int names_trigger(const char *path) {
  const char *name = getenv("RATELIMIT_FAULT_FSYNC_DIR_AFTER");
  const char *slash = strrchr(path, '/');

  return name != NULL && name[0] != '\0' && strcmp(slash != NULL ? slash + 1 : path, name) == 0;
}

/* Whether fd is open on the process's current directory. */
static int is_current_directory(int fd) {
  struct stat of_fd;
  struct stat of_dot;

  return fstat(fd, &of_fd) == 0 && S_ISDIR(of_fd.st_mode) && stat(".", &of_dot) == 0 &&
         of_fd.st_dev == of_dot.st_dev && of_fd.st_ino == of_dot.st_ino;
}

int rename(const char *oldpath, const char *newpath) {
  int (*real_rename)(const char *, const char *) =
      (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int rc = real_rename(oldpath, newpath);

  if (rc == 0 && names_trigger(newpath)) armed = 1;
  return rc;
}

int fsync(int fd) {
  int (*real_fsync)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

  if (armed && is_current_directory(fd)) {
    errno = EIO;
    return -1;
  }
  return real_fsync(fd);
}
