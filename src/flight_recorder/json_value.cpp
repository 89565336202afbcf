// decode_json (json_value.h): an nlohmann::json SAX handler that builds Values.
#include "flight_recorder/json_value.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpudiag::fr {

namespace {

class Builder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit Builder(const Limits& limits) : budget_(limits) {}

  bool null() override { return add(Value::none()); }
  bool boolean(bool v) override { return add(Value::boolean(v)); }
  bool number_integer(number_integer_t v) override { return add(Value::integer(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v <= static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max()))
      return add(Value::integer(static_cast<std::int64_t>(v)));
    return add(Value::real(static_cast<double>(v)));
  }
  bool number_float(number_float_t v, const string_t&) override { return add(Value::real(v)); }
  bool string(string_t& v) override { return add(Value::text(v)); }
  bool binary(binary_t&) override { return fail("binary data in JSON"); }
  bool start_object(std::size_t) override { return open(Value::Kind::dict); }
  bool key(string_t& v) override { return add(Value::text(v)); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Value::Kind::list); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // The input ended inside the document: cut short rather than malformed.
    truncated_ = std::string(e.what()).find("unexpected end of input") != std::string::npos;
    return fail(std::string(truncated_ ? "truncated: " : "not valid JSON: ") + e.what());
  }

  Value result() {
    if (!error_.empty()) throw FormatError(error_, truncated_);
    if (!done_) throw FormatError("truncated: the JSON document ends early", true);
    return std::move(root_);
  }

 private:
  bool fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  bool add(Value v) {
    try {
      budget_.charge(1);
      if (open_.empty()) {
        root_ = std::move(v);
        done_ = true;
      } else {
        budget_.append(open_.back(), std::move(v));
      }
      return true;
    } catch (const FormatError& e) {
      return fail(e.what());
    }
  }
  bool open(Value::Kind kind) {
    if (open_.size() >= budget_.limits().max_depth)
      return fail("containers nested deeper than " + std::to_string(budget_.limits().max_depth) +
                  " levels: the limit of one dump");
    open_.push_back(Value::container(kind));
    return true;
  }
  bool close() {
    Value v = std::move(open_.back());
    open_.pop_back();
    return add(std::move(v));
  }

  Budget budget_;
  std::vector<Value> open_;
  Value root_;
  bool done_ = false;
  bool truncated_ = false;
  std::string error_;
};

}  // namespace

Value decode_json(std::string_view data, const Limits& limits) {
  Builder b(limits);
  nlohmann::json::sax_parse(data.begin(), data.end(), &b, nlohmann::json::input_format_t::json,
                            true);
  return b.result();
}

}  // namespace gpudiag::fr
