#pragma once

/// @file workspace_routes.hpp
/// The workspace routes of the API (docs/api.md, "Workspaces"): `GET` and
/// `POST /v1/workspaces`, `DELETE /v1/workspaces/{name}`, over the
/// supervisor's workspace store. The store's names are one namespace; the
/// API gives each token a part of it of its own: a token's workspace `data`
/// is the store's `t<12 hex digits of the SHA-256 of the token's name>.data`,
/// so that a token lists, removes and binds (a session's `workspace`) only
/// its own workspaces, and never names another's. A caller without a token
/// (the unix socket's users) names the store's names as they are and sees
/// every workspace.
///
/// The api actor's messages for them:
///
///   (workspace_list_atom, uint64_t request_id, std::string owner)
///   (workspace_create_atom, uint64_t request_id, std::string owner, std::string name, uint64_t quota)
///   (workspace_remove_atom, uint64_t request_id, std::string owner, std::string name)
///
/// `owner` is the caller's token name ("" without one) and `name` the
/// client's; the handlers map both ways.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <caf/event_based_actor.hpp>
#include <caf/message.hpp>
#include <caf/message_handler.hpp>

#include "actors/api/access_control.hpp"
#include "actors/api/api_actor.hpp"
#include "actors/api/api_json.hpp"
#include "actors/api/http_server.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

namespace castellan::api {

/// The store's name of the workspace `owner` calls `name` (not checked).
std::string store_workspace_name(const std::string& owner, const std::string& name);

/// What `owner` calls the store's workspace `stored`; nullopt when it is
/// not one of `owner`'s.
std::optional<std::string> client_workspace_name(const std::string& owner,
                                                 const std::string& stored);

/// Why `name` cannot be a workspace of `owner` (the store's name rules,
/// with the room the owner's prefix takes), as the 400 naming `field`.
std::optional<api_error> check_workspace_name(const std::string& owner, const std::string& name,
                                              const std::string& field);

/// `path` is under /v1/workspaces.
bool is_workspace_path(std::string_view path);

/// A request to a workspace route, decided on the I/O thread: the response
/// to send at once, or the message for the api actor.
std::variant<http_response, caf::message> decide_workspace_request(const http_request& req,
                                                                    const caller& who);

/// The api actor's handlers of the messages above.
caf::message_handler workspace_handlers(caf::event_based_actor* self,
                                        supervisor_actor supervisor,
                                        std::shared_ptr<api_responder> responder);

} // namespace castellan::api
