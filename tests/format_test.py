#!/usr/bin/env python3
"""Checks that every C++ file in the repository is as clang-format
(.clang-format at the root) would write it. Exits 1 naming each file that is
not, with the command that fixes it.

Usage: format_test.py SOURCE_DIR CLANG_FORMAT
"""
import os
import subprocess
import sys

FOLDERS = ["base", "bundle", "graph", "data", "ops", "runtime", "checkpoint", "workloads", "tools",
           "examples", "bench", "tests", "interop", "distributed"]


def main():
    root, clang_format = sys.argv[1], sys.argv[2]
    files = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith((".h", ".cc"))]
    unformatted = []
    for i in range(0, len(files), 50):
        batch = files[i:i + 50]
        result = subprocess.run([clang_format, "--dry-run", "--Werror", "--style=file"] + batch,
                                capture_output=True, text=True)
        if result.returncode != 0:
            for path in batch:
                one = subprocess.run([clang_format, "--dry-run", "--Werror", "--style=file", path],
                                     capture_output=True, text=True)
                if one.returncode != 0:
                    unformatted.append(os.path.relpath(path, root))
    for path in unformatted:
        print(f"{path}: not clang-format clean (fix: clang-format -i {path})")
    print(f"format: {len(files)} files checked, {len(unformatted)} not clean")
    return 1 if unformatted else 0


if __name__ == "__main__":
    sys.exit(main())
