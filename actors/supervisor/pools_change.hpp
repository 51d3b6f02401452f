#pragma once

/// @file pools_change.hpp
/// What the supervisor's reconfigure (supervisor_actor.hpp) did to its
/// configured pools, by name.

#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace castellan {

/// The pools a reconfigure started, stopped, resized or replaced. All empty:
/// the new list was the one in force.
struct pools_change {
  std::vector<std::string> added;    ///< new names, started
  std::vector<std::string> removed;  ///< names gone: drained, then stopped
  std::vector<std::string> resized;  ///< only `size` changed
  std::vector<std::string> replaced; ///< other settings changed: a new pool, the old one drained
  bool default_changed = false;      ///< the first pool (the default route) is another one
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pools_change& x) {
  return f(caf::meta::type_name("pools_change"), x.added, x.removed, x.resized, x.replaced,
           x.default_changed);
}

/// One line for humans: "added c; removed b; resized a" ("no pool changed").
std::string describe(const pools_change& x);

} // namespace castellan
