#pragma once

/// @file package_etc.hpp
/// What a default sandbox sees of the host's /etc: what the installed
/// packages put there, minus secrets, instead of a hand-picked list (a
/// package reading its own configuration, like Debian's matplotlib reading
/// /etc/matplotlibrc, works without a policy change).
///
/// The rule, in order:
/// 1. Candidates: the top-level /etc entries that dpkg's installed packages
///    own (every path of /var/lib/dpkg/info/*.list and *.conffiles), those
///    ucf manages (/var/lib/ucf/hashfile), and a short list of files that
///    package scripts generate rather than ship (ld.so.cache, localtime,
///    timezone, mailcap, python3/, networks, shells, inputrc,
///    ca-certificates.conf). Nothing else of /etc: an administrator's own
///    files are never shown.
/// 2. Withheld: the deny list (etc_deny_patterns: account databases,
///    sudoers, host keys and identity, credential stores, castellan's own
///    configuration) and the files the sandbox generates itself (passwd,
///    group, hosts, nsswitch.conf).
/// 3. Shown only if any local user may read it: regular files readable by
///    others, directories readable and searchable by others, symlinks (kept
///    as symlinks: they lead only to what the sandbox itself shows). Inside
///    a shown directory, every entry that fails this test or matches the
///    deny list is masked (a directory as a whole), so a 0600 key in a 0755
///    directory stays hidden even from a sandbox whose user maps to the
///    file's owner; so is another file system mounted there (a container
///    runtime's secret volume), and a top-level candidate that is a mount
///    point is withheld.
/// Computed once per process (package_etc_view()): the per-worker cost is
/// the binds, not the derivation.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace castellan::platform {

/// One top-level /etc entry shown in the sandbox.
struct etc_entry {
  enum class kind : unsigned char { file, directory, symlink };
  std::string name;       ///< below /etc: "matplotlibrc", "ssl"
  kind type = kind::file;
  std::string link_target; ///< for a symlink, what it points to (unchanged)
};

/// The derived view.
struct etc_view {
  std::string etc_dir = "/etc"; ///< the host directory the names are below
  std::vector<etc_entry> entries;
  /// Paths below /etc hidden inside shown directories ("ssl/private").
  std::vector<std::string> masked;
  /// Candidates not shown, with the reason: "shadow (deny list)".
  std::vector<std::string> withheld;
  /// Where the candidates came from: "dpkg: 1043 packages, ucf: 1 file",
  /// or the fallback's description when the host has no dpkg database.
  std::string source;
};

/// Where to look (tests point these at a fabricated tree).
struct etc_view_options {
  std::string etc_dir = "/etc";
  std::string dpkg_info_dir = "/var/lib/dpkg/info";
  std::string ucf_hashfile = "/var/lib/ucf/hashfile";
  /// Bound on the entries walked below one shown directory; a directory
  /// with more is withheld whole (nothing is shown unchecked).
  std::size_t max_walk = 20000;
};

/// The deny list: fnmatch patterns (FNM_PATHNAME) on paths relative to
/// /etc, matched against every candidate and every entry walked.
const std::vector<std::string>& etc_deny_patterns();

/// Derives the view from the host (see the file comment).
etc_view derive_etc_view(const etc_view_options& options = {});

/// derive_etc_view() of this host, computed on first use and kept.
const etc_view& package_etc_view();

} // namespace castellan::platform
