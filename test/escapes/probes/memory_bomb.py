# Allocate and touch 3 GiB: more than any limit a test pool has (128 MiB
# under strict.json; 2 GiB for warm workers of an AddressSanitizer build).
x = bytearray(3 << 30)
verdict("allocated")
