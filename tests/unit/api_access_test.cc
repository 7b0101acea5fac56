// Who may use which route: the pure decisions (Authorize, ParseTokensFile,
// ApiAccess::Authenticate) from tables, and every route of the API walked
// with every role, a wrong token and none, against a served ApiServer on
// TCP. A route added without a row in kExpectedRoles fails the walk.
#include "api/access.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/event_hub.h"
#include "api/server.h"
#include "stats/collector.h"
#include "testing/fake_engine.h"
#include "testing/fake_kernel_service.h"
#include "testing/loopback.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using ::testing::HasSubstr;

const std::string kViewerToken = "viewer-token-0123456789";
const std::string kOperatorToken = "operator-token-0123456789";
const std::string kAdminToken = "admin-token-0123456789";

// What each route needs: the API's contract (docs/security.md "Roles"),
// written out so that changing a route's role, or adding a route, is a
// decision this table records.
const std::map<std::string, std::optional<Role>>& ExpectedRoles() {
  static const std::map<std::string, std::optional<Role>> roles = {
      {"GET /health", std::nullopt},
      {"GET /v1/agent", Role::kViewer},
      {"GET /v1/kernels", Role::kViewer},
      {"POST /v1/kernels", Role::kOperator},
      {"GET /v1/kernels/{id}", Role::kViewer},
      {"DELETE /v1/kernels/{id}", Role::kOperator},
      {"POST /v1/kernels/{id}/restart", Role::kOperator},
      {"POST /v1/kernels/{id}/exec", Role::kOperator},
      {"GET /v1/kernels/{id}/exec/{exec}", Role::kOperator},
      {"POST /v1/kernels/{id}/exec/{exec}/resize", Role::kOperator},
      {"GET /v1/kernels/{id}/logs", Role::kOperator},
      {"GET /v1/kernels/{id}/stats", Role::kViewer},
      {"GET /v1/stats", Role::kViewer},
      {"GET /metrics", Role::kViewer},
      {"GET /v1/events", Role::kViewer},
      {"POST /v1/agent/drain", Role::kAdmin},
      {"POST /v1/agent/undrain", Role::kAdmin},
      {"POST /v1/devices/{id}/drain", Role::kAdmin},
      {"POST /v1/devices/{id}/undrain", Role::kAdmin},
      {"POST /v1/devices/{id}/clear", Role::kAdmin},
      {"GET /v1/images", Role::kViewer},
      {"POST /v1/images/pull", Role::kOperator},
  };
  return roles;
}

TEST(ApiAccess, EveryRouteHasItsRoleInTheContractTable) {
  std::set<std::string> routes;
  for (const ApiServer::RouteName& route : ApiServer::Routes()) {
    const std::string name = route.method + " " + route.pattern;
    routes.insert(name);
    const auto expected = ExpectedRoles().find(name);
    ASSERT_NE(expected, ExpectedRoles().end()) << name << " has no row in ExpectedRoles: decide its role there";
    EXPECT_EQ(route.role, expected->second) << name;
    // What kernels print, and running code in them, is never a viewer's.
    if (route.pattern.find("/logs") != std::string::npos || route.pattern.find("/exec") != std::string::npos)
      EXPECT_GE(route.role.value_or(Role::kViewer), Role::kOperator) << name;
  }
  for (const auto& [name, role] : ExpectedRoles()) EXPECT_TRUE(routes.contains(name)) << name << " is no route now";
}

TEST(ApiAccess, AuthorizeComparesRoles) {
  struct Row {
    std::optional<Role> needed;
    Role has;
    bool allowed;
  };
  const std::vector<Row> rows = {
      {std::nullopt, Role::kViewer, true},     {Role::kViewer, Role::kViewer, true},
      {Role::kOperator, Role::kViewer, false}, {Role::kAdmin, Role::kViewer, false},
      {Role::kOperator, Role::kOperator, true}, {Role::kAdmin, Role::kOperator, false},
      {Role::kAdmin, Role::kAdmin, true},       {Role::kViewer, Role::kAdmin, true},
  };
  for (const Row& row : rows) {
    const std::optional<Refusal> refusal = Authorize(row.needed, Caller{"mgr-1", "token", row.has}, "POST /v1/x");
    EXPECT_EQ(!refusal.has_value(), row.allowed);
    if (refusal) {
      EXPECT_EQ(refusal->status, 403);
      EXPECT_THAT(refusal->message, HasSubstr("\"mgr-1\""));
      EXPECT_THAT(refusal->message, HasSubstr("POST /v1/x needs role " + WordOf(RoleWords(), *row.needed)));
    }
  }
}

