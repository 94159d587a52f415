#include "server/h2_session.h"

#include <fmt/format.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "util/text.h"

namespace aw::server {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

nghttp2_nv Nv(const std::string& name, const std::string& value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

struct SessionDeleter {
  void operator()(nghttp2_session* s) const { nghttp2_session_del(s); }
};

}  // namespace

struct H2Stream {
  int32_t id = 0;
  std::vector<std::pair<std::string, std::string>> fields;  // regular fields, names lower-case
  std::string method, path, query, authority, content_type;
  std::string body;
  size_t header_bytes = 0;
  bool header_overflow = false;
  bool too_large = false;
  bool dispatched = false;
  bool answered = false;  // Respond was called
  bool end_sent = false;  // the last frame of the answer is in the output
  bool closed = false;    // nghttp2 closed the stream
  HttpRequest request;
  std::function<void()> on_abandoned;
  // The answer being sent.
  HttpResponse response;
  size_t body_offset = 0;
  std::vector<std::string> trailer_storage;
};

struct H2Session::Impl {
  H2Options opts;
  Dispatch dispatch;
  std::unique_ptr<nghttp2_session, SessionDeleter> session;
  std::map<int32_t, std::shared_ptr<H2Stream>> streams;  // open, or dispatched and unanswered
  size_t started = 0;                                    // streams begun over the connection's life
  size_t receiving_bytes = 0;  // request bodies buffered for streams not dispatched yet
  bool goaway = false;
  // on_written callbacks whose last frame is in the output not yet reported written, and those in
  // the output being written now.
  std::vector<std::function<void(bool)>> sent_unflushed;
  std::vector<std::function<void(bool)>> in_flight;

  std::shared_ptr<H2Stream> Find(int32_t id) {
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second;
  }

  void Forget(int32_t id) { streams.erase(id); }

  void Submit(const std::shared_ptr<H2Stream>& st);
  void DispatchStream(const std::shared_ptr<H2Stream>& st);

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<Impl*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    ++self->started;
    auto st = std::make_shared<H2Stream>();
    st->id = frame->hd.stream_id;
    self->streams[st->id] = st;
    if (self->started >= self->opts.max_requests && !self->goaway) {
      self->goaway = true;
      nghttp2_submit_goaway(self->session.get(), NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR,
                            nullptr, 0);
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t /*flags*/,
                      void* user) {
    auto* self = static_cast<Impl*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto st = self->Find(frame->hd.stream_id);
    if (!st || st->dispatched) return 0;  // trailers after a dispatched request: ignored
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_overflow) return 0;
    if (st->header_bytes > self->opts.max_header_bytes ||
        st->fields.size() + 1 > self->opts.max_header_count) {
      st->header_overflow = true;
      st->fields.clear();
      return 0;
    }
    if (n == ":method") {
      st->method.assign(v);
    } else if (n == ":path") {
      const size_t q = v.find('?');
      st->path.assign(v.substr(0, q));
      if (q != std::string_view::npos) st->query.assign(v.substr(q + 1));
    } else if (n == ":authority") {
      st->authority.assign(v);
    } else if (!n.empty() && n[0] == ':') {
      // :scheme, :protocol: not used
    } else {
      if (n == "content-type") st->content_type.assign(v);
      st->fields.emplace_back(std::string(n), std::string(v));
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t /*flags*/, int32_t stream_id,
                         const uint8_t* data, size_t len, void* user) {
    auto* self = static_cast<Impl*>(user);
    auto st = self->Find(stream_id);
    if (!st || st->dispatched || st->header_overflow) return 0;  // discarded
    if (self->receiving_bytes + len > self->opts.max_buffered_bytes) {
      // Many streams sending bodies at once past the connection's budget: this one is refused.
      self->receiving_bytes -= st->body.size();
      st->body.clear();
      st->header_overflow = true;  // ignore the rest
      st->dispatched = true;
      nghttp2_submit_rst_stream(self->session.get(), NGHTTP2_FLAG_NONE, stream_id,
                                NGHTTP2_ENHANCE_YOUR_CALM);
      return 0;
    }
    if (st->too_large || st->body.size() + len > self->opts.max_body_bytes) {
      self->receiving_bytes -= st->body.size();
      st->too_large = true;
      st->body.clear();
      st->body.shrink_to_fit();
      self->DispatchStream(st);  // answered now; the rest of the body is discarded
      return 0;
    }
    st->body.append(reinterpret_cast<const char*>(data), len);
    self->receiving_bytes += len;
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<Impl*>(user);
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) || !end) return 0;
    auto st = self->Find(frame->hd.stream_id);
    if (!st || st->dispatched) return 0;
    self->DispatchStream(st);
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t /*error_code*/,
                           void* user) {
    auto* self = static_cast<Impl*>(user);
    auto st = self->Find(stream_id);
    if (!st) return 0;
    st->closed = true;
    if (!st->dispatched) self->receiving_bytes -= std::min(self->receiving_bytes, st->body.size());
    if (!st->end_sent) {
      // Closed before its answer was out: the client reset it (or the session ends).
      if (st->answered && st->response.on_written) {
        auto fn = std::move(st->response.on_written);
        st->response.on_written = nullptr;
        fn(false);
      }
      if (auto fn = std::move(st->on_abandoned)) {
        st->on_abandoned = nullptr;
        fn();
      }
    }
    // A dispatched stream keeps its request alive until the handler answers (Respond).
    if (!st->dispatched || st->answered) self->Forget(stream_id);
    return 0;
  }

  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    auto* self = static_cast<Impl*>(user);
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    auto st = self->Find(frame->hd.stream_id);
    if (!st || !st->answered || st->end_sent) return 0;
    st->end_sent = true;
    st->on_abandoned = nullptr;
    if (st->response.on_written) {
      self->sent_unflushed.push_back(std::move(st->response.on_written));
      st->response.on_written = nullptr;
    }
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source*, void* user) {
    auto* self = static_cast<Impl*>(user);
    auto st = self->Find(stream_id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const std::string& body = st->response.body;
    const size_t n = std::min(length, body.size() - st->body_offset);
    if (n > 0) std::memcpy(buf, body.data() + st->body_offset, n);
    st->body_offset += n;
    if (st->body_offset == body.size()) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!st->response.trailers.empty()) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        std::vector<nghttp2_nv> nva;
        st->trailer_storage.clear();
        for (auto& [name, value] : st->response.trailers) {
          st->trailer_storage.push_back(Lower(name));
          st->trailer_storage.push_back(value);
        }
        for (size_t i = 0; i + 1 < st->trailer_storage.size(); i += 2) {
          nva.push_back(Nv(st->trailer_storage[i], st->trailer_storage[i + 1]));
        }
        nghttp2_submit_trailer(self->session.get(), stream_id, nva.data(), nva.size());
      }
    }
    return static_cast<ssize_t>(n);
  }
};

