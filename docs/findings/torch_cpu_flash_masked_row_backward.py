"""torch's fused CPU attention: the backward of a row whose every key is masked by finfo.min is kv_len times
the gradient of its forward.

Run: python docs/findings/torch_cpu_flash_masked_row_backward.py
(torch and numpy only; a second.) Exits 1 while the FLASH_ATTENTION backend's dv on such a row is off the
gradient of the value its forward returns by more than 1e-4 relative, 0 once it is not, 4 when this torch has
no torch.nn.attention.sdpa_kernel to force the backend with.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    print("cannot run here: this torch has no torch.nn.attention.sdpa_kernel")
    sys.exit(4)

B, N, T, H = 1, 1, 4, 8
MIN = torch.finfo(torch.float32).min


def declared_gradient(q, k, v, dout, keys):
    """Row 0 sees every key through finfo.min, so its output is the plain mean of the value rows (the forward
    of every backend here): softmax with P = 1/keys. Its gradient in float64: dv, and dq, dk through the
    logits the finite fill was added to (what autodiff of softmax(q k^T * scale + mask) gives)."""
    q, k, v, o = (np.asarray(a, np.float64)[0, 0] for a in (q, k, v, dout))
    p = np.full(keys, 1.0 / keys)
    dv = np.outer(p, o[0])
    dp = v @ o[0]
    ds = p * (dp - p @ dp)
    scale = 1.0 / np.sqrt(H)
    return {"dq": scale * ds @ k, "dk": scale * np.outer(ds, q[0]), "dv": dv}


def grads(keys: int, backend: SDPBackend):
    g = torch.Generator().manual_seed(keys)
    q = torch.randn(B, N, T, H, generator=g)
    k, v = (torch.randn(B, N, keys, H, generator=g) for _ in range(2))
    mask = torch.zeros(T, keys)
    mask[0] = MIN  # row 0 sees no key: a padded query row, as transformers' float padding masks make
    dout = torch.zeros(B, N, T, H)
    dout[0, 0, 0] = torch.randn(H, generator=g)  # a cotangent on that row alone
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(dout)
    got = {
        "out": out[0, 0, 0].detach().numpy(),
        "dq": q.grad[0, 0, 0].numpy(),
        "dk": k.grad[0, 0].numpy(),
        "dv": v.grad[0, 0].numpy(),
    }
    want = declared_gradient(q.detach(), k.detach(), v.detach(), dout, keys)
    return got, want, v.detach()[0, 0].numpy().mean(0)


def rel(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
print("float32, one query row masked by finfo(float32).min on every key, a cotangent on that row alone")
print("keys  backend           out vs mean(v)   dv/declared   dq rel err   dk rel err   dv rel err")
worst = 0.0
for keys in (4, 8, 64):
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        got, want, mean_v = grads(keys, backend)
        ratio = float(np.abs(got["dv"]).sum() / np.abs(want["dv"]).sum())
        errs = [rel(got[q], want[q]) for q in ("dq", "dk", "dv")]
        if backend == SDPBackend.FLASH_ATTENTION:
            worst = max(worst, errs[2])
        print(
            f"{keys:4d}  {backend.name:16s}  {rel(got['out'], mean_v):.1e}          {ratio:8.3f}      "
            + "   ".join(f"{e:.1e}" for e in errs)
        )
print("shows" if worst > 1e-4 else "fixed")
sys.exit(1 if worst > 1e-4 else 0)
