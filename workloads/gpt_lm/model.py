"""GPT-2's architecture in plain PyTorch: learned position embeddings, pre-norm blocks of
causal self-attention (scaled_dot_product_attention, which picks the fastest kernel the
device has: flash or memory-efficient attention on GPUs) and a GELU MLP of 4x width, a final
norm, and the output projection tied to the token embedding."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)  # q, k and v in one matrix multiply
        self.c_proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(batch, length, width))


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A decoder-only LM; `forward(tokens, targets)` returns the mean cross-entropy."""

    def __init__(self, p: dict[str, Any]) -> None:
        super().__init__()
        width, vocab = p["d_model"], p["vocab"]
        self.checkpointing = bool(p["activation_checkpointing"])
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(p["max_context"], width)
        self.blocks = nn.ModuleList(Block(width, p["n_head"]) for _ in range(p["n_layer"]))
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one matrix, read twice
        self.apply(_init_weights)
        for name, parameter in self.named_parameters():  # GPT-2's scaled residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, std=0.02 / (2 * p["n_layer"]) ** 0.5)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointing else block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def build(p: dict[str, Any], device: torch.device | str) -> GPT:
    """The model made on `device` (never moved there: a move to another kind of device may
    copy the tied embedding into two parameters, and the model would train both)."""
    with torch.device(device):
        model = GPT(p)
    assert model.lm_head.weight is model.wte.weight
    return model


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def adamw(model: nn.Module, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """AdamW as GPT-2-style training runs it (betas 0.9, 0.95, weight decay 0.1), fused where
    the device has the fused kernel, else the multi-tensor (foreach) one."""
    settings: dict[str, Any] = {"lr": lr, "betas": (0.9, 0.95), "weight_decay": 0.1}
    try:
        return torch.optim.AdamW(model.parameters(), fused=True, **settings)
    except (RuntimeError, TypeError, ValueError):  # no fused kernel for this device or dtype
        return torch.optim.AdamW(model.parameters(), **settings)