TEST(ApiAccess, TokensFileLinesAreCheckedOneByOne) {
  const std::string good =
      "# name role token\n\nmgr-1 operator " + kOperatorToken + "\n  prom viewer " + kViewerToken + "  \n";
  Result<std::vector<NamedToken>> tokens = ParseTokensFile(good, "/t");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "mgr-1");
  EXPECT_EQ((*tokens)[0].role, Role::kOperator);
  EXPECT_EQ((*tokens)[1].token, kViewerToken);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"mgr-1 operator", "line 1: expected \"<name> <role> <token>\""},
      {"mgr-1 operator " + kOperatorToken + " extra", "three words"},
      {"mgr/1 operator " + kOperatorToken, "the name must be"},
      {"mgr-1 root " + kOperatorToken, "\"root\" is no role"},
      {"mgr-1 admin short", "at least 16"},
      {"a admin " + kAdminToken + "\na viewer " + kViewerToken, "line 2: \"a\" is named twice"},
      {"a admin " + kAdminToken + "\nb viewer " + kAdminToken, "given to another name"},
  };
  for (const auto& [text, problem] : bad) {
    Result<std::vector<NamedToken>> parsed = ParseTokensFile(text, "/t");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(problem)) << text;
  }
}

http::Request RequestWith(std::string authorization, std::string certificate, bool local = false) {
  http::Request request;
  request.method = "GET";
  request.path = "/v1/kernels";
  if (!authorization.empty()) request.headers.emplace_back("Authorization", std::move(authorization));
  request.client_certificate = std::move(certificate);
  request.local = local;
  return request;
}

TEST(ApiAccess, AuthenticateByTokenCertificateOrSocket) {
  ApiAccess access({{"token-file", Role::kAdmin, kAdminToken}}, std::nullopt,
                   {{"mgr-1", Role::kOperator}, {"prometheus", Role::kViewer}});
  ASSERT_TRUE(access.Reload().ok());
  struct Row {
    std::string name;
    http::Request request;
    std::string caller;  // "" when refused
    Role role = Role::kViewer;
    int status = 0;  // of the refusal
  };
  const std::vector<Row> rows = {
      {"the unix socket", RequestWith("", "", true), "unix-socket", Role::kAdmin},
      {"a token", RequestWith("Bearer " + kAdminToken, ""), "token-file", Role::kAdmin},
      {"the scheme in any case", RequestWith("bEaReR  " + kAdminToken + " ", ""), "token-file", Role::kAdmin},
      {"a listed certificate", RequestWith("", "mgr-1"), "mgr-1", Role::kOperator},
      {"a token beside a certificate", RequestWith("Bearer " + kAdminToken, "prometheus"), "token-file",
       Role::kAdmin},
      {"a wrong token beside a good certificate", RequestWith("Bearer " + kViewerToken, "mgr-1"), "", Role::kViewer,
       401},
      {"another scheme", RequestWith("Basic " + kAdminToken, ""), "", Role::kViewer, 401},
      {"no credential", RequestWith("", ""), "", Role::kViewer, 401},
      {"an unlisted certificate", RequestWith("", "stranger"), "", Role::kViewer, 403},
  };
  for (const Row& row : rows) {
    const std::variant<Caller, Refusal> who = access.Authenticate(row.request);
    if (row.caller.empty()) {
      ASSERT_TRUE(std::holds_alternative<Refusal>(who)) << row.name;
      EXPECT_EQ(std::get<Refusal>(who).status, row.status) << row.name;
    } else {
      ASSERT_TRUE(std::holds_alternative<Caller>(who)) << row.name;
      EXPECT_EQ(std::get<Caller>(who).name, row.caller) << row.name;
      EXPECT_EQ(std::get<Caller>(who).role, row.role) << row.name;
    }
  }
}

