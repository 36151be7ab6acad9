// LISTEN fan-out (see notifier.hpp).
#include "http/notifier.hpp"

#include "core/backoff.hpp"
#include "core/logfmt.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <charconv>
#include <limits>

namespace bgexec::http {

Subscription::Subscription(Notifier& n, std::int64_t job_id)
    : n_(n), job_id_(job_id), timer_(n.ex_, asio::steady_timer::time_point::max()) {
  auto& l = n_.subs_[job_id_];
  pos_ = l.insert(l.end(), this);
  ++n_.count_;
}

Subscription::~Subscription() {
  auto it = n_.subs_.find(job_id_);
  if (it != n_.subs_.end()) {
    it->second.erase(pos_);
    if (it->second.empty()) n_.subs_.erase(it);
  }
  --n_.count_;
}

asio::awaitable<void> Subscription::wait(std::chrono::steady_clock::duration d) {
  timer_.expires_after(d);
  co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
}

void Subscription::wake(std::int64_t seq) {
  seen_ = std::max(seen_, seq);
  timer_.cancel();
}

Notifier::Notifier(asio::any_io_executor ex, std::string conninfo)
    : ex_(ex), conn_(ex, std::move(conninfo), "http-listen") {}

void Notifier::set_listening(bool on, bool refused) {
  listening_ = on;
  refused_ = refused;
  if (!on && !refused) return;
  for (auto& t : listen_waiters_) t->cancel();
  listen_waiters_.clear();
}

// A stream waits for LISTEN so that no event committed after its replay
// goes unannounced.  On a hot standby LISTEN is refused (25006) at every
// try: each stream waited its whole 5 s before its first byte, and each
// EventSource reconnect again; it polls there, as bgexec tail does.
asio::awaitable<bool> Notifier::wait_listening(std::chrono::steady_clock::duration d) {
  if (listening_) co_return true;
  if (refused_) co_return false;
  auto t = std::make_shared<asio::steady_timer>(ex_, d);
  listen_waiters_.push_back(t);
  co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
  listen_waiters_.remove(t);  // still there when it timed out (set_listening clears the list)
  co_return listening_;
}

// Wakes the streams of the job named in a "job_id:seq" payload.
void Notifier::dispatch(const std::string& payload) {
  auto colon = payload.find(':');
  if (colon == std::string::npos) return;
  std::int64_t job = 0, seq = 0;
  const char* b = payload.data();
  if (std::from_chars(b, b + colon, job).ec != std::errc{}) return;
  if (std::from_chars(b + colon + 1, b + payload.size(), seq).ec != std::errc{}) return;
  auto it = subs_.find(job);
  if (it == subs_.end()) return;
  for (auto* s : it->second) s->wake(seq);
}

asio::awaitable<void> Notifier::run() {
  core::Backoff backoff(std::chrono::milliseconds(200), std::chrono::seconds(5));
  for (;;) {
    try {
      co_await conn_.connect();
      co_await conn_.query("LISTEN bgexec_events");
      set_listening(true);
      backoff.reset();
      core::log("info", "listening", {{"channel", "bgexec_events"}});
      // Notifications sent while we were not listening are lost: every
      // stream refetches from its own cursor.
      for (auto& [job, l] : subs_)
        for (auto* s : l) s->wake(std::numeric_limits<std::int64_t>::max());
      for (;;) {
        auto batch = co_await conn_.wait_notifications();
        for (const auto& n : batch)
          if (n.channel == "bgexec_events") dispatch(n.payload);
      }
    } catch (const std::exception& e) {
      const auto* pe = dynamic_cast<const pg::Error*>(&e);
      set_listening(false, pe && pe->sqlstate() == "25006");
      // One line per 10 s, as "database unavailable": on a hot standby
      // (LISTEN is refused during recovery) or a database away for long,
      // every retry fails again.
      static core::LogThrottle throttle(std::chrono::seconds(10));
      if (std::size_t skipped = 0; throttle.allow(&skipped))
        core::log("warn", "listen connection lost", {{"error", e.what()}, {"skipped", std::to_string(skipped)}});
    }
    conn_.close();
    asio::steady_timer t(ex_, backoff.next());
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace bgexec::http
