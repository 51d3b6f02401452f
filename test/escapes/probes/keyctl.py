# Read the kernel keyrings.
verdict(sys_call(250, 0, -3, 0, 0, 0))  # KEYCTL_GET_KEYRING_ID, session
