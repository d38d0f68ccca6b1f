# mypy: ignore-errors
# A small PyTorch CUDA extension, as its authors would write it: its kernels (csrc/*.cu) include no torch
# header, so that nvcc builds them where torch is absent; the binding (csrc/binding.cpp) does.
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

nvcc_flags = ["-O3", "--use_fast_math", "-lineinfo", "-Xptxas=-O3"]
if os.environ.get("DEMO_FAST_MATH", "1") == "0":
    nvcc_flags.remove("--use_fast_math")

setup(
    name="regbudget_demo",
    ext_modules=[
        CUDAExtension(
            name="regbudget_demo._C",
            sources=["csrc/binding.cpp", "csrc/softmax.cu", "csrc/scale.cu"],
            include_dirs=[os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": nvcc_flags},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
