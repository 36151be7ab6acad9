#pragma once
// The completer (River's shape): jobs hand it their final outcome, it writes
// them in batches with one bgexec.finish_many() per flush, so one commit (one
// WAL flush) serves many jobs (DESIGN.md §8).  A batch is flushed when
// `batch_max` items are pending, `delay` after its first item arrived, or at
// once when every job in flight is waiting on the completer; one flush at a
// time on the worker's own finish connection (not the control connection, so
// claims and finish batches overlap and their commits can share a WAL flush),
// and items that arrive meanwhile form the next batch.  A job handing its
// outcome here frees its slot (River's shape): the fetcher is woken and may
// claim a replacement while the batch is written; the job keeps its lease (and
// its heartbeats) until its finish is written, and the worker bounds the
// leases it holds to concurrency + max(concurrency, batch) (Worker::free_slots).
// Each item is exactly bgexec.finish(): applied only
// under the job's current lease, so re-sending a batch after a dropped
// connection is safe (an item already applied is refused the second time).

#include "util/event.hpp"
#include "worker/until.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace bgexec::worker {

namespace asio = boost::asio;

class Worker;

// What finish_many said about one item.
struct FinishResult {
  std::optional<std::string> status;  // new job status; nullopt when refused (lease not current)
  bool retried = false;               // the batch was re-sent after a failed attempt
};

class Completer {
 public:
  // Batch size and window: WorkerConfig's finish_batch and finish_delay_s.
  // `may_grow` says whether more items may join the queued batch: a job in
  // flight that is not waiting here yet, or a claim bringing more jobs (the
  // worker's last claim took all it asked for: a backlog); `on_queued` is
  // called when a job hands over its outcome (a slot is free).
  Completer(Worker& w, std::function<bool()> may_grow, std::function<void()> on_queued);

  // The flusher; runs until close() and every queued item is written.
  asio::awaitable<void> run();
  // Flushes what is queued without waiting for the batch window, then stops run().
  asio::awaitable<void> close();

  // The JSON text of one item of finish_many's array: {"body", "job_id",
  // "lease", "outcome"}, compact.  Built by the job off the event loop
  // (Worker::offload): a body may hold a step's 16 MiB of output.  `body`
  // is already masked.
  static std::string item_text(std::int64_t job_id, std::int64_t lease, const std::string& outcome,
                               const nlohmann::json& body);
  // Queues one finish (`item`: item_text's) and waits for its batch.
  // Retries a dropped connection while `until` has not passed (the job's
  // lease expiry as heartbeats renew it, read at each retry; the latest of
  // the batch); throws pg::Error when the batch failed.
  asio::awaitable<FinishResult> finish(std::int64_t job_id, std::int64_t lease, std::string item, Until until);
  // Jobs whose outcome is queued or being written (they hold no slot, only a lease).
  std::size_t waiting() const { return queue_.size() + sending_ + delayed_; }
  // The most items one finish_many carries.
  std::size_t batch_max() const { return batch_max_; }
  // The worker calls this when `may_grow` turns false other than by a job
  // handing over its outcome (its backlog ended), so the batch goes out now.
  void recheck() { wake_.notify(); }

 private:
  struct Pending {
    explicit Pending(boost::asio::any_io_executor ex) : done(ex) {}
    Event done;
    bool ready = false;
    FinishResult result;
    std::exception_ptr error;
  };
  struct Item {
    std::int64_t job_id = 0;
    std::int64_t lease = 0;
    std::string text;  // item_text
    Until until;
    std::shared_ptr<Pending> pending;
  };

  asio::awaitable<void> flush(std::vector<Item> batch);
  asio::awaitable<void> write(std::vector<Item>& batch);
  // Hands an item's result (or error) back to its job.
  void complete(Item& item);
  // An item whose job row another transaction holds (finish_many's 55P03,
  // after its lock_timeout): queued again after a short wait, while its
  // lease lasts.  False when it would not: the item then fails.
  bool retry_later(Item& item);
  // Whether nothing could add an item to the queued batch, so it need not
  // wait for its window.  Under a backlog it does wait: the next claim's
  // jobs join it (at 2 x 16, 0.15 commits per job instead of 0.175,
  // bench/README.md).
  bool all_waiting() const { return !may_grow_(); }

  Worker& w_;
  std::function<bool()> may_grow_;
  std::function<void()> on_queued_;
  std::size_t batch_max_;
  Clock::duration delay_;
  std::deque<Item> queue_;
  Clock::time_point first_at_;  // arrival of the oldest queued item
  std::size_t sending_ = 0;     // items of the flush in progress not yet completed
  std::size_t delayed_ = 0;     // items waiting to be queued again (retry_later)
  Event wake_;
  Event stopped_;
  bool closing_ = false;
  bool stopped_flag_ = false;
};

}  // namespace bgexec::worker
