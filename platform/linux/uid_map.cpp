#include "platform/linux/uid_map.hpp"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "platform/linux/file_io.hpp"

namespace castellan::platform {

namespace {

constexpr uint32_t nobody = 65534;

/// True if this process has CAP_SETUID and CAP_SETGID in its effective set.
bool has_setid_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0)
    return false;
  const uint32_t need = (1u << CAP_SETUID) | (1u << CAP_SETGID);
  return (data[0].effective & need) == need;
}

outcome<uint32_t> resolve(int64_t requested, uint32_t own, bool privileged, const char* what) {
  if (requested == id_mapping::automatic)
    return own == 0 ? nobody : own;
  if (requested < 0 || requested > 0xfffffffe)
    return logic_failure(std::string("id map: ") + what + " " + std::to_string(requested) +
                         " is not a valid id");
  const auto id = static_cast<uint32_t>(requested);
  if (id == 0)
    return logic_failure(std::string("id map: refusing to map the sandbox to host root (") +
                         what + " 0)");
  if (!privileged && id != own)
    return logic_failure(std::string("id map: ") + what + " " + std::to_string(id) +
                         " is not this process's own id (" + std::to_string(own) +
                         ") and it lacks CAP_SETUID/CAP_SETGID to map another");
  return id;
}

} // namespace

std::string id_map_plan::uid_map() const {
  return std::to_string(inside_uid) + " " + std::to_string(outside_uid) + " 1\n";
}

std::string id_map_plan::gid_map() const {
  return std::to_string(inside_gid) + " " + std::to_string(outside_gid) + " 1\n";
}

outcome<id_map_plan> plan_id_maps(const id_mapping& ids) {
  id_map_plan plan;
  plan.privileged = has_setid_capabilities();
  plan.inside_uid = ids.inside_uid;
  plan.inside_gid = ids.inside_gid;
  if (ids.inside_uid == 0 || ids.inside_gid == 0)
    return logic_failure("id map: the inside id must not be 0 (root inside the sandbox)");
  auto uid = resolve(ids.outside_uid, ::geteuid(), plan.privileged, "outside uid");
  if (!uid)
    return uid.error();
  auto gid = resolve(ids.outside_gid, ::getegid(), plan.privileged, "outside gid");
  if (!gid)
    return gid.error();
  plan.outside_uid = *uid;
  plan.outside_gid = *gid;
  return plan;
}

outcome<void> write_id_maps(pid_t pid, const id_map_plan& plan) {
  const std::string base = "/proc/" + std::to_string(pid) + "/";
  if (!plan.privileged) {
    if (auto r = write_text_file(base + "setgroups", "deny"); !r)
      return r.error().wrap("id map");
  }
  if (auto r = write_text_file(base + "uid_map", plan.uid_map()); !r)
    return r.error().wrap("id map");
  if (auto r = write_text_file(base + "gid_map", plan.gid_map()); !r)
    return r.error().wrap("id map");
  return {};
}

int become_sandbox_ids(const id_map_plan& plan, id_step& step) noexcept {
  if (plan.privileged) {
    step = id_step::setgroups;
    if (::syscall(SYS_setgroups, 0, nullptr) != 0)
      return errno;
  }
  step = id_step::setresgid;
  if (::syscall(SYS_setresgid, plan.inside_gid, plan.inside_gid, plan.inside_gid) != 0)
    return errno;
  step = id_step::setresuid;
  if (::syscall(SYS_setresuid, plan.inside_uid, plan.inside_uid, plan.inside_uid) != 0)
    return errno;
  step = id_step::none;
  return 0;
}

} // namespace castellan::platform
