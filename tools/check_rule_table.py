#!/usr/bin/env python3
"""Checks the lowering-rule table against PyTorch's schemas.

  python tools/check_rule_table.py [--build build] [--missing]

Every registered name must be an ATen overload; in-place and out variants
must take the same leading (non-out) arguments as the functional overload
they share a rule with. --missing lists variants of covered ops that have
no rule.
"""
import argparse
import os
import subprocess
import sys

import torch


def overload(name):
    base, _, ov = name.partition(".")
    pk = getattr(torch.ops.aten, base.split("::")[1], None)
    if pk is None:
        return None
    try:
        return getattr(pk, ov or "default")
    except AttributeError:
        return None


def signature(op):
    """Names of the arguments the executor passes (outs stripped)."""
    return [a.name for a in op._schema.arguments
            if not (a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--missing", action="store_true")
    opts = ap.parse_args()
    listing = subprocess.run([os.path.join(opts.build, "tpr_lower_run"), "--list"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    pairs = [l.split() for l in listing if l.strip()]
    names = [p[0] for p in pairs]
    fn_of = {p[0]: p[1] for p in pairs}
    bad = 0
    for n in names:
        if overload(n) is None:
            print(f"not an ATen overload: {n}")
            bad += 1
    # Variants sharing a base name must agree with the functional signature
    # on their leading arguments.
    by_base = {}
    for n in names:
        op = overload(n)
        if op is None:
            continue
        base = n.split(".")[0].rstrip("_")
        by_base.setdefault(base, []).append((n, signature(op)))
    # Names sharing a rule function should agree on argument positions
    # (printed for review: some rules handle several layouts on purpose).
    groups = {}
    for n in names:
        if overload(n) is not None:
            groups.setdefault(fn_of[n], []).append((n, signature(overload(n))))
    for members in groups.values():
        ref_name, ref = members[0]
        for n, sig in members[1:]:
            k = min(len(ref), len(sig))
            if sig[:k] != ref[:k]:
                print(f"  layout differs: {ref_name}{tuple(ref)} vs {n}{tuple(sig)}")
    print(f"{len(names)} rules, {len(by_base)} base ops, {bad} bad names")
    if opts.missing:
        for base in sorted(by_base):
            have = {n for n, _ in by_base[base]}
            for stem in (base, base + "_"):
                pk = getattr(torch.ops.aten, stem.split("::")[1], None)
                if pk is None:
                    continue
                for ov in pk.overloads():
                    full = stem + ("" if ov == "default" else "." + ov)
                    try:
                        torch._C._dispatch_has_kernel_for_dispatch_key(full, "CPU")
                    except RuntimeError:
                        continue  # TorchScript-only overload
                    if full not in have and "Dimname" not in str(getattr(pk, ov)._schema) \
                            and "names" not in ov:
                        print(f"  no rule: {full}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
