# Allocate and touch 1 GiB: more than any limit an escape-test pool has
# (128 MiB under strict.json; 512 MiB for warm workers of an
# AddressSanitizer build).
x = bytearray(1 << 30)
verdict("allocated")
