"""vLLM's piecewise compile (CompilationMode.VLLM_COMPILE) through the tpu
Dynamo backend: each piece between attention ops, for one compile range or
size, becomes tpu programs (one per size bucket of the token count)."""
import hashlib

from vllm.compilation.compiler_interface import CompilerInterface


class TpuCompiler(CompilerInterface):
    name = "tpu"

    def compute_hash(self, vllm_config):
        from torch_tpu._compile_cache import fingerprint

        return hashlib.sha256(fingerprint().encode()).hexdigest()[:10]

    def compile(self, graph, example_inputs, compiler_config, compile_range, key=None):
        from torch_tpu._compile import tpu_backend

        return tpu_backend(graph, example_inputs), None
