// A pickle decoder that never runs what it reads, for flight-recorder dumps.
//
// torch's C++ writer (torch/csrc/jit/serialization/pickler.cpp, Pickler::protocol and
// pushIValueImpl, called by pickle_str in c10d's TraceUtils.h) writes protocol 2: PROTO 2,
// dicts as EMPTY_DICT MARK ... SETITEMS, lists as EMPTY_LIST MARK ... APPENDS, tuples as
// TUPLE1-3 or MARK ... TUPLE, ints as BININT1/BININT2/BININT/LONG1, floats as BINFLOAT, strs as
// BINUNICODE, and BINPUT/BINGET to write a repeated str or a shared dict once. Python's own
// pickler (the fixtures' generator) adds nothing else for plain values at protocols 2 to 5
// besides FRAME, MEMOIZE and the short and 8-byte forms, which are read too.
//
// What is refused, with the reason and the byte offset, and nothing built from it:
//   - anything that names or builds a Python object: GLOBAL, STACK_GLOBAL, REDUCE, BUILD,
//     INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID (the Python module and name a
//     GLOBAL gives are quoted, so a user sees what the file tried to load);
//   - sets, out-of-band buffers, DUP and the text opcodes of protocols 0 and 1, which neither
//     writer uses for a dump; a file that does not start with PROTO 2 to 5;
//   - integers wider than 64 bits, a length that runs past the end of the file (a truncated
//     file, or a length field of 2^60), a dict key that is a list or dict;
//   - past the Limits of value.h: nesting deeper than max_depth, more than max_values values
//     (a memo reference to a container costs what the container holds, so a file of a few
//     bytes cannot expand into billions of values; each memo slot filled costs one, so a file
//     of MEMOIZE opcodes cannot fill memory with slots either), and a container changed after
//     a second reference to it was taken (the only way a pickle can make a container hold
//     itself).
// Decoding is a loop over the bytes with an explicit stack: no recursion, whatever the input.
#pragma once

#include <string_view>

#include "flight_recorder/value.h"

namespace gpudiag::fr {

/// Decodes one pickle that fills `data` (bytes after its STOP are ignored, as Python's loader
/// ignores them). Throws FormatError saying why it cannot be read. `protocol`, when given,
/// receives the PROTO number.
Value decode_pickle(std::string_view data, const Limits& limits, int* protocol = nullptr);

}  // namespace gpudiag::fr
