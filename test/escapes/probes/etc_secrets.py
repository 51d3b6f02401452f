# Read what /etc holds that the sandbox must not show: account databases,
# keys, files only their owner may read, host identity. The sandbox shows
# the /etc entries of installed packages, so a secret inside a directory it
# shows (ssl/private, a 0640 pg_hba.conf) must be masked, not merely absent.
leaks = []
for p in ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/sudoers",
          "/etc/machine-id", "/etc/subuid", "/etc/security/opasswd", "/etc/ssl/private",
          "/etc/postgresql/15/main/pg_hba.conf", "/etc/default/cacerts",
          "/etc/freeipmi/freeipmi.conf", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ed25519_key.pub",
          "/etc/castellan", "/etc/apt/auth.conf"]:
    try:
        if os.path.isdir(p):
            if os.listdir(p):
                leaks.append(p)
        elif open(p, "rb").read():
            leaks.append(p)
    except OSError:
        pass
verdict("leaked " + " ".join(leaks) if leaks else "nothing")
