"""Prints a wheel's unconditional requirements, one a line, with torch's '+cpu' pin relaxed to
the plain version (PyPI serves no '+cpu' builds; its torch of the same version runs on CPU)."""
import re
import sys
import zipfile

wheel = zipfile.ZipFile(sys.argv[1])
metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
for line in wheel.read(metadata).decode().splitlines():
    if not line.startswith("Requires-Dist:"):
        continue
    requirement = line.split(":", 1)[1].strip()
    if "extra ==" in requirement:
        continue
    print(re.sub(r"torch==([0-9.]+)\+cpu", r"torch==\1", requirement))
