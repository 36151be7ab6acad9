#pragma once
// What PostgreSQL's numeric, so jsonb, stores of a JSON number.  A document
// holding one it refuses fails whole ("value overflows numeric format",
// SQLSTATE 22003): text from a step's process (its output, a ::progress
// line) is checked before it is written.  Implemented in json_input.cpp,
// beside the rule that writes numbers as numeric does.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace bgexec::core {

// Whether numeric stores the JSON number `number` (JSON's grammar:
// -?int(.frac)?([eE][+-]?digits)?): at most 131072 digits before the point
// and 16383 after, once the exponent is applied.  Tried on PostgreSQL 15:
// 1e131071, 1e-16383 and 0e999999 yes; 1e131072, 1e-16384, 1.5e-16383 and
// 0e-16384 no.
bool numeric_accepts(std::string_view number);

// The first number in `v` numeric refuses, as read (cut to 40 characters
// and "..."); empty when none.  Parsed with Numbers::exact, such a number
// is a raw number of its text (parse_json_input), which is what this looks
// for; a double (nlohmann's 0 for 1e-16384, Numbers::doubles) is not one.
// Walks with its own stack, so any depth is safe.
std::string unstorable_number(const nlohmann::json& v);

// "the number N, out of the range of PostgreSQL's numeric (...)": how an
// error names such a number, after what held it (a step's output, a
// request's field).
inline std::string numeric_refuses(const std::string& number) {
  return "the number " + number +
         ", out of the range of PostgreSQL's numeric (at most 131072 digits before the point and 16383 after)";
}

// "the number N, past a double's range (...)": how an error names a
// number no JSON parser of bgexec reads (nlohmann's refuses it: the worker
// could not read a payload holding one), after what held it.
inline std::string double_refuses(const std::string& number) {
  return "the number " + number + ", past a double's range (at most 1.8e308 either way)";
}

}  // namespace bgexec::core
