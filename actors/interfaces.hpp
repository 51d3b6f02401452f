#pragma once

/// @file interfaces.hpp
/// The typed handles of castellan's actors, in one include for embedders.

#include "actors/actor_system_setup.hpp"
#include "actors/messages.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/session/session_actor.hpp"
#include "actors/supervisor/supervisor_actor.hpp"
