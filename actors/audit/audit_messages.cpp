#include "actors/audit/audit_messages.hpp"

namespace castellan {

std::string to_string(fsync_policy x) {
  switch (x) {
  case fsync_policy::never:
    return "never";
  case fsync_policy::interval:
    return "interval";
  case fsync_policy::every_record:
    return "every_record";
  }
  return "interval";
}

bool from_string(const std::string& name, fsync_policy& out) {
  for (auto x : {fsync_policy::never, fsync_policy::interval, fsync_policy::every_record}) {
    if (to_string(x) == name) {
      out = x;
      return true;
    }
  }
  return false;
}

} // namespace castellan
