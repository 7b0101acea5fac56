// docs/openapi.yaml held to the code: its paths and methods are exactly the
// routes slotd registers (ApiServer::Routes()), and a real agent, driven
// through every route with good and bad requests, answers only statuses the
// document lists for that route, with bodies, headers and events that fit
// the document's schemas.
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "api/server.h"
#include "common/version.h"
#include "model/event_type.h"
#include "integration/etcd.h"
#include "integration/harness.h"
#include "testing/eventually.h"
#include "common/ascii.h"
#include "config/choices.h"
#include "testing/openapi_validator.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// ---- Reading the document.

// A YAML node as JSON. Plain scalars are typed as YAML 1.2's core schema
// types them (null, booleans, integers, floats); quoted ones stay strings.
json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const YAML::Node& item : node) array.push_back(YamlToJson(item));
      return array;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) object[entry.first.as<std::string>()] = YamlToJson(entry.second);
      return object;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string text = node.Scalar();
  if (node.Tag() != "?") return text;  // quoted: "!"
  if (text == "null" || text == "~") return nullptr;
  if (text == "true") return true;
  if (text == "false") return false;
  json number = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!number.is_discarded() && number.is_number()) return number;
  return text;
}

const OpenApiValidator& Document() {
  static const OpenApiValidator* validator =
      new OpenApiValidator(YamlToJson(YAML::LoadFile(std::string(SLOTD_SOURCE_DIR) + "/docs/openapi.yaml")));
  return *validator;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string Upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// A node that may be a {"$ref": ...}, resolved.
const json& Deref(const json& node) {
  return node.contains("$ref") ? Document().Resolve(node["$ref"].get<std::string>()) : node;
}

// Every "$ref" in `node`, with where it is.
void CollectRefs(const json& node, const std::string& where, std::vector<std::pair<std::string, std::string>>& refs) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "$ref" && it->is_string()) refs.emplace_back(where, it->get<std::string>());
      else CollectRefs(*it, where + "/" + it.key(), refs);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) CollectRefs(node[i], where + "/" + std::to_string(i), refs);
  }
}

// ---- Talking to the agent with every byte of the answer at hand.

struct Answer {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // de-chunked

  std::string Header(const std::string& name) const {
    auto it = headers.find(Lower(name));
    return it == headers.end() ? "" : it->second;
  }
  // The media type of Content-Type, without its parameters.
  std::string MediaType() const {
    std::string type = Header("Content-Type");
    type = type.substr(0, type.find(';'));
    while (!type.empty() && type.back() == ' ') type.pop_back();
    return type;
  }
};

// The body of a chunked message; a chunk not yet whole ends it.
std::string Dechunk(std::string_view raw) {
  std::string body;
  while (true) {
    const size_t line_end = raw.find("\r\n");
    if (line_end == std::string_view::npos) break;
    const size_t size = std::strtoul(std::string(raw.substr(0, line_end)).c_str(), nullptr, 16);
    if (size == 0 || raw.size() < line_end + 2 + size) break;
    body.append(raw.substr(line_end + 2, size));
    raw.remove_prefix(std::min(raw.size(), line_end + 2 + size + 2));
  }
  return body;
}

// Parses the head and body of what a connection received.
Answer ParseAnswer(const std::string& raw) {
  Answer answer;
  const size_t head_end = raw.find("\r\n\r\n");
  const std::string head = raw.substr(0, head_end);
  if (head.rfind("HTTP/1.1 ", 0) == 0 && head.size() >= 12) answer.status = std::atoi(head.substr(9, 3).c_str());
  size_t at = head.find("\r\n");
  while (at != std::string::npos && at < head.size()) {
    const size_t next = head.find("\r\n", at + 2);
    const std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      answer.headers[Lower(line.substr(0, colon))] = value;
    }
    at = next;
  }
  const std::string rest = head_end == std::string::npos ? "" : raw.substr(head_end + 4);
  answer.body = Lower(answer.Header("Transfer-Encoding")) == "chunked" ? Dechunk(rest) : rest;
  return answer;
}

