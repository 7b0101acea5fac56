// Router: the API's routes as (method, path pattern) pairs. Matching is a
// pure function of the table, so 404 and 405 (with the methods a path does
// allow) follow from the same routes the handlers are registered with.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_server.h"
#include "config/choices.h"

namespace slotd {

class Router {
 public:
  // The decoded values of a pattern's {…} segments, in order.
  using Params = std::vector<std::string>;
  using Handler = std::function<void(http::Exchange&, const Params&)>;

  struct Route {
    std::string method;                 // "GET"
    std::string pattern;                // "/v1/kernels/{id}"
    std::vector<std::string> segments;  // "/v1/kernels/{id}" -> {"v1", "kernels", "{id}"}
    std::optional<Role> role;           // what a caller needs; nullopt: anyone
    http::Lane lane = http::Lane::kQuick;
    Handler handler;
  };

  // Adds a route. `pattern` is a path whose segments are literal or a
  // placeholder "{name}", which matches any one non-empty segment. `role`:
  // what a caller needs (nullopt: anyone).
  void Add(std::string method, std::string_view pattern, std::optional<Role> role, http::Lane lane, Handler handler);

  struct Match {
    enum class Outcome { kFound, kNoRoute, kWrongMethod };
    Outcome outcome = Outcome::kNoRoute;
    const Route* route = nullptr;  // kFound: the route
    Params params;                 // kFound: the placeholders' values, percent-decoded
    std::string allow;             // kWrongMethod: the methods the path has, "GET, DELETE"
  };
  // Finds the route for `method` and the still percent-encoded `path`. A
  // "%2F" in a segment stays inside that segment.
  Match Find(std::string_view method, std::string_view path) const;

 private:
  std::vector<Route> routes_;
};

}  // namespace slotd
