#pragma once
// Whether the worker may claim: not while a connection its jobs report back
// on cannot be used (the finish connection, the heartbeat's).  A job claimed
// then runs but cannot be finished: its lease runs out (or is renewed until
// the finish gives up), its result is thrown away, and a retry-safe job is
// claimed again and again until its attempts are spent, never having run
// (invariants 1 and 7).  Pure state: the worker reports each connection's
// failures and successes, logs what a change returns, and counts no free
// slot while the gate is closed (Worker::free_slots).

#include <map>
#include <string>

namespace bgexec::core {

class ClaimGate {
 public:
  // What a report changed, for the one log line it calls for.
  enum class Change {
    none,
    unavailable,  // this connection could be used until now: the gate is closed
    reopened,     // this connection was the last one unavailable: the gate is open
  };
  // The connection `which` ("finish", "heartbeat") cannot be used: its last
  // connect or statement failed as `error` says.  The error is kept (the
  // first one of a stretch).
  Change down(const std::string& which, const std::string& error);
  // The connection `which` worked (a connect or a statement the server answered).
  Change up(const std::string& which);
  bool open() const { return down_.empty(); }
  bool is_down(const std::string& which) const { return down_.count(which) > 0; }

 private:
  std::map<std::string, std::string> down_;  // connection -> the error that took it down
};

}  // namespace bgexec::core