// A request as the bytes a client sends; `body` gets a Content-Length.
std::string RequestBytes(const std::string& method, const std::string& target, const std::string& body,
                         const std::string& extra_headers = "", const std::string& connection = "close") {
  return method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: " + connection + "\r\n" + extra_headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// ---- Holding answers to the document.

// The operation of `method` on `pattern`; null when the document has none.
const json* Operation(const std::string& method, const std::string& pattern) {
  const json& paths = Document().document()["paths"];
  if (!paths.contains(pattern) || !paths[pattern].contains(Lower(method))) return nullptr;
  return &paths[pattern][Lower(method)];
}

// The routes ("GET /v1/kernels/{id}") whose answers ExpectFits has checked, to show every route was driven.
std::set<std::string>& Driven() {
  static std::set<std::string> driven;
  return driven;
}

// Checks `answer` of `method` `pattern` against the document: its status is
// one the operation lists, its required headers are there, and its body
// fits the schema of its media type. `what` says which request it was.
void ExpectFits(const std::string& method, const std::string& pattern, const Answer& answer, const std::string& what) {
  SCOPED_TRACE(method + " " + pattern + " (" + what + ") -> " + std::to_string(answer.status) + " " +
               answer.body.substr(0, 300));
  const json* operation = Operation(method, pattern);
  ASSERT_NE(operation, nullptr) << "the document has no " << method << " " << pattern;
  const std::string status = std::to_string(answer.status);
  ASSERT_TRUE((*operation)["responses"].contains(status))
      << "status " << status << " is not listed for " << method << " " << pattern << " in docs/openapi.yaml";
  Driven().insert(method + " " + pattern);
  const json& response = Deref((*operation)["responses"][status]);
  if (response.contains("headers"))
    for (const auto& [name, header] : response["headers"].items())
      if (Deref(header).value("required", false))
        EXPECT_FALSE(answer.Header(name).empty()) << "the required header " << name << " is missing";
  if (answer.status == 101) return;  // the connection is a terminal from here on
  ASSERT_TRUE(response.contains("content")) << "the document gives this answer no body";
  const std::string media = answer.MediaType();
  ASSERT_TRUE(response["content"].contains(media))
      << "Content-Type " << answer.Header("Content-Type") << " is not one the document lists: "
      << response["content"].dump();
  if (media != "application/json") return;  // text: any string
  const json body = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(body.is_discarded()) << "not JSON: " << answer.body;
  const std::vector<std::string> problems = Document().Validate(body, response["content"][media]["schema"]);
  EXPECT_THAT(problems, ::testing::IsEmpty()) << body.dump();
}

// Options of an agent with two mock devices, a token and a small body limit.
AgentOptions ContractAgent() {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-openapi";
  o.cores = "0-1";
  o.memory = "1g";
  o.token = "openapi-token";
  o.extra_toml =
      "[api]\n"
      "max-body-size = \"64k\"\n"
      "[resource.mock]\n"
      "devices = [\n"
      "  { id = \"mock0\", memory = \"16g\", processing-units = 108, numa-node = 0 },\n"
      "  { id = \"mock1\", memory = \"16g\", processing-units = 108, numa-node = 0 },\n"
      "]\n";
  return o;
}

// The agent and the way to call it, each call checked against the document.
class Contract {
 public:
  explicit Contract(const AgentProcess& agent) : agent_(agent) {}

  // Sends `method` `target` (whose route is `pattern`) over the unix socket and checks the answer.
  Answer Call(const std::string& method, const std::string& pattern, const std::string& target,
              const std::string& body = "", const std::string& what = "") const {
    return CallRaw(method, pattern, RequestBytes(method, target, body), what.empty() ? body.substr(0, 80) : what);
  }
  Answer CallJson(const std::string& method, const std::string& pattern, const std::string& target,
                  const json& body) const {
    return Call(method, pattern, target, body.dump());
  }
  // Sends `bytes` as they are and checks the answer.
  Answer CallRaw(const std::string& method, const std::string& pattern, const std::string& bytes,
                 const std::string& what, bool tcp = false) const {
    Answer answer = Exchange(bytes, tcp);
    ExpectFits(method, pattern, answer, what);
    return answer;
  }
  // Sends `bytes` and returns the parsed answer, unchecked.
  Answer Exchange(const std::string& bytes, bool tcp = false) const {
    RawClient client = tcp ? RawClient(agent_.port()) : RawClient(agent_.socket_path());
    EXPECT_TRUE(client.connected());
    client.Send(bytes);
    return ParseAnswer(client.Read(60s));
  }

 private:
  const AgentProcess& agent_;
};

json ContractKernel(const std::string& id) {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", 1}, {"mem", "32m"}, {"mock.device", 1}}},
          {"ports", {8080}},
          {"labels", {{"team", "contract"}}}};
}

// Whether `request` fits the create request's schema.
bool FitsCreateRequest(const json& request) {
  return Document().ValidateAgainst(request, "CreateKernelRequest").empty();
}

