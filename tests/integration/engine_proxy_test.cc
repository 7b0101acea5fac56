// EngineProxy (tests/testing/engine_proxy.h), the proxy that tests and
// benchmarks put between a client and the real engine at $DOCKER_HOST:
// several requests on one kept-alive connection, a chunked body among them,
// each answered by the engine and recorded with the container it names.
#include "testing/engine_proxy.h"

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using namespace std::chrono_literals;

TEST(EngineProxy, RecordsEveryRequestOfAKeptAliveConnectionAndPassesTheAnswersThrough) {
  EngineProxy proxy(DockerHost());
  RawClient client(proxy.docker_host().substr(std::string("unix://").size()));
  ASSERT_TRUE(client.connected());
  const std::string name = "slotd-itest-" + RunTag() + "-proxy";

  ASSERT_TRUE(client.Send("GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n"));
  std::string answer = client.Read(10s, nullptr, "OK");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;

  // A create with a chunked body, of an image that does not exist: refused,
  // nothing is created.
  const std::string body = R"({"Image":"slotd-test/no-such-image:none","Labels":{"x":"y"}})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(client.Send("POST /v1.41/containers/create?name=" + name +
                          " HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body + "\r\n0\r\n\r\n"));
  answer = client.Read(10s, nullptr, "no-such-image");
  EXPECT_EQ(answer.rfind("HTTP/1.1 404", 0), 0u) << answer;

  ASSERT_TRUE(client.Send("GET /v1.41/containers/" + name + "/json HTTP/1.1\r\nHost: docker\r\n\r\n"));
  answer = client.Read(10s, nullptr, name);
  EXPECT_EQ(answer.rfind("HTTP/1.1 404", 0), 0u) << answer;

  const std::vector<EngineProxy::Request> requests = proxy.Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, "/_ping");
  EXPECT_EQ(requests[0].container, "");
  EXPECT_EQ(requests[1].method, "POST");
  EXPECT_EQ(requests[1].container, name);
  EXPECT_EQ(requests[2].target, "/v1.41/containers/" + name + "/json");
  EXPECT_EQ(requests[2].container, name);
  EXPECT_EQ(proxy.CallsNaming({name}), 2);
}

TEST(EngineProxy, NamesTheContainerOfATarget) {
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/containers/json?all=1&filters=x"), "");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/containers/abc123/logs?follow=1"), "abc123");
  EXPECT_EQ(EngineProxy::NamedContainer("/containers/abc123"), "abc123");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/containers/json/json"), "json");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/containers/create?name=a%2Db&x=1"), "a-b");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/containers/create"), "");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/exec/e1/start"), "");
  EXPECT_EQ(EngineProxy::NamedContainer("/v1.41/events?filters=x"), "");
}

}  // namespace
}  // namespace slotd::testing
