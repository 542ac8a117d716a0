"""Builds torch_tpu._C: the C11 core (CMake, static) plus the thin C++ glue,
compiled against the installed torch (use --no-build-isolation)."""
import glob
import os
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
CORE_BUILD = os.path.join(ROOT, "build", "core")
CORE_LIB = os.path.join(CORE_BUILD, "libtpr.a")


class BuildWithCore(BuildExtension):
    def run(self):
        subprocess.check_call(["cmake", "-S", ROOT, "-B", CORE_BUILD,
                               "-DCMAKE_BUILD_TYPE=Release", "-DTPR_BUILD_TESTS=OFF"])
        subprocess.check_call(["cmake", "--build", CORE_BUILD, "-j", str(os.cpu_count() or 2),
                               "--target", "tpr"])
        super().run()


sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
ext = CppExtension(
    name="torch_tpu._C",
    sources=sources,
    include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "csrc")],
    extra_objects=[CORE_LIB],
    extra_compile_args={"cxx": ["-O2", "-std=c++17", "-fvisibility=hidden"]},
    libraries=["dl", "pthread"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildWithCore})
