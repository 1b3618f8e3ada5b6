// The paging of every List call (AIP-158; private to server/rpc/, docs/api.md#paging): a request's
// page_size and page_token, checked once, and the page cut from what the caller may see.
//
// Order: items go by their name's key: the number of "mrs/17" (17), or the text of names without one
// ("devices/rxe0", "tenants/app"). A page holds the items whose key is past the token's, so an item made
// between two pages shows on a later page if its key is past the cursor (numbers only grow: it always is),
// one deleted is simply absent, and none repeats or is skipped.
//
// The token is opaque to clients: base64 (URL alphabet) of the call it belongs to, a check of the request's
// other fields (its filters: a token used with other filters is INVALID_ARGUMENT on page_token) and the
// last key of its page. It holds nothing the caller did not see (that key is an item of its page).
// Pages are cut after the tenant's visibility filter, so neither a page's length nor whether there is a next
// page tells a caller anything about what it may not see.
#ifndef RDMAD_SERVER_RPC_PAGE_H_
#define RDMAD_SERVER_RPC_PAGE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/statusor.h"

namespace rdmad::rpc_internal {

inline constexpr int32_t kDefaultPageSize = 1000;
inline constexpr int32_t kMaxPageSize = 1000;

// Where a name sorts: its number, or (names without one) its text.
struct PageKey {
  uint64_t number = 0;
  std::string text;
  bool operator<(const PageKey& o) const { return number != o.number ? number < o.number : text < o.text; }
  bool operator==(const PageKey& o) const { return number == o.number && text == o.text; }
};
// "mrs/17" -> {17, ""}; "devices/rxe0", "rxe0" -> {0, "rxe0"}.
PageKey KeyOf(const std::string& name);

class Pager {
 public:
  // Checks `request`'s page_size and page_token (fields of those names) for the List call `method`:
  // INVALID_ARGUMENT on page_size (negative) or page_token (not one of this call's, or made with other
  // filters).
  static absl::StatusOr<Pager> Start(const google::protobuf::Message& request, const std::string& method);

  size_t size() const { return size_; }
  // The first page (no token), or the key the previous page ended with.
  bool first() const { return !after_.has_value; }
  // Whether an item with this key belongs after the cursor.
  bool After(const PageKey& k) const { return !after_.has_value || after_.key < k; }
  uint64_t after_number() const { return after_.has_value ? after_.key.number : 0; }
  // The next_page_token of a page that ended with `last` and has more after it.
  std::string TokenAfter(const PageKey& last) const;

  // A page of `items` (any order; those the caller may not see already removed): the next `size()` past the
  // cursor, in key order; `*next` is set to the next page's token if more are left, else cleared.
  template <typename T, typename NameOf>
  std::vector<T> Cut(std::vector<T> items, NameOf name_of, std::string* next) const {
    std::vector<std::pair<PageKey, T*>> keyed;
    keyed.reserve(items.size());
    for (T& i : items) {
      PageKey k = KeyOf(name_of(i));
      if (After(k)) keyed.emplace_back(std::move(k), &i);
    }
    std::sort(keyed.begin(), keyed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<T> out;
    next->clear();
    for (auto& [k, item] : keyed) {
      if (out.size() == size_) {
        *next = TokenAfter(KeyOf(name_of(out.back())));
        break;
      }
      out.push_back(std::move(*item));
    }
    return out;
  }

  // A page from a source that lists in number order past a number, at most a given count
  // (`fetch(after, limit)` -> absl::StatusOr<std::vector<T>>: the registry's lists), filtered by
  // `visible`: fetched in chunks until the page is full and one more visible item is known to follow (then
  // `*next` is set), or the source is exhausted.
  template <typename T, typename Source, typename Visible, typename NameOf>
  absl::StatusOr<std::vector<T>> Fetch(Source fetch, Visible visible, NameOf name_of, std::string* next) const {
    std::vector<T> out;
    next->clear();
    uint64_t after = after_number();
    const size_t chunk = std::max<size_t>(size_ + 1, 256);
    for (;;) {
      absl::StatusOr<std::vector<T>> got = fetch(after, chunk);
      if (!got.ok()) return got.status();
      for (T& item : *got) {
        after = KeyOf(name_of(item)).number;
        if (!visible(item)) continue;
        if (out.size() == size_) {
          *next = TokenAfter(KeyOf(name_of(out.back())));
          return out;
        }
        out.push_back(std::move(item));
      }
      if (got->size() < chunk) return out;
    }
  }

 private:
  struct After_ {
    bool has_value = false;
    PageKey key;
  };
  Pager(std::string method, std::string filters, size_t size, After_ after)
      : method_(std::move(method)), filters_(std::move(filters)), size_(size), after_(std::move(after)) {}

  std::string method_;
  std::string filters_;  // the check of the request's other fields
  size_t size_;
  After_ after_;
};

}  // namespace rdmad::rpc_internal

#endif  // RDMAD_SERVER_RPC_PAGE_H_