TEST(OpenApi, TheDocumentListsExactlyTheRoutesTheServerRegisters) {
  std::set<std::string> registered;
  for (const ApiServer::RouteName& route : ApiServer::Routes()) registered.insert(route.method + " " + route.pattern);
  std::set<std::string> documented;
  const std::set<std::string> kMethods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};
  for (const auto& [pattern, item] : Document().document()["paths"].items())
    for (const auto& [method, operation] : item.items())
      if (kMethods.count(method)) documented.insert(Upper(method) + " " + pattern);
  EXPECT_EQ(documented, registered);
}

TEST(OpenApi, EachOperationNamesTheRoleItsRouteNeedsAndListsTheRefusals) {
  const json& paths = Document().document()["paths"];
  for (const ApiServer::RouteName& route : ApiServer::Routes()) {
    const std::string method = AsciiLowered(route.method);
    const json& operation = paths[route.pattern][method];
    const std::string name = route.method + " " + route.pattern;
    EXPECT_EQ(operation.value("x-slotd-role", ""), route.role ? WordOf(RoleWords(), *route.role) : "anyone") << name;
    if (!route.role) continue;
    EXPECT_TRUE(operation["responses"].contains("401")) << name;
    EXPECT_TRUE(operation["responses"].contains("403")) << name;
  }
}

TEST(OpenApi, TheDocumentMapsExactlyTheEventTypesTheAgentAnnounces) {
  const json& mapping = Document().document()["components"]["schemas"]["Event"]["discriminator"]["mapping"];
  std::set<std::string> mapped;
  for (const auto& [name, ref] : mapping.items()) mapped.insert(name);
  std::set<std::string> announced;
  for (const EventType type : kEventTypes) announced.insert(EventTypeName(type));
  EXPECT_EQ(mapped, announced);
}

TEST(OpenApi, TheDocumentIsOfThisRelease) {
  EXPECT_EQ(Document().document()["info"]["version"], kSlotdVersion);
}

TEST(OpenApi, EveryReferenceResolvesAndEveryErrorAnswerIsTheErrorBody) {
  const json& doc = Document().document();
  EXPECT_EQ(doc["openapi"], "3.1.0");
  EXPECT_THAT(Document().SchemaProblems(), ::testing::IsEmpty());
  std::vector<std::pair<std::string, std::string>> refs;
  CollectRefs(doc, "#", refs);
  EXPECT_GT(refs.size(), 50u);
  for (const auto& [where, ref] : refs) EXPECT_NO_THROW(Document().Resolve(ref)) << where;
  for (const auto& [pattern, item] : doc["paths"].items()) {
    for (const auto& [method, operation] : item.items()) {
      if (!operation.contains("responses")) continue;
      for (const auto& [status, ref] : operation["responses"].items()) {
        const json& response = Deref(ref);
        EXPECT_TRUE(response.contains("description")) << method << " " << pattern << " " << status;
        if (status == "101" || std::stoi(status) < 400) continue;
        // Every error answer's body is Error (GET /health's 503 may also be its Health body).
        const json& schema = response["content"]["application/json"]["schema"];
        const std::string text = schema.dump();
        EXPECT_NE(text.find("#/components/schemas/Error"), std::string::npos) << method << " " << pattern << " " << status;
      }
      // Every route but /health needs the token, so every one lists 401.
      if (pattern != "/health")
        EXPECT_TRUE(operation["responses"].contains("401")) << method << " " << pattern;
    }
  }
}

TEST(OpenApi, EachPathDeclaresItsPlaceholdersAndEachOperationHasItsOwnId) {
  std::set<std::string> ids;
  for (const auto& [pattern, item] : Document().document()["paths"].items()) {
    std::set<std::string> placeholders;
    for (size_t open = pattern.find('{'); open != std::string::npos; open = pattern.find('{', open + 1))
      placeholders.insert(pattern.substr(open + 1, pattern.find('}', open) - open - 1));
    const json no_parameters = json::array();
    const json& shared = item.contains("parameters") ? item["parameters"] : no_parameters;
    for (const auto& [method, operation] : item.items()) {
      if (method == "parameters") continue;
      EXPECT_TRUE(ids.insert(operation.value("operationId", "")).second) << method << " " << pattern;
      std::set<std::string> declared;
      for (const json* list : {&shared, operation.contains("parameters") ? &operation["parameters"] : &no_parameters})
        for (const json& parameter : *list)
          if (Deref(parameter)["in"] == "path") {
            declared.insert(Deref(parameter)["name"].get<std::string>());
            EXPECT_EQ(Deref(parameter)["required"], true) << method << " " << pattern;
          }
      EXPECT_EQ(declared, placeholders) << method << " " << pattern;
    }
  }
}

