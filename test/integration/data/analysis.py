# A data-analysis exec of the kind users send: numpy, pandas, a matplotlib
# chart written as PNG, a multiprocessing pool, sqlite3 and a Python
# subprocess. Prints one JSON object; the test checks it.
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def square(x):
    return x * x


out = {}
a = np.arange(12, dtype=np.float64).reshape(3, 4)
out["numpy_sum"] = float(a.sum())
df = pd.DataFrame({"k": ["a", "b", "a", "b"], "v": [1, 2, 3, 4]})
out["pandas_groupby"] = {k: int(v) for k, v in df.groupby("k")["v"].sum().items()}

fig, ax = plt.subplots(figsize=(4, 3))
ax.plot(a[0], a[1], marker="o")
ax.set_title("castellan")
fig.savefig("/tmp/chart.png")
plt.close(fig)
with open("/tmp/chart.png", "rb") as f:
    png = f.read()
out["png_signature"] = png[:8].hex()
out["png_size"] = len(png)
out["mplconfigdir"] = matplotlib.get_configdir()

with multiprocessing.Pool(2) as pool:
    out["pool"] = pool.map(square, range(6))

db = sqlite3.connect(":memory:")
db.execute("create table t (x integer)")
db.executemany("insert into t values (?)", [(i,) for i in range(10)])
out["sqlite_sum"] = db.execute("select sum(x) from t").fetchone()[0]
db.close()

child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True,
                       check=True)
out["subprocess"] = child.stdout.strip()
print(json.dumps(out, sort_keys=True))
