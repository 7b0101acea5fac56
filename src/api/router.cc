#include "api/router.h"

namespace slotd {
namespace {

// The segments of a path: "/v1/kernels/k1" -> {"v1", "kernels", "k1"}. One
// trailing slash is ignored; an empty segment inside ("a//b") is kept, so it
// never matches a placeholder.
std::vector<std::string_view> Split(std::string_view path) {
  if (path.starts_with('/')) path.remove_prefix(1);
  if (path.ends_with('/')) path.remove_suffix(1);
  std::vector<std::string_view> parts;
  if (path.empty()) return parts;
  while (true) {
    const size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

bool IsPlaceholder(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

void Router::Add(std::string method, std::string_view pattern, std::optional<Role> role, http::Lane lane,
                 Handler handler) {
  Route route;
  route.method = std::move(method);
  route.pattern = std::string(pattern);
  route.role = role;
  for (std::string_view segment : Split(pattern)) route.segments.emplace_back(segment);
  route.lane = lane;
  route.handler = std::move(handler);
  routes_.push_back(std::move(route));
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  const std::vector<std::string_view> parts = Split(path);
  Match match;
  for (const Route& route : routes_) {
    if (route.segments.size() != parts.size()) continue;
    Params params;
    bool fits = true;
    for (size_t i = 0; i < parts.size() && fits; ++i) {
      if (IsPlaceholder(route.segments[i])) {
        fits = !parts[i].empty();
        params.push_back(http::PercentDecode(parts[i]));
      } else {
        fits = route.segments[i] == http::PercentDecode(parts[i]);
      }
    }
    if (!fits) continue;
    if (route.method == method) {
      match.outcome = Match::Outcome::kFound;
      match.route = &route;
      match.params = std::move(params);
      return match;
    }
    match.outcome = Match::Outcome::kWrongMethod;
    if (match.allow.find(route.method) == std::string::npos)
      match.allow += (match.allow.empty() ? "" : ", ") + route.method;
  }
  return match;
}

}  // namespace slotd
