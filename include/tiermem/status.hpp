// Status and StatusOr<T>: how every tiermem call reports failure. No exceptions cross the
// runtime, the allocator, the backends or a worker thread; errors are values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace tiermem {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller passed something wrong (bad pointer, bad size, bad value)
  kNotFound,           // a named thing (node, slot, server, option) does not exist
  kUnavailable,        // the thing exists in principle but not here/now (no CXL node, server gone)
  kNotSupported,       // this build or this kernel cannot do it
  kResourceExhausted,  // a tier, a quota or the address space is full
  kPermissionDenied,   // refused: bad token, EPERM from the kernel
  kDeadlineExceeded,   // a timeout expired
  kDataLoss,           // data could not be kept intact
  kAborted,            // a peer broke the protocol or hung up mid-way
  kInternal,           // a bug or an OS failure with no better category
};

// Returns the lower-case name of a code ("ok", "invalid_argument", ...).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: message" (or "ok").
  std::string ToString() const;
  // Prepends context: "context: message"; keeps the code.
  Status WithContext(std::string_view context) const;
  // The negative errno that best matches the code, for the C ABI.
  int ToErrno() const;
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
inline Status NotSupported(std::string m) { return Status(StatusCode::kNotSupported, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status PermissionDenied(std::string m) { return Status(StatusCode::kPermissionDenied, std::move(m)); }
inline Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status Aborted(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

// The one place where an errno value becomes a Status. `what` names the failed operation,
// e.g. ErrnoToStatus(errno, "mbind(node 1)").
Status ErrnoToStatus(int err, std::string_view what);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& s) : v_(s) {}          // NOLINT: implicit by design
  StatusOr(Status&& s) : v_(std::move(s)) {}    // NOLINT
  StatusOr(const T& value) : v_(value) {}       // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {} // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace tiermem

#define TIERMEM_CONCAT_INNER_(a, b) a##b
#define TIERMEM_CONCAT_(a, b) TIERMEM_CONCAT_INNER_(a, b)

// Returns early from the enclosing function when `expr` (a Status) is not ok.
#define TIERMEM_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::tiermem::Status tiermem_status_ = (expr);    \
    if (!tiermem_status_.ok()) return tiermem_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or return its status.
#define TIERMEM_ASSIGN_OR_RETURN(lhs, expr) \
  TIERMEM_ASSIGN_OR_RETURN_IMPL_(TIERMEM_CONCAT_(tiermem_sor_, __LINE__), lhs, expr)
#define TIERMEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
