#include "platform/linux/cgroups.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <sstream>
#include <thread>

#include "platform/linux/file_io.hpp"

namespace castellan::platform {

namespace {

/// The controllers castellan uses, in the order they are reported.
const char* const wanted_controllers[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> split_ws(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string word;
  while (in >> word)
    out.push_back(word);
  return out;
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto digit = [&](std::size_t k) { return s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && digit(i + 1) && digit(i + 2) && digit(i + 3)) {
      const int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out += static_cast<char>(v);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

struct mount_record {
  std::string root;
  std::string mount_point;
  std::string fstype;
  std::vector<std::string> super_options;
};

std::vector<mount_record> cgroup_mounts(const std::string& mountinfo) {
  std::vector<mount_record> out;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    auto fields = split_ws(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 7 || dash == fields.end())
      continue;
    const std::size_t d = static_cast<std::size_t>(dash - fields.begin());
    if (d < 5 || d + 3 >= fields.size())
      continue;
    mount_record rec;
    rec.root = unescape_mountinfo(fields[3]);
    rec.mount_point = unescape_mountinfo(fields[4]);
    rec.fstype = fields[d + 1];
    if (rec.fstype != "cgroup" && rec.fstype != "cgroup2")
      continue;
    rec.super_options = split(fields[d + 3], ',');
    out.push_back(std::move(rec));
  }
  return out;
}

/// `own` (a cgroup path) seen through a mount of the hierarchy rooted at
/// `root` at `mount_point`; empty when the own cgroup is not visible there.
std::string own_dir_in(const mount_record& m, const std::string& own) {
  if (m.root == "/")
    return own == "/" ? m.mount_point : m.mount_point + own;
  if (own == m.root)
    return m.mount_point;
  if (own.size() > m.root.size() && own.compare(0, m.root.size(), m.root) == 0 &&
      own[m.root.size()] == '/')
    return m.mount_point + own.substr(m.root.size());
  return {};
}

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.size() < 200;
}

/// Removes `dir` and every cgroup directory below it (depth first).
outcome<void> remove_tree_once(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != ".." && e->d_type == DT_DIR)
        children.push_back(dir + "/" + n);
    }
    ::closedir(d);
    for (const auto& c : children)
      if (auto r = remove_tree_once(c); !r)
        return r;
  } else if (errno == ENOENT) {
    return {};
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    return errno_failure("cgroup: rmdir " + dir);
  return {};
}

std::optional<uint64_t> read_u64(const std::string& path) {
  auto text = read_text_file(path, 4096);
  if (!text)
    return std::nullopt;
  if (text->rfind("max", 0) == 0)
    return UINT64_MAX;
  return parse_u64(*text);
}

std::optional<uint64_t> read_keyed(const std::string& path, const std::string& key) {
  auto text = read_text_file(path, 1 << 16);
  if (!text)
    return std::nullopt;
  return keyed_value(*text, key);
}

std::atomic<uint64_t> name_counter{0};

} // namespace

const char* to_string(cgroup_version v) noexcept {
  return v == cgroup_version::v2 ? "v2" : "v1";
}

// --- layout ---------------------------------------------------------------

