#pragma once
// SIGHUP as a stop request for the long-running commands (worker, serve).

#include <boost/asio/signal_set.hpp>

#include <signal.h>

namespace bgexec {

// Adds SIGHUP to `signals`, so a closed terminal (or a `kill -HUP`) stops
// the process as SIGTERM does instead of killing it where it stands.  A
// SIGHUP the process inherited as ignored (nohup, a supervisor) stays
// ignored: Asio would install its own handler over SIG_IGN.
inline void add_hangup(boost::asio::signal_set& signals) {
  struct sigaction current {};
  if (::sigaction(SIGHUP, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
  signals.add(SIGHUP);
}

}  // namespace bgexec
