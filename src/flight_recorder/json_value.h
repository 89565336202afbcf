// The JSON form of a flight-recorder dump (torch's FlightRecorder::dump_json, written by
// _dump_nccl_trace_json) read into the same plain values as a pickle, under the same Limits.
//
// nlohmann/json's SAX parser does the parsing (it keeps its own stack, so deep input cannot
// overflow ours); the handler here builds Values and stops the parse at the first value past
// max_depth or max_values, so no full JSON document is ever held besides the Values. Numbers
// that fit int64 are ints, other numbers floats; strings stay bytes as written (escapes
// decoded); duplicate keys are kept, and Value::get finds the last, as Python's json does.
#pragma once

#include <string_view>

#include "flight_recorder/value.h"

namespace gpudiag::fr {

/// Parses `data` as one JSON document. Throws FormatError with the reason.
Value decode_json(std::string_view data, const Limits& limits);

}  // namespace gpudiag::fr
