// HttpServer on a loopback port, driven by HttpClient: what it does when the
// host refuses it a thread, and a body of kept pieces.
#include "api/http_server.h"

#include <cerrno>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_client.h"

namespace slotd {
namespace {

using nlohmann::json;

// "/long" runs on the kLong lane, "/quick" on the kQuick lane; both answer 200.
http::Dispatch TwoLanes(const http::Request& request) {
  http::Dispatch dispatch;
  dispatch.lane = request.path == "/long" ? http::Lane::kLong : http::Lane::kQuick;
  dispatch.handler = [](http::Exchange& ex) { ex.Reply({.status = 200, .body = "{}"}); };
  return dispatch;
}

TEST(HttpServer, AThreadThatCannotBeMadeIsA503AndTheServerGoesOn) {
  http::ServerOptions options;
  int refused = 0;
  options.start_thread = [&refused](std::function<void()>) {
    ++refused;
    throw std::system_error(EAGAIN, std::generic_category(), "Resource temporarily unavailable");
  };
  http::HttpServer server(options);
  ASSERT_TRUE(server.ListenTcp("127.0.0.1", 0, TwoLanes).ok());
  server.Start();
  const HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.tcp_port()));
  for (int i = 0; i < 3; ++i) {
    auto answer = client.Request("GET", "/long");
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->status, 503);
    const json body = json::parse(answer->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << answer->body;
    EXPECT_EQ(body["error"]["code"], "unavailable");
    EXPECT_NE(body["error"]["message"].get<std::string>().find("tasks limit"), std::string::npos) << answer->body;
  }
  EXPECT_EQ(refused, 3);
  auto quick = client.Request("GET", "/quick");
  ASSERT_TRUE(quick.ok()) << quick.status().message();
  EXPECT_EQ(quick->status, 200);
  server.Stop();  // returns: no handler is counted in flight for the refused ones
}

TEST(HttpServer, ABodyOfPiecesArrivesWholeAndInOrderBetweenOtherAnswers) {
  // More pieces than one system call gathers (64), more bytes than a socket
  // buffer holds, and an empty piece among them.
  std::vector<std::shared_ptr<const std::string>> pieces;
  std::string whole;
  for (int i = 0; i < 3000; ++i) {
    const char letter = static_cast<char>('a' + i % 26);
    pieces.push_back(std::make_shared<const std::string>(i == 7 ? "" : std::string(1000, letter)));
    whole += *pieces.back();
  }
  http::HttpServer server({});
  ASSERT_TRUE(server
                  .ListenTcp("127.0.0.1", 0,
                             [&pieces](const http::Request& request) {
                               http::Dispatch dispatch;
                               dispatch.handler = [&pieces, small = request.path == "/small"](http::Exchange& ex) {
                                 http::Response response;
                                 if (small) response.body = "{}";
                                 else response.pieces = pieces;
                                 ex.Reply(std::move(response));
                               };
                               return dispatch;
                             })
                  .ok());
  server.Start();
  const HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.tcp_port()));
  for (const std::string path : {"/pieces", "/small", "/pieces"}) {
    auto answer = client.Request("GET", path);
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->status, 200);
    EXPECT_EQ(answer->body, path == "/small" ? "{}" : whole) << path;
  }
  server.Stop();
}

}  // namespace
}  // namespace slotd
