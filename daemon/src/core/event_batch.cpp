#include "core/event_batch.hpp"

#include "core/utf8.hpp"

namespace bgexec::core {

std::string sse_event(const nlohmann::json& ev) {
  std::string out = "id: " + ev.at("seq").dump() + "\n";
  out += "event: " + ev.at("kind").get<std::string>() + "\n";
  out += "data: " + dump(ev) + "\n\n";
  return out;
}

EventBatch render_event_batch(nlohmann::json rows, std::int64_t cursor) {
  EventBatch b;
  for (auto& ev : rows) {
    b.fetched = ev.at("fetched").get<std::int64_t>();
    ev.erase("fetched");
    auto seq = ev.at("seq").get<std::int64_t>();
    if (seq <= cursor) continue;  // never twice
    b.text += sse_event(ev);
    cursor = b.last_seq = seq;
    b.last_kind = ev.at("kind").get<std::string>();
    b.last_created = ev.at("created_at").get<std::string>();
  }
  b.kept = static_cast<std::int64_t>(rows.size());
  return b;
}

}  // namespace bgexec::core
