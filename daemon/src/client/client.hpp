#pragma once
// Client subcommands: submit, status, tail, stop, resume, retry, queues.

#include "core/output.hpp"

#include <map>
#include <string>
#include <vector>

namespace bgexec::client {

// Exit codes (documented in `bgexec --help`).
// output_error: stdout could not be written (full disk, closed terminal);
// output_closed: its reader is gone (EPIPE), 128 + SIGPIPE as a shell
// reports a process the signal killed.
enum Exit : int {
  ok = 0,
  job_failed = 1,
  usage = 2,
  db_error = 3,
  not_found = 4,
  suspended = 5,
  output_error = core::exit_output_error,
  output_closed = core::exit_output_closed
};

bool is_command(const std::string& cmd);
// Runs one client subcommand; returns the process exit code.
int run(const std::string& cmd, const std::vector<std::string>& args,
        const std::map<std::string, std::string>& env);

}  // namespace bgexec::client
