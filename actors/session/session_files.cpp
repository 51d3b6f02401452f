#include "actors/session/session_files.hpp"

#include <optional>

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "actors/session/workspace_store.hpp"
#include "platform/linux/workspace_files.hpp"
#include "platform/linux/workspace_path.hpp"
#include "platform/linux/workspace_transfer.hpp"

namespace castellan {

namespace {

files_entry entry_of(const platform::workspace_entry& e) {
  files_entry out;
  out.name = e.name;
  out.type = platform::to_string(e.type);
  out.size = e.size;
  out.mode = e.mode;
  out.mtime_ns = e.mtime_ns;
  out.link_target = e.link_target;
  return out;
}

files_reply failed(const failure& f, std::string path) {
  files_reply r;
  r.error = platform::files_error_code(f);
  r.message = f.describe();
  r.path = std::move(path);
  return r;
}

files_reply run(const files_root& root, files_request& req) {
  auto path = platform::parse_workspace_path(req.path);
  if (!path)
    return failed(path.error(), req.path);
  files_reply r;
  r.path = path->display();
  const int fd = root.fd();
  switch (req.op) {
    case files_op::stat: {
      auto e = platform::stat_entry(fd, *path);
      if (!e)
        return failed(e.error(), r.path);
      r.entry = entry_of(*e);
      return r;
    }
    case files_op::list: {
      auto l = platform::list_directory(fd, *path);
      if (!l)
        return failed(l.error(), r.path);
      for (const auto& e : l->entries)
        r.entries.push_back(entry_of(e));
      r.truncated = l->truncated;
      return r;
    }
    case files_op::upload: {
      platform::upload_options opts;
      opts.owner = root.owner;
      opts.mode = req.mode;
      opts.max_bytes = max_upload_bytes;
      opts.make_parents = req.parents;
      auto up = platform::workspace_upload::begin(fd, *path, opts);
      if (!up)
        return failed(up.error(), r.path);
      std::string_view rest = req.data;
      while (!rest.empty()) {
        const auto n = std::min(rest.size(), files_chunk_bytes);
        if (auto w = up->write(rest.substr(0, n)); !w)
          return failed(w.error(), r.path);
        rest.remove_prefix(n);
      }
      req.data.clear();
      req.data.shrink_to_fit();
      auto e = up->commit();
      if (!e)
        return failed(e.error(), r.path);
      r.entry = entry_of(*e);
      return r;
    }
    case files_op::remove: {
      if (auto done = platform::remove_entry(fd, *path, req.recursive); !done)
        return failed(done.error(), r.path);
      return r;
    }
    case files_op::mkdir: {
      if (auto done = platform::make_directory(fd, *path, req.parents, root.owner); !done)
        return failed(done.error(), r.path);
      if (auto e = platform::stat_entry(fd, *path))
        r.entry = entry_of(*e);
      return r;
    }
  }
  return failed(failure{EINVAL, "unknown files operation"}, r.path);
}

struct job_state {
  static inline const char* name = "castellan.files_job";
  std::shared_ptr<const files_root> root;
  std::optional<platform::workspace_download> download;
};

using job_ptr = files_job_actor::stateful_pointer<job_state>;

files_job_actor::behavior_type job_impl(job_ptr self, std::shared_ptr<const files_root> root) {
  self->state.root = std::move(root);
  return {
    [=](files_atom, files_request& req) -> files_reply {
      auto r = run(*self->state.root, req);
      self->quit();
      return r;
    },
    [=](files_download_atom, const std::string& text) -> download_ticket {
      download_ticket t;
      auto path = platform::parse_workspace_path(text);
      if (!path) {
        t.head = failed(path.error(), text);
        self->quit();
        return t;
      }
      t.head.path = path->display();
      auto d = platform::workspace_download::open(self->state.root->fd(), *path);
      if (!d) {
        t.head = failed(d.error(), t.head.path);
        self->quit();
        return t;
      }
      t.head.entry = entry_of(d->entry());
      self->state.download.emplace(std::move(*d));
      // The root is not needed any more: the open file is all a download
      // reads from.
      self->state.root.reset();
      t.transfer = caf::actor_cast<caf::actor>(self);
      return t;
    },
    [=](files_read_atom) -> caf::result<std::string> {
      auto& d = self->state.download;
      if (!d) {
        self->quit();
        return make_error(castellan_errc::invalid_request, "no download is open");
      }
      auto chunk = d->read(files_chunk_bytes);
      if (!chunk) {
        self->quit();
        return make_error(castellan_errc::io_failed,
                          platform::files_error_code(chunk.error()) + ": " +
                            chunk.error().describe());
      }
      if (chunk->empty())
        self->quit();
      return std::move(*chunk);
    },
    caf::after(files_idle_timeout) >> [=] { self->quit(); },
  };
}

} // namespace

outcome<std::shared_ptr<const files_root>> open_files_root(std::shared_ptr<const unique_fd> root,
                                                          const std::string& name) {
  if (auto ok = platform::check_openat2(); !ok)
    return ok.error();
  if (!root || !*root)
    return logic_failure("workspace '" + name + "' comes without its lease's fd");
  auto owner = sandbox_owner();
  if (!owner)
    return owner.error();
  auto out = std::make_shared<files_root>();
  out->root = std::move(root);
  out->owner = *owner;
  out->name = name;
  return std::shared_ptr<const files_root>(std::move(out));
}

files_job_actor spawn_files_job(caf::actor_system& sys, std::shared_ptr<const files_root> root) {
  return sys.spawn<caf::detached>(job_impl, std::move(root));
}

} // namespace castellan