TEST(OpenApi, TheCreateRequestSchemaRefusesWhatTheParserRefuses) {
  EXPECT_TRUE(FitsCreateRequest(ContractKernel("k-1")));
  EXPECT_TRUE(FitsCreateRequest({{"image", "x"}, {"resources", {{"mem", 268435456}, {"shm", "64MiB"}}},
                                 {"mounts", {{{"source", "/srv"}, {"target", "/data"}, {"readonly", true}}}},
                                 {"pull", "tag"}, {"max_lifetime", "2h"}}));
  for (const json& bad : {json{{"image", "x"}, {"gpu", 1}}, json{{"kernel_id", "k"}}, json{{"image", ""}},
                          json{{"image", "x"}, {"kernel_id", "-bad"}}, json{{"image", "x"}, {"resources", {{"cpu", 0}}}},
                          json{{"image", "x"}, {"resources", {{"mem", "lots"}}}},
                          json{{"image", "x"}, {"ports", {70000}}}, json{{"image", "x"}, {"pull", "always"}},
                          json{{"image", "x"}, {"mounts", {{{"source", "/a"}, {"target", "/b"}, {"mode", "ro"}}}}},
                          json{{"image", "x"}, {"env", {{"A", 1}}}}})
    EXPECT_FALSE(FitsCreateRequest(bad)) << bad;
}

// The events of a raw event stream: each frame's "event:" name and its data.
std::vector<std::pair<std::string, json>> Frames(const std::string& stream, int& keep_alives) {
  std::vector<std::pair<std::string, json>> frames;
  size_t at = 0;
  keep_alives = 0;
  while (true) {
    const size_t end = stream.find("\n\n", at);
    if (end == std::string::npos) break;
    const std::string frame = stream.substr(at, end - at);
    at = end + 2;
    if (frame.rfind(":", 0) == 0) {
      ++keep_alives;
      continue;
    }
    std::string name, data;
    size_t line_at = 0;
    while (line_at <= frame.size()) {
      size_t line_end = frame.find('\n', line_at);
      if (line_end == std::string::npos) line_end = frame.size();
      const std::string line = frame.substr(line_at, line_end - line_at);
      if (line.rfind("event: ", 0) == 0) name = line.substr(7);
      else if (line.rfind("data: ", 0) == 0) data = line.substr(6);
      else ADD_FAILURE() << "a line of an event frame that is neither event: nor data: " << line;
      line_at = line_end + 1;
    }
    frames.emplace_back(name, json::parse(data, nullptr, /*allow_exceptions=*/false));
  }
  return frames;
}

// Reads `events` (an open GET /v1/events, `stream` what came so far) until
// every type of `expected` has come or 10 s have passed, then checks the
// stream's head against the document and each frame's data against the
// schema its type maps to; returns the types that came.
std::set<std::string> ExpectEventsFit(RawClient& events, std::string stream, const std::set<std::string>& expected) {
  std::set<std::string> seen;
  int keep_alives = 0;
  for (int i = 0; i < 20; ++i) {
    stream += events.Read(500ms);
    seen.clear();
    for (const auto& [name, data] : Frames(ParseAnswer(stream).body, keep_alives)) seen.insert(name);
    if (std::includes(seen.begin(), seen.end(), expected.begin(), expected.end())) break;
  }
  const Answer answer = ParseAnswer(stream);
  ExpectFits("GET", "/v1/events", Answer{answer.status, answer.headers, ""}, "the stream's head");
  EXPECT_EQ(answer.MediaType(), "text/event-stream");
  const json& mapping = Document().document()["components"]["schemas"]["Event"]["discriminator"]["mapping"];
  const json& stream_schema =
      Document().document()["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"];
  for (const auto& [name, data] : Frames(answer.body, keep_alives)) {
    SCOPED_TRACE("event " + name + ": " + data.dump());
    EXPECT_FALSE(data.is_discarded());
    EXPECT_EQ(data.value("type", ""), name) << "the event: line and the data's type differ";
    if (!mapping.contains(name)) {
      ADD_FAILURE() << "an event type the document does not map";
      continue;
    }
    EXPECT_THAT(Document().Validate(data, {{"$ref", mapping[name]}}), ::testing::IsEmpty());
    EXPECT_THAT(Document().Validate(data, stream_schema), ::testing::IsEmpty());
  }
  return seen;
}

// Opens GET /v1/events on `agent`'s socket; returns what came with the answer's head.
std::string OpenEvents(const AgentProcess& agent, RawClient& events) {
  EXPECT_TRUE(events.connected());
  events.Send("GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n");
  std::string stream = events.Read(5s, nullptr, "\r\n\r\n");
  EXPECT_NE(stream.find("\r\n\r\n"), std::string::npos) << stream;
  return stream;
}

