"""Which common ops import a compiler module (torch._dynamo, sympy) on their
first call on tpu: each statement in a fresh process, after one small op and
a read have initialised the device. Prints the ones that do.

    python bench/first_use_imports.py"""
import subprocess
import sys

OPS = ["p.abs()", "p.neg()", "p.exp()", "p.log()", "p.sqrt()", "p.rsqrt()", "p.tanh()",
       "p.sigmoid()", "torch.relu(p)", "torch.nn.functional.gelu(p)",
       "torch.nn.functional.silu(p)", "p + p", "p * 2", "p - 1", "p / p", "p ** 2", "p.pow(2)",
       "torch.maximum(p, p)", "torch.clamp(p, 0, 1)", "p > 0", "p == p", "p.isnan()",
       "torch.where(p > 0, p, p)", "p.masked_fill(p > 0, 1.0)", "p.sum()", "p.mean()",
       "p.amax(1)", "p.max()", "p.argmax(1)", "p.any()", "p.all()", "p.norm()", "p.var(1)",
       "p @ p.t()", "p.t().contiguous()", "torch.cat([p, p])", "p.float().half()",
       "p.to(torch.int64)", "p.cumsum(1)", "p.softmax(1)", "p.log_softmax(1)",
       "torch.nn.functional.layer_norm(p, (3,))",
       "torch.nn.functional.embedding(torch.tensor([0, 1], device='tpu'), p)", "p.topk(2, 1)",
       "p.sort(1)", "torch.nn.functional.dropout(p, 0.1)", "torch.zeros_like(p)", "p.clone()",
       "p.fill_(1.0)", "p.zero_()", "p.copy_(p)", "p.expand(4, 2, 3).sum(0)",
       "torch.addcmul(p, p, p)", "torch.lerp(p, p, 0.5)", "p.sign()", "p.round()", "p.floor()",
       "p.reciprocal()", "p.square()"]

CHILD = """
import sys, torch, torch_tpu
p = torch.ones(2, 3, device='tpu'); p.cpu()
r = {stmt}
print([m for m in ('torch._dynamo', 'sympy') if m in sys.modules])
"""


def main():
    heavy = []
    for stmt in OPS:
        r = subprocess.run([sys.executable, "-c", CHILD.format(stmt=stmt)], capture_output=True,
                           text=True, timeout=300)
        lines = r.stdout.strip().splitlines()
        mods = lines[-1] if r.returncode == 0 and lines else "failed: " + r.stderr[-300:]
        if mods != "[]":
            heavy.append((stmt, mods))
    print(f"{len(OPS)} ops; {len(heavy)} import a compiler module on their first call")
    for stmt, mods in heavy:
        print(f"  {stmt}: {mods}")


if __name__ == "__main__":
    main()
