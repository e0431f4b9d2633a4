#!/usr/bin/env python3
"""Checks that every #include between the library's folders runs down the
layer order written at the top of the root CMakeLists.txt, and that public
headers include no third-party library a user would then need (TBB, Eigen,
protobuf, LevelDB). Exits 1 naming each offending line.

Usage: layering_test.py SOURCE_DIR
"""
import os
import re
import sys

# What each folder may include besides itself: the targets' link order.
ALLOWED = {
    "base": set(),
    "bundle": {"base"},
    "graph": {"base"},
    "data": {"base", "graph"},
    "ops": {"base", "bundle", "graph", "data"},
    "runtime": {"base", "graph", "data", "ops"},
    "checkpoint": {"base", "bundle", "graph", "data", "ops", "runtime"},
    "distributed": {"base", "bundle", "graph", "data", "ops", "runtime", "checkpoint"},
    "workloads": {"base", "bundle", "graph", "data", "ops", "runtime", "checkpoint"},
}
LIBRARY = set(ALLOWED)
# Folders that use the library and that the library never includes.
CONSUMERS = {"tools", "examples", "bench", "tests", "interop"}
THIRD_PARTY = re.compile(r'#\s*include\s*<(tbb/|oneapi/|Eigen/|unsupported/Eigen|google/protobuf|leveldb/|mpi\.h)')
PROJECT = re.compile(r'#\s*include\s*"([a-z_]+)/[^"]+"')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    problems = []
    checked = 0
    for folder in sorted(LIBRARY):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                public = name.endswith(".h") and not name.endswith("_internal.h")
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = PROJECT.match(line.strip())
                        if m:
                            checked += 1
                            target = m.group(1)
                            if target != folder and target in LIBRARY | CONSUMERS and \
                                    target not in ALLOWED[folder]:
                                problems.append(f"{rel}:{number}: {folder}/ includes {target}/ "
                                                f"(against the layer order): {line.strip()}")
                        if public and folder != "workloads" and THIRD_PARTY.match(line.strip()):
                            problems.append(f"{rel}:{number}: public header includes a "
                                            f"third-party header: {line.strip()}")
    for p in problems:
        print(p)
    print(f"layering: {checked} includes checked, {len(problems)} against the order")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
