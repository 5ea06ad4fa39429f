// Data directory checks and layout (see data_directory.hpp).
#include "runtime/data_directory.hpp"

#include "storage/control_file.hpp"

#include <tidemark/errors.hpp>

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tidemark::runtime {

namespace {

void make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw config_error("cannot create directory " + path + ": " + std::strerror(errno));
}

} // namespace

void check_data_directory(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      throw config_error("data directory \"" + dir +
                         "\" does not exist (database::create "
                         "or tidemark init makes one)");
    throw config_error("cannot reach data directory \"" + dir + "\": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    throw config_error("data directory \"" + dir + "\" is not a directory");
  // Whatever else it holds (a tidemark.conf, say), a directory without a control file is
  // not one: create() writes it last.
  const std::string control = storage::control_file_path(dir);
  if (::stat(control.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw config_error("cannot reach " + control + ": " + std::strerror(errno));
    throw config_error("\"" + dir +
                       "\" is not a Tidemark data directory: it has no "
                       "global/tidemark.control (database::create and tidemark init write it "
                       "last, so a directory whose create did not finish has none either)");
  }
  if (::access(control.c_str(), R_OK) != 0)
    throw config_error("cannot read " + control + ": " + std::strerror(errno));
}

void check_new_data_directory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT)
      return;
    struct stat st;
    if (errno == ENOTDIR && ::stat(dir.c_str(), &st) == 0)
      throw config_error("\"" + dir + "\" exists and is not a directory");
    throw config_error("cannot use \"" + dir +
                       "\" as a new data directory: " + std::strerror(errno));
  }
  bool empty = true;
  while (dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty)
    throw config_error("directory \"" + dir + "\" exists and is not empty");
}

void make_data_directory_tree(const std::string& dir) {
  make_directory(dir);
  for (const char* sub : {"/base", "/wal", "/global", "/xact", "/doublewrite"})
    make_directory(dir + sub);
}

} // namespace tidemark::runtime
