"""Splash attention asserts, with no message, on a mask that hides every key when every head has that mask.

    JAX_PLATFORMS=cpu python docs/findings/pallas_splash_fully_masked_assert.py

jax and numpy only. Builds splash kernels (make_splash_mha; building processes the mask on the
host, so no TPU and no interpreter is needed) for masks of 128x128 per head:
- one head, causal below the whole key range (CausalMask offset -128): nothing visible;
- two heads, that same mask in each;
- two heads, two different masks that each hide every key;
- two heads, one hiding every key and one full.
Exits 1 while a build stops at a bare AssertionError, 0 when none does.
"""

import sys
import traceback

import jax
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as mask_lib

L = 128
hidden = mask_lib.CausalMask((L, L), offset=-L)
also_hidden = mask_lib.CausalMask((L, L), offset=-2 * L)
full = mask_lib.FullMask((L, L))
print(f"jax {jax.__version__}")
asserted = False
for name, heads in (
    ("1 head, every key hidden", (hidden,)),
    ("2 heads, the same hidden mask", (hidden, hidden)),
    ("2 heads, two different hidden masks", (hidden, also_hidden)),
    ("2 heads, one hidden, one full", (hidden, full)),
):
    try:
        splash.make_splash_mha(mask_lib.MultiHeadMask(heads), head_shards=1, q_seq_shards=1)
        print(f"{name:40s} built")
    except AssertionError:
        asserted = True
        where = traceback.extract_tb(sys.exc_info()[2])[-1]
        at = f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}"
        print(f"{name:40s} AssertionError (no message) at {at}: {where.line}")
sys.exit(1 if asserted else 0)
