// The offline check of a data directory behind database::check_files(): the control file,
// the WAL from the redo point to its end (every record's CRC), every page of every
// relation (checksum and identity), and every image of the doublewrite ring. It knows no
// application layout and changes nothing: files are opened read-only.
#pragma once

#include <tidemark/database.hpp>

#include <string>

namespace tidemark {

file_check_report check_data_files(const std::string& dir);

} // namespace tidemark
