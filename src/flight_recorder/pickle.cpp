// decode_pickle (pickle.h): one pass over the opcodes with an explicit value stack, a stack of
// MARK positions and a memo, as Python's Unpickler keeps them (Lib/pickle.py, _Unpickler's
// load_* methods, define what each opcode does); only the plain-value opcodes are implemented.
#include "flight_recorder/pickle.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpudiag::fr {

namespace {

std::string hex_byte(unsigned char c) {
  static const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

/// The opcodes that make Python objects: refused by name.
const char* object_opcode(unsigned char op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
  }
  return nullptr;
}

/// Opcodes that are plain pickle but never in a dump: refused with what they are.
const char* unread_opcode(unsigned char op) {
  switch (op) {
    case 0x8f:
    case 0x90:
    case 0x91:
      return "a set (EMPTY_SET, ADDITEMS, FROZENSET)";
    case 0x97:
    case 0x98:
      return "an out-of-band buffer (NEXT_BUFFER, READONLY_BUFFER)";
    case '2':
      return "DUP";
    case 'I':
    case 'L':
    case 'F':
    case 'S':
    case 'V':
      return "a text opcode of protocol 0 (INT, LONG, FLOAT, STRING, UNICODE)";
  }
  return nullptr;
}

class Decoder {
 public:
  Decoder(std::string_view data, const Limits& limits) : d_(data), budget_(limits) {}

