"""The CI slice of the OpInfo harness (python -m torch_tpu.coverage --fast):
common ops across families, PyTorch's own sample inputs, fallback off.
Forward must pass everywhere; the backward column may trail slightly while
gradient rules are completed (the full run's totals live in docs/coverage.md)."""
from conftest import run_coverage


def test_fast_slice(tmp_path):
    r, results = run_coverage(["--fast"], tmp_path / "fast.json", "op")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(results) >= 50, r.stdout
    for column, floor in (("float32", 1.0), ("bfloat16", 1.0), ("backward", 0.95)):
        statuses = [v[column]["status"] for v in results.values() if column in v]
        counted = [s for s in statuses if s != "skip"]
        bad = {op: v[column] for op, v in results.items()
               if column in v and v[column]["status"] not in ("pass", "skip")}
        assert "error" not in statuses, bad
        assert counted.count("pass") / len(counted) >= floor, bad


# Ops that reshape, view or restride their input: each runs every sample
# again with its inputs transposed, channels-last, sliced and with odd strides
# on size-1 dims, and must give the CPU's values (the full op_db sweep is
# `--layouts all` in docs/coverage.md).
LAYOUT_OPS = ["nn.functional.group_norm", "nn.functional.layer_norm", "nn.functional.batch_norm",
              "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.unfold",
              "nn.functional.pad", "softmax", "reshape", "view", "flatten", "resize_as_",
              "nn.functional.scaled_dot_product_attention", "matmul", "unflatten"]


def test_layouts_slice(tmp_path):
    r, results = run_coverage(["--ops", ",".join(LAYOUT_OPS), "--dtypes", "float32",
                               "--no-backward", "--samples", "2", "--layouts", "all"],
                              tmp_path / "layouts.json", "op")
    assert r.returncode == 0, r.stdout + r.stderr
    columns = ["float32"] + [f"float32 {la}" for la in ("transposed", "channels_last", "sliced",
                                                       "size1_strides")]
    # (variants the CPU runs in float64 only are not counted)
    counted = {op: v for op, v in results.items() if v["float32"]["status"] != "skip"}
    assert len(counted) >= len(LAYOUT_OPS), sorted(results)
    bad = {(op, c): v.get(c) for op, v in counted.items() for c in columns
           if v.get(c, {}).get("status") != "pass"}
    assert not bad, bad
