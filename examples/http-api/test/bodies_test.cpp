// End-to-end tests of how the service reads request bodies (src/routes.cpp):
// at most 64 KiB, whatever the framing (Content-Length, chunked, a gzip
// Content-Encoding), a body declared larger refused before it is read, and
// the service's memory unmoved by 20 MB bodies. Raw sockets, so that the
// requests are exactly the ones an HTTP client library would not send.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "e2e.h"

namespace {

using namespace e2e;

constexpr std::size_t kBound = 64 * 1024;  // the service's documented bound
constexpr std::size_t kHuge = 20 * 1000 * 1000;

// A valid POST /messages body padded to `bytes` with an unknown field: the
// service (which ignores unknown fields) would store it if it read it.
std::string PaddedMessage(const std::string& user, std::size_t bytes) {
  std::string head = "{\"user\": \"" + user + "\", \"text\": \"hi\", \"pad\": \"";
  return head + std::string(bytes - head.size() - 2, 'x') + "\"}";
}

std::string Head(const std::string& request_line, const std::string& headers) {
  return request_line + "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers + "\r\n";
}

std::string ContentLength(std::size_t bytes) { return "Content-Length: " + std::to_string(bytes) + "\r\n"; }

// `body` in chunks of 16 KiB, as Transfer-Encoding: chunked frames it.
std::string Chunked(const std::string& body) {
  std::string framed;
  for (std::size_t offset = 0; offset < body.size(); offset += 16384) {
    std::string chunk = body.substr(offset, 16384);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    framed += size + chunk + "\r\n";
  }
  return framed + "0\r\n\r\n";
}

std::string Gzip(const std::string& data) {
  z_stream stream{};
  deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

long MessagesOf(const std::string& user) {
  return QueryValue<long>("SELECT count(*) FROM messages WHERE user_id = $1", user);
}

// A 413 with the JSON error, after which the service closed the connection.
void ExpectTooLarge(const RawResponse& response, const std::string& what) {
  EXPECT_EQ(response.Status(), 413) << what << ": " << response.text.substr(0, 300);
  EXPECT_NE(response.Body().find("larger than 65536 bytes"), std::string::npos)
      << what << ": " << response.text;
  EXPECT_TRUE(response.closed) << what << ": the connection must be closed after a body left unread";
}

// A body declared larger than the bound: 413 before a byte of it is sent
// (the test sends none, and the answer comes all the same).
TEST(Bodies, DeclaredTooLargeIsRefusedBeforeTheBodyIsSent) {
  RawResponse response = RawExchange(Head("POST /messages HTTP/1.1", ContentLength(kHuge)), "");
  ExpectTooLarge(response, "Content-Length 20 MB, no body sent");
}

// The same with "Expect: 100-continue": refused instead of "100 Continue".
TEST(Bodies, DeclaredTooLargeGetsNo100Continue) {
  RawResponse response =
      RawExchange(Head("POST /messages HTTP/1.1", ContentLength(kHuge) + "Expect: 100-continue\r\n"), "");
  EXPECT_EQ(response.text.find("100 Continue"), std::string::npos) << response.text;
  ExpectTooLarge(response, "Expect: 100-continue");
}

// 20 MB sent with a Content-Length, chunked, and as a 20 KB gzip of 20 MB:
// each refused, nothing stored, and the service's peak memory unmoved.
TEST(Bodies, TwentyMegabytesInAnyFramingAreNeitherReadNorStored) {
  const std::string user = Unique("huge-body");
  const std::string body = PaddedMessage(user, kHuge);
  RawExchange(Head("POST /messages HTTP/1.1", ContentLength(2)), "{}");  // every thread warmed up once
  const long peak_before = PeakMemoryKb();
  ASSERT_GT(peak_before, 0) << "cannot read the service's memory (HTTP_API_E2E_PID)";
  ExpectTooLarge(RawExchange(Head("POST /messages HTTP/1.1", ContentLength(body.size())), body),
                 "20 MB with Content-Length");
  ExpectTooLarge(
      RawExchange(Head("POST /messages HTTP/1.1", "Transfer-Encoding: chunked\r\n"), Chunked(body)),
      "20 MB chunked");
  const std::string gzipped = Gzip(body);
  ASSERT_LT(gzipped.size(), kBound) << "the compressed body must fit the bound to test its expansion";
  ExpectTooLarge(RawExchange(Head("POST /messages HTTP/1.1",
                                  ContentLength(gzipped.size()) + "Content-Encoding: gzip\r\n"),
                             gzipped),
                 "a 20 KB gzip of 20 MB");
  EXPECT_EQ(MessagesOf(user), 0);
  const long grown_kb = PeakMemoryKb() - peak_before;
  EXPECT_LT(grown_kb, 16 * 1024) << "the service's peak memory grew by " << grown_kb << " kB";
}

// Just over the bound, chunked: 413; just under it: read and stored.
TEST(Bodies, ChunkedBodiesAreBoundedAndRead) {
  const std::string user = Unique("chunked");
  ExpectTooLarge(RawExchange(Head("POST /messages HTTP/1.1", "Transfer-Encoding: chunked\r\n"),
                             Chunked(PaddedMessage(user, kBound + 1))),
                 "64 KiB + 1 chunked");
  RawResponse fits =
      RawExchange(Head("POST /messages HTTP/1.1", "Transfer-Encoding: chunked\r\nConnection: close\r\n"),
                  Chunked(PaddedMessage(user, kBound)));
  EXPECT_EQ(fits.Status(), 201) << fits.text.substr(0, 300);
  EXPECT_EQ(MessagesOf(user), 1);
}

// A POST without Content-Length or Transfer-Encoding has no body (RFC 9112):
// answered at once as malformed JSON (httplib alone would wait for the
// client to close the connection, reading a body until then).
TEST(Bodies, NoFramingMeansNoBody) {
  RawResponse response = RawExchange(Head("POST /messages HTTP/1.1", "Connection: close\r\n"), "");
  EXPECT_EQ(response.Status(), 400) << response.text;
  EXPECT_NE(response.Body().find("malformed JSON"), std::string::npos) << response.text;
}

// A body to a route that takes none is not read: 404 or 405, and closed.
TEST(Bodies, OtherRoutesDoNotReadBodies) {
  const std::string body = Chunked(std::string(1000000, ' '));
  RawResponse put = RawExchange(Head("PUT /messages HTTP/1.1", "Transfer-Encoding: chunked\r\n"), body);
  EXPECT_EQ(put.Status(), 405) << put.text;
  EXPECT_TRUE(put.closed);
  RawResponse elsewhere = RawExchange(Head("POST /nowhere HTTP/1.1", "Transfer-Encoding: chunked\r\n"), body);
  EXPECT_EQ(elsewhere.Status(), 404) << elsewhere.text;
  EXPECT_TRUE(elsewhere.closed);
  RawResponse bad = RawExchange(Head("POST /messages HTTP/1.1", "Content-Length: 1e9\r\n"), "");
  EXPECT_EQ(bad.Status(), 400) << bad.text;
}

}  // namespace