void H2Session::Impl::DispatchStream(const std::shared_ptr<H2Stream>& st) {
  st->dispatched = true;
  receiving_bytes -= std::min(receiving_bytes, st->body.size());
  if (st->header_overflow) {
    HttpResponse r;
    r.status = 431;
    r.body = "request header fields too large\n";
    st->answered = true;
    st->response = std::move(r);
    Submit(st);
    return;
  }
  HttpRequest& in = st->request;
  in.method = st->method;
  in.path = st->path;
  in.query = st->query;
  in.content_type = st->content_type;
  in.body_too_large = st->too_large;
  in.body = st->too_large ? std::string_view() : std::string_view(st->body);
  in.http2 = true;
  H2Stream* raw = st.get();
  in.header = [raw](std::string_view name) -> std::string_view {
    if (util::EqualsIgnoreCase(name, "host")) return raw->authority;
    for (const auto& [n, v] : raw->fields) {
      if (util::EqualsIgnoreCase(n, name)) return v;
    }
    return {};
  };
  in.on_abandoned = [raw](std::function<void()> fn) { raw->on_abandoned = std::move(fn); };
  dispatch(st->id, in);
  in.on_abandoned = nullptr;
}

void H2Session::Impl::Submit(const std::shared_ptr<H2Stream>& st) {
  HttpResponse& r = st->response;
  std::vector<std::string> storage;
  storage.reserve(4 + 2 * r.headers.size());
  storage.emplace_back(":status");
  storage.push_back(std::to_string(r.status));
  if (!r.content_type.empty()) {
    storage.emplace_back("content-type");
    storage.push_back(r.content_type);
  }
  for (auto& [name, value] : r.headers) {
    std::string lower = Lower(name);
    // Connection-specific fields are forbidden in HTTP/2 (RFC 9113 8.2.2).
    if (lower == "connection" || lower == "keep-alive" || lower == "transfer-encoding" ||
        lower == "upgrade" || lower == "proxy-connection" || lower == "content-length") {
      continue;
    }
    storage.push_back(std::move(lower));
    storage.push_back(value);
  }
  const bool headers_only = r.body.empty() && r.trailers.empty();
  if (!headers_only) {
    storage.emplace_back("content-length");
    storage.push_back(std::to_string(r.body.size()));
    if (!r.trailers.empty()) storage.pop_back(), storage.pop_back();  // gRPC: no content-length
  }
  std::vector<nghttp2_nv> nva;
  for (size_t i = 0; i + 1 < storage.size(); i += 2) nva.push_back(Nv(storage[i], storage[i + 1]));
  nghttp2_data_provider provider{};
  provider.read_callback = &Impl::ReadBody;
  const int rv = nghttp2_submit_response(session.get(), st->id, nva.data(), nva.size(),
                                         headers_only ? nullptr : &provider);
  if (rv != 0) {
    if (r.on_written) {
      auto fn = std::move(r.on_written);
      r.on_written = nullptr;
      fn(false);
    }
    nghttp2_submit_rst_stream(session.get(), NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
  }
}

H2Session::H2Session(H2Options options, Dispatch dispatch) : impl_(std::make_unique<Impl>()) {
  impl_->opts = options;
  impl_->dispatch = std::move(dispatch);
}

H2Session::~H2Session() {
  // Streams still open end with the connection: their clients are gone.
  std::vector<std::function<void(bool)>> callbacks;
  for (auto& fn : impl_->sent_unflushed) callbacks.push_back(std::move(fn));
  for (auto& fn : impl_->in_flight) callbacks.push_back(std::move(fn));
  impl_->sent_unflushed.clear();
  impl_->in_flight.clear();
  auto streams = std::move(impl_->streams);
  impl_->streams.clear();
  for (auto& [id, st] : streams) {
    if (st->end_sent) continue;
    if (st->answered && st->response.on_written)
      callbacks.push_back(std::move(st->response.on_written));
    if (auto fn = std::move(st->on_abandoned)) fn();
  }
  for (auto& fn : callbacks) {
    if (fn) fn(false);
  }
}

Status H2Session::Start() {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return Status::Internal("nghttp2: out of memory");
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &Impl::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &Impl::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Impl::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Impl::OnFrameRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &Impl::OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &Impl::OnFrameSend);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // Bounds on what a client can make the server queue or remember.
  nghttp2_option_set_max_outbound_ack(opt, 1000);
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_max_reserved_remote_streams(opt, 0);
  nghttp2_session* raw = nullptr;
  const int rv = nghttp2_session_server_new2(&raw, cbs, impl_.get(), opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) return Status::Internal(fmt::format("nghttp2: {}", nghttp2_strerror(rv)));
  impl_->session.reset(raw);
  const uint32_t window = static_cast<uint32_t>(
      std::clamp<size_t>(impl_->opts.max_body_bytes + 4096, 65535, (1u << 31) - 1));
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, impl_->opts.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(impl_->opts.max_header_bytes)},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, std::min<uint32_t>(window, 1 << 20)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  if (nghttp2_submit_settings(impl_->session.get(), NGHTTP2_FLAG_NONE, iv,
                              sizeof(iv) / sizeof(iv[0])) != 0) {
    return Status::Internal("nghttp2: cannot queue SETTINGS");
  }
  return Status::Ok();
}

