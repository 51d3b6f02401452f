#include "actors/policy/policy_actor.hpp"

#include <time.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <caf/actor_cast.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/errors.hpp"
#include "actors/policy/directory_watcher.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"

namespace castellan {

namespace {

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<std::string> describe_all(const std::vector<policy::policy_error>& errors) {
  std::vector<std::string> out;
  out.reserve(errors.size());
  for (const auto& e : errors)
    out.push_back(e.describe());
  return out;
}

// What decides whether a reload changed a policy: its JSON and where each
// rule came from (explanations name the origin).
std::string fingerprint(const policy::policy_document& doc) {
  std::string fp = to_json(doc).dump();
  for (const auto& r : doc.fs_rules)
    fp += '\n' + r.origin;
  for (const auto& r : doc.net_rules)
    fp += '\n' + r.origin;
  for (const auto& r : doc.exec_rules)
    fp += '\n' + r.origin;
  return fp;
}

std::string file_name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The watcher thread's way to the actor: a weak reference, so that the
/// thread never keeps the actor alive. Events that arrive before the actor
/// exists are remembered as one rescan, sent when it is set.
class actor_slot {
public:
  void set(caf::weak_actor_ptr p) {
    std::lock_guard<std::mutex> guard{mtx_};
    ptr_ = std::move(p);
    if (pending_)
      if (auto hdl = caf::actor_cast<policy_actor>(ptr_.lock()))
        caf::anon_send(hdl, policy_file_event{});
    pending_ = false;
  }

  void forward(const std::string& file) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!ptr_) {
      pending_ = true;
      return;
    }
    if (auto hdl = caf::actor_cast<policy_actor>(ptr_.lock()))
      caf::anon_send(hdl, policy_file_event{file});
  }

private:
  std::mutex mtx_;
  caf::weak_actor_ptr ptr_;
  bool pending_ = false;
};

struct policy_entry {
  std::string path; ///< empty for policies put by message
  policy_snapshot snapshot;
  std::string fingerprint;
};

struct policy_state {
  static inline const char* name = "castellan.policy";

  policy_config cfg;
  std::map<std::string, policy_entry> policies;
  std::map<std::string, policy_rejected> rejected;
  std::vector<caf::actor> subscribers;
  std::shared_ptr<directory_watcher> watcher; ///< stops (joins) when the state goes
  uint64_t last_revision = 0;
};

using policy_pointer = policy_actor::stateful_pointer<policy_state>;

// Subscribers are dynamically typed, which a typed actor may not send() to:
// the notifications go out anonymously.
template <class Message> void notify(policy_pointer self, const Message& msg) {
  for (const auto& s : self->state.subscribers)
    caf::anon_send(s, msg);
}

void publish(policy_pointer self, const std::string& name, const std::string& path,
             policy::policy_document doc, std::string fp) {
  auto& st = self->state;
  const uint64_t revision = ++st.last_revision;
  policy_snapshot snap{policy::compiled_policy::compile(std::move(doc), name, revision)};
  st.policies[name] = policy_entry{path, snap, std::move(fp)};
  st.rejected.erase(name);
  notify(self, policy_updated{name, path, revision, std::move(snap), realtime_ns()});
}

void reject(policy_pointer self, policy_rejected r, bool always_notify) {
  auto& st = self->state;
  auto prev = st.rejected.find(r.policy_name);
  const bool changed = prev == st.rejected.end() || prev->second.errors != r.errors;
  st.rejected[r.policy_name] = r;
  if (changed || always_notify)
    notify(self, r);
}

policy_status status_of(policy_pointer self) {
  auto& st = self->state;
  policy_status out;
  out.directory = st.cfg.directory;
  for (const auto& [name, e] : st.policies)
    out.loaded.push_back(name + "@" + std::to_string(e.snapshot->revision()));
  for (const auto& [name, r] : st.rejected)
    out.rejected.push_back(r);
  return out;
}

/// Reloads every policy of the directory. `trigger` names the file the
/// watcher saw change ("" for a full rescan): its refusal is announced even
/// when the errors are the same as last time (someone just saved it).
void rescan(policy_pointer self, const std::string& trigger) {
  auto& st = self->state;
  const std::string& dir = st.cfg.directory;
  auto files = policy::list_policy_files(dir);
  if (!files) {
    // Keep every loaded policy; say why nothing was reloaded.
    reject(self, policy_rejected{"", dir, {files.error().describe()}, realtime_ns()}, false);
    return;
  }
  st.rejected.erase("");
  std::set<std::string> seen;
  for (const auto& path : *files) {
    const std::string name = policy::policy_name_of(path);
    seen.insert(name);
    auto doc = policy::load_policy(path, dir);
    if (!doc) {
      reject(self, policy_rejected{name, path, describe_all(doc.errors()), realtime_ns()},
             file_name_of(path) == trigger);
      continue;
    }
    std::string fp = fingerprint(*doc);
    auto it = st.policies.find(name);
    if (it != st.policies.end() && it->second.fingerprint == fp && it->second.path == path) {
      st.rejected.erase(name);
      continue;
    }
    publish(self, name, path, std::move(*doc), std::move(fp));
  }
  for (const auto& [name, e] : st.policies) {
    if (e.path.empty() || seen.count(name) != 0)
      continue;
    // Removing a file never removes a policy a pool may be running with.
    reject(self,
           policy_rejected{name,
                           e.path,
                           {e.path + ": file removed; revision " +
                            std::to_string(e.snapshot->revision()) + " stays in force"},
                           realtime_ns()},
           false);
  }
}

