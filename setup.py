"""Builds torch_tpu._C: the C11 core (CMake, static) plus the thin C++ glue,
compiled against the installed torch (use --no-build-isolation)."""
import glob
import os
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = os.path.dirname(os.path.abspath(__file__))
# TORCH_TPU_SANITIZE=1 builds core and glue with ASan/UBSan (run Python with
# LD_PRELOAD=$(gcc -print-file-name=libasan.so)).
SANITIZE = os.environ.get("TORCH_TPU_SANITIZE") == "1"
SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] if SANITIZE else []
CORE_BUILD = os.path.join(ROOT, "build", "core-asan" if SANITIZE else "core")
CORE_LIB = os.path.join(CORE_BUILD, "libtpr.a")


class BuildWithCore(BuildExtension):
    def run(self):
        subprocess.check_call(["cmake", "-S", ROOT, "-B", CORE_BUILD,
                               "-DCMAKE_BUILD_TYPE=Release", "-DTPR_BUILD_TESTS=OFF",
                               "-DTPR_SANITIZE=" + ("ON" if SANITIZE else "OFF")])
        subprocess.check_call(["cmake", "--build", CORE_BUILD, "-j", str(os.cpu_count() or 2),
                               "--target", "tpr"])
        super().run()


sources = sorted(glob.glob(os.path.join("csrc", "**", "*.cpp"), recursive=True))
ext = CppExtension(
    name="torch_tpu._C",
    sources=sources,
    include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "csrc")],
    extra_objects=[CORE_LIB],
    depends=[CORE_LIB],  # relink when the core changed (ninja skips unchanged objects)
    extra_compile_args={"cxx": ["-O2", "-std=c++17", "-fvisibility=hidden"] + SAN_FLAGS},
    extra_link_args=SAN_FLAGS,
    libraries=["dl", "pthread"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildWithCore})
