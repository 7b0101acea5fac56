// CannedServer: a tiny HTTP/1.1 server on 127.0.0.1 for tests of clients
// that must survive whatever a server sends (slotctl's reading of answers,
// the engine client's bounds).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/mutex.h"

namespace slotd::testing {

// An HTTP/1.1 server on 127.0.0.1 that answers every request with one canned
// response (status and body), then closes the connection; it remembers the
// request line of the last request.
class CannedServer {
 public:
  CannedServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }

  // The response to every later request.
  void Answer(int status, std::string body) {
    MutexLock lock(mu_);
    status_ = status;
    body_ = std::move(body);
  }
  // These bytes, as they are, to every later request: a head of any shape.
  void AnswerRaw(std::string bytes) {
    MutexLock lock(mu_);
    raw_ = std::move(bytes);
  }
  // The request line of the last request ("GET /v1/kernels HTTP/1.1").
  std::string last_request() const {
    MutexLock lock(mu_);
    return last_request_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      Exchange(fd);
      close(fd);
    }
  }

  // Reads one request (headers and a Content-Length body) and answers it.
  void Exchange(int fd) {
    std::string request;
    char buffer[4096];
    size_t body_start = std::string::npos, content_length = 0;
    while (body_start == std::string::npos || request.size() < body_start + content_length) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 5000) <= 0) return;
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) return;
      request.append(buffer, static_cast<size_t>(n));
      if (body_start == std::string::npos && request.find("\r\n\r\n") != std::string::npos) {
        body_start = request.find("\r\n\r\n") + 4;
        const size_t at = request.find("Content-Length: ");
        if (at != std::string::npos && at < body_start) content_length = std::stoul(request.substr(at + 16));
      }
    }
    std::string response;
    {
      MutexLock lock(mu_);
      last_request_ = request.substr(0, request.find("\r\n"));
      response = !raw_.empty() ? raw_
                               : "HTTP/1.1 " + std::to_string(status_) + " Canned\r\nContent-Type: application/json\r\n" +
                                     "Content-Length: " + std::to_string(body_.size()) +
                                     "\r\nConnection: close\r\n\r\n" + body_;
    }
    for (size_t sent = 0; sent < response.size();) {
      const ssize_t n = write(fd, response.data() + sent, response.size() - sent);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable Mutex mu_;
  int status_ GUARDED_BY(mu_) = 200;
  std::string body_ GUARDED_BY(mu_) = "{}";
  std::string last_request_ GUARDED_BY(mu_);
  std::string raw_ GUARDED_BY(mu_);  // non-empty: the whole answer
};

}  // namespace slotd::testing