TEST(OpenApi, EveryRouteAnswersAsTheDocumentSays) {
  AgentProcess agent(ContractAgent());
  ASSERT_TRUE(agent.Start()) << agent.log();
  const Contract api(agent);
  const std::string tag = RunTag();
  const std::string k1 = "oa-" + tag + "-1", k2 = "oa-" + tag + "-2", k3 = "oa-" + tag + "-3";

  // The event stream, read at the end: the socket holds what comes meanwhile.
  RawClient events(agent.socket_path());
  const std::string stream = OpenEvents(agent, events);

  // Health, agent, and the transport's own answers.
  api.Call("GET", "/health", "/health");
  api.CallRaw("GET", "/health", RequestBytes("GET", "/health", ""), "no token on TCP", /*tcp=*/true);
  api.Call("GET", "/v1/agent", "/v1/agent");
  api.CallRaw("GET", "/v1/agent", RequestBytes("GET", "/v1/agent", ""), "no token on TCP", /*tcp=*/true);
  api.CallRaw("GET", "/v1/agent", RequestBytes("GET", "/v1/agent", "", "Authorization: Bearer openapi-token\r\n"),
              "token on TCP", /*tcp=*/true);
  api.CallRaw("GET", "/v1/kernels", RequestBytes("GET", "/v1/kernels", "", "Authorization: Bearer wrong\r\n"),
              "wrong token", /*tcp=*/true);
  api.CallRaw("POST", "/v1/kernels",
              "POST /v1/kernels HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n", "body over 64k");
  api.CallRaw("GET", "/v1/kernels/{id}", RequestBytes("GET", "/v1/kernels/" + std::string(9000, 'k'), ""),
              "target over 8k");
  api.CallRaw("GET", "/v1/stats",
              "GET /v1/stats HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(70000, 'h') + "\r\n\r\n",
              "headers over 64k");
  {
    // Not HTTP, an unknown path, a wrong method: no operation, but the Error body, and Allow names the document's methods.
    const Answer garbage = api.Exchange("this is not http\r\n\r\n");
    EXPECT_EQ(garbage.status, 400);
    EXPECT_THAT(Document().ValidateAgainst(json::parse(garbage.body, nullptr, false), "Error"), ::testing::IsEmpty());
    const Answer nowhere = api.Exchange(RequestBytes("GET", "/v1/nodes", ""));
    EXPECT_EQ(nowhere.status, 404);
    EXPECT_THAT(Document().ValidateAgainst(json::parse(nowhere.body, nullptr, false), "Error"), ::testing::IsEmpty());
    const Answer wrong = api.Exchange(RequestBytes("PUT", "/v1/kernels/x", ""));
    EXPECT_EQ(wrong.status, 405);
    EXPECT_THAT(Document().ValidateAgainst(json::parse(wrong.body, nullptr, false), "Error"), ::testing::IsEmpty());
    std::set<std::string> documented;
    for (const auto& [method, operation] : Document().document()["paths"]["/v1/kernels/{id}"].items())
      if (method != "parameters") documented.insert(Upper(method));
    std::set<std::string> allowed;
    std::string allow = wrong.Header("Allow");
    for (size_t at = 0; at <= allow.size();) {
      size_t comma = allow.find(',', at);
      if (comma == std::string::npos) comma = allow.size();
      std::string method = allow.substr(at, comma - at);
      while (!method.empty() && method.front() == ' ') method.erase(0, 1);
      allowed.insert(method);
      at = comma + 1;
    }
    EXPECT_EQ(allowed, documented) << "Allow: " << allow;
  }

  // Creates: good, repeated, conflicting, bad, unmeetable.
  const Answer created = api.CallJson("POST", "/v1/kernels", "/v1/kernels", ContractKernel(k1));
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", ContractKernel(k1)).status, 200);
  json other = ContractKernel(k1);
  other["command"] = {"sleep", "7"};
  EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", other).status, 409);
  EXPECT_EQ(api.Call("POST", "/v1/kernels", "/v1/kernels", std::string("{\"image\":")).status, 400);
  for (const json& bad : {json{{"image", kTestImage}, {"gpu", 1}}, json{{"image", kTestImage}, {"kernel_id", "-bad"}},
                          json{{"image", kTestImage}, {"resources", {{"mem", "lots"}}}},
                          json{{"image", kTestImage}, {"resources", {{"cuda.device", 1}}}}}) {
    EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", bad).status, 400) << bad;
  }
  EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", json{{"image", "no-such/image:" + tag}}).status, 400);
  json greedy = ContractKernel(k2);
  greedy["resources"]["mock.device"] = 2;
  EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", greedy).status, 422);
  // A kernel that ends by itself, for kernel_terminated and the unmeasured stats.
  const json ending = {{"kernel_id", k2},
                       {"image", kTestImage},
                       {"command", {"sh", "-c", "exit 3"}},
                       {"resources", {{"cpu", 1}, {"mem", "16m"}}}};
  ASSERT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", ending).status, 201);
  agent.WaitForState(k2, "TERMINATED");

  // Reads.
  api.Call("GET", "/v1/kernels", "/v1/kernels");
  api.Call("GET", "/v1/kernels/{id}", "/v1/kernels/" + k1);
  EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}", "/v1/kernels/nope-" + tag).status, 404);

  // Exec: run and wait, bytes that are not UTF-8, a timeout, bad bodies, a kernel not running.
  const std::string exec = "/v1/kernels/" + k1 + "/exec";
  const std::string exec_pattern = "/v1/kernels/{id}/exec";
  EXPECT_EQ(api.CallJson("POST", exec_pattern, exec, json{{"command", {"sh", "-c", "echo hi; echo oops >&2; exit 3"}}}).status,
            200);
  const Answer binary = api.CallJson("POST", exec_pattern, exec, json{{"command", {"printf", "a\\377b"}}});
  EXPECT_TRUE(json::parse(binary.body, nullptr, false).contains("stdout_base64")) << binary.body;
  EXPECT_EQ(api.CallJson("POST", exec_pattern, exec, json{{"command", {"sleep", "5"}}, {"timeout_s", 1}}).status, 504);
  EXPECT_EQ(api.CallJson("POST", exec_pattern, exec, json{{"command", json::array()}}).status, 400);
  EXPECT_EQ(api.CallJson("POST", exec_pattern, exec, json{{"command", {"true"}}, {"timeout_s", 0}}).status, 400);
  EXPECT_EQ(api.CallJson("POST", exec_pattern, "/v1/kernels/" + k2 + "/exec", json{{"command", {"true"}}}).status, 409);
  EXPECT_EQ(api.CallJson("POST", exec_pattern, "/v1/kernels/nope-" + tag + "/exec", json{{"command", {"true"}}}).status,
            404);

  // Exec on a terminal: the upgrade, its state, a resize, its end.
  {
    RawClient terminal(agent.socket_path());
    const json body = {{"command", {"sh"}}, {"tty", true}, {"rows", 30}, {"cols", 100}};
    terminal.Send(RequestBytes("POST", exec, body.dump(), "Upgrade: tcp\r\n", "Upgrade"));
    const Answer upgraded = ParseAnswer(terminal.Read(10s, nullptr, "\r\n\r\n"));
    ExpectFits("POST", exec_pattern, upgraded, "Upgrade: tcp");
    ASSERT_EQ(upgraded.status, 101);
    const std::string exec_id = upgraded.Header("X-Slotd-Exec-Id");
    const std::string state_target = exec + "/" + exec_id;
    api.Call("GET", "/v1/kernels/{id}/exec/{exec}", state_target);
    EXPECT_EQ(api.CallJson("POST", "/v1/kernels/{id}/exec/{exec}/resize", state_target + "/resize",
                       json{{"rows", 33}, {"cols", 101}}).status,
              200);
    EXPECT_EQ(api.CallJson("POST", "/v1/kernels/{id}/exec/{exec}/resize", state_target + "/resize", json{{"rows", 33}})
                  .status,
              400);
    EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}/exec/{exec}", exec + "/nope" + tag).status, 404);
    terminal.Send("exit 4\n");
    bool closed = false;
    for (int i = 0; i < 20 && !closed; ++i) terminal.Read(500ms, &closed);
    EXPECT_TRUE(closed);
    json state;
    for (int i = 0; i < 50; ++i) {
      const Answer now = api.Call("GET", "/v1/kernels/{id}/exec/{exec}", state_target);
      state = json::parse(now.body, nullptr, false);
      if (state.value("running", true) == false) break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(state["exit_code"], 4) << state;
  }

  // Logs.
  const Answer logs = api.Call("GET", "/v1/kernels/{id}/logs", "/v1/kernels/" + k1 + "/logs?tail=5");
  EXPECT_EQ(logs.status, 200);
  EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}/logs", "/v1/kernels/" + k1 + "/logs?tail=x").status, 400);
  EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}/logs", "/v1/kernels/" + k1 + "/logs?follow=maybe").status, 400);
  EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}/logs", "/v1/kernels/nope-" + tag + "/logs").status, 404);

  // Stats: wait for a sweep that measured k1, then the terminated k2 and an unknown id.
  bool measured = false;
  for (int i = 0; i < 100 && !measured; ++i) {
    const Answer stats = api.Call("GET", "/v1/kernels/{id}/stats", "/v1/kernels/" + k1 + "/stats");
    measured = json::parse(stats.body, nullptr, false).value("measured", false);
    if (!measured) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(measured);
  api.Call("GET", "/v1/stats", "/v1/stats");
  api.Call("GET", "/v1/kernels/{id}/stats", "/v1/kernels/" + k2 + "/stats");
  EXPECT_EQ(api.Call("GET", "/v1/kernels/{id}/stats", "/v1/kernels/nope-" + tag + "/stats").status, 404);
  const Answer metrics = api.Call("GET", "/metrics", "/metrics");
  EXPECT_NE(metrics.body.find("slotd_kernels{"), std::string::npos);

  // Images: the list, a pull from a registry nobody serves, bad pull bodies.
  api.Call("GET", "/v1/images", "/v1/images");
  const Answer pulled = api.CallJson("POST", "/v1/images/pull", "/v1/images/pull",
                                 json{{"image", "127.0.0.1:1/slotd-none/none:" + tag}});
  EXPECT_NE(pulled.status, 200) << pulled.body;
  EXPECT_EQ(api.CallJson("POST", "/v1/images/pull", "/v1/images/pull", json::object()).status, 400);
  EXPECT_EQ(api.CallJson("POST", "/v1/images/pull", "/v1/images/pull", json{{"image", "x"}, {"tag", "y"}}).status, 400);

  // Devices: drain, undrain, a clear of a device without a mark, an unknown device.
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/drain", "/v1/devices/mock1/drain").status, 200);
  api.Call("GET", "/v1/agent", "/v1/agent", "", "a drained device");
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/undrain", "/v1/devices/mock1/undrain").status, 200);
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/clear", "/v1/devices/mock1/clear").status, 409);
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/drain", "/v1/devices/nope/drain").status, 404);
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/clear", "/v1/devices/nope/clear").status, 404);
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/undrain", "/v1/devices/nope/undrain").status, 404);

  // The agent's drain: a create while drained is 503.
  EXPECT_EQ(api.Call("POST", "/v1/agent/drain", "/v1/agent/drain").status, 200);
  api.Call("GET", "/v1/agent", "/v1/agent", "", "drained");
  EXPECT_EQ(api.CallJson("POST", "/v1/kernels", "/v1/kernels", ContractKernel(k3)).status, 503);
  EXPECT_EQ(api.Call("POST", "/v1/agent/undrain", "/v1/agent/undrain").status, 200);

  // Restart and delete, and both again for an id that is gone.
  EXPECT_EQ(api.Call("POST", "/v1/kernels/{id}/restart", "/v1/kernels/" + k1 + "/restart").status, 200);
  EXPECT_EQ(api.Call("DELETE", "/v1/kernels/{id}", "/v1/kernels/" + k1).status, 200);
  EXPECT_EQ(api.Call("DELETE", "/v1/kernels/{id}", "/v1/kernels/" + k2).status, 200);
  EXPECT_EQ(api.Call("DELETE", "/v1/kernels/{id}", "/v1/kernels/" + k1).status, 404);
  EXPECT_EQ(api.Call("POST", "/v1/kernels/{id}/restart", "/v1/kernels/" + k1 + "/restart").status, 404);

  // The events: each frame's data fits the schema its type maps to.
  const std::set<std::string> expected = {"kernel_created", "kernel_started",   "kernel_terminated", "kernel_removed",
                                          "image_pull",     "device_drained",   "device_undrained",  "agent_drained",
                                          "agent_undrained"};
  const std::set<std::string> seen = ExpectEventsFit(events, stream, expected);
  EXPECT_EQ(seen, expected) << agent.log();

  // Every route was driven at least once.
  std::set<std::string> every;
  for (const ApiServer::RouteName& route : ApiServer::Routes()) every.insert(route.method + " " + route.pattern);
  EXPECT_EQ(Driven(), every);
}

