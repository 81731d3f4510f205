"""torch's CPU scaled_dot_product_attention backward loses precision on rows whose logits lie far from zero.

Run: python docs/findings/torch_sdpa_cpu_flash_lse_large_logits.py
Imports only torch, numpy and the standard library (CPU).
q and k on a grid of halves, so every float32 logit q.k * scale is exact; one component shifts every
logit of a row by -2**17. On the CPU, F.scaled_dot_product_attention with no backend forced picks its
fused flash kernel for float32, whose backward recomputes p = exp(qk * scale - logsumexp) from a
float32 logsumexp near -1.3e5 (ulp 2**-7), so p is off by a row-wide factor up to exp(2**-8). The
math backend (sdpa_kernel(SDPBackend.MATH): autograd through a max-subtracted softmax) in float32 is
the reference, in float64 the truth. Exits 1 while the default backend's dv error exceeds 10x the
float32 reference's, 0 once it does not.
"""

import contextlib
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

L, D, SCALE, SHIFT = 16, 64, 1.0, 2.0**17
rng = np.random.default_rng(0)
q = np.rint(rng.standard_normal((1, 1, L, D)) * 2) / 2  # [batch, heads, seq, head_dim]
k = np.rint(rng.standard_normal((1, 1, L, D)) * 2) / 2
v = rng.standard_normal((1, 1, L, D))
dout = rng.standard_normal((1, 1, L, D))
a = 2.0**9
q[..., 0], k[..., 0] = -a, SHIFT / (SCALE * a)  # every logit of every row moved by -SHIFT, exactly


def run(dtype, backend=None):
    """out and dv of F.scaled_dot_product_attention in `dtype` (backend None: torch's own choice)."""
    leaves = [torch.tensor(x, dtype=dtype, requires_grad=True) for x in (q, k, v)]
    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        out = F.scaled_dot_product_attention(*leaves, scale=SCALE)
        _, _, dv = torch.autograd.grad(out, leaves, grad_outputs=torch.tensor(dout, dtype=dtype))
    return {"out": out.detach().double().numpy(), "dv": dv.double().numpy()}


x32 = [torch.tensor(x, dtype=torch.float32) for x in (q, k, v)]
chosen = SDPBackend(torch._fused_sdp_choice(*x32, scale=SCALE))
print(f"torch {torch.__version__}: the CPU backend chosen for float32 is {chosen.name}")
# The residual the flash backward reads: (output, logsumexp [batch, heads, seq]), float32 for float32.
_, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*x32, scale=SCALE)
s64 = np.einsum("bhqd,bhkd->bhqk", q, k) * SCALE
lse64 = s64.max(-1) + np.log(np.exp(s64 - s64.max(-1, keepdims=True)).sum(-1))
lse_err = float(np.abs(lse.double().numpy() - lse64).max())
ulp = float(np.spacing(np.float32(np.abs(lse64).max())))
print(f"logits near -{SHIFT:.0f}: logsumexp residual max |torch - truth| = {lse_err:.2e} (float32 ulp there {ulp:.2e})")
truth, ruler = run(torch.float64, SDPBackend.MATH), run(torch.float32, SDPBackend.MATH)
errors = {}
for label, backend in (("FLASH_ATTENTION", SDPBackend.FLASH_ATTENTION), ("default", None)):
    got = run(torch.float32, backend)
    for name in ("out", "dv"):
        err, ref = (float(np.abs(x[name] - truth[name]).max()) for x in (got, ruler))
        errors[label, name] = (err, ref)
        print(
            f"logits near -{SHIFT:.0f}, {label} backend: {name} max |torch - truth| = {err:.2e}; "
            f"float32 reference (MATH) {ref:.2e}"
        )
err, ref = errors["default", "dv"]
sys.exit(1 if err > 10 * ref else 0)
