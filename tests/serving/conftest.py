"""Serving tests: vLLM on tpu (torch_tpu.vllm). They need the serving
environment (./setup.sh --serving in a virtual environment of its own);
elsewhere they are not collected."""
import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("vllm") else ["test_*.py"]