const char kGpu0[] = "GPU-0a0a0a0a-1111-2222-3333-0000000000aa";
const char kGpu1[] = "GPU-1b1b1b1b-1111-2222-3333-0000000000bb";

// Writes the fake libnvidia-ml's file: two GPUs, a process of no kernel on
// the first, and `events` (Xid events).
void WriteGpus(const std::string& file, const json& events) {
  const json gpus = {{{"uuid", kGpu0}, {"name", "Fake H200"}, {"memory", "141g"}, {"numa_node", 0},
                      {"utilization", {{"gpu", 37}, {"memory", 12}}},
                      {"processes", {{{"pid", 1}, {"used_memory", "1g"}}}}},
                     {{"uuid", kGpu1}, {"name", "Fake H200"}, {"memory", "141g"}, {"numa_node", 0}}};
  WriteFile(file + ".tmp", json{{"gpus", gpus}, {"events", events}}.dump());
  ASSERT_EQ(::rename((file + ".tmp").c_str(), file.c_str()), 0);
}

TEST(OpenApi, GpusTheirHealthAndTheirMeasuresAnswerAsTheDocumentSays) {
  TempDir dir;
  const std::string file = dir.path() + "/nvml.json";
  WriteGpus(file, json::array());
  setenv("SLOTD_FAKE_NVML_FILE", file.c_str(), 1);
  AgentOptions o;
  o.id = "it-" + RunTag() + "-openapi-gpu";
  o.cores = "0";
  o.extra_toml = "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) + "\"\nattach = \"env\"\n";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const Contract api(agent);
  const std::string kernel = "oa-gpu-" + RunTag();
  RawClient events(agent.socket_path());
  const std::string stream = OpenEvents(agent, events);

  const json request = {{"kernel_id", kernel},
                        {"image", kTestImage},
                        {"command", {"sleep", "3600"}},
                        {"resources", {{"cpu", 1}, {"mem", "32m"}, {"cuda.device", 1}}}};
  const Answer created = api.CallJson("POST", "/v1/kernels", "/v1/kernels", request);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string held = json::parse(created.body)["allocations"]["devices"]["cuda"][0];
  api.Call("GET", "/v1/agent", "/v1/agent", "", "two GPUs");

  // An Xid on the kernel's GPU: the device turns unhealthy, the kernel gets a condition.
  WriteGpus(file, json::array({{{"id", 1}, {"gpu", held}, {"xid", 79}}}));
  bool marked = false;
  for (int i = 0; i < 100 && !marked; ++i) {
    const Answer got = api.Call("GET", "/v1/kernels/{id}", "/v1/kernels/" + kernel, "", "waiting for the condition");
    marked = !json::parse(got.body, nullptr, false).value("condition", json()).is_null();
    if (!marked) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(marked);
  api.Call("GET", "/v1/agent", "/v1/agent", "", "an unhealthy GPU");
  bool swept = false;
  for (int i = 0; i < 100 && !swept; ++i) {
    const Answer stats = api.Call("GET", "/v1/stats", "/v1/stats", "", "waiting for a measured GPU");
    const json body = json::parse(stats.body, nullptr, false);
    for (const json& device : body["agent"]["devices"]) swept = swept || device.value("measured", false);
    if (!swept) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(swept);
  api.Call("GET", "/v1/kernels/{id}/stats", "/v1/kernels/" + kernel + "/stats");

  // Cleared, it is healthy again; a second clear finds no mark.
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/clear", "/v1/devices/" + held + "/clear").status, 200);
  EXPECT_EQ(api.Call("POST", "/v1/devices/{id}/clear", "/v1/devices/" + held + "/clear").status, 409);
  EXPECT_EQ(api.Call("DELETE", "/v1/kernels/{id}", "/v1/kernels/" + kernel).status, 200);

  const std::set<std::string> expected = {"kernel_created", "kernel_started",   "kernel_condition",
                                          "device_unhealthy", "device_healthy", "kernel_removed"};
  const std::set<std::string> seen = ExpectEventsFit(events, stream, expected);
  EXPECT_TRUE(std::includes(seen.begin(), seen.end(), expected.begin(), expected.end()))
      << ::testing::PrintToString(seen);
}

TEST(OpenApi, TheEtcdRegistrationAnswersAsTheDocumentSays) {
  TestEtcd etcd;
  ASSERT_TRUE(etcd.started());
  AgentOptions o = ContractAgent();
  o.id = "it-" + RunTag() + "-openapi-etcd";
  o.extra_toml += "[etcd]\nendpoints = [\"" + etcd.url() + "\"]\nlease-ttl = \"2s\"\n";
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const Contract contract(agent);
  for (const char* state : {"registered", "unreachable"}) {
    if (std::string(state) == "unreachable") {
      etcd.Stop();
      ASSERT_TRUE(Eventually([&] { return agent.CallJson("GET", "/health", nullptr, 200)["etcd"]["state"] == state; }));
    }
    EXPECT_EQ(json::parse(contract.Call("GET", "/health", "/health", "", state).body)["etcd"]["state"], state);
    EXPECT_EQ(json::parse(contract.Call("GET", "/v1/agent", "/v1/agent", "", state).body)["etcd"]["state"], state);
  }
}

}  // namespace
}  // namespace slotd::testing
