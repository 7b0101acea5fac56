#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace slotd {

namespace {

// "<what> failed: <errno text>" for the failure of the step `what`.
std::string Failed(const std::string& what, int error) { return what + ": " + std::strerror(error); }

// The status of a write of `path` that failed at `step`.
Status WriteFailed(const std::string& path, const std::string& step, int error) {
  std::string remedy = "check that its directory exists and is writable by the agent's user";
  if (error == ENOSPC || error == EDQUOT) remedy = "free space on its filesystem";
  if (error == EIO) remedy = "check the disk (the kernel log says more)";
  return Status::Unavailable("cannot write " + path + " (" + Failed(step, error) + "); the previous file is unchanged; " +
                             remedy);
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view text, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string temp_name = path + ".tmp.XXXXXX";
  std::vector<char> temp(temp_name.begin(), temp_name.end());
  temp.push_back('\0');
  const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) return WriteFailed(path, "creating a temporary file beside it", errno);
  auto abandon = [&](const std::string& step, int error) {
    ::unlink(temp.data());
    return WriteFailed(path, step, error);
  };
  if (::fchmod(fd, mode) != 0) {
    const int error = errno;
    ::close(fd);
    return abandon("setting its mode", error);
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      return abandon("writing " + std::string(temp.data()), error);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return abandon("flushing " + std::string(temp.data()) + " to disk", error);
  }
  if (::close(fd) != 0) return abandon("closing " + std::string(temp.data()), errno);
  if (::rename(temp.data(), path.c_str()) != 0) return abandon("renaming " + std::string(temp.data()) + " over it", errno);
  // The rename itself is durable once the directory is synced; a filesystem
  // that cannot sync a directory (EINVAL) has nothing more to do.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    const int synced = ::fsync(dir_fd);
    const int error = errno;
    ::close(dir_fd);
    if (synced != 0 && error != EINVAL)
      return Status::Unavailable("wrote " + path + " but " + Failed("flushing its directory " + dir + " to disk", error) +
                                 "; a crash now may bring back the previous file; check the disk");
  }
  return Status::Ok();
}

}  // namespace slotd
