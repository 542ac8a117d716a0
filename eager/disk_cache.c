// The persistent executable cache: serialized executables on disk, keyed by
// the plugin's identity and the graph's 128-bit hash.
//
// Layout: <dir>/<plugin id>/<graph hash>.xla, where the plugin id hashes the
// plugin's path, file size and mtime, PJRT API version, platform name and
// version, the XLA_FLAGS / LIBTPU_INIT_ARGS it starts with and our code
// generator's version, so a different, upgraded or differently flagged
// plugin, or another emitter, never reads another's entries.
// An entry is a small header (magic, format version, key, payload size,
// payload checksum) followed by the runtime's serialized executable, which
// carries its own checksum. Anything that does not verify is deleted and
// recompiled, never trusted. Writes go to a unique temporary file renamed
// into place, so concurrent processes see whole entries or none. When the
// directory is unusable (read-only, full), the cache turns itself off with
// one warning and compiling continues in memory. Total size is bounded:
// the least recently used entries (by mtime, refreshed on every hit) go
// first.
//
// Entries are native code: loading one runs it. So the cache root and every
// folder below it must be real directories (not symlinks) owned by this
// user and writable by nobody else, every ancestor of the root must be owned
// by this user or by root and, if others can write it, sticky (as /tmp and
// /dev/shm are), and an entry must be a regular file owned by this user and
// writable by nobody else. Anything else turns the cache off with one
// warning (compiling continues in memory), or, for one entry, makes it a
// miss. Folders are created 0700 and entries 0600.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "eager/internal.h"

#define ENTRY_MAGIC 0x43555054u  // "TPUC"
#define ENTRY_VERSION 1u
// The StableHLO a graph becomes: raise it whenever the emitter or the
// builders write other text for a graph whose hash does not change, so that
// executables compiled from the old text are never loaded for the new.
#define CODEGEN_VERSION 2u

typedef struct entry_header {
  uint32_t magic;
  uint32_t version;
  uint64_t key[2];
  uint64_t payload_size;
  uint64_t payload_checksum;
} entry_header_t;

static char cache_dir[4096];  // "" = off
static int64_t max_bytes;
static int64_t approx_bytes = -1;  // of this plugin's folder; -1 = unknown
static tpr_disk_cache_stats_t dstats;

static uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void warn_and_disable(const char* what, const char* path) {
  fprintf(stderr,
          "torch_tpu: the compilation cache at %s is unusable (%s: %s); "
          "caching compiled programs in memory only\n",
          path, what, strerror(errno));
  cache_dir[0] = '\0';
  dstats.disabled = true;
}

static int mkdirs(const char* path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char* p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
  return 0;
}

// Why the folder |path| cannot be trusted (NULL when it can): |own| folders
// are the root and those below it, else an ancestor of the root.
static const char* untrusted_dir(const char* path, bool own) {
  struct stat st;
  if ((own ? lstat(path, &st) : stat(path, &st)) != 0) return "cannot stat it";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  uid_t me = geteuid();
  if (own) {
    if (st.st_uid != me) return "another user owns it";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "its group or other users can write it";
  } else {
    if (st.st_uid != me && st.st_uid != 0) return "another user owns a folder above it";
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return "other users can write a folder above it";
  }
  return NULL;
}

// Checks |dir| (below |root|, or the root itself) and the root's ancestors;
// on failure writes the offending folder into |bad|.
static const char* untrusted_tree(const char* root, const char* dir, char* bad,
                                  size_t cap) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  size_t root_len = strlen(root);
  while (root_len > 1 && root[root_len - 1] == '/') root_len--;
  // Ancestors of the root, outermost first, then the root and below.
  for (char* p = tmp + 1;; p++) {
    bool end = *p == '\0';
    if (!end && *p != '/') continue;
    *p = '\0';
    bool own = (size_t)(p - tmp) >= root_len;
    const char* why = untrusted_dir(tmp, own);
    if (why) {
      snprintf(bad, cap, "%s", tmp);
      return why;
    }
    if (end) return NULL;
    *p = '/';
  }
}

