"""Builds torch_neuronx._C: the C++ glue linked with the C runtime (libnrt.a).

The C runtime is built by the Makefile (`make lib`) so it stays free of any
PyTorch dependency; this file only compiles csrc/ with torch's own flags
(ninja, incremental) and links the archive.
"""
import glob
import hashlib
import os
import shutil
import subprocess

import torch
import torch.utils.cpp_extension as cpp_extension
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
PCH_DIR = os.path.join(ROOT, "build", "pch")
PCH_FLAGS = ["-include", os.path.join(PCH_DIR, "pch.h"), "-Winvalid-pch"]


def _build_pch(cflags, post_cflags):
    """Compiles csrc/pch.h with exactly the flags ninja will use for the glue
    (GCC ignores a PCH built with other flags, with a warning, and parses the
    header instead), only when the flags or the header changed: a new .gch
    recompiles every file."""
    post = [f for f in post_cflags if f not in PCH_FLAGS]
    cmd = [cpp_extension.get_cxx_compiler()] + list(cflags) + ["-x", "c++-header",
                                                               os.path.join(PCH_DIR, "pch.h"),
                                                               "-o", os.path.join(PCH_DIR, "pch.h.gch")] + post
    with open(os.path.join(ROOT, "csrc", "pch.h"), "rb") as f:
        header = f.read()
    stamp = hashlib.sha256(header + "\0".join(cmd).encode() + torch.__version__.encode()).hexdigest()
    stamp_path = os.path.join(PCH_DIR, "stamp")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp:
        return
    os.makedirs(PCH_DIR, exist_ok=True)
    shutil.copyfile(os.path.join(ROOT, "csrc", "pch.h"), os.path.join(PCH_DIR, "pch.h"))
    print("building the glue's precompiled header (build/pch)", flush=True)
    subprocess.check_call(cmd)
    with open(stamp_path, "w") as f:
        f.write(stamp)


_write_ninja_file = cpp_extension._write_ninja_file


def _write_ninja_file_with_pch(*args, **kwargs):
    # torch writes the ninja file with the final compile flags just before
    # running it: the one place to see them.
    _write_ninja_file(*args, **kwargs)
    if kwargs.get("sources"):
        _build_pch(kwargs.get("cflags") or [], kwargs.get("post_cflags") or [])


cpp_extension._write_ninja_file = _write_ninja_file_with_pch


class BuildWithRuntime(BuildExtension):
    def run(self):
        subprocess.check_call(["make", "-C", ROOT, "lib"])
        # A fixed build directory keeps ninja's objects between builds (pip's
        # editable builds would otherwise use a fresh temporary directory),
        # so touching one glue file recompiles only that file.
        self.build_temp = os.path.join(ROOT, "build", "ext")
        super().run()


ext = CppExtension(
    name="torch_neuronx._C",
    sources=sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True)),
    # kineto/: torch.profiler's plugin interface (csrc/runtime/profiler.cpp).
    include_dirs=[os.path.join(ROOT, "runtime", "include"), os.path.join(ROOT, "csrc"),
                  os.path.join(os.path.dirname(torch.__file__), "include", "kineto")],
    extra_compile_args=["-O2", "-std=c++17", "-fvisibility=hidden", "-Wno-unused-parameter"] + PCH_FLAGS,
    extra_objects=[os.path.join(ROOT, "build", "libnrt.a")],
    extra_link_args=["-pthread", "-lm"],
    depends=[os.path.join("build", "libnrt.a")]
    + sorted(glob.glob(os.path.join("csrc", "**", "*.h"), recursive=True))
    + sorted(glob.glob(os.path.join("runtime", "include", "nrt", "**", "*.h"), recursive=True)),
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildWithRuntime.with_options(use_ninja=True)})
