// core::render_event_batch: the SSE text the gateway renders once per shared
// fetch, and the cursor, kind and sizes each stream at that cursor takes from it.
#include "core/event_batch.hpp"

#include <gtest/gtest.h>

using bgexec::core::render_event_batch;
using nlohmann::json;

namespace {

json row(std::int64_t seq, const std::string& kind, std::int64_t fetched, json data = json::object()) {
  json r = json::object();
  r["job_id"] = 7;
  r["seq"] = seq;
  r["kind"] = kind;
  r["data"] = std::move(data);
  r["created_at"] = "2026-12-07T09:00:0" + std::to_string(seq) + ".000000Z";
  r["fetched"] = fetched;
  return r;
}

}  // namespace

TEST(EventBatch, RendersEachEventAfterTheCursorInOrder) {
  json rows = json::array({row(3, "log", 2, json{{"line", "a"}}), row(4, "completed", 2)});
  auto b = render_event_batch(rows, 2);
  EXPECT_EQ(b.text,
            "id: 3\nevent: log\ndata: {\"created_at\":\"2026-12-07T09:00:03.000000Z\",\"data\":{\"line\":\"a\"},"
            "\"job_id\":7,\"kind\":\"log\",\"seq\":3}\n\n"
            "id: 4\nevent: completed\ndata: {\"created_at\":\"2026-12-07T09:00:04.000000Z\",\"data\":{},"
            "\"job_id\":7,\"kind\":\"completed\",\"seq\":4}\n\n");
  EXPECT_EQ(b.last_seq, 4);
  EXPECT_EQ(b.last_kind, "completed");
  EXPECT_EQ(b.last_created, "2026-12-07T09:00:04.000000Z");
  EXPECT_EQ(b.fetched, 2);
  EXPECT_EQ(b.kept, 2);
}

// The `fetched` column is the page's, not the event's: it is never sent.
TEST(EventBatch, DropsTheFetchedColumn) {
  auto b = render_event_batch(json::array({row(1, "started", 1)}), 0);
  EXPECT_EQ(b.text.find("fetched"), std::string::npos);
}

// Never twice: an event at or before the cursor is skipped, but counted in
// the page (kept), which says whether more follow.
TEST(EventBatch, SkipsEventsAtOrBeforeTheCursor) {
  auto b = render_event_batch(json::array({row(5, "log", 3), row(6, "log", 3), row(7, "log", 3)}), 6);
  EXPECT_EQ(b.text.rfind("id: 7\n", 0), 0u);
  EXPECT_EQ(b.text.find("id: 6\n"), std::string::npos);
  EXPECT_EQ(b.last_seq, 7);
  EXPECT_EQ(b.kept, 3);
}

// A page cut by size: fetched > kept.
TEST(EventBatch, KeepsThePageSizes) {
  auto b = render_event_batch(json::array({row(1, "log", 40)}), 0);
  EXPECT_EQ(b.fetched, 40);
  EXPECT_EQ(b.kept, 1);
}

// Nothing after the cursor: no text, no last event (the stream's cursor,
// kind and created_at stay as they were).
TEST(EventBatch, EmptyPage) {
  auto b = render_event_batch(json::array(), 9);
  EXPECT_TRUE(b.text.empty());
  EXPECT_EQ(b.last_seq, 0);
  EXPECT_FALSE(b.last_created.has_value());
  EXPECT_EQ(b.fetched, 0);
  EXPECT_EQ(b.kept, 0);
  b = render_event_batch(json::array({row(9, "log", 1)}), 9);
  EXPECT_TRUE(b.text.empty());
  EXPECT_EQ(b.kept, 1);
}