static void configure_locked(const char* root, int64_t max_size_bytes) {
  cache_dir[0] = '\0';
  dstats.disabled = true;
  if (!root || !*root || !tpr_eager_client()) return;
  tpr_client_t* c = tpr_eager_client();
  tpr_plugin_info_t info;
  tpr_plugin_get_info(tpr_client_plugin(c), &info);
  uint64_t id = 0xcbf29ce484222325ull;
  id = fnv1a(info.path, strlen(info.path), id);
  struct stat st;
  if (stat(info.path, &st) == 0) {
    id = fnv1a(&st.st_size, sizeof st.st_size, id);
    id = fnv1a(&st.st_mtime, sizeof st.st_mtime, id);
  }
  id = fnv1a(&info.api_major, sizeof info.api_major, id);
  id = fnv1a(&info.api_minor, sizeof info.api_minor, id);
  const char* pn = tpr_client_platform_name(c);
  const char* pv = tpr_client_platform_version(c);
  id = fnv1a(pn, strlen(pn), id);
  id = fnv1a(pv, strlen(pv), id);
  const uint32_t codegen = CODEGEN_VERSION;
  id = fnv1a(&codegen, sizeof codegen, id);
  // The plugin reads its compiler flags from these at start-up: another
  // setting compiles other code, so it gets other entries.
  static const char* const kFlagVars[] = {"XLA_FLAGS", "LIBTPU_INIT_ARGS"};
  for (size_t i = 0; i < sizeof kFlagVars / sizeof kFlagVars[0]; i++) {
    const char* v = getenv(kFlagVars[i]);
    id = fnv1a(kFlagVars[i], strlen(kFlagVars[i]) + 1, id);
    if (v) id = fnv1a(v, strlen(v), id);
  }
  char abs_root[4096];
  if (root[0] != '/') {  // relative: its ancestors are the working folder's
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) return;
    snprintf(abs_root, sizeof abs_root, "%s/%s", cwd, root);
  } else {
    snprintf(abs_root, sizeof abs_root, "%s", root);
  }
  root = abs_root;
  snprintf(cache_dir, sizeof cache_dir, "%s/%016llx", root, (unsigned long long)id);
  if (mkdirs(cache_dir) != 0 || access(cache_dir, W_OK | X_OK) != 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s", cache_dir);
    warn_and_disable("cannot create or write the folder", path);
    return;
  }
  char bad[4096];
  const char* why = untrusted_tree(root, cache_dir, bad, sizeof bad);
  if (why) {
    fprintf(stderr,
            "torch_tpu: not using the compilation cache at %s: %s (%s); a cache "
            "others can write could hand this process their code. Caching "
            "compiled programs in memory only\n", root, why, bad);
    cache_dir[0] = '\0';
    dstats.disabled = true;
    return;
  }
  max_bytes = max_size_bytes > 0 ? max_size_bytes : (int64_t)2 << 30;
  approx_bytes = -1;
  dstats.disabled = false;
}

static void entry_path(const uint64_t key[2], char* out, size_t cap) {
  snprintf(out, cap, "%s/%016llx%016llx.xla", cache_dir,
           (unsigned long long)key[0], (unsigned long long)key[1]);
}

