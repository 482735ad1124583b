#include "tiermem/status.hpp"

#include <cerrno>
#include <cstring>
#include <string>

namespace tiermem {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kNotSupported: return "not_supported";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kDataLoss: return "data_loss";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

int Status::ToErrno() const {
  switch (code_) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return -EINVAL;
    case StatusCode::kNotFound: return -ENOENT;
    case StatusCode::kUnavailable: return -ENODEV;
    case StatusCode::kNotSupported: return -EOPNOTSUPP;
    case StatusCode::kResourceExhausted: return -ENOMEM;
    case StatusCode::kPermissionDenied: return -EACCES;
    case StatusCode::kDeadlineExceeded: return -ETIMEDOUT;
    case StatusCode::kDataLoss: return -EIO;
    case StatusCode::kAborted: return -ECONNABORTED;
    case StatusCode::kInternal: return -EFAULT;
  }
  return -EFAULT;
}

Status ErrnoToStatus(int err, std::string_view what) {
  if (err < 0) err = -err;
  char buf[128];
  // GNU strerror_r returns the message pointer (maybe not buf).
  const char* msg = strerror_r(err, buf, sizeof(buf));
  std::string m(what);
  m += ": ";
  m += msg;
  m += " (errno " + std::to_string(err) + ")";
  StatusCode code;
  switch (err) {
    case 0: return Status::Ok();
    case EINVAL: case EFAULT: case EBADF: case ERANGE: case E2BIG:
      code = StatusCode::kInvalidArgument; break;
    case ENOENT: case ENODEV: case ENXIO: case ESRCH:
      code = StatusCode::kNotFound; break;
    case ENOMEM: case ENOSPC: case EMFILE: case ENFILE: case EDQUOT:
      code = StatusCode::kResourceExhausted; break;
    case EPERM: case EACCES:
      code = StatusCode::kPermissionDenied; break;
    case ENOSYS: case EOPNOTSUPP: case EAFNOSUPPORT: case EPROTONOSUPPORT:
      code = StatusCode::kNotSupported; break;
    case ETIMEDOUT:
      code = StatusCode::kDeadlineExceeded; break;
    case ECONNREFUSED: case ECONNRESET: case EPIPE: case EHOSTUNREACH: case ENETUNREACH:
    case EAGAIN: case EBUSY: case ENOTCONN:
      code = StatusCode::kUnavailable; break;
    case EIO:
      code = StatusCode::kDataLoss; break;
    default:
      code = StatusCode::kInternal; break;
  }
  return Status(code, std::move(m));
}

}  // namespace tiermem
