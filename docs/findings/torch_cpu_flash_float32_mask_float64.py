"""torch's fused CPU attention misreads a float32 attn_mask given with float64 query, key and value.

Run: python docs/findings/torch_cpu_flash_float32_mask_float64.py
(torch and numpy only; a second or two.) Exits 1 while the FLASH_ATTENTION backend's float64 output with a
float32 mask is off the truth by more than 1e-6, 0 once it is not, 4 when this torch has no
torch.nn.attention.sdpa_kernel to force the backend with.
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


def truth(q, k, v, mask):
    """softmax(q k^T / sqrt(H) + mask) v in numpy longdouble (80-bit on x86-64), rounded to float64."""
    q, k, v, mask = (np.asarray(a, np.longdouble) for a in (q, k, v, mask))
    s = np.einsum("bnth,bnsh->bnts", q, k) / np.sqrt(np.longdouble(H)) + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bnts,bnsh->bnth", p, v).astype(np.float64)


def error(keys: int, backend: SDPBackend | None) -> float:
    """max |out - truth| of one float64 call with a float32 additive mask (causal, -inf above the diagonal
    of the last T keys) on `keys` keys, with `backend` forced (None: torch's own choice)."""
    g = torch.Generator().manual_seed(keys)
    q = torch.randn(B, N, T, H, generator=g, dtype=torch.float64)
    k, v = (torch.randn(B, N, keys, H, generator=g, dtype=torch.float64) for _ in range(2))
    hidden = torch.ones(T, keys, dtype=torch.bool).triu(keys - T + 1)
    mask = torch.zeros(T, keys, dtype=torch.float32).masked_fill(hidden, float("-inf"))
    if backend is None:
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    else:
        with sdpa_kernel([backend]):
            got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return float(np.abs(got.numpy() - truth(q.numpy(), k.numpy(), v.numpy(), mask.double().numpy())).max())


print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
print("float64 q, k, v with a float32 additive mask (-inf above the causal diagonal): max |out - truth|")
print("keys   FLASH_ATTENTION   MATH        default")
worst = 0.0
for keys in (4, 8, 15, 16, 17, 64, 520):
    flash, math, default = (error(keys, b) for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, None))
    worst = max(worst, flash)
    print(f"{keys:4d}   {flash:.2e}          {math:.2e}    {default:.2e}")
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, N, T if i == 0 else 64, H, generator=g, dtype=torch.float64) for i in range(3))
mask = torch.randn(T, 64, generator=g)
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    as32 = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    as64 = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.double())
print(f"the same float32 mask cast to float64 first: max |difference| = {float((as32 - as64).abs().max()):.2e}")
print("shows" if worst > 1e-6 else "fixed")
sys.exit(1 if worst > 1e-6 else 0)