outcome<cgroup_layout> cgroup_layout::parse(const std::string& mountinfo,
                                            const std::string& proc_self_cgroup,
                                            const std::string& v2_controllers) {
  cgroup_layout layout;
  const auto mounts = cgroup_mounts(mountinfo);
  // /proc/self/cgroup: "id:controllers:path"; v2 is "0::path".
  std::vector<std::pair<std::vector<std::string>, std::string>> v1_paths;
  std::string v2_path;
  std::istringstream in(proc_self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos)
      return logic_failure("cgroup layout: malformed /proc/self/cgroup line '" + line + "'");
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty())
      v2_path = path;
    else
      v1_paths.emplace_back(split(controllers, ','), path);
  }
  const auto v2_available = split_ws(v2_controllers);
  if (!v2_path.empty()) {
    for (const auto& m : mounts) {
      if (m.fstype != "cgroup2")
        continue;
      layout.v2_mount_ = m.mount_point;
      layout.v2_own_dir_ = own_dir_in(m, v2_path);
      break;
    }
  }
  for (const char* wanted : wanted_controllers) {
    cgroup_controller c;
    c.name = wanted;
    const bool on_v2 = !layout.v2_own_dir_.empty() &&
                       std::find(v2_available.begin(), v2_available.end(), c.name) !=
                         v2_available.end();
    if (on_v2) {
      c.version = cgroup_version::v2;
      c.own_dir = layout.v2_own_dir_;
      layout.controllers_.push_back(c);
      continue;
    }
    // v1: the hierarchy whose line in /proc/self/cgroup lists it, and a
    // cgroup mount whose super options list it.
    for (const auto& [names, path] : v1_paths) {
      if (std::find(names.begin(), names.end(), c.name) == names.end())
        continue;
      for (const auto& m : mounts) {
        if (m.fstype != "cgroup" || std::find(m.super_options.begin(), m.super_options.end(),
                                              c.name) == m.super_options.end())
          continue;
        std::string dir = own_dir_in(m, path);
        if (dir.empty())
          continue;
        c.version = cgroup_version::v1;
        c.own_dir = dir;
        layout.controllers_.push_back(c);
        break;
      }
      break;
    }
  }
  return layout;
}

outcome<cgroup_layout> cgroup_layout::detect() {
  auto mountinfo = read_text_file("/proc/self/mountinfo", 4 << 20);
  if (!mountinfo)
    return mountinfo.error().wrap("cgroup layout");
  auto self = read_text_file("/proc/self/cgroup", 1 << 16);
  if (!self)
    return self.error().wrap("cgroup layout");
  auto first = parse(*mountinfo, *self, "");
  if (!first)
    return first;
  if (first->v2_own_dir_.empty())
    return first;
  auto v2 = read_text_file(first->v2_own_dir_ + "/cgroup.controllers", 4096);
  if (!v2)
    return first; // a v2 mount we cannot read: v1 only
  return parse(*mountinfo, *self, *v2);
}

cgroup_layout cgroup_layout::below(const std::string& relative) const {
  cgroup_layout out = *this;
  for (auto& c : out.controllers_)
    c.own_dir += "/" + relative;
  if (!out.v2_own_dir_.empty())
    out.v2_own_dir_ += "/" + relative;
  return out;
}

const cgroup_controller* cgroup_layout::find(const std::string& name) const noexcept {
  for (const auto& c : controllers_)
    if (c.name == name)
      return &c;
  return nullptr;
}

// --- worker_cgroup --------------------------------------------------------

std::string worker_cgroup::unique_name(const std::string& prefix) {
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(++name_counter);
}

