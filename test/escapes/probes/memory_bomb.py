# Allocate and touch 512 MiB.
x = bytearray(512 << 20)
verdict("allocated")
