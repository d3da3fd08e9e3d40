// Internals of <ratelimit/ratelimit.hpp> that need no database: JSON text for
// configs, a reader for the flat JSON object in a PT429 error's DETAIL, and a
// parser for the ISO 8601 timestamps in it. Not part of the public API.
#ifndef RATELIMIT_DETAIL_HPP
#define RATELIMIT_DETAIL_HPP

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace ratelimit {

// A moment on the server's clock, exact to its microsecond.
using TimePoint = std::chrono::time_point<std::chrono::system_clock, std::chrono::microseconds>;

namespace detail {

// Throws std::invalid_argument if `text` holds a NUL byte: PostgreSQL text cannot, and libpq would cut it
// there.
inline void require_no_nul(std::string_view text, const char* what) {
  if (text.find('\0') != std::string_view::npos)
    throw std::invalid_argument(std::string("ratelimit: ") + what + " must not contain a NUL byte");
}

// `value` as a JSON number that reads back as the same double (locale-independent): plain decimals such as
// 60000 or 0.001, exponents only for very large or small magnitudes. Throws std::invalid_argument if it is
// not finite (JSON has no NaN or infinity).
inline std::string json_number(double value, const char* what) {
  if (!std::isfinite(value))
    throw std::invalid_argument(std::string("ratelimit: ") + what + " must be a finite number");
  char buf[400];
  const double magnitude = std::fabs(value);
  const bool plain = magnitude == 0 || (magnitude >= 1e-6 && magnitude < 1e21);
  std::to_chars_result end = plain ? std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed)
                                   : std::to_chars(buf, buf + sizeof buf, value);
  if (end.ec != std::errc()) throw std::invalid_argument(std::string("ratelimit: cannot format ") + what);
  return std::string(buf, end.ptr);
}

// `value` as PostgreSQL float8 input text that reads back as the same double, whatever the C++ locale:
// the shortest round-trip digits, or Infinity, -Infinity, NaN.
inline std::string float8_text(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  char buf[64];
  std::to_chars_result end = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, end.ptr);
}

