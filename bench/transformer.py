"""A decoder-only transformer with random weights, in the two layouts of
bench/transformer_configs.py (nothing is downloaded), of the shape a configuration
gives: its own, or a Hugging Face config.json's.

gpt2   LayerNorm, GELU MLP (4x), learned positions, biases; the output
       projection is the token table (openai/gpt-2 src/model.py).
llama  RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention, no
       biases (Llama 3, Mistral), or biases on q, k and v alone (Qwen2: qkv_bias).

Written after torchtitan's model code (pytorch/torchtitan, models/llama3): one
module per part, the blocks in `layers` so that FSDP2 can shard each
(bench/lm.py). Attention is torch's scaled_dot_product_attention, causal.
Runs on the nodes: never imports hpcbench.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformer_configs import TransformerConfig  # a sibling module (bench/ is on sys.path)


def rotary_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position's angle per pair of a head's features (seq, head_dim/2)."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), freqs)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions: each pair (x[2i], x[2i+1]) of a head turned by its position's
    angle, as Llama's complex multiply does. x: (batch, seq, heads, head_dim)."""
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[: x.shape[1], None, :], sin[: x.shape[1], None, :]
    turned = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return turned.flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.heads, c.kv_heads, c.head_dim
        # A head's width is the config's (head_dim), not always dim / heads: q and the
        # output projection are heads x head_dim wide.
        q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.wq = nn.Linear(c.dim, q, bias=c.bias or c.qkv_bias)
        self.wk = nn.Linear(c.dim, kv, bias=c.bias or c.qkv_bias)
        self.wv = nn.Linear(c.dim, kv, bias=c.bias or c.qkv_bias)
        self.wo = nn.Linear(q, c.dim, bias=c.bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None):
        b, t, _ = x.shape
        # -1 heads: under tensor parallelism each worker holds heads / tp of them (and
        # kv_heads / tp), its columns of wq, wk and wv (bench/layout.py).
        q = self.wq(x).view(b, t, -1, self.head_dim)
        k = self.wk(x).view(b, t, -1, self.head_dim)
        v = self.wv(x).view(b, t, -1, self.head_dim)
        if rope is not None:
            q, k = rotate(q, *rope), rotate(k, *rope)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            is_causal=True,
            enable_gqa=self.kv_heads != self.heads,
        )
        return self.wo(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    """GPT-2's GELU MLP, or Llama's SwiGLU (w2(silu(w1 x) * w3 x))."""

    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.swiglu = c.family == "llama"
        self.w1 = nn.Linear(c.dim, c.ffn, bias=c.bias)
        self.w2 = nn.Linear(c.ffn, c.dim, bias=c.bias)
        self.w3 = nn.Linear(c.dim, c.ffn, bias=False) if self.swiglu else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w3 is not None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


def norm(c: TransformerConfig) -> nn.Module:
    if c.family == "llama":
        return nn.RMSNorm(c.dim, eps=c.norm_eps)
    return nn.LayerNorm(c.dim, eps=c.norm_eps)


class Block(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.attention_norm, self.attention = norm(c), Attention(c)
        self.mlp_norm, self.mlp = norm(c), MLP(c)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None):
        x = x + self.attention(self.attention_norm(x), rope)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    """tokens (batch, seq) -> logits (batch, seq, vocab)."""

    def __init__(self, c: TransformerConfig, seq_len: int) -> None:
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab, c.dim)
        # GPT-2's table holds every position of its context, whatever the training length.
        self.pos_embeddings = nn.Embedding(c.context, c.dim) if c.family == "gpt2" else None
        self.layers = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = norm(c)
        self.output = nn.Linear(c.dim, c.vocab, bias=False)
        if c.tied:
            self.output.weight = self.tok_embeddings.weight
        if c.family == "llama":  # buffers, not parameters: FSDP leaves them whole
            cos, sin = rotary_tables(c.head_dim, seq_len, c.rope_theta)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        if self.tok_embeddings.weight.device.type != "meta":
            self.init_weights()

    @torch.no_grad()
    def init_weights(self) -> None:
        """GPT-2's: normal(0, 0.02) weights and zero biases; the projections back into the
        residual stream scaled by 1/sqrt(2 L); norms at one."""
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            else:
                residual = name.endswith(("wo.weight", "w2.weight"))
                std = 0.02 / math.sqrt(2 * self.config.layers) if residual else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok_embeddings(tokens)
        if self.pos_embeddings is not None:
            x = x + self.pos_embeddings(torch.arange(tokens.shape[1], device=tokens.device))
        rope = (self.rope_cos, self.rope_sin) if self.config.family == "llama" else None
        for block in self.layers:
            x = block(x, rope)
        return self.output(self.norm(x))
