#pragma once
// `bgexec serve`: the HTTP gateway (REST API, Server-Sent Events, metrics, dashboard).

#include <string>
#include <vector>

namespace bgexec::http {

// Parses the serve flags (after the subcommand) and runs the gateway until
// SIGINT/SIGTERM.  Returns the process exit code (2 on usage errors).
int run_serve(const std::vector<std::string>& args);

}  // namespace bgexec::http
