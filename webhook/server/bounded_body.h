// BoundedBody: a Beast request body that keeps at most `limit` bytes.
//
// Promise: the body's bytes are appended to `data` while they fit within `limit`; past it,
// `overflow` is set, `data` is released and every further byte is consumed and dropped, so the
// connection can read the rest of an over-limit body (bounded by the parser's body_limit) with no
// more memory than the limit. A Content-Length over the limit sets `overflow` before any byte.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstdint>
#include <string>

namespace aw::server {

struct BoundedBody {
  struct value_type {
    std::string data;
    size_t limit = 0;
    bool overflow = false;
  };

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (length && *length > body_.limit) {
        Overflow();
      } else if (length) {
        body_.data.reserve(static_cast<size_t>(*length));
      }
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      ec = {};
      const size_t n = boost::asio::buffer_size(buffers);
      if (!body_.overflow && body_.data.size() + n > body_.limit) Overflow();
      if (!body_.overflow) {
        for (auto b : boost::beast::buffers_range_ref(buffers)) {
          body_.data.append(static_cast<const char*>(b.data()), b.size());
        }
      }
      return n;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    void Overflow() {
      body_.overflow = true;
      std::string().swap(body_.data);
    }
    value_type& body_;
  };
};

}  // namespace aw::server
