#pragma once

/// @file pool_fixture.hpp
/// An actor system that spawns pools on demand and shuts them all down at
/// the end of the test.

#include <vector>

#include "support/actor_system_fixture.hpp"

namespace castellan::test {

struct pool_fixture : actor_system_fixture {
  ~pool_fixture() {
    for (auto& p : pools)
      caf::anon_send(p, shutdown_atom::value);
  }

  /// Spawns a pool from `pc` (the test fails if it cannot be spawned).
  pool_actor make(pool_config pc) {
    auto pool = spawn_pool(sys, std::move(pc));
    BOOST_REQUIRE_MESSAGE(pool, (pool ? "" : pool.error().describe()));
    pools.push_back(*pool);
    return *pool;
  }

  std::vector<pool_actor> pools;
};

} // namespace castellan::test
