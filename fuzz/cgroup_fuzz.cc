// Fuzz target: the cgroup and /proc files the stats path reads
// (CgroupReader over a fake root; ForEachLine, SplitFields and ParseNumber
// of text_files.h).
//
// Input: files, each after a line "### NAME". NAME "mountinfo", "cgroup" and
// "status" are <root>/proc/self/mountinfo, <root>/proc/1/cgroup and
// <root>/proc/1/status; any other NAME (letters, digits, '.', '_', '-', ',', '/')
// is a path under <root>/sys/fs/cgroup/. A file holds the lines up to the
// next "### " line, newlines included. The files are written to a fresh
// directory for each input, removed after it.
// Invariants: ForEachLine yields exactly the lines of each file (lines of
// 4096 bytes or more skipped, as it promises); SplitFields yields pieces of
// the line; a container id found is 64 hex digits of the cgroup file; a
// namespace pid is positive; located directories are under the root; and
// reading twice reads the same.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "stats/cgroup.h"
#include "stats/text_files.h"

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFiles = 32;

struct File {
  std::string path;  // relative to the root
  std::string_view text;
};

// A fresh directory for one input's fake root, removed when it goes out of
// scope (left behind only when an invariant aborts, for a look).
class ScratchRoot {
 public:
  ScratchRoot() {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string pattern = std::string(base) + "/slotd-fuzz-cgroup.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ScratchRoot() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchRoot(const ScratchRoot&) = delete;
  ScratchRoot& operator=(const ScratchRoot&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

bool IsSafeName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '/' || name.find("..") != std::string_view::npos) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == ',' || c == '/';
    if (!ok) return false;
  }
  return true;
}

std::vector<File> SplitFiles(std::string_view input) {
  std::vector<File> files;
  size_t at = input.starts_with("### ") ? 0 : input.find("\n### ");
  if (at != 0 && at != std::string_view::npos) ++at;
  while (at != std::string_view::npos && files.size() < kMaxFiles) {
    const size_t name_end = input.find('\n', at);
    if (name_end == std::string_view::npos) break;
    const std::string_view name = input.substr(at + 4, name_end - at - 4);
    size_t next = input.find("\n### ", name_end);
    const size_t end = next == std::string_view::npos ? input.size() : next + 1;
    const std::string_view text = input.substr(name_end + 1, end - name_end - 1);
    if (name == "mountinfo") files.push_back({"proc/self/mountinfo", text});
    else if (name == "cgroup") files.push_back({"proc/1/cgroup", text});
    else if (name == "status") files.push_back({"proc/1/status", text});
    else if (IsSafeName(name)) files.push_back({"sys/fs/cgroup/" + std::string(name), text});
    for (size_t i = 0; i + 1 < files.size(); ++i) {
      if (files[i].path != files.back().path) continue;
      files.pop_back();  // the first of a name counts
      break;
    }
    at = next == std::string_view::npos ? next : next + 1;
  }
  return files;
}

// The lines ForEachLine promises for `text`: split at '\n', without a last
// empty piece, and without lines of 4096 bytes or more.
std::vector<std::string> ExpectedLines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (line.size() < 4096) lines.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

void CheckLines(const fs::path& path, std::string_view text) {
  // Only a file that holds `text`: not one that is also a directory, nor a
  // name written again later under another spelling ("a//b" is "a/b").
  std::error_code error_code;
  if (!fs::is_regular_file(path, error_code) || fs::file_size(path, error_code) != text.size()) return;
  std::ifstream in(path, std::ios::binary);
  const std::string held((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (held != text) return;
  std::vector<std::string> lines;
  const int error = slotd::ForEachLine(path.c_str(), [&](std::string_view line) {
    lines.emplace_back(line);
    std::string_view fields[6];
    const size_t count = slotd::SplitFields(line, fields, 6);
    FUZZ_CHECK(count <= 6, "SplitFields returned " + std::to_string(count) + " of at most 6");
    for (size_t i = 0; i < count; ++i) {
      FUZZ_CHECK(fields[i].data() >= line.data() && fields[i].data() + fields[i].size() <= line.data() + line.size(),
                 "a field outside its line");
      FUZZ_CHECK(fields[i].find(' ') == std::string_view::npos, "a field with a space");
    }
    uint64_t value = 12345;
    if (!slotd::ParseNumber(line, value)) FUZZ_CHECK(value == 12345, "ParseNumber failed but changed its output");
  });
  if (error != 0) return;
  const std::vector<std::string> expected = ExpectedLines(text);
  FUZZ_CHECK(lines == expected, "ForEachLine gave " + std::to_string(lines.size()) + " lines of " + path.string() +
                                    ", expected " + std::to_string(expected.size()));
}

bool SameSample(const slotd::CgroupSample& a, const slotd::CgroupSample& b) {
  return a.cpu_usage_ns == b.cpu_usage_ns && a.memory_used_bytes == b.memory_used_bytes &&
         a.memory_limit_bytes == b.memory_limit_bytes && a.memory_cache_bytes == b.memory_cache_bytes &&
         a.pids == b.pids && a.io_read_bytes == b.io_read_bytes && a.io_write_bytes == b.io_write_bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const ScratchRoot scratch;
  const fs::path& root = scratch.path();
  std::error_code ignored;
  const std::vector<File> files = SplitFiles(input);
  std::string cgroup_text;
  for (const File& file : files) {
    const fs::path path = root / file.path;
    fs::create_directories(path.parent_path(), ignored);
    std::ofstream(path, std::ios::binary).write(file.text.data(), static_cast<std::streamsize>(file.text.size()));
    if (file.path == "proc/1/cgroup") cgroup_text = file.text;
  }
  for (const File& file : files) CheckLines(root / file.path, file.text);

  const slotd::CgroupReader reader(root.string());
  auto id = reader.ContainerIdOfPid(1);
  if (id.ok()) {
    FUZZ_CHECK(id->size() == 64 && id->find_first_not_of("0123456789abcdef") == std::string::npos, "container id " + *id);
    FUZZ_CHECK(cgroup_text.find(*id) != std::string::npos, "container id " + *id + " is not in the cgroup file");
  }
  auto pid = reader.NamespacePid(1);
  if (pid.ok()) FUZZ_CHECK(*pid > 0, "namespace pid " + std::to_string(*pid));

  auto paths = reader.Locate(1);
  if (!paths.ok()) return 0;
  for (const slotd::CgroupDir* dir : {&paths->cpu, &paths->memory, &paths->pids, &paths->io}) {
    FUZZ_CHECK(dir->path.empty() || dir->path.rfind(root.string(), 0) == 0, "cgroup directory " + dir->path);
  }
  auto first = reader.Read(*paths);
  auto second = reader.Read(1);
  FUZZ_CHECK(first.ok() == second.ok() && (!first.ok() || SameSample(*first, *second)), "two reads differ");
  return 0;
}
