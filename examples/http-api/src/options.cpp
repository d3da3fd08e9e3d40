// Flags and their environment variables, described once in kFlags so that
// parsing, the environment fallback and --help cannot disagree.
#include "options.h"

#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace http_api {
namespace {

struct Flag {
  const char* name;  // without the leading "--"
  const char* env;
  const char* help;
  bool takes_value;
  std::function<void(Options&, const std::string&)> apply;
};

// An integer in [low, high], or UsageError naming `what`.
int ParseInt(const std::string& text, int low, int high, const std::string& what) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < low || value > high)
    throw UsageError(what + " must be an integer from " + std::to_string(low) + " to " +
                     std::to_string(high) + ", not \"" + text + "\"");
  return static_cast<int>(value);
}

// A limit config: checked here only for being a JSON object, so that a typo
// fails before connecting; ratelimit_define checks its fields.
std::string ParseLimit(const std::string& text, const std::string& what) {
  nlohmann::json config = nlohmann::json::parse(text, nullptr, false);
  if (!config.is_object()) throw UsageError(what + " must be a JSON object, not \"" + text + "\"");
  return text;
}

// A boolean environment variable: set and not "0"/"false"/"no"/"".
bool Truthy(const std::string& text) {
  return !(text.empty() || text == "0" || text == "false" || text == "no");
}

const Flag kFlags[] = {
    {"host", "HTTP_API_HOST", "address to listen on (default 127.0.0.1)", true,
     [](Options& o, const std::string& v) { o.host = v; }},
    {"port", "HTTP_API_PORT", "port to listen on; 0 picks a free one (default 8080)", true,
     [](Options& o, const std::string& v) { o.port = ParseInt(v, 0, 65535, "--port"); }},
    {"db", "HTTP_API_DB", "libpq connection string (default: the PG* environment variables)", true,
     [](Options& o, const std::string& v) { o.conninfo = v; }},
    {"threads", "HTTP_API_THREADS", "worker threads, one database connection each (default 8)", true,
     [](Options& o, const std::string& v) { o.threads = ParseInt(v, 1, 256, "--threads"); }},
    {"no-limiter", "HTTP_API_NO_LIMITER", "serve without the limit calls (to measure what they cost)", false,
     [](Options& o, const std::string& v) { o.limiter = !Truthy(v); }},
    {"messages-limit", "HTTP_API_MESSAGES_LIMIT", "config of the per-user limit of POST /messages", true,
     [](Options& o, const std::string& v) { o.messages_limit = ParseLimit(v, "--messages-limit"); }},
    {"signup-limit", "HTTP_API_SIGNUP_LIMIT", "config of the global limit of POST /signup", true,
     [](Options& o, const std::string& v) { o.signup_limit = ParseLimit(v, "--signup-limit"); }},
    {"completions-limit", "HTTP_API_COMPLETIONS_LIMIT",
     "config of the per-user token limit of POST /completions", true,
     [](Options& o, const std::string& v) { o.completions_limit = ParseLimit(v, "--completions-limit"); }},
    {"playground-limit", "HTTP_API_PLAYGROUND_LIMIT",
     "config of the service's limit on new playground keys (each lives an hour)", true,
     [](Options& o, const std::string& v) { o.playground_limit = ParseLimit(v, "--playground-limit"); }},
    {"help", nullptr, "print this help", false, [](Options& o, const std::string&) { o.help = true; }},
};

const Flag& FindFlag(const std::string& name) {
  for (const Flag& flag : kFlags)
    if (name == flag.name) return flag;
  throw UsageError("unknown flag --" + name + " (see --help)");
}

void ApplyEnvironment(Options& options) {
  for (const Flag& flag : kFlags) {
    const char* value = flag.env == nullptr ? nullptr : std::getenv(flag.env);
    if (value != nullptr) flag.apply(options, value);
  }
}

// Applies argv: "--name value", "--name=value", or "--name" for a switch.
void ApplyArguments(Options& options, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) throw UsageError("unexpected argument \"" + arg + "\" (see --help)");
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (std::size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const Flag& flag = FindFlag(name);
    if (flag.takes_value && !has_value) {
      if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
      value = argv[++i];
    } else if (!flag.takes_value) {
      if (has_value) throw UsageError("--" + name + " takes no value");
      value = "1";
    }
    flag.apply(options, value);
  }
}

}  // namespace

Options ParseOptions(int argc, const char* const* argv) {
  Options options;
  ApplyEnvironment(options);
  ApplyArguments(options, argc, argv);
  return options;
}

std::string Usage() {
  std::ostringstream out;
  out << "usage: ratelimit-http-api [flags]\n\n";
  for (const Flag& flag : kFlags) {
    out << "  --" << flag.name << (flag.takes_value ? " VALUE" : "") << "\n      " << flag.help;
    if (flag.env != nullptr) out << " [env " << flag.env << "]";
    out << "\n";
  }
  Options defaults;
  out << "\ndefault limits:\n  messages:    " << defaults.messages_limit
      << "\n  signup:      " << defaults.signup_limit << "\n  completions: " << defaults.completions_limit
      << "\n  playground:  " << defaults.playground_limit << "\n";
  return out.str();
}

}  // namespace http_api
