#pragma once
// A batch of a job's events rendered as Server-Sent Events text, once for
// every stream that reads it (the gateway's event streams share a fetch:
// http/gateway.hpp, SharedFetch).

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace bgexec::core {

// One event as SSE: `id:` its seq, `event:` its kind, `data:` the row's JSON.
std::string sse_event(const nlohmann::json& ev);

// What a stream needs of one fetch (events_page_sql's rows): the text to
// send, where its cursor moves, and the sizes that say whether more follow.
struct EventBatch {
  std::string text;                         // the SSE text of the events after the cursor
  std::int64_t last_seq = 0;                // seq of the last event in text; 0 when text is empty
  std::string last_kind;                    // its kind
  std::optional<std::string> last_created;  // its created_at
  std::int64_t fetched = 0;                 // rows bgexec.events() returned (more than kept: cut by size)
  std::int64_t kept = 0;                    // rows of the page
};

// Renders the rows of events_page_sql (pg::Result::to_json(true)) after
// `cursor`: each event whose seq is past it, in the rows' order, without
// the page's `fetched` column.  Streams at the same cursor reading the same
// rows get the same batch, so it is rendered once for them all.
EventBatch render_event_batch(nlohmann::json rows, std::int64_t cursor);

}  // namespace bgexec::core
