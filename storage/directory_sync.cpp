// Making a whole data directory durable: see directory_sync.hpp.
#include "storage/directory_sync.hpp"

#include "storage/types.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <vector>

namespace tidemark::storage {
namespace {

struct entry {
  std::string path;
  bool is_directory = false;
  dev_t device = 0;
};

// The entries of `dir` (not . and ..), sorted by name so that the walk is reproducible.
std::vector<entry> list_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    throw io_error("cannot open directory '" + dir + "': " + std::strerror(errno), errno);
  std::vector<entry> result;
  while (dirent* item = ::readdir(d)) {
    std::string name = item->d_name;
    if (name == "." || name == "..")
      continue;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) // removed while we walk (a dangling link or a recycled file)
        continue;
      int error = errno;
      ::closedir(d);
      throw io_error("cannot stat '" + path + "': " + std::strerror(error), error);
    }
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
      result.push_back({path, S_ISDIR(st.st_mode), st.st_dev});
  }
  ::closedir(d);
  std::sort(result.begin(), result.end(),
            [](const entry& a, const entry& b) { return a.path < b.path; });
  return result;
}

void fsync_tree(io_engine& io, const std::string& dir, directory_sync_report& report) {
  for (const entry& e : list_directory(dir)) {
    if (e.is_directory) {
      fsync_tree(io, e.path, report);
      continue;
    }
    sync_file_at(io, e.path);
    ++report.files;
  }
  io.sync_directory(dir);
  ++report.directories;
}

// One directory per file system the tree spans (the root's first).
void collect_file_systems(const std::string& dir, dev_t device, std::set<dev_t>& seen,
                          std::vector<std::string>& roots) {
  if (seen.insert(device).second)
    roots.push_back(dir);
  for (const entry& e : list_directory(dir))
    if (e.is_directory)
      collect_file_systems(e.path, e.device, seen, roots);
}

} // namespace

directory_sync_report sync_directory_tree(io_engine& io, const std::string& root,
                                          directory_sync_method method) {
  auto started = std::chrono::steady_clock::now();
  directory_sync_report report;
  if (method == directory_sync_method::fsync) {
    fsync_tree(io, root, report);
  } else {
    struct stat st {};
    if (::stat(root.c_str(), &st) != 0)
      throw io_error("cannot stat '" + root + "': " + std::strerror(errno), errno);
    std::set<dev_t> seen;
    std::vector<std::string> roots;
    collect_file_systems(root, st.st_dev, seen, roots);
    for (const std::string& dir : roots)
      io.sync_file_system(dir);
    report.file_systems = roots.size();
  }
  report.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

} // namespace tidemark::storage
