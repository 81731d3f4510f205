"""PyTorch scaled_dot_product_attention's fused GPU backends as kernels under test.

flash (torch_flash), memory-efficient (torch_efficient) and cuDNN (torch_cudnn), each
forced with torch.nn.attention.sdpa_kernel so that torch cannot fall back to the math
path. They exist only on a CUDA device: this module registers them only when
torch.cuda.is_available(), so on a CPU host (or a CPU build of torch) they are simply
not in the registry. Their CPU counterpart is the torch_sdpa oracle.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.core import coverage as cov
from harness.core.case import DTYPES, Case
from harness.core.contract import About, Capabilities, Conventions, Implementation, Outputs, Restriction, register
from harness.core.inputs import Inputs
from harness.core.torchvjp import repeat_kv, torch_outputs


def api(*, bias: bool) -> cov.Api:
    """Every parameter of F.scaled_dot_product_attention, as a fused GPU backend is driven."""
    attn_mask = (
        cov.Param(name="attn_mask", drawn="float bias (causal folded in), or None", exercised=cov.has_bias)
        if bias
        else cov.Param(name="attn_mask", why="this backend takes no attn_mask")
    )
    return cov.Api(
        name="torch.nn.functional.scaled_dot_product_attention",
        locate=lambda: F.scaled_dot_product_attention,
        params=(
            *cov.arrays(
                "[B, N, T, H] on CUDA",
                "[B, N, S, H] (k/v heads repeated for GQA)",
                "[B, N, S, H]",
                names=("query", "key", "value"),
            ),
            attn_mask,
            cov.Param(name="dropout_p", why="random: no deterministic truth to compare with"),
            cov.Param(name="is_causal", drawn="True, False", exercised=cov.causal_top_left),
            cov.scale_param("scale"),
            cov.Param(name="enable_gqa", why="the adapter repeats k/v heads (a torch >= 2.5 flag), not yet drawn"),
        ),
    )


# The backends' checks are C++ (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp), not in the wheel
# to quote from, and these hosts have no CUDA to probe them on.
READ = "read from sdp_utils.cpp (C++, not in the wheel); no CUDA here to probe"


class TorchSDPABackend(Implementation):
    role = "kernel"
    framework = "torch"

    def __init__(self, name: str, backend_name: str, capabilities: Capabilities) -> None:
        self.name = name
        self.backend_name = backend_name
        self.capabilities = capabilities
        self.api = (api(bias="bias" in capabilities.mask_components),)
        self.conventions = Conventions(
            bias="QK^T * scale + attn_mask (float mask)",
            causal="is_causal is top-left",
            gqa="the adapter repeats k/v heads",
            # Declared masks leave every row a visible key (top-left causal), so this is never checked.
            empty_rows="zeros",
            # torch's CPU kernels split work by thread count, fixed within a process
            reproducible=True,
            batch_invariant=True,
            notes="untested on the CPU hosts this harness was built on",
        )
        self.description = f"torch {torch.__version__} SDPA, {backend_name} backend on CUDA"
        self.about = About(
            summary=f"torch SDPA, its {backend_name} backend",
            source="torch/nn/functional.py: scaled_dot_product_attention (aten/.../transformers/sdp_utils_cpp.h)",
            cases=8,  # natively on a GPU: milliseconds a case
            needs="cuda",
            notes="capabilities from reading upstream's sdp_utils checks, not from a run here",
            restrictions=tuple(
                Restriction(on=on, rule="as each backend's check reads", choice=READ)
                for on in ("dtypes", "head_dims", "mask_components", "dbias")
            ),
        )

    def backend(self) -> str:
        return "gpu"

    def device(self) -> str:
        return f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"  # pragma: no cover - needs CUDA

    def run(self, case: Case, inputs: Inputs, *, grads: bool) -> Outputs:  # pragma: no cover - needs CUDA
        from torch.nn.attention import SDPBackend, sdpa_kernel

        group = case.q_heads // case.kv_heads

        def f(q, k, v, bias):
            causal = case.mask.causal == "top_left"
            mask = bias
            if bias is not None and causal:
                # attn_mask and is_causal cannot be combined: fold the causal mask into the bias.
                hidden = torch.ones(case.q_len, case.kv_len, dtype=torch.bool, device=q.device).triu(1)
                mask, causal = bias.masked_fill(hidden, float("-inf")), False
            with sdpa_kernel(getattr(SDPBackend, self.backend_name)):
                return F.scaled_dot_product_attention(
                    q, repeat_kv(k, group), repeat_kv(v, group), attn_mask=mask, is_causal=causal, scale=case.sm_scale
                )

        return torch_outputs(f, inputs, case.dtype, grads=grads, device="cuda")


def backends() -> list[TorchSDPABackend]:
    """The three fused backends with what each accepts (PyTorch's sdp_utils checks)."""
    half = ("bfloat16", "float16")  # flash and cuDNN take 16-bit inputs only
    return [
        TorchSDPABackend(
            "torch_flash",
            "FLASH_ATTENTION",
            # Flash takes no attn_mask, hence no bias; head_dim up to 256, a multiple of 8.
            Capabilities(
                dtypes=half,
                head_dims=(64, 32, 128, 256),
                seq_lens=(64, 128, 256),
                mask_components=frozenset({"causal_top_left"}),
                dbias=False,
            ),
        ),
        TorchSDPABackend(
            "torch_efficient",
            "EFFICIENT_ATTENTION",
            Capabilities(
                dtypes=DTYPES,
                head_dims=(64, 32, 80, 128),
                seq_lens=(64, 100, 128, 256),
                mask_components=frozenset({"causal_top_left", "bias"}),
            ),
        ),
        TorchSDPABackend(
            "torch_cudnn",
            "CUDNN_ATTENTION",
            Capabilities(
                dtypes=half,
                head_dims=(64, 128),
                seq_lens=(64, 128, 256),
                mask_components=frozenset({"causal_top_left"}),
                dbias=False,
            ),
        ),
    ]


for _impl in backends():
    register(_impl, here=torch.cuda.is_available())
