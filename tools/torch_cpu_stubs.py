#!/usr/bin/env python3
"""Make PyPI's CUDA build of torch importable on a CPU-only machine without
its ~3 GB of nvidia-* wheels.

PyPI's linux x86_64 torch wheel is built with CUDA and its shared libraries
name the CUDA libraries (libcudart, libcublas, libcudnn, ...) as DT_NEEDED,
so `import torch` fails when `pip install --no-deps torch` left them out.
This script writes small stub libraries with those sonames into torch/lib
(on torch's $ORIGIN rpath): each defines, with the symbol versions torch
asks for, every symbol torch imports from it, as a function that returns
100 (cudaErrorNoDevice) or as zeroed data. CUDA is never initialised: the
CPU code paths never call into them, and torch.cuda.is_available() is False.
The anna reference tools only use the CPU.

Usage: torch_cpu_stubs.py [--check]  (run with the venv's python; needs
readelf and a C compiler, i.e. binutils and gcc). Idempotent.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile


def readelf(args, path):
    return subprocess.run(["readelf", *args, "-W", path], check=True, capture_output=True, text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))


SYM = re.compile(r"^\s*\d+:\s+[0-9a-f]+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\w+)\s+(\S+)")


def dynsyms(path):
    """(defined names, [(name, version, type, bind)] undefined)."""
    defined, undef = set(), []
    for line in readelf(["--dyn-syms"], path).splitlines():
        m = SYM.match(line)
        if not m:
            continue
        typ, bind, ndx, name = m.groups()
        base, _, ver = name.partition("@")
        ver = ver.lstrip("@").split(" ")[0]
        if ndx == "UND":
            if base:
                undef.append((base, ver, typ, bind))
        else:
            defined.add(base)
    return defined, undef


_ldcache = []


def verneed(path):
    """{version name: file} of the versions path needs from other files."""
    out, cur = {}, None
    for line in readelf(["-V"], path).splitlines():
        m = re.search(r"File: (\S+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Name: (\S+)", line)
        if m and cur:
            out[m.group(1)] = cur
    return out


def system_lib(soname):
    if not _ldcache:
        _ldcache.append(subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout)
    out = _ldcache[0]
    m = re.search(r"^\s*" + re.escape(soname) + r" \(.*?\) => (\S+)", out, re.M)
    return m.group(1) if m else None


def main():
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch_cpu_stubs: torch is not installed in this environment")
    root = spec.submodule_search_locations[0]
    libdir = os.path.join(root, "lib")
    objs = sorted(set(glob.glob(os.path.join(root, "**", "*.so*"), recursive=True)))
    objs = [o for o in objs if os.path.isfile(o) and not os.path.basename(o).startswith("stub-")]
    own = {os.path.basename(o) for o in objs}
    missing, provided = set(), set()
    undef = []
    stubmark = "anna-cuda-stub"
    seen_sys = set()
    for o in objs:
        with open(o, "rb") as f:
            if stubmark.encode() in f.read():  # a stub made by an earlier run
                own.discard(os.path.basename(o))
                continue
        d, u = dynsyms(o)
        provided |= d
        vn = verneed(o)
        undef += [(name, ver, vn.get(ver, ""), typ, bind) for name, ver, typ, bind in u]
        for n in needed(o):
            if n in own:
                continue
            # A real CUDA library from the nvidia-* wheels (torch's rpath).
            if glob.glob(os.path.join(root, "..", "nvidia", "**", n), recursive=True):
                continue
            sys_path = system_lib(n)
            if sys_path and sys_path not in seen_sys:
                seen_sys.add(sys_path)
                provided |= dynsyms(sys_path)[0]
            elif sys_path:
                pass
            else:
                missing.add(n)
    if not missing:
        print("torch_cpu_stubs: nothing missing")
        return
    # Versioned imports go to the stub of the file that the version need
    # names; unversioned ones that no present library defines go into every
    # stub (the first loaded wins).
    per = {s: {} for s in missing}
    loose = {}
    for name, ver, file, typ, bind in undef:
        if bind == "WEAK" or name in provided:
            continue
        if file in per:
            per[file][name] = (ver, typ)
        elif not ver and not name.startswith(("Py", "_Py")):
            loose[name] = ("", typ)
    with tempfile.TemporaryDirectory() as tmp:
        for so in sorted(missing):
            syms = dict(loose)
            syms.update(per[so])
            asm = [f'.section .comment\n.string "{stubmark}"\n.text']
            for name, (ver, typ) in sorted(syms.items()):
                q = '"' + name + '"'
                if typ == "OBJECT":
                    asm.append(f".data\n.globl {q}\n.type {q},@object\n.size {q},256\n{q}:\n.zero 256\n.text")
                else:
                    asm.append(f".globl {q}\n.type {q},@function\n{q}:\nmovl $100, %eax\nret")
            src = os.path.join(tmp, so + ".s")
            with open(src, "w") as f:
                f.write("\n".join(asm) + "\n.section .note.GNU-stack,\"\",@progbits\n")
            vs = os.path.join(tmp, so + ".map")
            nodes = {}
            for n, (v, _) in per[so].items():
                nodes.setdefault(v, []).append(n)
            rest = sorted(n for n in loose if n not in per[so])
            with open(vs, "w") as f:
                for v, names in sorted(nodes.items()):
                    f.write(v + " {\n  global:\n" + "".join(f'    "{n}";\n' for n in sorted(names)) + "};\n")
                if rest:
                    f.write("ANNA_UNVERSIONED {\n  global:\n" + "".join(f'    "{n}";\n' for n in rest) + "};\n")
            out = os.path.join(libdir, so)
            subprocess.run(["cc", "-shared", "-nostdlib", "-o", out, src, f"-Wl,-soname,{so}", f"-Wl,--version-script={vs}"], check=True)
            print(f"torch_cpu_stubs: {so}: {len(syms)} symbols")


if __name__ == "__main__":
    main()
