#!/usr/bin/env python3
"""The layering rules the compiler cannot see, checked on the sources (docs/dev/architecture.md#layers).

Bazel's visibility decides which package may depend on which. An #include needs no dependency to compile
when the header reaches the compiler through another one, so the includes are checked here too:
  1. A file outside package P includes only P's public headers: those a target of P lists in `hdrs`.
     A header in `srcs` (server/registry/internal.h, client/read_status.h's internals) stays in P.
  2. A file in server/Q includes a header of server/P only if P's BUILD admits Q: the visibility of
     the target that lists the header (its own, else the package's default_visibility).
  3. In server/, only server/verbs/ includes rdma-core (<infiniband/...>, <rdma/...>).

Usage: check-layering.py [ROOT]      checks the tree at ROOT (default: this repository), prints every
                                     violation, exits 1 if there is one
       check-layering.py --self-test  checks small trees made to break each rule, and one that breaks none
"""
import os
import re
import sys
import tempfile

SOURCE_DIRS = ("server", "client", "cli", "proto", "tests", "examples")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
TARGET = re.compile(r'^(\w+)\(\s*$(.*?)^\)', re.M | re.S)
PACKAGE_VIS = re.compile(r'package\(\s*default_visibility\s*=\s*\[(.*?)\]', re.S)


def strings(text):
    return re.findall(r'"([^"]*)"', text)


def attribute(body, name):
    """The strings of `name = [...]` or `name = "..."` in a rule's body."""
    m = re.search(r'^\s*' + name + r'\s*=\s*(\[.*?\]|"[^"]*")', body, re.M | re.S)
    return strings(m.group(1)) if m else None


class Package:
    def __init__(self, path, build_text):
        self.path = path  # "server/registry"
        m = PACKAGE_VIS.search(build_text)
        self.default_visibility = strings(m.group(1)) if m else ["//visibility:private"]
        self.public_headers = {}  # header file name -> the visibility of the target that lists it
        for m in TARGET.finditer(build_text):
            body = m.group(2)
            hdrs = attribute(body, "hdrs") or []
            vis = attribute(body, "visibility") or self.default_visibility
            for h in hdrs:
                self.public_headers[h] = vis

    def admits(self, visibility, package):
        """True if a target with `visibility` may be used from `package` (a path such as "server/cm")."""
        for v in visibility:
            if v == "//visibility:public" or v == "//" + package + ":__pkg__":
                return True
            if v.endswith(":__subpackages__"):
                base = v[2:-len(":__subpackages__")]
                if package == base or package.startswith(base + "/"):
                    return True
        return package == self.path


def load_packages(root):
    packages = {}
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "BUILD" in files or "BUILD.bazel" in files:
                name = "BUILD" if "BUILD" in files else "BUILD.bazel"
                rel = os.path.relpath(dirpath, root)
                with open(os.path.join(dirpath, name)) as f:
                    packages[rel] = Package(rel, f.read())
    return packages


def owning_package(packages, rel_path):
    d = os.path.dirname(rel_path)
    while d:
        if d in packages:
            return d
        d = os.path.dirname(d)
    return None


def check(root):
    packages = load_packages(root)
    problems = []
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".cpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                mine = owning_package(packages, rel)
                with open(path, errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    kind, header = m.group(1), m.group(2)
                    line = text.count("\n", 0, m.start()) + 1
                    where = "%s:%d" % (rel, line)
                    if kind == "<":
                        if (rel.startswith("server/") and not rel.startswith("server/verbs/")
                                and header.startswith(("infiniband/", "rdma/"))):
                            problems.append("%s: includes <%s>: only server/verbs/ talks to rdma-core" % (where, header))
                        continue
                    theirs = owning_package(packages, header)
                    if theirs is None or theirs == mine:
                        continue
                    package = packages[theirs]
                    file_in_package = os.path.relpath(header, theirs)
                    if file_in_package not in package.public_headers:
                        problems.append("%s: includes %s, a private header of %s (no target lists it in hdrs)"
                                        % (where, header, theirs))
                        continue
                    if mine is None or not mine.startswith("server/"):
                        continue  # visibility outside server/ is Bazel's alone (tests may use every layer)
                    if not package.admits(package.public_headers[file_in_package], mine):
                        problems.append("%s: includes %s, but %s/BUILD does not admit %s (a layer below, or "
                                        "beside, must not be reached around)" % (where, header, theirs, mine))
    return problems


def self_test():
    def tree(files):
        d = tempfile.mkdtemp(prefix="layering-")
        for rel, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        return d

    base = {
        "server/low/BUILD": 'package(default_visibility = [\n    "//server/high:__pkg__",\n])\n\n'
                            'cc_library(\n    name = "low",\n    srcs = ["private.h", "low.cc"],\n'
                            '    hdrs = ["low.h"],\n)\n',
        "server/low/low.h": "",
        "server/low/private.h": "",
        "server/low/low.cc": '#include "server/low/private.h"\n#include <infiniband/verbs.h>\n',
        "server/high/BUILD": 'package(default_visibility = ["//visibility:public"])\n',
        "server/high/high.cc": '#include "server/low/low.h"\n',
        "server/verbs/BUILD": "",
        "server/verbs/v.cc": "#include <infiniband/verbs.h>\n",
        "server/other/BUILD": "",
    }
    cases = {
        "a clean tree": ({}, 0),
        "a private header": ({"server/high/high.cc": '#include "server/low/private.h"\n'}, 1),
        "a layer not admitted": ({"server/other/o.cc": '#include "server/low/low.h"\n'}, 1),
        "rdma-core outside verbs/": ({"server/high/high.cc": "#include <rdma/rdma_cma.h>\n"}, 1),
    }
    failed = 0
    for name, (change, want) in cases.items():
        files = dict(base)
        files.update(change)
        got = check(tree(files))
        # The clean tree's low.cc includes rdma-core too: that one is counted in every case.
        got = [p for p in got if not p.startswith("server/low/low.cc")]
        if len(got) != want:
            print("self-test %s: expected %d problem(s), got %d: %s" % (name, want, len(got), got))
            failed += 1
    if not check(tree(base)):
        print("self-test: rdma-core included by server/low/low.cc was not reported")
        failed += 1
    return failed


def main():
    if sys.argv[1:] == ["--self-test"]:
        failed = self_test()
        print("layering self-test: %s" % ("ok" if failed == 0 else "%d case(s) failed" % failed))
        return 1 if failed else 0
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    print("layering: %d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
