// The API's route table and its JSON bodies, without a server.
#include "api/router.h"

#include <gtest/gtest.h>

#include "api/responses.h"
#include "common/base64.h"

namespace slotd {
namespace {

using Outcome = Router::Match::Outcome;

Router Routes() {
  Router router;
  auto nothing = [](http::Exchange&, const Router::Params&) {};
  router.Add("GET", "/v1/kernels", Role::kViewer, http::Lane::kQuick, nothing);
  router.Add("POST", "/v1/kernels", Role::kViewer, http::Lane::kLong, nothing);
  router.Add("GET", "/v1/kernels/{id}", Role::kViewer, http::Lane::kQuick, nothing);
  router.Add("DELETE", "/v1/kernels/{id}", Role::kViewer, http::Lane::kLong, nothing);
  router.Add("GET", "/v1/kernels/{id}/logs", Role::kViewer, http::Lane::kLong, nothing);
  return router;
}

TEST(Router, FindsTheRouteAndDecodesItsPlaceholders) {
  const Router router = Routes();
  Router::Match m = router.Find("GET", "/v1/kernels/k%2F1/logs");
  ASSERT_EQ(m.outcome, Outcome::kFound);
  EXPECT_EQ(m.params, Router::Params{"k/1"});  // an escaped slash stays inside its segment
  EXPECT_EQ(m.route->lane, http::Lane::kLong);
  EXPECT_EQ(router.Find("POST", "/v1/kernels").outcome, Outcome::kFound);
  EXPECT_EQ(router.Find("GET", "/v1/kernels/").route->method, "GET");
}

TEST(Router, AWrongMethodNamesEveryMethodThePathTakes) {
  const Router router = Routes();
  Router::Match m = router.Find("PUT", "/v1/kernels/k1");
  EXPECT_EQ(m.outcome, Outcome::kWrongMethod);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(router.Find("DELETE", "/v1/kernels").allow, "GET, POST");
}

TEST(Router, AnUnknownPathIsNoRoute) {
  const Router router = Routes();
  EXPECT_EQ(router.Find("GET", "/v1/kernel").outcome, Outcome::kNoRoute);
  EXPECT_EQ(router.Find("GET", "/v1/kernels/k1/logs/more").outcome, Outcome::kNoRoute);
  EXPECT_EQ(router.Find("GET", "/v1/kernels//logs").outcome, Outcome::kNoRoute);  // an empty id is no id
}

TEST(Responses, BytesThatAreNotUtf8AreReplacedInTextAndKeptExactInBase64) {
  nlohmann::json body;
  ExactText(body, "out", std::string("a\xFF" "b", 3));
  ExactText(body, "err", "fine ✓");
  EXPECT_EQ(DumpJson(body), R"({"err":"fine ✓","out":"a�b","out_base64":"Yf9i"})");
  EXPECT_FALSE(IsUtf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(IsUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(IsUtf8("\xF0\x9F\x98\x80"));
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("ab"), "YWI=");
  EXPECT_EQ(Base64("abcd"), "YWJjZA==");
}

TEST(Responses, EveryErrorHasTheSameShape) {
  http::Response r = ErrorResponse(Status::ResourceExhausted("insufficient cpu"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, R"({"error":{"code":"insufficient_resources","message":"insufficient cpu"}})");
  EXPECT_EQ(ErrorResponse(Status::NotFound(std::string("kernel \xFF")), 0).body,
            R"({"error":{"code":"not_found","message":"kernel �"}})");
}

}  // namespace
}  // namespace slotd
