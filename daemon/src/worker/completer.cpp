// The completer: batched finishes (see completer.hpp).
#include "worker/completer.hpp"

#include "core/logfmt.hpp"
#include "core/sqlstate.hpp"
#include "core/utf8.hpp"
#include "worker/worker.hpp"

#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace bgexec::worker {

using nlohmann::json;

Completer::Completer(Worker& w, std::function<bool()> may_grow, std::function<void()> on_queued)
    : w_(w), may_grow_(std::move(may_grow)), on_queued_(std::move(on_queued)),
      batch_max_(static_cast<std::size_t>(w.config().finish_batch)),
      delay_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(w.config().finish_delay_s))),
      wake_(w.executor()), stopped_(w.executor()) {}

std::string Completer::item_text(std::int64_t job_id, std::int64_t lease, const std::string& outcome,
                                 const json& body) {
  // As core::dump writes the object (its keys in order), without copying
  // the body into it.
  std::string text = "{\"body\":" + core::dump(body);
  text += ",\"job_id\":" + std::to_string(job_id) + ",\"lease\":" + std::to_string(lease);
  text += ",\"outcome\":" + core::dump(json(outcome)) + "}";
  return text;
}

asio::awaitable<FinishResult> Completer::finish(std::int64_t job_id, std::int64_t lease, std::string item_json,
                                                Until until) {
  if (stopped_flag_) throw std::logic_error("finish after the completer stopped");
  auto pending = std::make_shared<Pending>(w_.executor());
  Item item;
  item.job_id = job_id;
  item.lease = lease;
  item.text = std::move(item_json);
  item.until = std::move(until);
  item.pending = pending;
  if (queue_.empty()) first_at_ = Clock::now();
  queue_.push_back(std::move(item));
  // The flusher needs waking for the first item (it starts the batch window),
  // when a batch is full or when nothing else can join it; in between it is
  // already waiting on the window.
  if (queue_.size() == 1 || queue_.size() >= batch_max_ || all_waiting()) wake_.notify();
  on_queued_();  // this job's slot is free for a claim
  while (!pending->ready) co_await pending->done.wait();
  if (pending->error) std::rethrow_exception(pending->error);
  co_return pending->result;
}

asio::awaitable<void> Completer::run() {
  for (;;) {
    while (queue_.empty()) {
      if (closing_ && delayed_ == 0) {
        stopped_flag_ = true;
        stopped_.notify();
        co_return;
      }
      co_await wake_.wait();
    }
    // The batch window: until it is full, `delay_` has passed since its first
    // item, no job left could join it, or the worker is draining.
    auto deadline = first_at_ + delay_;
    while (queue_.size() < batch_max_ && !closing_ && !all_waiting() && Clock::now() < deadline)
      co_await wake_.wait_until(deadline);
    std::size_t n = std::min(queue_.size(), batch_max_);
    std::vector<Item> batch;
    batch.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    // What is left (arrived while the batch was full) opens the next window now.
    if (!queue_.empty()) first_at_ = Clock::now();
    sending_ = batch.size();
    co_await flush(std::move(batch));
    sending_ = 0;  // flush completed every item
  }
}

asio::awaitable<void> Completer::close() {
  closing_ = true;
  wake_.notify();
  while (!stopped_flag_) co_await stopped_.wait();
}

asio::awaitable<void> Completer::flush(std::vector<Item> batch) {
  std::exception_ptr error;
  bool isolate = false, locked = false;
  try {
    co_await write(batch);
  } catch (const pg::Error& e) {
    auto cls = e.classify();
    // One bad item must fail only its own job: a batch refused for any other
    // reason than the connection is written again item by item.  So is one
    // that met a job row another transaction holds (55P03: a client's stop()
    // in a transaction it keeps open): the others must not wait for it.
    locked = e.sqlstate() == "55P03";
    isolate = batch.size() > 1 &&
              (locked || (cls != core::ErrorClass::connection && cls != core::ErrorClass::retry));
    if (isolate)
      core::log("warn", "finish batch failed, finishing its items one by one",
                {{"error", e.what()}, {"sqlstate", e.sqlstate()}, {"items", std::to_string(batch.size())}});
    error = std::current_exception();
  } catch (const std::exception&) {
    error = std::current_exception();
  }
  if (isolate) {
    for (auto& item : batch) {
      std::vector<Item> one;
      one.push_back(std::move(item));
      try {
        co_await write(one);
      } catch (const pg::Error& e) {
        if (e.sqlstate() == "55P03" && retry_later(one[0])) continue;
        one[0].pending->error = std::current_exception();
      } catch (const std::exception&) {
        one[0].pending->error = std::current_exception();
      }
      complete(one[0]);
    }
    co_return;
  }
  for (auto& item : batch) {
    if (locked && retry_later(item)) continue;
    if (error) item.pending->error = error;
    complete(item);
  }
}

bool Completer::retry_later(Item& item) {
  constexpr auto pause = std::chrono::milliseconds(200);
  if (Clock::now() + pause >= item.until()) return false;
  if (sending_ > 0) --sending_;
  ++delayed_;
  auto timer = std::make_shared<asio::steady_timer>(w_.executor(), pause);
  timer->async_wait([this, timer, it = std::move(item)](const boost::system::error_code&) mutable {
    --delayed_;
    if (queue_.empty()) first_at_ = Clock::now();
    queue_.push_back(std::move(it));
    wake_.notify();
  });
  return true;
}

void Completer::complete(Item& item) {
  item.pending->ready = true;
  item.pending->done.notify();
  if (sending_ > 0) --sending_;
}

// One finish_many for the batch; fills each item's result.  Throws pg::Error.
asio::awaitable<void> Completer::write(std::vector<Item>& batch) {
  // The array's text, of the items' texts (item_text): an array of the
  // items would copy each body, which may hold a step's 16 MiB of rows
  // (hundreds of MB as nlohmann values).  core::dump never throws on a body
  // holding invalid UTF-8, which would fail the whole batch.
  std::string items = "[";
  for (auto& item : batch) {
    if (items.size() > 1) items += ',';
    items += item.text;
  }
  items += ']';
  // Retried while any item's job still holds its lease, as renewed since
  // (a job given up no longer counts).
  Until until = [&batch] {
    auto latest = Clock::time_point::min();
    for (auto& item : batch) latest = std::max(latest, item.until());
    return latest;
  };
  bool retried = false;
  pg::Params params;
  params.push_back(std::move(items));
  const std::string sql = "SELECT job_id, lease, status FROM bgexec.finish_many($1::jsonb)";
  auto r = co_await w_.fin_exec(sql, params, until, &retried);
  std::map<std::pair<std::int64_t, std::int64_t>, std::optional<std::string>> status;
  for (int i = 0; i < r.rows(); ++i)
    status[{std::stoll(r.get(i, 0).value_or("0")), std::stoll(r.get(i, 1).value_or("0"))}] = r.get(i, 2);
  for (auto& item : batch) {
    auto it = status.find({item.job_id, item.lease});
    if (it != status.end()) item.pending->result.status = it->second;
    item.pending->result.retried = retried;
  }
}

}  // namespace bgexec::worker
