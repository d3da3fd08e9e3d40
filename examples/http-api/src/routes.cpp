#include "routes.h"

#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace http_api {
namespace {

using nlohmann::json;

// What reading a request's body came to.
enum class BodyRead { kComplete, kTooLarge, kUnreadable };

// Whether httplib reads a body for this method before routing it
// (detail::expect_content): the requests whose bodies must be bounded here.
bool MethodReadsBody(const httplib::Request& request) {
  const std::string& method = request.method;
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" || method == "PRI";
}

// Whether the request announces a body: a Transfer-Encoding, or a
// Content-Length other than 0. Without either, a request has none (RFC 9112,
// 6.3), although httplib would read one until the connection closes.
bool AnnouncesBody(const httplib::Request& request) {
  if (request.has_header("Transfer-Encoding")) return true;
  return request.has_header("Content-Length") && request.get_header_value("Content-Length") != "0";
}

// The Content-Length header as a number; nullopt when absent or not a
// number of at most 18 digits (httplib would read such a header as 0).
std::optional<std::uint64_t> DeclaredLength(const httplib::Request& request) {
  if (!request.has_header("Content-Length")) return std::nullopt;
  const std::string& text = request.get_header_value("Content-Length");
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

Reply TooLarge() {
  return ErrorReply(413, "the body is larger than " + std::to_string(kMaxBodyBytes) + " bytes");
}

// The answer to a request refused before its body is read, if it is.
std::optional<Reply> RefusalBeforeReading(const httplib::Request& request,
                                          const std::set<std::string>& paths) {
  if (!MethodReadsBody(request)) return std::nullopt;
  if (paths.count(request.path) == 0) return ErrorReply(404, "not found");
  if (request.method != "POST") return ErrorReply(405, "only POST");
  if (request.has_header("Content-Length") && !DeclaredLength(request))
    return ErrorReply(400, "Content-Length is not a number");
  std::optional<std::uint64_t> length = DeclaredLength(request);
  if (length && *length > kMaxBodyBytes) return TooLarge();
  return std::nullopt;
}

// Writes `reply` and closes the connection after it: the request's body was
// not read, or not all of it, so what follows on the connection is no
// request. httplib 0.11 lets a handler close a connection only this way: a
// response whose content provider fails, after writing all of it, ends the
// connection's keep-alive loop (detail::process_server_socket_core).
// `length_header`: set Content-Length here (httplib sets it only for
// responses of routed requests, not for a refused 100-continue).
void WriteAndClose(const Reply& reply, httplib::Response& response, bool length_header) {
  response.status = reply.status;
  for (const auto& [name, value] : reply.headers) response.set_header(name, value);
  response.set_header("Connection", "close");
  auto body = std::make_shared<const std::string>(reply.body.dump());
  if (length_header) response.set_header("Content-Length", std::to_string(body->size()));
  response.set_content_provider(body->size(), "application/json",
                                [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                                  sink.write(body->data() + offset, length);
                                  return false;  // written: now close (see above)
                                });
}

// Reads the request's body into `text`, at most kMaxBodyBytes of it as the
// endpoint sees it (httplib undoes a gzip, deflate or br Content-Encoding
// before `read` hands the bytes over, so a small compressed body cannot
// expand past the bound). Stops reading at the bound.
BodyRead ReadBody(const httplib::Request& request, const httplib::ContentReader& read, std::string& text) {
  if (!AnnouncesBody(request)) return BodyRead::kComplete;
  bool too_large = false;
  bool complete = read([&](const char* data, std::size_t length) {
    if (length > kMaxBodyBytes - text.size()) {
      too_large = true;
      return false;
    }
    text.append(data, length);
    return true;
  });
  if (too_large) return BodyRead::kTooLarge;
  return complete ? BodyRead::kComplete : BodyRead::kUnreadable;
}

// The request body as a JSON object, or BadRequest.
json ParseBody(const std::string& body) {
  json request = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) throw BadRequest("malformed JSON");
  if (!request.is_object()) throw BadRequest("the body must be a JSON object");
  return request;
}

}  // namespace

void Write(const Reply& reply, httplib::Response& response) {
  response.status = reply.status;
  for (const auto& [name, value] : reply.headers) response.set_header(name, value);
  response.set_content(reply.body.dump(), "application/json");
}

Reply Answer(const httplib::Request& http, const std::function<Reply()>& endpoint, const Reply& on_failure) {
  try {
    return endpoint();
  } catch (const BadRequest& e) {
    Reply reply = ErrorReply(400, e.what());
    if (!e.field().empty()) reply.body["field"] = e.field();
    return reply;
  } catch (const std::exception& e) {
    std::cerr << http.method << " " << http.path << ": " << e.what() << std::endl;
    return on_failure;
  }
}

JsonRoutes::JsonRoutes(httplib::Server& server) : server_(server) {
  // Belt and braces: httplib's own reads stop at the bound too.
  server_.set_payload_max_length(kMaxBodyBytes);
  server_.set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
    if (!RefusedUnread(request, response)) return httplib::Server::HandlerResponse::Unhandled;
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib adds Keep-Alive to every response; not to one that closes.
  server_.set_post_routing_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.get_header_value("Connection") == "close") response.headers.erase("Keep-Alive");
  });
  // "Expect: 100-continue": refused before the client sends the body at all.
  server_.set_expect_100_continue_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        std::optional<Reply> refusal = RefusalBeforeReading(request, paths_);
        if (!refusal) return 100;
        WriteAndClose(*refusal, response, /*length_header=*/true);
        return refusal->status;
      });
}

bool JsonRoutes::RefusedUnread(const httplib::Request& request, httplib::Response& response) const {
  std::optional<Reply> refusal = RefusalBeforeReading(request, paths_);
  if (!refusal) return false;
  if (AnnouncesBody(request))
    WriteAndClose(*refusal, response, /*length_header=*/false);
  else
    Write(*refusal, response);
  return true;
}

void JsonRoutes::Post(const std::string& path, std::function<Reply(const json&)> endpoint) {
  paths_.insert(path);
  server_.Post(path,
               [endpoint = std::move(endpoint)](const httplib::Request& http, httplib::Response& response,
                                                const httplib::ContentReader& read) {
                 std::string body;
                 BodyRead outcome = ReadBody(http, read, body);
                 if (outcome == BodyRead::kTooLarge) return WriteAndClose(TooLarge(), response, false);
                 if (outcome == BodyRead::kUnreadable)
                   return WriteAndClose(ErrorReply(400, "the body could not be read"), response, false);
                 auto answer = [&] { return endpoint(ParseBody(body)); };
                 Write(Answer(http, answer, ErrorReply(500, "internal error")), response);
               });
}

}  // namespace http_api