// `text` as a JSON string literal: quotes, backslashes and control characters escaped, other bytes as they
// are (UTF-8 passes through). Throws std::invalid_argument on a NUL byte.
inline std::string json_string(std::string_view text) {
  require_no_nul(text, "a JSON string");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out.push_back(kHex[(static_cast<unsigned char>(c) >> 4) & 0xf]);
          out.push_back(kHex[static_cast<unsigned char>(c) & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

// One member value of a flat JSON object.
struct JsonScalar {
  enum class Type { kNull, kString, kNumber, kBool, kNested };
  Type type = Type::kNull;
  std::string text;   // kString: the unescaped UTF-8 bytes
  double number = 0;  // kNumber (NaN, Infinity and -Infinity included, as PostgreSQL's float8out writes them)
  bool boolean = false;
};

// A strict reader of one JSON object whose members are scalars (nested values are skipped).
class FlatJsonReader {
 public:
  explicit FlatJsonReader(std::string_view text) : text_(text) {}

  // Reads the object starting at `pos`; on success stores its members (in order) and the position after it.
  bool read_object(std::size_t pos, std::vector<std::pair<std::string, JsonScalar>>* members,
                   std::size_t* end) {
    pos_ = pos;
    members->clear();
    if (!consume('{')) return false;
    skip_space();
    if (consume('}')) return finish(end);
    for (;;) {
      std::string name;
      JsonScalar value;
      skip_space();
      if (!read_string(&name)) return false;
      skip_space();
      if (!consume(':')) return false;
      skip_space();
      if (!read_value(&value, 0)) return false;
      members->emplace_back(std::move(name), std::move(value));
      skip_space();
      if (consume('}')) return finish(end);
      if (!consume(',')) return false;
    }
  }

 private:
  static constexpr int kMaxDepth = 32;

  bool finish(std::size_t* end) {
    *end = pos_;
    return true;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  bool consume(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void skip_space() {
    while (!at_end() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool read_hex4(unsigned* out) {
    if (pos_ + 4 > text_.size()) return false;
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      int digit = hex_digit(text_[pos_++]);
      if (digit < 0) return false;
      value = value * 16 + static_cast<unsigned>(digit);
    }
    *out = value;
    return true;
  }

  static void append_utf8(unsigned cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // A \uXXXX escape (the "\u" already read), a surrogate pair as one code point. No NUL, no lone surrogate.
  bool read_unicode_escape(std::string* out) {
    unsigned cp = 0;
    if (!read_hex4(&cp) || cp == 0) return false;
    if (cp >= 0xdc00 && cp <= 0xdfff) return false;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      unsigned low = 0;
      if (!consume('\\') || !consume('u') || !read_hex4(&low) || low < 0xdc00 || low > 0xdfff) return false;
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    append_utf8(cp, out);
    return true;
  }

  bool read_string(std::string* out) {
    if (!consume('"')) return false;
    for (;;) {
      if (at_end()) return false;
      char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (at_end()) return false;
      switch (text_[pos_++]) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u':
          if (!read_unicode_escape(out)) return false;
          break;
        default:
          return false;
      }
    }
  }

  // A JSON number, or NaN / Infinity / -Infinity.
  bool read_number(double* out) {
    std::size_t start = pos_;
    while (!at_end()) {
      char c = text_[pos_];
      bool number_char = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
      bool word_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      if (!number_char && !word_char) break;
      ++pos_;
    }
    std::string_view token = text_.substr(start, pos_ - start);
    if (token.empty()) return false;
    if (token == "NaN" || token == "Infinity" || token == "-Infinity") {
      *out = token == "NaN" ? std::nan("") : (token[0] == '-' ? -HUGE_VAL : HUGE_VAL);
      return true;
    }
    const char* first = token.data();
    const char* last = token.data() + token.size();
    if (*first != '-' && (*first < '0' || *first > '9')) return false;  // from_chars would take "inf"
    std::from_chars_result result = std::from_chars(first, last, *out);
    return result.ec == std::errc() && result.ptr == last;
  }

  // Skips a nested array or object (strings inside handled), up to kMaxDepth levels.
  bool skip_nested(int depth) {
    if (depth > kMaxDepth) return false;
    char open = text_[pos_++];
    char close = open == '{' ? '}' : ']';
    skip_space();
    if (consume(close)) return true;
    for (;;) {
      skip_space();
      JsonScalar ignored;
      if (open == '{') {
        std::string name;
        if (!read_string(&name)) return false;
        skip_space();
        if (!consume(':')) return false;
        skip_space();
      }
      if (!read_value(&ignored, depth + 1)) return false;
      skip_space();
      if (consume(close)) return true;
      if (!consume(',')) return false;
    }
  }

  bool read_value(JsonScalar* out, int depth) {
    if (at_end()) return false;
    char c = text_[pos_];
    if (c == '"') {
      out->type = JsonScalar::Type::kString;
      return read_string(&out->text);
    }
    if (c == '{' || c == '[') {
      out->type = JsonScalar::Type::kNested;
      return skip_nested(depth);
    }
    if (consume_word("null")) {
      out->type = JsonScalar::Type::kNull;
      return true;
    }
    if (consume_word("true") || consume_word("false")) {
      out->type = JsonScalar::Type::kBool;
      out->boolean = text_[pos_ - 4] == 't';  // "true" or "false": 4 bytes back is 't' or 'a'
      return true;
    }
    out->type = JsonScalar::Type::kNumber;
    return read_number(&out->number);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// Parses the ISO 8601 form PostgreSQL writes a timestamptz as in JSON
// ("2024-05-01T12:00:00.123456+02:00"; also Z, +HH, +HH:MM:SS, a space instead of T), years 0000-200000.
// nullopt for anything else (infinity, BC dates, out-of-range fields).
inline std::optional<TimePoint> parse_iso_timestamp(std::string_view text) {
  std::size_t pos = 0;
  auto digits = [&](std::size_t min, std::size_t max, std::int64_t* out) {
    std::size_t start = pos;
    std::int64_t value = 0;
    while (pos < text.size() && pos - start < max && text[pos] >= '0' && text[pos] <= '9')
      value = value * 10 + (text[pos++] - '0');
    *out = value;
    return pos - start >= min;
  };
  auto consume = [&](char c) {
    if (pos >= text.size() || text[pos] != c) return false;
    ++pos;
    return true;
  };
  std::int64_t year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!digits(4, 6, &year) || !consume('-') || !digits(2, 2, &month) || !consume('-') || !digits(2, 2, &day))
    return std::nullopt;
  if (!consume('T') && !consume(' ')) return std::nullopt;
  if (!digits(2, 2, &hour) || !consume(':') || !digits(2, 2, &minute) || !consume(':') ||
      !digits(2, 2, &second))
    return std::nullopt;
  std::int64_t micros = 0;
  if (consume('.')) {
    std::size_t start = pos;
    std::int64_t fraction = 0;
    if (!digits(1, 6, &fraction)) return std::nullopt;
    for (std::size_t n = pos - start; n < 6; ++n) fraction *= 10;
    micros = fraction;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;  // beyond microseconds: cut
  }
  std::int64_t offset = 0;  // seconds east of UTC
  if (consume('Z')) {
    offset = 0;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos++] == '-' ? -1 : 1;
    std::int64_t oh = 0, om = 0, os = 0;
    if (!digits(2, 2, &oh)) return std::nullopt;
    if (consume(':') && !digits(2, 2, &om)) return std::nullopt;
    if (consume(':') && !digits(2, 2, &os)) return std::nullopt;
    offset = sign * (oh * 3600 + om * 60 + os);
  } else {
    return std::nullopt;
  }
  // Years past 200000 are beyond the extension's clock (and would overflow int64 microseconds near 294000).
  if (pos != text.size() || year > 200000 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 59)
    return std::nullopt;
  const std::int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset;
  return TimePoint(std::chrono::microseconds(seconds * 1000000 + micros));
}

// What a PT429 error's DETAIL says about the refused limit.
struct Refusal {
  std::string name;
  std::optional<std::string> key;  // nullopt: the NULL (global) key
  double retry_after = 0;
  std::string retry_at_text;  // as the server wrote it: in UTC, whatever the session's time zone
  std::optional<TimePoint> retry_at;
  double remaining = 0;
};

// Reads a refusal from one JSON object's members; nullopt unless name, key and retry_after have their types.
inline std::optional<Refusal> refusal_from_members(
    const std::vector<std::pair<std::string, JsonScalar>>& members) {
  Refusal refusal;
  bool has_name = false, has_key = false, has_retry_after = false;
  refusal.remaining = std::nan("");
  for (const auto& [field, value] : members) {
    using Type = JsonScalar::Type;
    if (field == "name") {
      if (value.type != Type::kString) return std::nullopt;
      refusal.name = value.text;
      has_name = true;
    } else if (field == "key") {
      if (value.type == Type::kString) {
        refusal.key = value.text;
      } else if (value.type == Type::kNull) {
        refusal.key.reset();
      } else {
        return std::nullopt;
      }
      has_key = true;
    } else if (field == "retry_after") {
      if (value.type != Type::kNumber) return std::nullopt;
      refusal.retry_after = value.number;
      has_retry_after = true;
    } else if (field == "retry_at") {
      if (value.type == Type::kString) {
        refusal.retry_at_text = value.text;
        refusal.retry_at = parse_iso_timestamp(value.text);
      }
    } else if (field == "remaining") {
      if (value.type == Type::kNumber) refusal.remaining = value.number;
    }
  }
  if (!has_name || !has_key || !has_retry_after) return std::nullopt;
  return refusal;
}

// Finds the refusal object in the full text of a PT429 error as libpq formats it
// ("ERROR:  rate limit \"n\" exceeded\nDETAIL:  {...}\nHINT:  ..."): the first line of the form
// "<label> {...}" (a label without quotes, as libpq writes DETAIL in any language) whose JSON object ends
// the line and names a refused limit. Keys cannot forge one: the server writes them only JSON-escaped,
// on the DETAIL line. With `expected_names`, the object's name must be one of them; a name cannot
// forge itself (it would have to contain its own escaped copy), and the first DETAIL object wins.
inline std::optional<Refusal> find_refusal(std::string_view message,
                                           const std::vector<std::string>* expected_names) {
  std::vector<std::pair<std::string, JsonScalar>> members;
  for (std::size_t line = 0; line < message.size();) {
    std::size_t line_end = message.find('\n', line);
    if (line_end == std::string_view::npos) line_end = message.size();
    std::size_t brace = message.find('{', line);
    if (brace < line_end && brace > line) {
      std::string_view label = message.substr(line, brace - line);
      std::size_t end = 0;
      if (label.find('"') == std::string_view::npos && label.back() == ' ' &&
          FlatJsonReader(message).read_object(brace, &members, &end)) {
        while (end < message.size() && (message[end] == ' ' || message[end] == '\r')) ++end;
        if (end == message.size() || message[end] == '\n') {
          std::optional<Refusal> refusal = refusal_from_members(members);
          bool expected = expected_names == nullptr;
          for (std::size_t i = 0; refusal && !expected && i < expected_names->size(); ++i)
            expected = (*expected_names)[i] == refusal->name;
          if (refusal && expected) return refusal;
        }
      }
    }
    line = line_end + 1;
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace ratelimit

#endif  // RATELIMIT_DETAIL_HPP
