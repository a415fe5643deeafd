"""Builds torch_neuronx._C: the C++ glue linked with the C runtime (libnrt.a).

The C runtime is built by the Makefile (`make lib`) so it stays free of any
PyTorch dependency; this file only compiles csrc/ with torch's own flags
(ninja, incremental) and links the archive.
"""
import glob
import os
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))


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
    extra_compile_args=["-O2", "-std=c++17", "-fvisibility=hidden", "-Wno-unused-parameter"],
    extra_objects=[os.path.join(ROOT, "build", "libnrt.a")],
    extra_link_args=["-pthread", "-lm"],
    depends=[os.path.join("build", "libnrt.a")]
    + sorted(glob.glob(os.path.join("csrc", "**", "*.h"), recursive=True))
    + sorted(glob.glob(os.path.join("runtime", "include", "nrt", "**", "*.h"), recursive=True)),
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildWithRuntime.with_options(use_ninja=True)})