static int read_all(int fd, void* buf, size_t n) {
  char* p = (char*)buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_all(int fd, const void* buf, size_t n) {
  const char* p = (const char*)buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

// Reads, verifies and loads the entry at |path| for |key|. Touches no shared
// state, so it runs on any thread (a background load); *|corrupt| says that
// a file was there and failed a check.
tpr_status_t tpr_disk_cache_read(const char* path, const uint64_t key[2],
                                 tpr_executable_t** out, bool* corrupt) {
  *out = NULL;
  *corrupt = false;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *corrupt = errno == ELOOP;  // a symbolic link where an entry belongs
    return TPR_ERR(NOT_FOUND, "no entry");
  }
  entry_header_t h;
  struct stat st;
  void* payload = NULL;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            !(st.st_mode & (S_IWGRP | S_IWOTH)) && read_all(fd, &h, sizeof h) == 0 &&
            h.magic == ENTRY_MAGIC && h.version == ENTRY_VERSION &&
            h.key[0] == key[0] && h.key[1] == key[1] &&
            (uint64_t)st.st_size == sizeof h + h.payload_size &&
            (payload = tpr_malloc((size_t)h.payload_size)) != NULL &&
            read_all(fd, payload, (size_t)h.payload_size) == 0 &&
            fnv1a(payload, (size_t)h.payload_size, 0xcbf29ce484222325ull) ==
                h.payload_checksum;
  close(fd);
  tpr_status_t s = ok ? tpr_executable_deserialize(tpr_eager_client(), payload,
                                                   (size_t)h.payload_size, out)
                      : TPR_ERR(DATA_LOSS, "corrupt entry");
  tpr_free(payload);
  *corrupt = !tpr_status_is_ok(s);  // corrupt, truncated or foreign
  return s;
}

void tpr_disk_cache_count_read(const char* path, bool loaded, bool corrupt) {
  if (corrupt) {  // recompiled, and written again
    unlink(path);
    dstats.corrupt++;
  }
  if (!loaded) {
    dstats.misses++;
    return;
  }
  utimes(path, NULL);  // recently used: evicted last
  dstats.hits++;
}

bool tpr_disk_cache_entry(const uint64_t key[2], char* path, size_t cap) {
  if (!cache_dir[0]) return false;
  entry_path(key, path, cap);
  struct stat st;
  return lstat(path, &st) == 0;
}

tpr_status_t tpr_disk_cache_load(const uint64_t key[2], tpr_executable_t** out) {
  *out = NULL;
  if (!cache_dir[0]) return TPR_ERR(NOT_FOUND, "disk cache off");
  char path[4200];
  entry_path(key, path, sizeof path);
  bool corrupt;
  tpr_status_t s = tpr_disk_cache_read(path, key, out, &corrupt);
  tpr_disk_cache_count_read(path, tpr_status_is_ok(s), corrupt);
  return s;
}

static void evict_if_needed(int64_t added) {
  if (approx_bytes < 0) {  // first write: measure the folder once
    approx_bytes = 0;
    DIR* d = opendir(cache_dir);
    if (!d) return;
    struct dirent* e;
    char p[4400];
    struct stat st;
    while ((e = readdir(d))) {
      snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
      if (e->d_name[0] != '.' && stat(p, &st) == 0) approx_bytes += st.st_size;
    }
    closedir(d);
  }
  approx_bytes += added;
  while (approx_bytes > max_bytes) {
    DIR* d = opendir(cache_dir);
    if (!d) return;
    struct dirent* e;
    char p[4400], oldest[4400] = "";
    time_t oldest_t = 0;
    int64_t oldest_size = 0;
    struct stat st;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
      if (stat(p, &st) != 0) continue;
      if (!oldest[0] || st.st_mtime < oldest_t) {
        snprintf(oldest, sizeof oldest, "%s", p);
        oldest_t = st.st_mtime;
        oldest_size = st.st_size;
      }
    }
    closedir(d);
    if (!oldest[0]) return;
    unlink(oldest);
    approx_bytes -= oldest_size;
    dstats.evictions++;
  }
}

void tpr_disk_cache_store(const uint64_t key[2], tpr_executable_t* exe) {
  if (!cache_dir[0]) return;
  void* data = NULL;
  size_t size = 0;
  tpr_status_t s = tpr_executable_serialize(exe, &data, &size);
  if (!tpr_status_is_ok(s)) {  // the plugin cannot serialize: nothing to do
    tpr_status_free(s);
    return;
  }
  entry_header_t h = {ENTRY_MAGIC, ENTRY_VERSION, {key[0], key[1]},
                      size, fnv1a(data, size, 0xcbf29ce484222325ull)};
  char path[4200], tmp[4300];
  entry_path(key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.%d.%lx.tmp", path, (int)getpid(),
           (unsigned long)time(NULL));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && write_all(fd, &h, sizeof h) == 0 &&
            write_all(fd, data, size) == 0;
  if (fd >= 0) ok = (close(fd) == 0) && ok;
  tpr_free(data);
  if (!ok || rename(tmp, path) != 0) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", cache_dir);
    unlink(tmp);
    warn_and_disable("cannot write an entry", dir);
    return;
  }
  dstats.writes++;
  evict_if_needed((int64_t)(sizeof h + size));
}

void tpr_disk_cache_configure(const char* root, int64_t max_size_bytes) {
  tpr_eager_lock();
  configure_locked(root, max_size_bytes);
  tpr_eager_unlock();
}

void tpr_disk_cache_get_stats(tpr_disk_cache_stats_t* out) {
  tpr_eager_lock();
  *out = dstats;
  out->disabled = !cache_dir[0];
  tpr_eager_unlock();
}

void tpr_disk_cache_reset_stats(void) {
  tpr_eager_lock();
  bool disabled = dstats.disabled;
  memset(&dstats, 0, sizeof dstats);
  dstats.disabled = disabled;
  tpr_eager_unlock();
}

const char* tpr_disk_cache_dir(void) { return cache_dir; }
