#include "kube/client.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/post.hpp>

#include "kube/core/raw_scan.h"

namespace aw::kube {

std::string Resource::Path(std::string_view ns, std::string_view name, std::string_view sub) const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (namespaced && !ns.empty()) {
    p += "/namespaces/";
    p += ns;
  }
  p += "/" + plural;
  if (!name.empty()) {
    p += "/";
    p += name;
    if (!sub.empty()) {
      p += "/";
      p += sub;
    }
  }
  return p;
}

std::string_view PatchContentType(PatchType t) {
  switch (t) {
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/json-patch+json";
}

std::string QueryEscape(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (unsigned char c : v) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

namespace {

void AddParam(std::string* q, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  q->push_back(q->empty() ? '?' : '&');
  q->append(key);
  q->push_back('=');
  q->append(QueryEscape(value));
}

}  // namespace

Client::Client(std::unique_ptr<Transport> transport, std::chrono::milliseconds default_timeout)
    : transport_(std::move(transport)), default_timeout_(default_timeout) {}

Client::~Client() {
  transport_->Shutdown();
  // The transport's own threads (a fake's) end while the whole transport still exists.
  transport_->Join();
}

void Client::Shutdown() { transport_->Shutdown(); }
bool Client::IsShutdown() const { return transport_->IsShutdown(); }

namespace {
// The answer to `req` as a JSON document, or the ApiError it means.
Result<JsonPtr> ToJson(const HttpRequest& req, Result<HttpResponse> r) {
  if (!r) return r.error();
  if (r->status < 200 || r->status >= 300)
    return ParseStatusError(r->status, r->body, r->retry_after);
  auto doc = std::make_shared<rapidjson::Document>();
  doc->Parse(r->body.data(), r->body.size());
  if (doc->HasParseError()) {
    ApiError e;
    e.http_status = r->status;
    e.code = r->status;
    e.reason = "InvalidResponse";
    e.message = fmt::format("{} {}: response is not JSON", req.method,
                            req.path.substr(0, req.path.find('?')));
    return e;
  }
  return doc;
}
}  // namespace

namespace {

// The request of a single-object verb.
HttpRequest ObjectRequest(std::string method, std::string path, const std::string& body,
                          std::string content_type, std::chrono::milliseconds timeout) {
  HttpRequest req;
  req.method = std::move(method);
  req.path = std::move(path);
  req.body = body;
  if (!body.empty()) req.content_type = std::move(content_type);
  req.timeout = timeout;
  return req;
}

}  // namespace

namespace {

HttpRequest ListRequest(const Resource& r, std::string_view ns, const ListOptions& o) {
  std::string q;
  AddParam(&q, "labelSelector", o.label_selector);
  AddParam(&q, "fieldSelector", o.field_selector);
  if (o.limit > 0) AddParam(&q, "limit", std::to_string(o.limit));
  AddParam(&q, "continue", o.continue_token);
  if (o.continue_token.empty()) AddParam(&q, "resourceVersion", o.resource_version);
  AddParam(&q, "timeout", fmt::format("{}s", std::max<int64_t>(1, o.timeout.count() / 1000)));
  HttpRequest req;
  req.path = r.Path(ns) + q;
  req.timeout = o.timeout + std::chrono::seconds(5);
  req.cancel = o.cancel;
  return req;
}

// ListAllAsync's paging: Step() takes the answer to
// the page asked with `opts` and says whether the list is complete, failed, or needs `opts` next.
struct ListAllState {
  enum class Next { kDone, kError, kPage };
  ListOptions opts;
  bool restarted = false;
  ListResult out;
  std::optional<ApiError> error;

  Next Step(Result<JsonPtr> page) {
    if (!page) {
      if (page.error().IsExpired() && !opts.continue_token.empty() && !restarted) {
        // The continue token expired: start over with one unpaginated list.
        restarted = true;
        out = ListResult{};
        opts.continue_token.clear();
        opts.limit = 0;
        return Next::kPage;
      }
      error = page.error();
      return Next::kError;
    }
    ++out.pages;
    rapidjson::Document& d = **page;
    if (!d.IsObject()) {
      ApiError e;
      e.http_status = 200;
      e.reason = "InvalidResponse";
      e.message = "list response is not an object";
      error = e;
      return Next::kError;
    }
    auto items = d.FindMember("items");
    if (items != d.MemberEnd() && items->value.IsArray()) {
      for (auto& it : items->value.GetArray()) {
        out.items.push_back(CopyToDocument(it, 4096));
      }
    }
    std::string cont;
    auto md = d.FindMember("metadata");
    if (md != d.MemberEnd() && md->value.IsObject()) {
      auto rv = md->value.FindMember("resourceVersion");
      if (rv != md->value.MemberEnd() && rv->value.IsString())
        out.resource_version = rv->value.GetString();
      auto c = md->value.FindMember("continue");
      if (c != md->value.MemberEnd() && c->value.IsString()) cont = c->value.GetString();
    }
    if (cont.empty()) return Next::kDone;
    opts.continue_token = cont;
    return Next::kPage;
  }
};

}  // namespace

void Client::ListAsync(const Resource& r, std::string_view ns, const ListOptions& o,
                       std::function<void(Result<JsonPtr>)> done) {
  auto req = std::make_shared<HttpRequest>(ListRequest(r, ns, o));
  transport_->DoAsync(*req, [req, done = std::move(done)](Result<HttpResponse> res) {
    done(ToJson(*req, std::move(res)));
  });
}

namespace {
// One link of ListAllAsync's chain: asks for the page st->opts, then the next, until done.
struct ListAllChain {
  Client* client;
  Resource resource;
  std::string ns;
  ListAllState state;
  std::function<void(Result<ListResult>)> done;
};
void ListAllStep(const std::shared_ptr<ListAllChain>& ch) {
  ch->client->ListAsync(ch->resource, ch->ns, ch->state.opts, [ch](Result<JsonPtr> page) {
    ListAllState* st = &ch->state;
    auto* done = &ch->done;
    switch (st->Step(std::move(page))) {
      case ListAllState::Next::kDone:
        (*done)(std::move(st->out));
        return;
      case ListAllState::Next::kError:
        (*done)(*st->error);
        return;
      case ListAllState::Next::kPage:
        ListAllStep(ch);
        return;
    }
  });
}
}  // namespace

void Client::ListAllAsync(const Resource& r, std::string_view ns, ListOptions o,
                          std::function<void(Result<ListResult>)> done) {
  auto ch = std::make_shared<ListAllChain>();
  ch->client = this;
  ch->resource = r;
  ch->ns = std::string(ns);
  ch->state.opts = std::move(o);
  ch->done = std::move(done);
  ListAllStep(ch);
}

namespace {
// One link of ListPagesAsync's chain: asks for the page `opts`, hands its items on, then the next.
struct ListPagesChain {
  Transport* transport;
  Resource resource;
  std::string ns;
  ListOptions opts;
  bool restarted = false;
  int number = 0;
  std::function<void(const ListPage&)> on_page;
  std::function<void(Result<std::string>)> done;
};
void ListPagesStep(const std::shared_ptr<ListPagesChain>& ch) {
  auto req = std::make_shared<HttpRequest>(ListRequest(ch->resource, ch->ns, ch->opts));
  ch->transport->DoAsync(*req, [ch, req](Result<HttpResponse> r) {
    if (r && (r->status < 200 || r->status >= 300))
      r = Result<HttpResponse>(ParseStatusError(r->status, r->body, r->retry_after));
    if (!r) {
      if (r.error().IsExpired() && !ch->opts.continue_token.empty() && !ch->restarted) {
        // The continue token expired: start over with one unpaginated list.
        ch->restarted = true;
        ch->number = 0;
        ch->opts.continue_token.clear();
        ch->opts.limit = 0;
        ListPagesStep(ch);
        return;
      }
      ch->done(r.error());
      return;
    }
    StatusOr<ListPageScan> page = ScanListPage(r->body);
    if (!page) {
      ApiError e;
      e.http_status = r->status;
      e.code = r->status;
      e.reason = "InvalidResponse";
      e.message = fmt::format("GET {}: {}", req->path.substr(0, req->path.find('?')),
                              page.status().message());
      ch->done(e);
      return;
    }
    ListPage p;
    p.number = ++ch->number;
    p.first = p.number == 1;
    p.items = &page->items;
    p.non_object_items = page->non_object_items;
    ch->on_page(p);
    std::string rv = std::move(page->resource_version);
    std::string next = std::move(page->continue_token);
    if (next.empty()) {
      ch->done(std::move(rv));
      return;
    }
    ch->opts.continue_token = std::move(next);
    // The next page from a fresh step: a transport that answers inline (the unit tests' fakes)
    // would otherwise nest the calls and keep every page's answer alive down the chain.
    boost::asio::post(ch->transport->executor(), [ch] { ListPagesStep(ch); });
  });
}
}  // namespace

void Client::ListPagesAsync(const Resource& r, std::string_view ns, ListOptions o,
                            std::function<void(const ListPage&)> on_page,
                            std::function<void(Result<std::string>)> done) {
  auto ch = std::make_shared<ListPagesChain>();
  ch->transport = transport_.get();
  ch->resource = r;
  ch->ns = std::string(ns);
  ch->opts = std::move(o);
  ch->on_page = std::move(on_page);
  ch->done = std::move(done);
  ListPagesStep(ch);
}

void Client::CallAsync(HttpRequest req, std::function<void(Result<JsonPtr>)> done) {
  auto shared = std::make_shared<HttpRequest>(std::move(req));
  transport_->DoAsync(*shared, [shared, done = std::move(done)](Result<HttpResponse> res) {
    done(ToJson(*shared, std::move(res)));
  });
}

void Client::PatchAsync(const Resource& r, std::string_view ns, std::string_view name,
                        PatchType type, const std::string& body,
                        std::function<void(Result<JsonPtr>)> done) {
  CallAsync(ObjectRequest("PATCH", r.Path(ns, name), body, std::string(PatchContentType(type)),
                          default_timeout_),
            std::move(done));
}

void Client::GetAsync(const Resource& r, std::string_view ns, std::string_view name, AsyncDone done,
                      Timeout timeout) {
  CallAsync(ObjectRequest("GET", r.Path(ns, name), {}, {}, timeout.value_or(default_timeout_)),
            std::move(done));
}

void Client::CreateAsync(const Resource& r, std::string_view ns, const std::string& body,
                         AsyncDone done, Timeout timeout) {
  CallAsync(ObjectRequest("POST", r.Path(ns), body, "application/json",
                          timeout.value_or(default_timeout_)),
            std::move(done));
}

void Client::UpdateAsync(const Resource& r, std::string_view ns, std::string_view name,
                         const std::string& body, AsyncDone done, Timeout timeout) {
  CallAsync(ObjectRequest("PUT", r.Path(ns, name), body, "application/json",
                          timeout.value_or(default_timeout_)),
            std::move(done));
}

void Client::DeleteAsync(const Resource& r, std::string_view ns, std::string_view name,
                         AsyncDone done, const std::string& delete_options_json) {
  CallAsync(ObjectRequest("DELETE", r.Path(ns, name), delete_options_json, "application/json",
                          default_timeout_),
            std::move(done));
}

namespace {

HttpRequest WatchRequest(const Resource& r, std::string_view ns, const WatchOptions& o) {
  std::string q = "?watch=true";
  AddParam(&q, "labelSelector", o.label_selector);
  AddParam(&q, "fieldSelector", o.field_selector);
  AddParam(&q, "resourceVersion", o.resource_version);
  if (o.allow_bookmarks) AddParam(&q, "allowWatchBookmarks", "true");
  if (o.timeout_seconds > 0) AddParam(&q, "timeoutSeconds", std::to_string(o.timeout_seconds));
  HttpRequest req;
  req.path = r.Path(ns) + q;
  // The server ends the stream after timeoutSeconds; a silent connection beyond that is dead.
  req.timeout = std::chrono::seconds((o.timeout_seconds > 0 ? o.timeout_seconds : 300) + 30);
  req.cancel = o.cancel;
  return req;
}

// The watch stream's decoding: Feed() takes each chunk (false: stop reading), Finish() turns
// the stream's end into WatchAsync's result.
class WatchDecoder {
 public:
  WatchDecoder(std::string start_rv, std::function<bool(WatchEvent&)> handler, bool raw = false,
               std::function<void(std::string_view)> on_skipped = {},
               size_t max_line = 32 * 1024 * 1024)
      : last_rv_(std::move(start_rv)),
        handler_(std::move(handler)),
        raw_(raw),
        on_skipped_(std::move(on_skipped)),
        framer_(max_line) {}

  bool Feed(std::string_view chunk) {
    bool keep = true;
    if (raw_) {
      framer_.FeedSkipping(
          chunk,
          [&](std::string_view line) {
            if (keep) keep = FeedRaw(line);
          },
          [&] { Skipped("watch event exceeds the line size limit"); });
      return keep;
    }
    bool ok = framer_.Feed(chunk, [&](std::string_view line) {
      if (!keep) return;
      StatusOr<WatchEvent> ev = ParseWatchEvent(line);
      if (!ev) {
        ApiError e;
        e.http_status = 200;
        e.reason = "InvalidWatchEvent";
        e.message = ev.status().message();
        event_error_ = e;
        keep = false;
        return;
      }
      if (ev->type == WatchEvent::Type::kError) {
        event_error_ = ev->error;
        keep = false;
        return;
      }
      std::string rv = MetaString(*ev->object, "resourceVersion");
      if (!handler_(*ev)) keep = false;
      if (!rv.empty()) last_rv_ = rv;
    });
    if (!ok) {
      ApiError e;
      e.http_status = 200;
      e.reason = "InvalidWatchEvent";
      e.message = "watch event exceeds the line size limit";
      event_error_ = e;
      return false;
    }
    return keep;
  }

  Result<std::string> Finish(const Result<HttpResponse>& res) {
    if (event_error_) return *event_error_;
    if (!res) return res.error();
    if (res->status < 200 || res->status >= 300) {
      return ParseStatusError(res->status, res->body, res->retry_after);
    }
    return last_rv_;
  }

 private:
  // One line of a raw watch; false: stop reading.
  bool FeedRaw(std::string_view line) {
    StatusOr<RawWatchEvent> raw = ScanWatchEvent(line);
    if (!raw) {
      Skipped(raw.status().message());
      return true;
    }
    if (raw->type == WatchEvent::Type::kError) {
      StatusOr<WatchEvent> ev = ParseWatchEvent(line);  // a Status: small, decoded whole
      if (ev && ev->type == WatchEvent::Type::kError) {
        event_error_ = ev->error;
      } else {
        ApiError e;
        e.http_status = 200;
        e.reason = "InvalidWatchEvent";
        e.message = ev ? "ERROR watch event without a Status" : ev.status().message();
        event_error_ = e;
      }
      return false;
    }
    WatchEvent ev;
    ev.type = raw->type;
    ev.object_json = raw->object;
    bool keep = handler_(ev);
    return keep;
  }
  void Skipped(std::string_view why) {
    if (on_skipped_) on_skipped_(why);
  }

  std::string last_rv_;
  std::function<bool(WatchEvent&)> handler_;
  bool raw_ = false;
  std::function<void(std::string_view)> on_skipped_;
  std::optional<ApiError> event_error_;
  LineFramer framer_;
};

}  // namespace

void Client::WatchAsync(const Resource& r, std::string_view ns, const WatchOptions& o,
                        std::function<bool(WatchEvent&)> handler,
                        std::function<void(Result<std::string>)> done) {
  auto dec = std::make_shared<WatchDecoder>(o.resource_version, std::move(handler), o.raw,
                                            o.on_skipped, o.max_event_bytes);
  transport_->StreamAsync(
      WatchRequest(r, ns, o),
      [dec](std::string_view chunk, Transport::Resume resume) { resume(dec->Feed(chunk)); },
      [dec, done = std::move(done)](Result<HttpResponse> res) { done(dec->Finish(res)); });
}

StatusOr<std::unique_ptr<Client>> NewClient(const ClientConfig& config) {
  StatusOr<std::unique_ptr<Transport>> t = NewHttpsTransport(config);
  if (!t) return t.status();
  return std::make_unique<Client>(std::move(t).value());
}

}  // namespace aw::kube