outcome<worker_cgroup> worker_cgroup::create(const cgroup_layout& layout, const std::string& name,
                                             const cgroup_limits& limits) {
  if (!valid_name(name))
    return logic_failure("cgroup: invalid name '" + name + "'");
  auto require = [&](const char* controller, bool needed) -> outcome<void> {
    if (needed && !layout.find(controller))
      return logic_failure(std::string("cgroup: a limit needs the '") + controller +
                           "' controller, which neither cgroup v2 nor a v1 hierarchy offers "
                           "to this process");
    return {};
  };
  if (auto r = require("memory", limits.memory_bytes != 0); !r)
    return r.error();
  if (auto r = require("pids", limits.pids != 0); !r)
    return r.error();
  if (auto r = require("cpu", limits.cpu_percent != 0); !r)
    return r.error();

  worker_cgroup cg;
  // One node per distinct own directory (co-mounted v1 controllers and all
  // of v2 share one).
  std::vector<std::string> v2_needed;
  for (const auto& c : layout.controllers()) {
    const std::string dir = c.own_dir + "/" + name;
    auto it = std::find_if(cg.nodes_.begin(), cg.nodes_.end(),
                           [&](const node& n) { return n.dir == dir; });
    std::size_t index;
    if (it == cg.nodes_.end()) {
      cg.nodes_.push_back(node{c.name, c.version, dir});
      index = cg.nodes_.size() - 1;
    } else {
      it->controller += "," + c.name;
      index = static_cast<std::size_t>(it - cg.nodes_.begin());
    }
    cg.by_controller_.emplace_back(c.name, index);
    if (c.version == cgroup_version::v2)
      v2_needed.push_back(c.name);
  }
  if (cg.nodes_.empty())
    return logic_failure("cgroup: no usable controller (memory, pids, cpu) on this system");

  // v2: the controllers must be enabled for our children.
  if (!v2_needed.empty()) {
    const std::string control = layout.v2_own_dir() + "/cgroup.subtree_control";
    auto enabled = read_text_file(control, 4096);
    if (!enabled)
      return enabled.error().wrap("cgroup");
    const auto on = split_ws(*enabled);
    std::string add;
    for (const auto& c : v2_needed)
      if (std::find(on.begin(), on.end(), c) == on.end())
        add += (add.empty() ? "+" : " +") + c;
    if (!add.empty()) {
      if (auto r = write_text_file(control, add); !r)
        return r.error().wrap(
          "cgroup: enabling controllers for children of our own v2 cgroup (EBUSY means "
          "this process sits in that cgroup itself: cgroup v2 allows controllers for "
          "children only in cgroups without processes; run the supervisor in a leaf and "
          "delegate its parent)");
    }
  }

  for (std::size_t i = 0; i < cg.nodes_.size(); ++i) {
    if (::mkdir(cg.nodes_[i].dir.c_str(), 0755) != 0) {
      // EEXIST included: never adopt (and later remove) a cgroup we did not make.
      const failure f = errno_failure("cgroup: mkdir " + cg.nodes_[i].dir);
      for (std::size_t j = i; j-- > 0;)
        ::rmdir(cg.nodes_[j].dir.c_str());
      return f;
    }
  }
  cg.removed_ = false; // from here on, cg's destructor removes what we made

  auto set = [&](const std::string& controller, const std::string& file,
                 const std::string& value) -> outcome<void> {
    const node* n = cg.node_for(controller);
    return write_text_file(n->dir + "/" + file, value);
  };
  auto has = [&](const std::string& controller, const std::string& file) {
    const node* n = cg.node_for(controller);
    return n && path_exists(n->dir + "/" + file);
  };
  const cgroup_controller* memory = layout.find("memory");
  if (limits.memory_bytes != 0) {
    const std::string bytes = std::to_string(limits.memory_bytes);
    if (memory->version == cgroup_version::v1) {
      if (auto r = set("memory", "memory.limit_in_bytes", bytes); !r)
        return r.error().wrap("cgroup");
      // RAM + swap = RAM: no swap (memsw exists when swap accounting is on).
      if (has("memory", "memory.memsw.limit_in_bytes"))
        if (auto r = set("memory", "memory.memsw.limit_in_bytes", bytes); !r)
          return r.error().wrap("cgroup");
    } else {
      if (auto r = set("memory", "memory.max", bytes); !r)
        return r.error().wrap("cgroup");
      if (has("memory", "memory.swap.max"))
        if (auto r = set("memory", "memory.swap.max", "0"); !r)
          return r.error().wrap("cgroup");
      if (has("memory", "memory.oom.group"))
        if (auto r = set("memory", "memory.oom.group", "1"); !r)
          return r.error().wrap("cgroup");
    }
  }
  if (limits.pids != 0)
    if (auto r = set("pids", "pids.max", std::to_string(limits.pids)); !r)
      return r.error().wrap("cgroup");
  if (limits.cpu_percent != 0) {
    constexpr uint64_t period = 100'000;
    const uint64_t quota = period * limits.cpu_percent / 100;
    if (layout.find("cpu")->version == cgroup_version::v1) {
      if (auto r = set("cpu", "cpu.cfs_period_us", std::to_string(period)); !r)
        return r.error().wrap("cgroup");
      if (auto r = set("cpu", "cpu.cfs_quota_us", std::to_string(quota)); !r)
        return r.error().wrap("cgroup");
    } else if (auto r = set("cpu", "cpu.max", std::to_string(quota) + " " + std::to_string(period));
               !r) {
      return r.error().wrap("cgroup");
    }
  }
  return cg;
}

worker_cgroup::worker_cgroup(worker_cgroup&& other) noexcept
  : nodes_(std::move(other.nodes_)),
    by_controller_(std::move(other.by_controller_)),
    removed_(std::exchange(other.removed_, true)) {}