TEST(ApiAccess, TokensFileReloadKeepsTheOldTokensWhenTheNewFileIsBad) {
  TempTree dir("api_access_test");
  const std::string path = dir.root() + "/tokens";
  dir.Write("tokens", "mgr-1 operator " + kOperatorToken + "\n");
  ApiAccess access({}, path, {});
  ASSERT_TRUE(access.Reload().ok());
  dir.Write("tokens", "mgr-1 operator\n");
  const Status bad = access.Reload();
  EXPECT_THAT(bad.message(), HasSubstr("agent.tokens-file"));
  const auto who = access.Authenticate(RequestWith("Bearer " + kOperatorToken, ""));
  ASSERT_TRUE(std::holds_alternative<Caller>(who));
  EXPECT_EQ(std::get<Caller>(who).name, "mgr-1");
}

// The status line's code of one request to 127.0.0.1:`port`, read from a
// fresh connection that is then closed (a stream's head is enough).
int StatusOf(int port, const std::string& method, const std::string& path, const std::string& token) {
  const int fd = testing::ConnectToLoopback(port);
  if (fd < 0) return -1;
  timeval wait{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  request += "\r\n";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string head;
  char c;
  while (head.size() < 64 && ::recv(fd, &c, 1, 0) == 1 && c != '\r') head += c;
  ::close(fd);
  // "HTTP/1.1 403 Forbidden"
  return head.size() >= 12 ? std::stoi(head.substr(9, 3)) : -1;
}

TEST(ApiAccess, EveryRouteWithEveryRoleAndWithout) {
  TempTree dir("api_access_walk");
  FakeKernelService service;
  EventHub hub;
  FakeEngine engine;
  StatsCollector collector(StatsCollector::Options{.agent_id = "fake"}, [] { return std::vector<StatsTarget>{}; },
                           engine, {});
  ApiAccess access({{"viewer", Role::kViewer, kViewerToken},
                    {"operator", Role::kOperator, kOperatorToken},
                    {"admin", Role::kAdmin, kAdminToken}},
                   std::nullopt, {});
  ASSERT_TRUE(access.Reload().ok());
  http::ServerOptions options;
  options.request_timeout = std::chrono::seconds(5);
  ApiServer server(service, hub, collector, access, options, 2, 2);
  ASSERT_TRUE(server.Bind("127.0.0.1", 0, dir.root() + "/agent.sock").ok());
  server.Start();

  struct Credential {
    std::string name;
    std::string token;
    std::optional<Role> role;  // nullopt: none, or one the agent does not know
  };
  const std::vector<Credential> credentials = {{"no credential", "", std::nullopt},
                                               {"a wrong token", "not-a-token-0123456789", std::nullopt},
                                               {"viewer", kViewerToken, Role::kViewer},
                                               {"operator", kOperatorToken, Role::kOperator},
                                               {"admin", kAdminToken, Role::kAdmin}};
  int walked = 0;
  for (const ApiServer::RouteName& route : ApiServer::Routes()) {
    std::string path = route.pattern;
    for (const auto& [placeholder, value] : {std::pair{"{id}", "k1"}, std::pair{"{exec}", "e1"}})
      if (const size_t at = path.find(placeholder); at != std::string::npos) path.replace(at, strlen(placeholder), value);
    for (const Credential& credential : credentials) {
      const int status = StatusOf(server.port(), route.method, path, credential.token);
      const std::string what = route.method + " " + path + " with " + credential.name;
      ASSERT_GT(status, 0) << what;
      if (!route.role) {
        EXPECT_NE(status, 401) << what;
        EXPECT_NE(status, 403) << what;
      } else if (!credential.role) {
        EXPECT_EQ(status, 401) << what;
      } else if (*credential.role < *route.role) {
        EXPECT_EQ(status, 403) << what;
      } else {
        EXPECT_NE(status, 401) << what;
        EXPECT_NE(status, 403) << what;
      }
      ++walked;
    }
  }
  EXPECT_EQ(walked, static_cast<int>(ApiServer::Routes().size() * credentials.size()));
  server.Stop();
}

}  // namespace
}  // namespace slotd
