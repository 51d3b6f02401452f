# Load a BPF program / map.
verdict(sys_call(321, 0, 0, 0))  # BPF_MAP_CREATE