Status H2Session::Receive(std::string_view bytes) {
  if (!impl_->session) return Status::Internal("HTTP/2 session not started");
  const ssize_t n = nghttp2_session_mem_recv(
      impl_->session.get(), reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (n < 0) {
    return Status::InvalidArgument(
        fmt::format("HTTP/2: {}", nghttp2_strerror(static_cast<int>(n))));
  }
  return Status::Ok();
}

std::string H2Session::TakeOutput(size_t max) {
  std::string out;
  if (!impl_->session) return out;
  while (out.size() < max) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(impl_->session.get(), &data);
    if (n <= 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  for (auto& fn : impl_->sent_unflushed) impl_->in_flight.push_back(std::move(fn));
  impl_->sent_unflushed.clear();
  return out;
}

void H2Session::Flushed(bool written) {
  auto callbacks = std::move(impl_->in_flight);
  impl_->in_flight.clear();
  for (auto& fn : callbacks) {
    if (fn) fn(written);
  }
}

void H2Session::Respond(int32_t stream, HttpResponse response) {
  auto st = impl_->Find(stream);
  if (!st || st->answered || st->closed) {
    if (st && st->closed && !st->answered) impl_->Forget(stream);
    if (response.on_written) response.on_written(false);
    return;
  }
  st->answered = true;
  st->on_abandoned = nullptr;
  st->response = std::move(response);
  impl_->Submit(st);
}

void H2Session::Reset(int32_t stream) {
  auto st = impl_->Find(stream);
  if (!st) return;
  if (st->closed) return impl_->Forget(stream);
  st->answered = true;
  st->on_abandoned = nullptr;
  nghttp2_submit_rst_stream(impl_->session.get(), NGHTTP2_FLAG_NONE, stream,
                            NGHTTP2_INTERNAL_ERROR);
}

void H2Session::Shutdown() {
  if (!impl_->session || impl_->goaway) return;
  impl_->goaway = true;
  nghttp2_submit_goaway(impl_->session.get(), NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(impl_->session.get()),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

bool H2Session::WantsIo() const {
  if (!impl_->session) return false;
  if (nghttp2_session_want_write(impl_->session.get()) != 0) return true;
  if (impl_->goaway && OpenStreams() == 0) return false;
  return nghttp2_session_want_read(impl_->session.get()) != 0;
}

bool H2Session::WantsWrite() const {
  return impl_->session && nghttp2_session_want_write(impl_->session.get()) != 0;
}

size_t H2Session::Receiving() const {
  size_t n = 0;
  for (const auto& [id, st] : impl_->streams) {
    if (!st->dispatched && !st->closed) ++n;
  }
  return n;
}

size_t H2Session::Waiting() const {
  size_t n = 0;
  for (const auto& [id, st] : impl_->streams) {
    if (st->dispatched && !st->answered && !st->closed) ++n;
  }
  return n;
}

size_t H2Session::OpenStreams() const {
  size_t n = 0;
  for (const auto& [id, st] : impl_->streams) {
    if (!st->closed) ++n;
  }
  return n;
}

}  // namespace aw::server