  Value run(int* protocol);

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw FormatError(why + " (opcode at byte " + std::to_string(op_at_) + ")");
  }
  [[noreturn]] void truncated(std::uint64_t wanted) const {
    const std::string need = "the opcode at byte " + std::to_string(op_at_) + " needs " +
                             std::to_string(wanted) + " more bytes, the file has " +
                             std::to_string(d_.size() - pos_) + " left";
    // More than any file gpudiag reads cannot be a file cut short: a corrupt length field.
    if (wanted > budget_.limits().max_file_bytes)
      throw FormatError("corrupt: " + need + ", more than any dump can hold");
    throw FormatError("truncated: " + need + " (a rank killed while writing?)", true);
  }
  std::string_view take(std::uint64_t n) {
    if (n > d_.size() - pos_) truncated(n);
    auto s = d_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::uint64_t le(int n) {  // an unsigned little-endian field of n bytes
    auto s = take(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(s[k]);
    return v;
  }
  std::uint64_t be8() {  // BINFLOAT's big-endian double
    auto s = take(8);
    std::uint64_t v = 0;
    for (char ch : s) v = (v << 8) | static_cast<unsigned char>(ch);
    return v;
  }
  std::string_view line() {  // a text argument up to '\n' (GLOBAL's names, PUT and GET)
    auto end = d_.find('\n', pos_);
    if (end == std::string_view::npos) truncated(1);  // no end of line before the end of the file
    auto s = d_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  void push(Value v) {
    budget_.charge(1);
    stack_.push_back(std::move(v));
  }
  Value pop() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::size_t pop_mark() {  // removes the last MARK; the values above it start at the index
    if (marks_.empty()) fail("no MARK to close");
    const std::size_t at = marks_.back();
    marks_.pop_back();
    return at;
  }
  Value& top() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    return stack_.back();
  }

  void integer(std::uint64_t nbytes) {
    if (nbytes > 8) fail("an integer wider than 64 bits");
    auto s = take(nbytes);
    std::uint64_t v = 0;
    for (std::size_t k = s.size(); k-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[k]);
    if (nbytes > 0 && nbytes < 8 && (static_cast<unsigned char>(s.back()) & 0x80))
      v |= ~std::uint64_t{0} << (8 * nbytes);  // sign-extend
    push(Value::integer(static_cast<std::int64_t>(v)));
  }
  void text(std::uint64_t n, bool bytes) {
    auto s = take(n);
    push(bytes ? Value::bytes(s) : Value::text(s));
  }
  /// Moves the stack's values from index `from` up into `target` (a list, tuple or dict),
  /// checked against `want` (a list or dict; none: a new container), and drops them from the
  /// stack. They go straight from the stack into the container, never through a copy.
  void add_items(Value& target, std::size_t from, Value::Kind want = Value::Kind::none) {
    const std::size_t n = stack_.size() - from;
    if (want != Value::Kind::none && target.kind != want)
      fail(std::string("adds items to a ") + target.type_name() + ", not a " +
           (want == Value::Kind::list ? "list" : "dict"));
    if (want == Value::Kind::dict) {
      if (n % 2) fail("a dict item without its value");
      for (std::size_t k = from; k < stack_.size(); k += 2)
        if (stack_[k].kind == Value::Kind::list || stack_[k].kind == Value::Kind::dict)
          fail(std::string("a dict key that is a ") + stack_[k].type_name() + " (unhashable)");
    }
    auto& items = target.box()->items;
    if (items.size() + n > items.capacity())  // exact for one batch, doubling for many
      items.reserve(std::max(items.size() + n, 2 * items.capacity()));
    for (std::size_t k = from; k < stack_.size(); ++k) budget_.append(target, std::move(stack_[k]));
    stack_.resize(from);
  }
  void make(Value::Kind kind, std::size_t from) {
    Value v = Value::container(kind);
    add_items(v, from, kind == Value::Kind::dict ? kind : Value::Kind::none);
    push(std::move(v));
  }
  void memo_put(std::uint64_t key) {
    const Value& v = top();
    auto [it, added] = memo_.try_emplace(key);
    if (added) budget_.charge(1);  // a new slot holds a value as a list's item does
    it->second = v;
  }
  void memo_get(std::uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("refers to memo slot " + std::to_string(key) + ", never stored");
    Value v = it->second;
    if (Container* c = v.box()) c->shared = true;
    budget_.charge(v.weight() > 1 ? v.weight() - 1 : 0);  // push() charges the first
    push(std::move(v));
  }
  std::uint64_t decimal(std::string_view s) {
    std::uint64_t v = 0;
    if (s.empty() || s.size() > 18) fail("a memo slot that is not a number");
    for (char ch : s) {
      if (ch < '0' || ch > '9') fail("a memo slot that is not a number");
      v = v * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    return v;
  }
  [[noreturn]] void refuse_object(unsigned char op) {
    std::string what = object_opcode(op);
    if (op == 'c' || op == 'i') {  // GLOBAL and INST name a module and an attribute
      auto module = line();
      auto name = line();
      auto cut = [](std::string_view s) {
        return std::string(s.substr(0, 120)) + (s.size() > 120 ? "..." : "");
      };
      what += " " + cut(module) + "." + cut(name);
    }
    throw FormatError("it loads a Python object (" + what + " at byte " + std::to_string(op_at_) +
                      "); a flight-recorder dump holds plain values only, and nothing in this "
                      "file was run");
  }

  void proto() {
    const auto v = static_cast<int>(le(1));
    if (op_at_ != 0) fail("a second PROTO");
    if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + ", not 2 to 5");
    protocol_ = v;
  }
  void small_tuple(std::size_t n) {
    if (stack_.size() < floor() + n) fail("the stack is empty");
    make(Value::Kind::tuple, stack_.size() - n);
  }
  // APPEND, SETITEM: the top one or two values into the value below them.
  void append_top(std::size_t n, Value::Kind want) {
    if (stack_.size() < floor() + n) fail("the stack is empty");
    add_items(below(stack_.size() - n), stack_.size() - n, want);
  }
  void append_marked(Value::Kind want) {  // APPENDS, SETITEMS: into the value below the MARK
    const std::size_t from = pop_mark();
    add_items(below(from), from, want);
  }
  Value& below(std::size_t from) {  // the value under stack index `from`, above any MARK
    if (from <= floor()) fail("the stack is empty");
    return stack_[from - 1];
  }

  std::string_view d_;
  std::size_t pos_ = 0, op_at_ = 0;
  Budget budget_;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value> memo_;
  int protocol_ = 0;
};

Value Decoder::run(int* protocol) {
  if (d_.empty()) throw FormatError("empty");
  if (static_cast<unsigned char>(d_[0]) != 0x80)
    throw FormatError("not a pickle of protocol 2 to 5: it starts with byte " +
                      hex_byte(static_cast<unsigned char>(d_[0])) + ", not PROTO (0x80)");
  while (pos_ < d_.size()) {
    op_at_ = pos_;
    const auto op = static_cast<unsigned char>(d_[pos_++]);
    if (object_opcode(op)) refuse_object(op);
    if (const char* what = unread_opcode(op))
      fail(std::string("holds ") + what + ", which no flight-recorder writer uses");
    // One opcode a line, as a table (clang-format would spread each over three).
    // clang-format off
    switch (op) {
      case 0x80: proto(); break;                          // PROTO
      case 0x95: {                                        // FRAME: a length for buffering only
        const auto n = le(8);
        if (n > d_.size() - pos_) truncated(n);
        break;
      }
      case '.':                                           // STOP
        if (!marks_.empty() || stack_.size() != 1)
          fail("STOP with " + std::to_string(stack_.size()) + " values and " +
               std::to_string(marks_.size()) + " MARKs on the stack, not one value");
        if (protocol) *protocol = protocol_;
        return std::move(stack_.back());
      case '(': budget_.charge(1); marks_.push_back(stack_.size()); break;  // MARK
      case '0':                                           // POP: the top value, or a MARK on top
        if (!marks_.empty() && marks_.back() == stack_.size()) marks_.pop_back();
        else pop();
        break;
      case '1': stack_.resize(pop_mark()); break;         // POP_MARK
      case 'N': push(Value::none()); break;
      case 0x88: push(Value::boolean(true)); break;       // NEWTRUE
      case 0x89: push(Value::boolean(false)); break;      // NEWFALSE
      case 'J': push(Value::integer(static_cast<std::int32_t>(le(4)))); break;  // BININT
      case 'K': push(Value::integer(static_cast<std::int64_t>(le(1)))); break;  // BININT1
      case 'M': push(Value::integer(static_cast<std::int64_t>(le(2)))); break;  // BININT2
      case 0x8a: integer(le(1)); break;                   // LONG1
      case 0x8b: integer(le(4)); break;                   // LONG4
      case 'G': push(Value::real(std::bit_cast<double>(be8()))); break;  // BINFLOAT
      case 'X': text(le(4), false); break;                // BINUNICODE
      case 0x8c: text(le(1), false); break;               // SHORT_BINUNICODE
      case 0x8d: text(le(8), false); break;               // BINUNICODE8
      case 'U': text(le(1), false); break;                // SHORT_BINSTRING (a str in Python 3)
      case 'T': text(le(4), false); break;                // BINSTRING
      case 'B': text(le(4), true); break;                 // BINBYTES
      case 'C': text(le(1), true); break;                 // SHORT_BINBYTES
      case 0x8e: text(le(8), true); break;                // BINBYTES8
      case 0x96: text(le(8), true); break;                // BYTEARRAY8
      case ']': push(Value::container(Value::Kind::list)); break;   // EMPTY_LIST
      case '}': push(Value::container(Value::Kind::dict)); break;   // EMPTY_DICT
      case ')': push(Value::container(Value::Kind::tuple)); break;  // EMPTY_TUPLE
      case 'l': make(Value::Kind::list, pop_mark()); break;         // LIST
      case 't': make(Value::Kind::tuple, pop_mark()); break;        // TUPLE
      case 'd': make(Value::Kind::dict, pop_mark()); break;         // DICT
      case 0x85: case 0x86: case 0x87: small_tuple(op - 0x84); break;  // TUPLE1, 2, 3
      case 'a': append_top(1, Value::Kind::list); break;  // APPEND
      case 'e': append_marked(Value::Kind::list); break;  // APPENDS
      case 's': append_top(2, Value::Kind::dict); break;  // SETITEM
      case 'u': append_marked(Value::Kind::dict); break;  // SETITEMS
      case 'q': memo_put(le(1)); break;                   // BINPUT
      case 'r': memo_put(le(4)); break;                   // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); break;           // MEMOIZE
      case 'p': memo_put(decimal(line())); break;         // PUT
      case 'h': memo_get(le(1)); break;                   // BINGET
      case 'j': memo_get(le(4)); break;                   // LONG_BINGET
      case 'g': memo_get(decimal(line())); break;         // GET
      default: fail("unknown opcode " + hex_byte(op));
    }
    // clang-format on
  }
  throw FormatError("truncated: the file ends at byte " + std::to_string(d_.size()) +
                        " before the pickle's STOP (a rank killed while writing?)",
                    true);
}

}  // namespace

Value decode_pickle(std::string_view data, const Limits& limits, int* protocol) {
  return Decoder(data, limits).run(protocol);
}

}  // namespace gpudiag::fr
