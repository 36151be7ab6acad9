// stdout of the commands that print and exit (see output.hpp).
#include "output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

namespace bgexec::core {

OutBuf::int_type OutBuf::overflow(int_type c) {
  if (sync() != 0) return traits_type::eof();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int OutBuf::sync() {
  if (err_) return -1;
  for (const char* p = pbase(); p < pptr();) {
    const ssize_t n = ::write(STDOUT_FILENO, p, static_cast<std::size_t>(pptr() - p));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err_ = n < 0 ? errno : EIO;
      return -1;
    }
    p += n;
  }
  setp(buf_, buf_ + sizeof buf_);
  return 0;
}

OutputError::OutputError(int e) : std::runtime_error(std::strerror(e)), err(e) {}

void check_output() {
  std::cout.flush();
  if (std::cout.good()) return;
  auto* out = dynamic_cast<OutBuf*>(std::cout.rdbuf());
  throw OutputError(out && out->error() ? out->error() : EIO);
}

int output_failed(const std::string& who, const OutputError& e) {
  if (e.err == EPIPE) return exit_output_closed;
  std::cerr << who << ": cannot write output: " << e.what();
  if (e.submitted) std::cerr << " (job " << *e.submitted << " was submitted)";
  std::cerr << "\n";
  return exit_output_error;
}

int print(const std::string& who, std::string_view text, int code) {
  std::cout.flush();  // what went before, in std::cout's own buffer
  OutBuf out;
  std::streambuf* const before = std::cout.rdbuf(&out);
  std::cout << text;
  int rc = code;
  try {
    check_output();
  } catch (const OutputError& e) {
    rc = output_failed(who, e);
  }
  std::cout.rdbuf(before);  // clears the stream's state too
  return rc;
}

}  // namespace bgexec::core