template <class Check>
caf::result<policy_decision> decide(policy_pointer self, const std::string& name, Check&& check) {
  auto it = self->state.policies.find(name);
  if (it == self->state.policies.end())
    return make_error(castellan_errc::no_such_policy, name);
  const auto& snap = *it->second.snapshot.policy;
  return make_policy_decision(snap, check(snap));
}

policy_actor::behavior_type policy_main(policy_pointer self, policy_config cfg,
                                        std::shared_ptr<directory_watcher> watcher) {
  self->state.cfg = std::move(cfg);
  self->state.watcher = std::move(watcher);
  rescan(self, std::string{});
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& subs = self->state.subscribers;
    subs.erase(std::remove_if(subs.begin(), subs.end(),
                              [&](const caf::actor& a) { return a.address() == dm.source; }),
               subs.end());
  });
  return {
      [self](policy_get_atom, const std::string& name) -> caf::result<policy_snapshot> {
        auto it = self->state.policies.find(name);
        if (it == self->state.policies.end())
          return make_error(castellan_errc::no_such_policy, name);
        return it->second.snapshot;
      },
      [self](policy_list_atom) {
        std::vector<std::string> out;
        for (const auto& [name, e] : self->state.policies)
          out.push_back(name);
        return out;
      },
      [self](policy_put_atom, const std::string& name,
             const std::string& text) -> caf::result<policy_snapshot> {
        const std::string& dir = self->state.cfg.directory;
        auto parsed = policy::parse_policy(text, "<" + name + ">");
        if (!parsed)
          return make_error(castellan_errc::policy_invalid, parsed.to_failure());
        auto doc = policy::resolve_extends(*parsed, dir, dir);
        if (!doc)
          return make_error(castellan_errc::policy_invalid, doc.to_failure());
        std::string fp = fingerprint(*doc);
        publish(self, name, std::string{}, std::move(*doc), std::move(fp));
        return self->state.policies[name].snapshot;
      },
      [self](const fs_check& q) {
        return decide(self, q.policy, [&](const policy::compiled_policy& p) {
          return p.check_fs(q.path, q.access);
        });
      },
      [self](const net_check& q) {
        return decide(self, q.policy, [&](const policy::compiled_policy& p) {
          auto proto = policy::parse_net_proto(q.proto);
          if (!proto)
            return policy::detail::invalid_decision();
          return p.check_net(*proto, q.address, q.port, q.host);
        });
      },
      [self](const exec_check& q) {
        return decide(self, q.policy, [&](const policy::compiled_policy& p) {
          return p.check_exec(q.path, q.sha256);
        });
      },
      [self](subscribe_atom, const caf::actor& who) {
        auto& subs = self->state.subscribers;
        if (!who || std::find(subs.begin(), subs.end(), who) != subs.end())
          return;
        self->monitor(who);
        subs.push_back(who);
      },
      [self](unsubscribe_atom, const caf::actor& who) {
        auto& subs = self->state.subscribers;
        subs.erase(std::remove(subs.begin(), subs.end(), who), subs.end());
      },
      [self](policy_reload_atom) {
        rescan(self, std::string{});
        return status_of(self);
      },
      [self](status_atom) { return status_of(self); },
      [self](const policy_file_event& ev) { rescan(self, ev.file_name); },
  };
}

} // namespace

caf::expected<policy_actor> spawn_policy(caf::actor_system& sys, policy_config cfg) {
  auto files = policy::list_policy_files(cfg.directory);
  if (!files)
    return make_error(castellan_errc::io_failed, files.error());
  auto slot = std::make_shared<actor_slot>();
  std::shared_ptr<directory_watcher> watcher;
  if (cfg.watch) {
    // Started before the first load, so no change can fall between the two.
    auto w = directory_watcher::start(cfg.directory,
                                      [slot](const std::string& file) { slot->forward(file); });
    if (!w)
      return make_error(castellan_errc::io_failed, w.error());
    watcher = std::move(*w);
  }
  auto hdl = sys.spawn(policy_main, std::move(cfg), std::move(watcher));
  slot->set(caf::actor_cast<caf::weak_actor_ptr>(hdl));
  return hdl;
}

} // namespace castellan