worker_cgroup& worker_cgroup::operator=(worker_cgroup&& other) noexcept {
  if (this != &other) {
    if (!removed_) {
      (void)kill_all(std::chrono::seconds(1));
      (void)remove(std::chrono::seconds(2));
    }
    nodes_ = std::move(other.nodes_);
    by_controller_ = std::move(other.by_controller_);
    removed_ = std::exchange(other.removed_, true);
  }
  return *this;
}

worker_cgroup::~worker_cgroup() {
  if (removed_)
    return;
  (void)kill_all(std::chrono::seconds(1));
  (void)remove(std::chrono::seconds(2));
}

const worker_cgroup::node* worker_cgroup::node_for(const std::string& controller) const noexcept {
  for (const auto& [name, index] : by_controller_)
    if (name == controller)
      return &nodes_[index];
  return nullptr;
}

std::vector<std::string> worker_cgroup::directories() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_)
    out.push_back(n.dir);
  return out;
}

std::string worker_cgroup::v2_directory() const {
  for (const auto& n : nodes_)
    if (n.version == cgroup_version::v2)
      return n.dir;
  return {};
}

cgroup_placement worker_cgroup::placement() const {
  cgroup_placement p;
  for (const auto& n : nodes_) {
    if (n.version == cgroup_version::v2)
      p.clone_into = n.dir;
    else
      p.directories.push_back(n.dir);
  }
  return p;
}

std::string worker_cgroup::describe() const {
  std::string out;
  for (const auto& [name, index] : by_controller_)
    out += (out.empty() ? "" : ",") + name + "=" + to_string(nodes_[index].version);
  return out;
}

outcome<void> worker_cgroup::attach(pid_t pid) {
  const std::string text = std::to_string(pid);
  for (const auto& n : nodes_)
    if (auto r = write_text_file(n.dir + "/cgroup.procs", text); !r)
      return r.error().wrap("cgroup: attach");
  return {};
}

outcome<std::vector<pid_t>> worker_cgroup::pids() const {
  std::vector<pid_t> out;
  if (nodes_.empty())
    return out;
  auto text = read_text_file(nodes_.front().dir + "/cgroup.procs", 4 << 20);
  if (!text)
    return text.error().wrap("cgroup");
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line))
    if (auto v = parse_u64(line))
      out.push_back(static_cast<pid_t>(*v));
  return out;
}

outcome<cgroup_applied_limits> worker_cgroup::applied_limits() const {
  cgroup_applied_limits out;
  if (const node* m = node_for("memory")) {
    if (m->version == cgroup_version::v1) {
      out.memory_bytes = read_u64(m->dir + "/memory.limit_in_bytes");
      out.memory_swap_bytes = read_u64(m->dir + "/memory.memsw.limit_in_bytes");
    } else {
      out.memory_bytes = read_u64(m->dir + "/memory.max");
      out.memory_swap_bytes = read_u64(m->dir + "/memory.swap.max");
    }
  }
  if (const node* p = node_for("pids"))
    out.pids = read_u64(p->dir + "/pids.max");
  if (const node* c = node_for("cpu")) {
    if (c->version == cgroup_version::v1) {
      out.cpu_quota_us = read_u64(c->dir + "/cpu.cfs_quota_us");
      out.cpu_period_us = read_u64(c->dir + "/cpu.cfs_period_us");
    } else if (auto text = read_text_file(c->dir + "/cpu.max", 4096)) {
      const auto words = split_ws(*text);
      if (words.size() == 2) {
        out.cpu_quota_us = words[0] == "max" ? std::optional<uint64_t>(UINT64_MAX)
                                             : parse_u64(words[0]);
        out.cpu_period_us = parse_u64(words[1]);
      }
    }
  }
  return out;
}

