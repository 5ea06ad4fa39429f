// The data directory as a place on the file system: whether a path is one (or may become
// one), and the tree of subdirectories create() and a base backup make. Every refusal
// names its real cause: missing, not a directory, not readable (with errno's words), not
// empty, or not a Tidemark data directory.
#pragma once

#include <string>

namespace tidemark::runtime {

/// Throws config_error naming the cause when `dir` is missing, not a directory, cannot be
/// read, or is not a Tidemark data directory (it has no control file, whatever else it
/// holds).
void check_data_directory(const std::string& dir);

/// Throws config_error unless `dir` is missing or an empty directory, naming the cause: it
/// is a file, it is not empty, or a part of its path cannot be used (errno's words).
void check_new_data_directory(const std::string& dir);

/// Makes `dir` (its parent must exist) and the subdirectories of a data directory.
void make_data_directory_tree(const std::string& dir);

} // namespace tidemark::runtime
