// Value's constructors and accessors (value.h).
#include "flight_recorder/value.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace gpudiag::fr {

namespace {
const std::vector<Value> kNoItems;
}  // namespace

static_assert(sizeof(Value) == 32, "a dump holds millions of Values: keep one at 32 bytes");

Value Value::boolean(bool v) {
  Value x;
  x.kind = Kind::boolean;
  x.b = v;
  return x;
}

Value Value::integer(std::int64_t v) {
  Value x;
  x.kind = Kind::integer;
  x.i = v;
  return x;
}

Value Value::real(double v) {
  Value x;
  x.kind = Kind::real;
  x.d = v;
  return x;
}

Value Value::text(std::string_view v) {
  Value x;
  x.kind = Kind::text;
  if (v.empty()) return x;
  // One allocation: the length, then the bytes (a std::string behind a shared_ptr took two;
  // a dump can hold millions of short strs).
  const std::uint64_t n = v.size();
  auto block = std::make_shared_for_overwrite<char[]>(sizeof n + v.size());
  std::memcpy(block.get(), &n, sizeof n);
  std::memcpy(block.get() + sizeof n, v.data(), v.size());
  x.ref_ = std::move(block);
  return x;
}

Value Value::bytes(std::string_view v) {
  Value x = text(v);
  x.kind = Kind::bytes;
  return x;
}

Value Value::container(Kind k) {
  Value x;
  x.kind = k;
  x.ref_ = std::make_shared<Container>();
  return x;
}

Container* Value::box() const {
  return is_container() ? static_cast<Container*>(ref_.get()) : nullptr;
}

std::string_view Value::str() const {
  if ((kind != Kind::text && kind != Kind::bytes) || !ref_) return {};
  const char* block = static_cast<const char*>(ref_.get());
  std::uint64_t n = 0;
  std::memcpy(&n, block, sizeof n);
  return {block + sizeof n, static_cast<std::size_t>(n)};
}

const std::vector<Value>& Value::items() const {
  const Container* c = box();
  return c ? c->items : kNoItems;
}

const Value* Value::get(std::string_view key) const {
  const Container* c = box();
  if (kind != Kind::dict || !c) return nullptr;
  const auto& v = c->items;
  for (std::size_t n = v.size() / 2; n-- > 0;)
    if (v[2 * n].kind == Kind::text && v[2 * n].str() == key) return &v[2 * n + 1];
  return nullptr;
}

std::uint32_t Value::height() const {
  const Container* c = box();
  return c ? c->height : 0;
}

std::uint64_t Value::weight() const {
  const Container* c = box();
  return c ? c->weight : 1;
}

const char* Value::type_name() const {
  switch (kind) {
    case Kind::none:
      return "None";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::real:
      return "float";
    case Kind::text:
      return "str";
    case Kind::bytes:
      return "bytes";
    case Kind::list:
      return "list";
    case Kind::tuple:
      return "tuple";
    case Kind::dict:
      return "dict";
  }
  return "?";
}

void Budget::charge(std::uint64_t n) {
  charged_ = n > limits_.max_values - std::min(charged_, limits_.max_values)
                 ? limits_.max_values + 1
                 : charged_ + n;
  if (charged_ > limits_.max_values)
    throw FormatError("more than " + std::to_string(limits_.max_values) +
                      " values (counting each reference to a shared one): the limit of one dump");
}

void Budget::append(Value& parent, Value child) {
  Container& c = *parent.box();
  if (c.shared)
    throw FormatError(
        "a container changed after it was referenced again (a structure that "
        "contains itself); torch never writes one");
  const std::uint32_t h = child.height() + 1;
  if (h > limits_.max_depth)
    throw FormatError("containers nested deeper than " + std::to_string(limits_.max_depth) +
                      " levels: the limit of one dump");
  c.height = std::max(c.height, h);
  const std::uint64_t w = child.weight();
  c.weight = w > limits_.max_values - std::min(c.weight, limits_.max_values)
                 ? limits_.max_values + 1
                 : c.weight + w;
  c.items.push_back(std::move(child));
}

}  // namespace gpudiag::fr