outcome<cgroup_usage> worker_cgroup::usage() const {
  cgroup_usage out;
  if (const node* m = node_for("memory")) {
    if (m->version == cgroup_version::v1) {
      out.memory_current_bytes = read_u64(m->dir + "/memory.usage_in_bytes");
      out.memory_peak_bytes = read_u64(m->dir + "/memory.max_usage_in_bytes");
      out.oom_kills = read_keyed(m->dir + "/memory.oom_control", "oom_kill");
    } else {
      out.memory_current_bytes = read_u64(m->dir + "/memory.current");
      out.memory_peak_bytes = read_u64(m->dir + "/memory.peak");
      out.oom_kills = read_keyed(m->dir + "/memory.events", "oom_kill");
    }
  }
  if (const node* p = node_for("pids"))
    out.pids_current = read_u64(p->dir + "/pids.current");
  const std::string v2 = v2_directory();
  if (!v2.empty())
    out.cpu_usec = read_keyed(v2 + "/cpu.stat", "usage_usec");
  if (!out.cpu_usec) {
    if (const node* a = node_for("cpuacct")) {
      if (auto ns = read_u64(a->dir + "/cpuacct.usage"))
        out.cpu_usec = *ns / 1000;
    }
  }
  return out;
}

std::string worker_cgroup::directory_of(const std::string& controller,
                                       cgroup_version* version) const {
  const node* n = node_for(controller);
  if (n == nullptr)
    return {};
  if (version != nullptr)
    *version = n->version;
  return n->dir;
}

bool worker_cgroup::reset_peak_memory() noexcept {
  const node* m = node_for("memory");
  if (m == nullptr)
    return false;
  const std::string file =
    m->dir + (m->version == cgroup_version::v1 ? "/memory.max_usage_in_bytes" : "/memory.peak");
  return static_cast<bool>(write_text_file(file, m->version == cgroup_version::v1 ? "0" : "reset"));
}

outcome<worker_cgroup::signal_pass> worker_cgroup::signal_all(bool use_freezer) noexcept {
  signal_pass pass;
  try {
    const std::string v2 = v2_directory();
    if (!v2.empty() && path_exists(v2 + "/cgroup.kill")) {
      if (auto r = write_text_file(v2 + "/cgroup.kill", "1"); !r)
        return r.error().wrap("cgroup: kill");
      pass.method = "cgroup.kill";
      return pass;
    }
    const node* freezer = node_for("freezer");
    const bool freeze = use_freezer && freezer && freezer->version == cgroup_version::v1;
    // Freezing is asynchronous; writing FROZEN is enough for our purpose:
    // from here on a task the freezer reaches stops, and a child forked
    // meanwhile is born freezing. A SIGKILL sent to a frozen task is acted on
    // at the thaw.
    if (freeze)
      if (auto r = write_text_file(freezer->dir + "/freezer.state", "FROZEN"); !r)
        return r.error().wrap("cgroup: freeze");
    auto victims = pids();
    if (victims)
      for (pid_t p : *victims)
        if (::kill(p, SIGKILL) == 0)
          ++pass.tasks;
    if (freeze)
      if (auto r = write_text_file(freezer->dir + "/freezer.state", "THAWED"); !r)
        return r.error().wrap("cgroup: thaw");
    if (!victims)
      return victims.error();
    pass.method = freeze ? "freezer" : "kill-loop";
    return pass;
  } catch (const std::bad_alloc&) {
    return logic_failure("cgroup: kill: out of memory");
  }
}

outcome<void> worker_cgroup::kill_all(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (int pass = 0;; ++pass) {
    auto left = pids();
    if (!left)
      return left.error();
    if (left->empty())
      return {};
    if (clock::now() >= deadline)
      return logic_failure("cgroup: " + std::to_string(left->size()) +
                           " task(s) still alive after the kill (first pid " +
                           std::to_string(left->front()) + ")");
    // Usually the tasks are dying already (their namespace's init is gone)
    // or one plain pass ends them: a task with SIGKILL pending forks no
    // more, and the next pass gets the children forked before it. The
    // freezer (milliseconds per use on v1) only if forks keep up.
    if (auto signalled = signal_all(pass >= 3); !signalled)
      return signalled.error();
    // Killed tasks leave cgroup.procs once they have exited; until then
    // they are listed (and signalled again, which is harmless).
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

outcome<void> worker_cgroup::remove(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    for (;;) {
      auto r = remove_tree_once(it->dir);
      if (r)
        break;
      if (r.error().code != EBUSY || clock::now() >= deadline)
        return r.error();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  removed_ = true;
  return {};
}

} // namespace castellan::platform
